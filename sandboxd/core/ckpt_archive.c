/* A checkpoint packed into one tar and unpacked on another node (core/ckpt_archive.h). The
 * packer walks the directory with openat (no path is followed through a symlink); the unpacker
 * checks each member itself, then lets libarchive write it with its secure-path options. */
#include "sandboxd/core/ckpt_archive.h"

#include "common/archive.h"
#include "common/fdutil.h"
#include "common/macro.h"
#include "sandboxd/core/registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define RECORD_MAX (1u << 20)
#define DEPTH_MAX 256

typedef struct pack {
    struct archive *a;
    char rel[PATH_MAX];
    char buf[1 << 16];
    error_rec *err;
} pack;

static int archive_failed(struct archive *a, error_rec *err, const char *what) {
    int e = archive_errno(a);
    return error_set(err, e > 0 ? -e : -EIO, "%s: %s", what, archive_error_string(a) ?: "?");
}

/* fd: a directory's, whose overlay opaque marker (an image's upper directory, shim/pause.h)
 * travels as the one extended attribute a checkpoint holds; -1 for anything else. */
static int put_header(pack *p, const struct stat *st, const char *link, int fd) {
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return error_set(p->err, -ENOMEM, "out of memory");
    archive_entry_copy_stat(e, st);
    archive_entry_set_pathname(e, p->rel);
    if (link)
        archive_entry_set_symlink(e, link);
    char v[8];
    ssize_t n = fd >= 0 ? fgetxattr(fd, SD_CKPT_XATTR, v, sizeof(v)) : -1;
    if (n > 0)
        archive_entry_xattr_add_entry(e, SD_CKPT_XATTR, v, (size_t)n);
    int h = archive_write_header(p->a, e);
    archive_entry_free(e);
    return h == ARCHIVE_OK || h == ARCHIVE_WARN ? 0 : archive_failed(p->a, p->err, p->rel);
}

static int put_data(pack *p, int fd, uint64_t size) {
    for (uint64_t off = 0; off < size;) {
        ssize_t n =
            pread(fd, p->buf, (size_t)MIN((uint64_t)sizeof(p->buf), size - off), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return error_set_errno(p->err, negative_errno(), "read %s", p->rel);
        if (n == 0)
            return error_set(p->err, -EIO, "%s shrank while it was packed", p->rel);
        if (archive_write_data(p->a, p->buf, (size_t)n) < 0)
            return archive_failed(p->a, p->err, p->rel);
        off += (uint64_t)n;
    }
    return 0;
}

static int pack_dir(pack *p, int dfd, int depth);

static int pack_node(pack *p, int dfd, const char *name, int depth) {
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return error_set_errno(p->err, negative_errno(), "stat %s", p->rel);
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
        if (n < 0)
            return error_set_errno(p->err, negative_errno(), "readlink %s", p->rel);
        target[n] = 0;
        return put_header(p, &st, target, -1);
    }
    bool whiteout = S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
    if (S_ISFIFO(st.st_mode) || whiteout)
        return put_header(p, &st, NULL, -1);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return 0; /* sockets, devices: nothing a restore reads */
    _cleanup_close_ int fd = openat(
        dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
    if (fd < 0)
        return error_set_errno(p->err, negative_errno(), "open %s", p->rel);
    int r = put_header(p, &st, NULL, S_ISDIR(st.st_mode) ? fd : -1);
    if (r < 0)
        return r;
    return S_ISDIR(st.st_mode) ? pack_dir(p, fd, depth + 1) : put_data(p, fd, (uint64_t)st.st_size);
}

static int pack_dir(pack *p, int dfd, int depth) {
    if (depth > DEPTH_MAX)
        return error_set(p->err, -ELOOP, "%s: directories nested too deep", p->rel);
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3); /* (a worker thread: another may spawn meanwhile) */
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        safe_close(fd);
        return error_set_errno(p->err, negative_errno(), "read the directory %s", p->rel);
    }
    size_t len = strlen(p->rel);
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(p->rel + len, sizeof(p->rel) - len, "%s%s", len ? "/" : "",
                             de->d_name) >= sizeof(p->rel) - len)
            r = error_set(p->err, -ENAMETOOLONG, "a path under %s is too long", p->rel);
        else
            r = pack_node(p, dirfd(dir), de->d_name, depth);
        p->rel[len] = 0;
    }
    closedir(dir);
    return r;
}

