/* Safe rootfs tarball import with libarchive (see image.h). */
#include "shim/image.h"

#include "common/archive.h"
#include "common/fdutil.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int check_type(struct archive_entry *e, const char *path, error_rec *err) {
    switch (la.archive_entry_filetype(e)) {
    case AE_IFREG:
    case AE_IFDIR:
    case AE_IFLNK:
    case AE_IFIFO:
        return 0;
    default:
        return error_set(err, -EPERM, "image: %s: device nodes and sockets are not allowed", path);
    }
}

/* Rewrite one entry to live under dest; returns 1 to skip it. */
static int rewrite_entry(struct archive_entry *e, const char *dest, error_rec *err) {
    char rel[PATH_MAX], full[PATH_MAX + 8], name[PATH_MAX];
    const char *p = la.archive_entry_pathname(e);
    /* a copy: the entry's own string is freed when its pathname is set below */
    snprintf(name, sizeof(name), "%s", p ? p : "(null)");
    if (!p || libarchive_clean_path(p, rel, sizeof(rel)) < 0)
        return error_set(err, -EPERM, "image: unsafe path \"%s\"", name);
    if (!rel[0])
        return 1;
    int r = la.archive_entry_hardlink(e) ? 0 : check_type(e, rel, err);
    if (r < 0)
        return r;
    snprintf(full, sizeof(full), "%s/%s", dest, rel);
    la.archive_entry_set_pathname(e, full);
    const char *hl = la.archive_entry_hardlink(e);
    if (hl) {
        if (libarchive_clean_path(hl, rel, sizeof(rel)) < 0 || !rel[0])
            return error_set(err, -EPERM, "image: %s: unsafe hard link to \"%s\"", name, hl);
        snprintf(full, sizeof(full), "%s/%s", dest, rel);
        la.archive_entry_set_hardlink(e, full);
    }
    la.archive_entry_set_perm(e, la.archive_entry_perm(e) & 01777); /* no setuid/setgid */
    la.archive_entry_set_uid(e, 0);
    la.archive_entry_set_gid(e, 0);
    return 0;
}

static int copy_data(struct archive *in, struct archive *out, error_rec *err) {
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r = la.archive_read_data_block(in, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_OK)
            return error_set(err, -EIO, "image: read: %s", la.archive_error_string(in));
        if (la.archive_write_data_block(out, buf, len, off) < ARCHIVE_OK)
            return error_set(err, -EIO, "image: write: %s", la.archive_error_string(out));
    }
}

static int extract(struct archive *in, struct archive *out, const char *dest, error_rec *err) {
    for (;;) {
        struct archive_entry *e;
        int r = la.archive_read_next_header(in, &e);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return error_set(err, -EINVAL, "image: bad archive: %s", la.archive_error_string(in));
        r = rewrite_entry(e, dest, err);
        if (r < 0)
            return r;
        if (r == 1)
            continue;
        if (la.archive_write_header(out, e) < ARCHIVE_WARN)
            return error_set(err, -EPERM, "image: %s: %s", la.archive_entry_pathname(e),
                             la.archive_error_string(out));
        if (la.archive_entry_size(e) > 0 && (r = copy_data(in, out, err)) < 0)
            return r;
        if (la.archive_write_finish_entry(out) < ARCHIVE_WARN)
            return error_set(err, -EIO, "image: %s: %s", la.archive_entry_pathname(e),
                             la.archive_error_string(out));
    }
}

int shim_image_import_tar(const char *tar_path, const char *dest_dir, error_rec *err) {
    int lr = libarchive_load(err);
    if (lr < 0)
        return lr;
    if (mkdir(dest_dir, 0755) < 0)
        return error_set_errno(err, negative_errno(), "image: create %s", dest_dir);
    char dest[PATH_MAX];
    if (!realpath(dest_dir, dest)) {
        int r = error_set_errno(err, negative_errno(), "image: resolve %s", dest_dir);
        rmdir(dest_dir);
        return r;
    }
    struct archive *in = la.archive_read_new(), *out = la.archive_write_disk_new();
    int r = -ENOMEM;
    if (in && out) {
        la.archive_read_support_filter_all(in);
        la.archive_read_support_format_tar(in);
        la.archive_read_support_format_gnutar(in);
        /* SECURE_SYMLINKS: never write through a symlink; NODOTDOT: belt and braces. */
        la.archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                   ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                   ARCHIVE_EXTRACT_SECURE_NODOTDOT);
        if (la.archive_read_open_filename(in, tar_path, 1 << 16) != ARCHIVE_OK)
            r = error_set(err, -ENOENT, "image: open %s: %s", tar_path,
                          la.archive_error_string(in));
        else
            r = extract(in, out, dest, err);
        if (r == 0 && la.archive_write_close(out) != ARCHIVE_OK)
            r = error_set(err, -EIO, "image: finish: %s", la.archive_error_string(out));
    }
    la.archive_read_free(in);
    la.archive_write_free(out);
    if (r < 0)
        rm_rf(dest);
    return r;
}
