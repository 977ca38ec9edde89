/* libarchive for `sbx cp`, loaded on demand (dlopen), so every other command starts without
 * libarchive and the libraries it pulls in (libxml2, ICU, libstdc++, ...). The CLI's calls
 * name the functions as usual; the macros below route them through the loaded table. */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#define CLI_ARCHIVE_FUNCS(X)                                                                       \
    X(archive_entry_filetype)                                                                      \
    X(archive_entry_free)                                                                          \
    X(archive_entry_hardlink)                                                                      \
    X(archive_entry_new)                                                                           \
    X(archive_entry_pathname)                                                                      \
    X(archive_entry_set_gid)                                                                       \
    X(archive_entry_set_filetype)                                                                  \
    X(archive_entry_set_gname)                                                                     \
    X(archive_entry_set_hardlink)                                                                  \
    X(archive_entry_set_pathname)                                                                  \
    X(archive_entry_set_perm)                                                                      \
    X(archive_entry_set_size)                                                                      \
    X(archive_entry_set_uid)                                                                       \
    X(archive_entry_set_uname)                                                                     \
    X(archive_entry_size)                                                                          \
    X(archive_entry_sourcepath)                                                                    \
    X(archive_error_string)                                                                        \
    X(archive_read_data_block)                                                                     \
    X(archive_read_disk_descend)                                                                   \
    X(archive_read_disk_new)                                                                       \
    X(archive_read_disk_open)                                                                      \
    X(archive_read_disk_set_symlink_physical)                                                      \
    X(archive_read_free)                                                                           \
    X(archive_read_new)                                                                            \
    X(archive_read_next_header)                                                                    \
    X(archive_read_next_header2)                                                                   \
    X(archive_read_open_memory)                                                                    \
    X(archive_read_support_format_tar)                                                             \
    X(archive_set_error)                                                                           \
    X(archive_write_close)                                                                         \
    X(archive_write_data)                                                                          \
    X(archive_write_data_block)                                                                    \
    X(archive_write_disk_new)                                                                      \
    X(archive_write_disk_set_options)                                                              \
    X(archive_write_finish_entry)                                                                  \
    X(archive_write_free)                                                                          \
    X(archive_write_header)                                                                        \
    X(archive_write_new)                                                                           \
    X(archive_write_open2)                                                                         \
    X(archive_write_set_format_pax_restricted)

typedef struct cli_archive_syms {
#define CLI_LA_DECL(f) __typeof__(f) *f;
    CLI_ARCHIVE_FUNCS(CLI_LA_DECL)
#undef CLI_LA_DECL
} cli_archive_syms;

extern cli_archive_syms cli_la;

/* Load libarchive once: 0, or cli_error()'s exit code after printing why. */
int cli_archive_load(void);

/* From here on, the names call through the table (only in files that include this header). */
#ifndef CLI_ARCHIVE_NO_ROUTE
#define CLI_LA_ROUTE(f) cli_la.f
#define archive_entry_filetype CLI_LA_ROUTE(archive_entry_filetype)
#define archive_entry_free CLI_LA_ROUTE(archive_entry_free)
#define archive_entry_new CLI_LA_ROUTE(archive_entry_new)
#define archive_entry_pathname CLI_LA_ROUTE(archive_entry_pathname)
#define archive_entry_set_gid CLI_LA_ROUTE(archive_entry_set_gid)
#define archive_entry_set_gname CLI_LA_ROUTE(archive_entry_set_gname)
#define archive_entry_set_pathname CLI_LA_ROUTE(archive_entry_set_pathname)
#define archive_entry_set_uid CLI_LA_ROUTE(archive_entry_set_uid)
#define archive_entry_set_uname CLI_LA_ROUTE(archive_entry_set_uname)
#define archive_entry_size CLI_LA_ROUTE(archive_entry_size)
#define archive_entry_sourcepath CLI_LA_ROUTE(archive_entry_sourcepath)
#define archive_entry_hardlink CLI_LA_ROUTE(archive_entry_hardlink)
#define archive_entry_set_filetype CLI_LA_ROUTE(archive_entry_set_filetype)
#define archive_entry_set_hardlink CLI_LA_ROUTE(archive_entry_set_hardlink)
#define archive_entry_set_perm CLI_LA_ROUTE(archive_entry_set_perm)
#define archive_entry_set_size CLI_LA_ROUTE(archive_entry_set_size)
#define archive_error_string CLI_LA_ROUTE(archive_error_string)
#define archive_read_data_block CLI_LA_ROUTE(archive_read_data_block)
#define archive_read_disk_descend CLI_LA_ROUTE(archive_read_disk_descend)
#define archive_read_disk_new CLI_LA_ROUTE(archive_read_disk_new)
#define archive_read_disk_open CLI_LA_ROUTE(archive_read_disk_open)
#define archive_read_disk_set_symlink_physical CLI_LA_ROUTE(archive_read_disk_set_symlink_physical)
#define archive_read_free CLI_LA_ROUTE(archive_read_free)
#define archive_read_new CLI_LA_ROUTE(archive_read_new)
#define archive_read_next_header CLI_LA_ROUTE(archive_read_next_header)
#define archive_read_next_header2 CLI_LA_ROUTE(archive_read_next_header2)
#define archive_read_open_memory CLI_LA_ROUTE(archive_read_open_memory)
#define archive_read_support_format_tar CLI_LA_ROUTE(archive_read_support_format_tar)
#define archive_set_error CLI_LA_ROUTE(archive_set_error)
#define archive_write_close CLI_LA_ROUTE(archive_write_close)
#define archive_write_data CLI_LA_ROUTE(archive_write_data)
#define archive_write_data_block CLI_LA_ROUTE(archive_write_data_block)
#define archive_write_disk_new CLI_LA_ROUTE(archive_write_disk_new)
#define archive_write_disk_set_options CLI_LA_ROUTE(archive_write_disk_set_options)
#define archive_write_finish_entry CLI_LA_ROUTE(archive_write_finish_entry)
#define archive_write_free CLI_LA_ROUTE(archive_write_free)
#define archive_write_header CLI_LA_ROUTE(archive_write_header)
#define archive_write_new CLI_LA_ROUTE(archive_write_new)
#define archive_write_open2 CLI_LA_ROUTE(archive_write_open2)
#define archive_write_set_format_pax_restricted                                                    \
    CLI_LA_ROUTE(archive_write_set_format_pax_restricted)
#endif
