/* The safe walker (see safepath.h): one component at a time, no symlinks, checked mounts. */
#include "common/safepath.h"

#include "common/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int open_component(int dir, const char *name, int flags, int *ret_fd) {
    /* openat2 refuses O_PATH with any flag but O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC */
    if (!(flags & O_PATH))
        flags |= O_NOCTTY;
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                           .resolve =
                               RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH};
    long fd = syscall(SYS_openat2, dir, name, &how, sizeof(how));
    if (fd < 0)
        return negative_errno();
    *ret_fd = (int)fd;
    return 0;
}

int safepath_mnt_id(int fd, uint64_t *ret) {
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0)
        return negative_errno();
    if (!(stx.stx_mask & STATX_MNT_ID))
        return -EOPNOTSUPP;
    *ret = stx.stx_mnt_id;
    return 0;
}

/* The directory at path (relative to root) opened O_PATH, without mount checks (none known yet)
 * but never through a symlink. */
static int open_plain(int root, const char *path, int *ret_fd) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    int cur, r = open_component(root, ".", O_PATH | O_DIRECTORY, &cur);
    char *save = NULL;
    for (char *s = buf, *c; r == 0 && (c = strtok_r(s, "/", &save)); s = NULL) {
        int next;
        r = open_component(cur, c, O_PATH | O_DIRECTORY, &next);
        safe_close(cur);
        cur = r == 0 ? next : -1;
    }
    if (r == 0)
        *ret_fd = cur;
    return r;
}

int safepath_init(safepath *sp, int root, const char *const *writable, size_t n) {
    *sp = (safepath){.root = root};
    for (size_t i = 0; i < n && sp->n_mnt < SAFEPATH_MAX_MOUNTS; i++) {
        _cleanup_close_ int fd = -1;
        uint64_t id;
        if (open_plain(root, writable[i], &fd) < 0 || safepath_mnt_id(fd, &id) < 0)
            continue;
        bool dup = false;
        for (size_t k = 0; k < sp->n_mnt; k++)
            dup = dup || sp->mnt[k] == id;
        if (!dup)
            sp->mnt[sp->n_mnt++] = id;
    }
    return sp->n_mnt > 0 ? 0 : -ENOENT;
}

static bool read_only_mount_ok(int fd) {
    struct statfs fs;
    struct statvfs vfs;
    if (fstatfs(fd, &fs) < 0 || fstatvfs(fd, &vfs) < 0)
        return false;
    if (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC ||
        fs.f_type == DEVPTS_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC ||
        fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == DEBUGFS_MAGIC ||
        fs.f_type == SECURITYFS_MAGIC)
        return false;
    return (vfs.f_flag & ST_RDONLY) != 0;
}

int safepath_allowed(const safepath *sp, int fd, const struct stat *st, bool write) {
    uint64_t id;
    int r = safepath_mnt_id(fd, &id);
    if (r < 0)
        return r;
    bool ours = false;
    for (size_t i = 0; i < sp->n_mnt; i++)
        ours = ours || sp->mnt[i] == id;
    if (!ours && (write || !sp->read_ro_mounts || !read_only_mount_ok(fd)))
        return -EXDEV;
    if (write && sp->uid_hi > sp->uid_lo && (st->st_uid < sp->uid_lo || st->st_uid >= sp->uid_hi))
        return -EPERM;
    return 0;
}

static int check_fd(const safepath *sp, int fd, bool write) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return negative_errno();
    return safepath_allowed(sp, fd, &st, write);
}

/* One step of a walk: the directory name in cur, checked; create: mkdir it when missing (the
 * directory the walk made is given to uid; its mount is checked first). */
/* A directory component that is not one: -ELOOP if it is a symlink (which O_DIRECTORY |
 * O_NOFOLLOW reports as -ENOTDIR), else r. */
