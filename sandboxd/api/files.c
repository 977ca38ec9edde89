/* Files: GET/PUT /v1/sandboxes/{id}/files?path=. Paths are resolved inside the sandbox's root
 * (/proc/<init_pid>/root) with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so no symlink
 * or ".." can reach the host. One file travels as octet-stream, a directory as a tar (entries
 * relative to the directory). Written files belong to the sandbox user (uid_base + 1000). */
#include "sandboxd/api/api.h"

#include "sandboxd/core/registry.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TAR_MAX (256ull << 20)
#define MAX_DEPTH 64

static int xopenat2(int dirfd, const char *path, uint64_t flags, mode_t mode) {
    struct open_how how = {.flags = flags | O_CLOEXEC,
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
    return fd < 0 ? negative_errno() : (int)fd;
}

static bool valid_path(const char *p) {
    if (!p || p[0] != '/' || strlen(p) > 4096)
        return false;
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
            return false;
    return true;
}

static void reply_errno(sd_request *req, int r, const char *what, const char *path) {
    if (r == -ENOENT)
        sd_reply_error(req, 404, "not_found", "%s: %s not found", what, path);
    else if (r == -ENOTDIR || r == -EISDIR || r == -ELOOP || r == -EXDEV || r == -EINVAL ||
             r == -ENAMETOOLONG)
        sd_reply_error(req, 400, "invalid_argument", "%s: %s: %s", what, path, strerror(-r));
    else if (r == -EROFS || r == -EACCES || r == -EPERM)
        sd_reply_error(req, 400, "invalid_argument", "%s: %s is not writable: %s", what, path,
                       strerror(-r));
    else if (r == -ENOSPC || r == -EDQUOT)
        sd_reply_error(req, 413, "too_large", "%s: the sandbox's disk is full", what);
    else if (r == -EFBIG)
        sd_reply_error(req, 413, "too_large", "%s: %s is larger than %llu bytes", what, path,
                       TAR_MAX);
    else
        sd_reply_error(req, 500, "internal", "%s: %s: %s", what, path, strerror(-r));
}

/* Checks shared by GET and PUT; returns the sandbox root dirfd or -1 after answering. */
static int files_prologue(sd_request *req, sd_sandbox *sb, const char **ret_path) {
    const char *path = sd_req_query(req, "path");
    if (!valid_path(path)) {
        sd_reply_error(req, 400, "invalid_argument",
                       "path: must be an absolute path without \"..\" components");
        return -1;
    }
    if (sb->state != SD_RUNNING || sb->init_pid <= 0) {
        sd_reply_error(req, 409, "conflict", "sandbox %s is not running", sb->id);
        return -1;
    }
    char root[64];
    snprintf(root, sizeof(root), "/proc/%d/root", sb->init_pid);
    int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        sd_reply_error(req, 500, "internal", "cannot open the sandbox's root: %m");
        return -1;
    }
    *ret_path = path;
    return fd;
}

/* ---- GET: tar of a directory ---- */

typedef struct membuf {
    char *data;
    size_t len, cap;
} membuf;

static la_ssize_t mem_write(struct archive *a, void *ud, const void *buf, size_t n) {
    membuf *m = ud;
    if (m->len + n > TAR_MAX) {
        archive_set_error(a, EFBIG, "too large");
        return -1;
    }
    if (m->len + n > m->cap) {
        size_t cap = MAX(m->cap * 2, m->len + n + 65536);
        char *d = realloc(m->data, cap);
        if (!d)
            return -1;
        m->data = d;
        m->cap = cap;
    }
    memcpy(m->data + m->len, buf, n);
    m->len += n;
    return (la_ssize_t)n;
}

static int tar_entry(struct archive *a, int dirfd, const char *name, const char *rel, int depth);

static int tar_dir(struct archive *a, int dfd, const char *rel, int depth) {
    if (depth > MAX_DEPTH)
        return -ELOOP;
    int fd = dup(dfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        safe_close(fd);
        return negative_errno();
    }
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char child[4096];
        snprintf(child, sizeof(child), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        r = tar_entry(a, dfd, de->d_name, child, depth);
    }
    closedir(dir);
    return r;
}

