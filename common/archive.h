/* libarchive loaded on demand: the symbol table (dlopen'ed at the first import, so processes that
 * never unpack an archive start without libarchive and the libraries it pulls in), and the
 * normalization of the paths archive members name. */
#pragma once

#include "common/error.h"

#include <archive.h>
#include <archive_entry.h>
#include <stddef.h>

#define LIBARCHIVE_FUNCS(X)                                                                        \
    X(archive_entry_filetype)                                                                      \
    X(archive_entry_gid)                                                                           \
    X(archive_entry_hardlink)                                                                      \
    X(archive_entry_mode)                                                                          \
    X(archive_entry_mtime)                                                                         \
    X(archive_entry_pathname)                                                                      \
    X(archive_entry_perm)                                                                          \
    X(archive_entry_set_gid)                                                                       \
    X(archive_entry_set_hardlink)                                                                  \
    X(archive_entry_set_pathname)                                                                  \
    X(archive_entry_set_perm)                                                                      \
    X(archive_entry_set_uid)                                                                       \
    X(archive_entry_size)                                                                          \
    X(archive_entry_symlink)                                                                       \
    X(archive_entry_uid)                                                                           \
    X(archive_errno)                                                                               \
    X(archive_error_string)                                                                        \
    X(archive_read_data)                                                                           \
    X(archive_read_data_block)                                                                     \
    X(archive_read_free)                                                                           \
    X(archive_read_new)                                                                            \
    X(archive_read_next_header)                                                                    \
    X(archive_read_open)                                                                           \
    X(archive_read_open_filename)                                                                  \
    X(archive_read_open_memory)                                                                    \
    X(archive_read_support_filter_all)                                                             \
    X(archive_read_support_format_gnutar)                                                          \
    X(archive_read_support_format_raw)                                                             \
    X(archive_read_support_format_tar)                                                             \
    X(archive_write_close)                                                                         \
    X(archive_write_data)                                                                          \
    X(archive_write_data_block)                                                                    \
    X(archive_write_disk_new)                                                                      \
    X(archive_write_disk_set_options)                                                              \
    X(archive_write_finish_entry)                                                                  \
    X(archive_write_free)                                                                          \
    X(archive_write_header)                                                                        \
    X(archive_write_new)                                                                           \
    X(archive_write_open)                                                                          \
    X(archive_write_set_format_pax_restricted)

/* The loaded functions, called as la.archive_read_new() etc. once libarchive_load() succeeded. */
typedef struct libarchive_syms {
#define LA_DECL(f) __typeof__(f) *f;
    LIBARCHIVE_FUNCS(LA_DECL)
#undef LA_DECL
} libarchive_syms;

extern libarchive_syms la;

/* Load libarchive and fill `la` (once; later calls return 0 at once). -ENOENT when it is missing.
 */
int libarchive_load(error_rec *err);

/* Normalize an archive member's path into buf: strip "./" components and "/" runs; refuse an
 * absolute path or a ".." component (-EINVAL) and one that does not fit (-ENAMETOOLONG).
 * "" is the archive's root. */
int libarchive_clean_path(const char *in, char *buf, size_t len);