static int not_dir(int cur, const char *name, int r) {
    struct stat st;
    if (r == -ENOTDIR && fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return -ELOOP;
    return r;
}

static int step(const safepath *sp, int cur, char *name, bool write, bool create, uid_t uid,
                int *ret_fd) {
    int fd, r = open_component(cur, name, O_RDONLY | O_DIRECTORY, &fd);
    r = not_dir(cur, name, r);
    if (r == -ENOENT && create) {
        bool made = mkdirat(cur, name, 0755) == 0;
        if (!made && errno != EEXIST)
            return negative_errno();
        if ((r = open_component(cur, name, O_RDONLY | O_DIRECTORY, &fd)) < 0)
            return r;
        if (made && ((r = check_fd(sp, fd, false)) < 0 ||
                     (fchown(fd, uid, uid) < 0 && (r = negative_errno()) < 0))) {
            safe_close(fd);
            return r;
        }
    } else if (r < 0) {
        return r;
    }
    if ((r = check_fd(sp, fd, write)) < 0) {
        safe_close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

int safepath_dir(const safepath *sp, const char *path, bool write, bool create, uid_t uid,
                 int *ret_fd) {
    size_t len = strlen(path);
    _cleanup_free_ char *buf = malloc(len + 1);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, path, len + 1);
    int cur, r = open_component(sp->root, ".", O_RDONLY | O_DIRECTORY, &cur);
    if (r < 0)
        return r;
    if ((r = check_fd(sp, cur, write)) < 0) {
        safe_close(cur);
        return r;
    }
    char *save = NULL;
    for (char *s = buf, *c; (c = strtok_r(s, "/", &save)); s = NULL) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            safe_close(cur);
            return -EINVAL;
        }
        int next;
        r = step(sp, cur, c, write, create, uid, &next);
        safe_close(cur);
        if (r < 0)
            return r;
        cur = next;
    }
    *ret_fd = cur;
    return 0;
}

int safepath_dir_at(int dir, const char *name, int *ret_fd) {
    return open_component(dir, name, O_RDONLY | O_DIRECTORY, ret_fd);
}

