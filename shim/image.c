/* Safe rootfs tarball import with libarchive (see image.h). */
#include "shim/image.h"

#include "common/fdutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* libarchive (and the twelve libraries it pulls in: xml2, ICU, libstdc++, compressors...) is
 * loaded only when an image is imported, so the per-sandbox shim starts without it. */
#define ARCHIVE_FUNCS(X)                                                                           \
    X(archive_entry_filetype)                                                                      \
    X(archive_entry_hardlink)                                                                      \
    X(archive_entry_pathname)                                                                      \
    X(archive_entry_perm)                                                                          \
    X(archive_entry_set_gid)                                                                       \
    X(archive_entry_set_hardlink)                                                                  \
    X(archive_entry_set_pathname)                                                                  \
    X(archive_entry_set_perm)                                                                      \
    X(archive_entry_set_uid)                                                                       \
    X(archive_entry_size)                                                                          \
    X(archive_error_string)                                                                        \
    X(archive_read_data_block)                                                                     \
    X(archive_read_free)                                                                           \
    X(archive_read_new)                                                                            \
    X(archive_read_next_header)                                                                    \
    X(archive_read_open_filename)                                                                  \
    X(archive_read_support_filter_all)                                                             \
    X(archive_read_support_format_gnutar)                                                          \
    X(archive_read_support_format_tar)                                                             \
    X(archive_write_close)                                                                         \
    X(archive_write_data_block)                                                                    \
    X(archive_write_disk_new)                                                                      \
    X(archive_write_disk_set_options)                                                              \
    X(archive_write_finish_entry)                                                                  \
    X(archive_write_free)                                                                          \
    X(archive_write_header)

static struct {
#define AX_DECL(f) __typeof__(f) *f;
    ARCHIVE_FUNCS(AX_DECL)
#undef AX_DECL
} ax;

static int load_libarchive(error_rec *err) {
    static void *handle;
    if (handle)
        return 0;
    void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return error_set(err, -ENOENT, "image: cannot load libarchive: %s", dlerror());
#define AX_LOAD(f)                                                                                 \
    if (!(*(void **)&ax.f = dlsym(h, #f))) {                                                       \
        dlclose(h);                                                                                \
        return error_set(err, -ENOENT, "image: libarchive lacks %s", #f);                          \
    }
    ARCHIVE_FUNCS(AX_LOAD)
#undef AX_LOAD
    handle = h;
    return 0;
}

/* Strip leading "./" and "/" duplicates; reject absolute paths and ".." components.
 * Returns the cleaned path in buf, "" for the archive root itself. */
static int clean_path(const char *in, char *buf, size_t len) {
    if (!in || in[0] == '/')
        return -EINVAL;
    size_t o = 0;
    for (const char *p = in; *p;) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o + n + 2 > len)
                return -ENAMETOOLONG;
            if (o)
                buf[o++] = '/';
            memcpy(buf + o, p, n);
            o += n;
        }
        p += n;
        while (*p == '/')
            p++;
    }
    buf[o] = '\0';
    return 0;
}

static int check_type(struct archive_entry *e, const char *path, error_rec *err) {
    switch (ax.archive_entry_filetype(e)) {
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
    char rel[PATH_MAX], full[PATH_MAX + 8];
    const char *name = ax.archive_entry_pathname(e);
    if (clean_path(name, rel, sizeof(rel)) < 0)
        return error_set(err, -EPERM, "image: unsafe path \"%s\"", name ? name : "(null)");
    if (!rel[0])
        return 1;
    int r = ax.archive_entry_hardlink(e) ? 0 : check_type(e, rel, err);
    if (r < 0)
        return r;
    snprintf(full, sizeof(full), "%s/%s", dest, rel);
    ax.archive_entry_set_pathname(e, full);
    const char *hl = ax.archive_entry_hardlink(e);
    if (hl) {
        if (clean_path(hl, rel, sizeof(rel)) < 0 || !rel[0])
            return error_set(err, -EPERM, "image: %s: unsafe hard link to \"%s\"", name, hl);
        snprintf(full, sizeof(full), "%s/%s", dest, rel);
        ax.archive_entry_set_hardlink(e, full);
    }
    ax.archive_entry_set_perm(e, ax.archive_entry_perm(e) & 01777); /* no setuid/setgid */
    ax.archive_entry_set_uid(e, 0);
    ax.archive_entry_set_gid(e, 0);
    return 0;
}

static int copy_data(struct archive *in, struct archive *out, error_rec *err) {
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r = ax.archive_read_data_block(in, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_OK)
            return error_set(err, -EIO, "image: read: %s", ax.archive_error_string(in));
        if (ax.archive_write_data_block(out, buf, len, off) < ARCHIVE_OK)
            return error_set(err, -EIO, "image: write: %s", ax.archive_error_string(out));
    }
}

static int extract(struct archive *in, struct archive *out, const char *dest, error_rec *err) {
    for (;;) {
        struct archive_entry *e;
        int r = ax.archive_read_next_header(in, &e);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return error_set(err, -EINVAL, "image: bad archive: %s", ax.archive_error_string(in));
        r = rewrite_entry(e, dest, err);
        if (r < 0)
            return r;
        if (r == 1)
            continue;
        if (ax.archive_write_header(out, e) < ARCHIVE_WARN)
            return error_set(err, -EPERM, "image: %s: %s", ax.archive_entry_pathname(e),
                             ax.archive_error_string(out));
        if (ax.archive_entry_size(e) > 0 && (r = copy_data(in, out, err)) < 0)
            return r;
        if (ax.archive_write_finish_entry(out) < ARCHIVE_WARN)
            return error_set(err, -EIO, "image: %s: %s", ax.archive_entry_pathname(e),
                             ax.archive_error_string(out));
    }
}

int shim_image_import_tar(const char *tar_path, const char *dest_dir, error_rec *err) {
    int lr = load_libarchive(err);
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
    struct archive *in = ax.archive_read_new(), *out = ax.archive_write_disk_new();
    int r = -ENOMEM;
    if (in && out) {
        ax.archive_read_support_filter_all(in);
        ax.archive_read_support_format_tar(in);
        ax.archive_read_support_format_gnutar(in);
        /* SECURE_SYMLINKS: never write through a symlink; NODOTDOT: belt and braces. */
        ax.archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                   ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                   ARCHIVE_EXTRACT_SECURE_NODOTDOT);
        if (ax.archive_read_open_filename(in, tar_path, 1 << 16) != ARCHIVE_OK)
            r = error_set(err, -ENOENT, "image: open %s: %s", tar_path,
                          ax.archive_error_string(in));
        else
            r = extract(in, out, dest, err);
        if (r == 0 && ax.archive_write_close(out) != ARCHIVE_OK)
            r = error_set(err, -EIO, "image: finish: %s", ax.archive_error_string(out));
    }
    ax.archive_read_free(in);
    ax.archive_write_free(out);
    if (r < 0)
        rm_rf(dest);
    return r;
}