static int tar_entry(struct archive *a, int dirfd, const char *name, const char *rel, int depth) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return negative_errno();
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
        return 0; /* devices, fifos, sockets are not copied */
    struct archive_entry *e = archive_entry_new();
    archive_entry_copy_stat(e, &st);
    archive_entry_set_pathname(e, rel);
    archive_entry_set_uid(e, 1000);
    archive_entry_set_gid(e, 1000);
    char target[4096];
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = 0;
        archive_entry_set_symlink(e, target);
    }
    int r = 0;
    int fd = S_ISLNK(st.st_mode) ? -1
                                 : openat(dirfd, name,
                                          O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
                                              (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
    if (!S_ISLNK(st.st_mode) && fd < 0)
        r = negative_errno();
    else if (archive_write_header(a, e) != ARCHIVE_OK)
        r = archive_errno(a) == EFBIG ? -EFBIG : -EIO;
    else if (S_ISREG(st.st_mode)) {
        char buf[65536];
        ssize_t n;
        while (r >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
            if (archive_write_data(a, buf, (size_t)n) < 0)
                r = archive_errno(a) == EFBIG ? -EFBIG : -EIO;
    } else if (S_ISDIR(st.st_mode)) {
        r = tar_dir(a, fd, rel, depth + 1);
    }
    safe_close(fd);
    archive_entry_free(e);
    return r;
}

static void reply_tar(sd_request *req, int dirfd, const char *path) {
    membuf m = {0};
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_set_bytes_in_last_block(a, 1);
    int r = archive_write_open2(a, &m, NULL, mem_write, NULL, NULL) == ARCHIVE_OK ? 0 : -EIO;
    if (r >= 0)
        r = tar_dir(a, dirfd, "", 0);
    if (archive_write_close(a) != ARCHIVE_OK && r >= 0)
        r = archive_errno(a) == EFBIG ? -EFBIG : -EIO;
    archive_write_free(a);
    if (r < 0) {
        free(m.data);
        reply_errno(req, r, "path", path);
        return;
    }
    sd_reply_data(req, 200, "application/x-tar", m.data, m.len);
}

void sd_api_files_get(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    const char *path;
    _cleanup_close_ int root = files_prologue(req, sb, &path);
    if (root < 0)
        return;
    int fd = xopenat2(root, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0) {
        reply_errno(req, fd, "path", path);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
        safe_close(fd);
        sd_reply_error(req, 400, "invalid_argument", "path: %s is not a file or directory", path);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        reply_tar(req, fd, path);
        safe_close(fd);
        return;
    }
    fd_set_nonblock(fd, 0);
    sd_reply_fd(req, "application/octet-stream", fd, (uint64_t)st.st_size);
}

/* ---- PUT ---- */

/* mkdir -p of `path` inside the root; new directories belong to uid. Returns an O_PATH fd. */
static int mkdirs(int root, const char *path, uid_t uid) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    int cur = xopenat2(root, "/", O_PATH | O_DIRECTORY, 0);
    for (char *s = buf + 1; cur >= 0 && *s;) {
        char *slash = strchr(s, '/');
        if (slash)
            *slash = 0;
        if (*s) {
            int next = xopenat2(cur, s, O_PATH | O_DIRECTORY, 0);
            if (next == -ENOENT) {
                if (mkdirat(cur, s, 0755) < 0 && errno != EEXIST) {
                    next = negative_errno();
                } else if (fchownat(cur, s, uid, uid, AT_SYMLINK_NOFOLLOW) < 0) {
                    next = negative_errno();
                } else {
                    next = xopenat2(cur, s, O_PATH | O_DIRECTORY, 0);
                }
            }
            safe_close(cur);
            cur = next;
        }
        if (!slash)
            break;
        s = slash + 1;
    }
    return cur;
}

static int split_parent(const char *path, char *parent, size_t plen, const char **base) {
    const char *slash = strrchr(path, '/');
    size_t n = (size_t)(slash - path);
    if (n >= plen || !slash[1])
        return -EINVAL;
    memcpy(parent, path, n);
    parent[n] = 0;
    if (n == 0)
        strcpy(parent, "/");
    *base = slash + 1;
    return 0;
}

static int write_file(int root, const char *path, const void *data, size_t len, mode_t mode,
                      uid_t uid) {
    char parent[4096];
    const char *base;
    if (split_parent(path, parent, sizeof(parent), &base) < 0)
        return -EINVAL;
    _cleanup_close_ int pfd = mkdirs(root, parent, uid);
    if (pfd < 0)
        return pfd;
    _cleanup_close_ int fd = xopenat2(root, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY, mode);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return -EINVAL;
    if (fchown(fd, uid, uid) < 0 || fchmod(fd, mode) < 0)
        return negative_errno();
    return fd_write_all(fd, data, len);
}

/* The absolute path in the sandbox of an archive entry: 1 and the path, 0 for the archive's
 * root itself ("." or "/"), -EINVAL for a name with ".." components. */
static int entry_path(const char *dest, struct archive_entry *e, char *full, size_t size) {
    const char *name = archive_entry_pathname(e);
    while (name && (*name == '/' || strncmp(name, "./", 2) == 0))
        name += *name == '/' ? 1 : 2;
    if (!name || !*name || strcmp(name, ".") == 0)
        return 0;
    snprintf(full, size, "%s/%s", strcmp(dest, "/") ? dest : "", name);
    size_t fl = strlen(full);
    while (fl > 1 && full[fl - 1] == '/')
        full[--fl] = 0;
    return valid_path(full) ? 1 : -EINVAL;
}

static int untar_entry(int root, const char *dest, struct archive *a, struct archive_entry *e,
                       uid_t uid) {
    char full[8192];
    int k = entry_path(dest, e, full, sizeof(full));
    if (k <= 0)
        return k;
    mode_t type = archive_entry_filetype(e), mode = archive_entry_perm(e) & 0777;
    if (type == AE_IFDIR) {
        int fd = mkdirs(root, full, uid);
        return fd < 0 ? fd : safe_close(fd) + 1;
    }
    if (type == AE_IFREG) {
        char parent[4096];
        const char *base;
        if (split_parent(full, parent, sizeof(parent), &base) < 0)
            return -EINVAL;
        _cleanup_close_ int pfd = mkdirs(root, parent, uid);
        if (pfd < 0)
            return pfd;
        _cleanup_close_ int fd =
            xopenat2(root, full, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY, mode);
        if (fd < 0)
            return fd;
        if (fchown(fd, uid, uid) < 0 || fchmod(fd, mode) < 0)
            return negative_errno();
        const void *buf;
        size_t size;
        la_int64_t off;
        int r;
        while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK)
            if (pwrite(fd, buf, size, off) != (ssize_t)size)
                return negative_errno();
        return r == ARCHIVE_EOF ? 0 : -EINVAL;
    }
    if (type == AE_IFLNK && archive_entry_symlink(e)) {
        char parent[4096];
        const char *base;
        if (split_parent(full, parent, sizeof(parent), &base) < 0)
            return -EINVAL;
        char dir_in_root[4096];
        snprintf(dir_in_root, sizeof(dir_in_root), "%s", parent);
        _cleanup_close_ int pfd = mkdirs(root, dir_in_root, uid);
        if (pfd < 0)
            return pfd;
        _cleanup_close_ int dfd = xopenat2(root, parent, O_RDONLY | O_DIRECTORY, 0);
        if (dfd < 0)
            return dfd;
        if (symlinkat(archive_entry_symlink(e), dfd, base) < 0)
            return negative_errno();
        if (fchownat(dfd, base, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
            return negative_errno();
    }
    return 0; /* other types are skipped */
}

/* Whether a proper ancestor of path is one of the archive's symlinks (a set of paths). */
static bool beneath_link(char *path, json_t *links) {
    for (char *p = path + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        bool hit = json_object_get(links, path) != NULL;
        *p = '/';
        if (hit)
            return true;
    }
    return false;
}

/* A first pass, so that an archive that is refused changes nothing: every entry's name must be
 * valid and none may lie beneath a symlink that the archive itself makes. */
static int untar_check(const char *dest, const void *data, size_t len) {
    struct archive *a = archive_read_new();
    json_t *links = json_object();
    int r = a && links ? 0 : -ENOMEM;
    if (r == 0) {
        archive_read_support_format_tar(a);
        archive_read_support_format_gnutar(a);
        r = archive_read_open_memory(a, data, len) == ARCHIVE_OK ? 0 : -EINVAL;
    }
    struct archive_entry *e;
    while (r >= 0) {
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        char full[8192];
        if ((h != ARCHIVE_OK && h != ARCHIVE_WARN) ||
            (r = entry_path(dest, e, full, sizeof(full))) < 0 || beneath_link(full, links))
            r = -EINVAL;
        else if (r > 0 && archive_entry_filetype(e) == AE_IFLNK &&
                 json_object_set_new_nocheck(links, full, json_true()) < 0)
            r = -ENOMEM;
    }
    json_decref(links);
    archive_read_free(a);
    return r < 0 ? r : 0;
}

static int untar(int root, const char *dest, const void *data, size_t len, uid_t uid) {
    int c = untar_check(dest, data, len);
    if (c < 0)
        return c;
    _cleanup_close_ int dfd = mkdirs(root, dest, uid);
    if (dfd < 0)
        return dfd;
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    int r = archive_read_open_memory(a, data, len) == ARCHIVE_OK ? 0 : -EINVAL;
    struct archive_entry *e;
    while (r >= 0) {
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            r = -EINVAL;
            break;
        }
        r = untar_entry(root, dest, a, e, uid);
    }
    archive_read_free(a);
    return r;
}

static int parse_mode(const char *s, mode_t *ret) {
    if (!s) {
        *ret = 0644;
        return 0;
    }
    char *end;
    unsigned long m = strtoul(s, &end, 8);
    if (!*s || *end || m > 0777)
        return -EINVAL;
    *ret = (mode_t)m;
    return 0;
}

void sd_api_files_put(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    const char *ctype = sd_req_header(req, "Content-Type");
    bool tar = ctype && strncmp(ctype, "application/x-tar", 17) == 0;
    if (ctype && !tar && strncmp(ctype, "application/octet-stream", 24) != 0) {
        sd_reply_error(req, 415, "unsupported_media_type",
                       "Content-Type must be application/octet-stream or application/x-tar");
        return;
    }
    mode_t mode;
    if (parse_mode(sd_req_query(req, "mode"), &mode) < 0) {
        sd_reply_error(req, 400, "invalid_argument", "mode: must be octal, at most 0777");
        return;
    }
    const char *path;
    _cleanup_close_ int root = files_prologue(req, sb, &path);
    if (root < 0)
        return;
    uid_t uid = (uid_t)sd_uid_base(sb->uid_slot) + 1000;
    int r = tar ? untar(root, path, req->body, req->body_len, uid)
                : write_file(root, path, req->body, req->body_len, mode, uid);
    if (r < 0)
        reply_errno(req, r == -ENOENT ? -EINVAL : r, "path", path);
    else
        sd_reply_json(req, 204, NULL);
}