static int pack_record(pack *p, json_t *record) {
    _cleanup_free_ char *s = json_dumps(record, JSON_COMPACT);
    struct archive_entry *e = s ? archive_entry_new() : NULL;
    if (!e)
        return error_set(p->err, -ENOMEM, "out of memory");
    archive_entry_set_pathname(e, SD_CKPT_RECORD);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0600);
    archive_entry_set_size(e, (la_int64_t)strlen(s));
    int h = archive_write_header(p->a, e);
    archive_entry_free(e);
    if (h != ARCHIVE_OK && h != ARCHIVE_WARN)
        return archive_failed(p->a, p->err, SD_CKPT_RECORD);
    return archive_write_data(p->a, s, strlen(s)) < 0 ? archive_failed(p->a, p->err, SD_CKPT_RECORD)
                                                      : 0;
}

int sd_ckpt_pack(const char *dir, json_t *record, int out, error_rec *err) {
    _cleanup_free_ pack *p = calloc(1, sizeof(*p));
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    if (dfd < 0)
        return error_set_errno(err, negative_errno(), "open %s", dir);
    p->err = err;
    p->a = archive_write_new();
    if (!p->a)
        return error_set(err, -ENOMEM, "out of memory");
    archive_write_set_format_pax_restricted(p->a);
    archive_write_set_bytes_in_last_block(p->a, 1);
    int r =
        archive_write_open_fd(p->a, out) == ARCHIVE_OK ? 0 : archive_failed(p->a, err, "the tar");
    if (r == 0)
        r = pack_record(p, record);
    if (r == 0)
        r = pack_dir(p, dfd, 0);
    if (r == 0 && archive_write_close(p->a) != ARCHIVE_OK)
        r = archive_failed(p->a, err, "the tar");
    archive_write_free(p->a);
    return r;
}

/* ---- unpack ---- */

static int read_record(struct archive *a, struct archive_entry *e, json_t **ret, error_rec *err) {
    const char *name = archive_entry_pathname(e);
    la_int64_t size = archive_entry_size(e);
    if (!name || strcmp(name, SD_CKPT_RECORD) != 0 || archive_entry_filetype(e) != AE_IFREG ||
        size <= 0 || size > RECORD_MAX)
        return error_set(err, -EINVAL, "the archive does not start with the sandbox's record");
    _cleanup_free_ char *buf = malloc((size_t)size);
    if (!buf)
        return error_set(err, -ENOMEM, "out of memory");
    if (archive_read_data(a, buf, (size_t)size) != size)
        return archive_failed(a, err, SD_CKPT_RECORD);
    json_error_t je;
    json_t *j = json_loadb(buf, (size_t)size, 0, &je);
    if (!json_is_object(j) || !json_is_integer(json_object_get(j, "uid_slot"))) {
        json_decref(j);
        return error_set(err, -EINVAL, "%s: not a sandbox record", SD_CKPT_RECORD);
    }
    *ret = j;
    return 0;
}

/* A member as the checkpoint can hold it (see the header). */
static int member_ok(struct archive_entry *e, uid_t lo, const char *rel, error_rec *err) {
    mode_t type = archive_entry_filetype(e);
    bool whiteout = type == AE_IFCHR && archive_entry_rdev(e) == makedev(0, 0);
    if (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK && type != AE_IFIFO && !whiteout)
        return error_set(err, -EINVAL, "%s: a device or another kind of node is refused", rel);
    if (archive_entry_hardlink(e))
        return error_set(err, -EINVAL, "%s: a hard link is refused", rel);
    if (archive_entry_perm(e) & (S_ISUID | S_ISGID))
        return error_set(err, -EINVAL, "%s: a setuid or setgid file is refused", rel);
    const char *xname;
    const void *xval;
    size_t xlen;
    archive_entry_xattr_reset(e); /* (pax: its LIBARCHIVE. and SCHILY. headers may both be read) */
    while (archive_entry_xattr_next(e, &xname, &xval, &xlen) == ARCHIVE_OK)
        if (type != AE_IFDIR || strcmp(xname, SD_CKPT_XATTR) != 0 || xlen > 8)
            return error_set(err, -EINVAL, "%s: an extended attribute other than a directory's %s",
                             rel, SD_CKPT_XATTR);
    la_int64_t ids[2] = {archive_entry_uid(e), archive_entry_gid(e)};
    for (int i = 0; i < 2; i++)
        if (ids[i] != 0 && (ids[i] < (la_int64_t)lo || ids[i] >= (la_int64_t)lo + 65536))
            return error_set(err, -EINVAL, "%s: owned by %lld, not by the sandbox's ids", rel,
                             (long long)ids[i]);
    return 0;
}