int safepath_node(int dir, const char *name, int *ret_fd, struct stat *ret_st) {
    int fd, r = open_component(dir, name, O_PATH, &fd);
    if (r < 0)
        return r;
    if (fstat(fd, ret_st) < 0) {
        r = negative_errno();
        safe_close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

int safepath_reopen(int path_fd, int flags, int *ret_fd) {
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/fd/%d", path_fd);
    int fd = open(p, flags | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return negative_errno();
    *ret_fd = fd;
    return 0;
}

/* Whether name in dir may be replaced by a new node: missing, or a regular file, symlink, FIFO or
 * socket on an allowed mount, owned by the range (a directory: -EISDIR; a device: -EPERM).
 * ino: the inode there, 0 when none. */
static int replaceable(const safepath *sp, int dir, const char *name, ino_t *ret_ino,
                       dev_t *ret_dev) {
    _cleanup_close_ int pfd = -1;
    struct stat st;
    int r = safepath_node(dir, name, &pfd, &st);
    if (r == -ENOENT) {
        *ret_ino = 0;
        *ret_dev = 0;
        return 0;
    }
    if (r < 0)
        return r;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) && !S_ISFIFO(st.st_mode) &&
        !S_ISSOCK(st.st_mode))
        return -EPERM; /* a device node: never touched */
    if ((r = safepath_allowed(sp, pfd, &st, true)) < 0)
        return r;
    *ret_ino = st.st_ino;
    *ret_dev = st.st_dev;
    return 0;
}

static bool valid_base(const char *name) {
    return *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static void tmp_name(char buf[SAFEPATH_TMP_NAME]) {
    static unsigned n;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(buf, SAFEPATH_TMP_NAME, ".sbx-new-%d-%u-%lx", (int)getpid(), n++,
             (unsigned long)ts.tv_nsec);
}

int safepath_replace(const safepath *sp, int dir, const char *tmp, const char *name) {
    ino_t ino;
    dev_t dev;
    int r = valid_base(name) ? replaceable(sp, dir, name, &ino, &dev) : -EINVAL;
    if (r == 0 && renameat(dir, tmp, dir, name) < 0)
        r = negative_errno();
    if (r < 0)
        (void)unlinkat(dir, tmp, 0);
    return r;
}

int safepath_file_new(const safepath *sp, int dir, const char *name, mode_t mode, uid_t uid,
                      safepath_file *ret) {
    ino_t ino;
    dev_t dev;
    int r = valid_base(name) ? replaceable(sp, dir, name, &ino, &dev) : -EINVAL;
    if (r < 0)
        return r;
    safepath_file f = {.fd = -1};
    /* unnamed until it is whole: nothing is left behind by a failure or a kill */
    f.fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_NOCTTY | O_CLOEXEC, mode);
    for (int tries = 0; f.fd < 0 && tries < 8; tries++) { /* no O_TMPFILE here: a hidden name */
        tmp_name(f.tmp);
        f.fd = openat(dir, f.tmp,
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
                      mode);
        if (f.fd < 0 && errno != EEXIST)
            return negative_errno();
    }
    if (f.fd < 0)
        return -EEXIST;
    if (fchown(f.fd, uid, uid) < 0 || fchmod(f.fd, mode) < 0) {
        r = negative_errno();
        safepath_file_discard(dir, &f);
        return r;
    }
    *ret = f;
    return 0;
}

void safepath_file_discard(int dir, safepath_file *f) {
    f->fd = safe_close(f->fd);
    if (f->tmp[0])
        (void)unlinkat(dir, f->tmp, 0);
    f->tmp[0] = 0;
}

int safepath_link_over(const safepath *sp, int fd, int dir, const char *name) {
    struct stat st;
    ino_t ino;
    dev_t dev;
    int r = valid_base(name) ? replaceable(sp, dir, name, &ino, &dev) : -EINVAL;
    if (r < 0)
        return r;
    if (fstat(fd, &st) < 0)
        return negative_errno();
    if (st.st_ino == ino && st.st_dev == dev)
        return 0; /* name is that file already */
    if (ino == 0 && linkat(fd, "", dir, name, AT_EMPTY_PATH) == 0)
        return 0; /* nothing there: linked in place (it fails if something came meanwhile) */
    if (ino == 0 && errno != EEXIST)
        return negative_errno();
    char tmp[SAFEPATH_TMP_NAME];
    for (int tries = 0;; tries++) {
        tmp_name(tmp);
        if (linkat(fd, "", dir, tmp, AT_EMPTY_PATH) == 0)
            break;
        if (errno != EEXIST || tries == 8)
            return negative_errno();
    }
    return safepath_replace(sp, dir, tmp, name);
}

int safepath_symlink_over(const safepath *sp, const char *target, int dir, const char *name,
                          uid_t uid) {
    if (!valid_base(name))
        return -EINVAL;
    char tmp[SAFEPATH_TMP_NAME];
    for (int tries = 0;; tries++) {
        tmp_name(tmp);
        if (symlinkat(target, dir, tmp) == 0)
            break;
        if (errno != EEXIST || tries == 8)
            return negative_errno();
    }
    if (fchownat(dir, tmp, uid, uid, AT_SYMLINK_NOFOLLOW) < 0) {
        int r = negative_errno();
        (void)unlinkat(dir, tmp, 0);
        return r;
    }
    return safepath_replace(sp, dir, tmp, name);
}

int safepath_file_commit(const safepath *sp, int dir, const char *name, safepath_file *f) {
    int r = f->tmp[0] ? safepath_replace(sp, dir, f->tmp, name)
                      : safepath_link_over(sp, f->fd, dir, name);
    f->tmp[0] = 0; /* renamed, or removed by safepath_replace */
    f->fd = safe_close(f->fd);
    return r;
}

static int copy_range(int in, int out, off_t off, off_t end) {
    while (off < end) {
        loff_t ioff = off, ooff = off;
        ssize_t n = copy_file_range(in, &ioff, out, &ooff, (size_t)(end - off), 0);
        if (n == 0)
            return 0; /* the source shrank */
        if (n > 0) {
            off += n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return negative_errno();
        char buf[65536];
        ssize_t k = pread(in, buf, (size_t)MIN((off_t)sizeof(buf), end - off), off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? negative_errno() : 0;
        for (ssize_t w = 0; w < k;) {
            ssize_t m = pwrite(out, buf + w, (size_t)(k - w), off + w);
            if (m < 0 && errno != EINTR)
                return negative_errno();
            w += m > 0 ? m : 0;
        }
        off += k;
    }
    return 0;
}

int safepath_copy_sparse(int in, int out, uint64_t size) {
    off_t end = (off_t)size, off = 0;
    while (off < end) {
        off_t data = lseek(in, off, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* only a hole is left */
        off_t hole = data < 0 ? end : lseek(in, data, SEEK_HOLE);
        if (data < 0) /* no SEEK_DATA here: all data */
            data = off;
        if (hole < 0 || hole > end)
            hole = end;
        if (data >= end)
            break;
        int r = copy_range(in, out, data, hole);
        if (r < 0)
            return r;
        off = hole;
    }
    return ftruncate(out, end) < 0 ? negative_errno() : 0;
}