static int write_member(struct archive *a, struct archive *disk, struct archive_entry *e,
                        const char *path, error_rec *err) {
    archive_entry_set_pathname(e, path);
    int h = archive_write_header(disk, e);
    if (h != ARCHIVE_OK && h != ARCHIVE_WARN)
        return archive_failed(disk, err, path);
    const void *buf;
    size_t len;
    la_int64_t off;
    for (;;) {
        int rd = archive_read_data_block(a, &buf, &len, &off);
        if (rd == ARCHIVE_EOF)
            break;
        if (rd != ARCHIVE_OK)
            return archive_failed(a, err, path);
        if (archive_write_data_block(disk, buf, len, off) != ARCHIVE_OK)
            return archive_failed(disk, err, path);
    }
    return archive_write_finish_entry(disk) == ARCHIVE_OK ? 0 : archive_failed(disk, err, path);
}

static int unpack_members(struct archive *a, struct archive *disk, const char *dir, uid_t lo,
                          error_rec *err) {
    char rel[PATH_MAX], path[PATH_MAX * 2];
    struct archive_entry *e;
    for (;;) {
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            return 0;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN)
            return archive_failed(a, err, "the tar");
        int r = libarchive_clean_path(archive_entry_pathname(e), rel, sizeof(rel));
        if (r < 0 || !rel[0])
            return error_set(err, -EINVAL, "a member's path is refused: %s",
                             archive_entry_pathname(e) ?: "(none)");
        if ((r = member_ok(e, lo, rel, err)) < 0)
            return r;
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        if ((r = write_member(a, disk, e, path, err)) < 0)
            return r;
    }
}

int sd_ckpt_unpack(int in, const char *dir, json_t **ret_record, error_rec *err) {
    struct archive *a = archive_read_new(), *disk = archive_write_disk_new();
    json_t *record = NULL;
    int r = a && disk ? 0 : error_set(err, -ENOMEM, "out of memory");
    if (r == 0) {
        archive_read_support_format_tar(a);
        archive_write_disk_set_options(disk, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
                                                 ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
                                                 ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                 ARCHIVE_EXTRACT_SECURE_NODOTDOT);
        if (archive_read_open_fd(a, in, 1 << 16) != ARCHIVE_OK)
            r = archive_failed(a, err, "the tar");
    }
    struct archive_entry *e;
    if (r == 0) {
        int h = archive_read_next_header(a, &e);
        r = h == ARCHIVE_OK || h == ARCHIVE_WARN
                ? read_record(a, e, &record, err)
                : error_set(err, -EINVAL, "not a checkpoint archive: %s",
                            h == ARCHIVE_EOF ? "empty" : archive_error_string(a) ?: "?");
    }
    if (r == 0) {
        int slot = (int)json_integer_value(json_object_get(record, "uid_slot"));
        r = slot >= 0 && slot < SLOTS_MAX
                ? unpack_members(a, disk, dir, (uid_t)sd_uid_base(slot), err)
                : error_set(err, -EINVAL, "%s: uid slot %d is out of range", SD_CKPT_RECORD, slot);
    }
    if (disk)
        archive_write_free(disk);
    if (a)
        archive_read_free(a);
    if (r < 0)
        json_decref(record);
    else
        *ret_record = record;
    return r;
}
