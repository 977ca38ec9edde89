/* Descriptor and file helpers (see fdutil.h). Every descriptor opened here is O_CLOEXEC. */
#include "common/fdutil.h"

#include "common/macro.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fd_set_cloexec(int fd, int on) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0)
        return -errno;
    fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
    return fcntl(fd, F_SETFD, fl) < 0 ? -errno : 0;
}

int fd_set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

int fd_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len) {
    size_t cap = MIN((size_t)4096, max), len = 0;
    _cleanup_free_ char *buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len == cap) {
            if (cap >= max) {
                char extra;
                ssize_t k = read(fd, &extra, 1);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k < 0)
                    return -errno;
                if (k > 0)
                    return -EFBIG;
                break;
            }
            cap = MIN(cap * 2, max);
            char *nb = realloc(buf, cap + 1);
            if (!nb)
                return -ENOMEM;
            buf = nb;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (ret_len)
        *ret_len = len;
    *ret = TAKE_PTR(buf);
    return 0;
}

int file_read_all(const char *path, size_t max, char **ret, size_t *ret_len) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    return fd_read_all(fd, max, ret, ret_len);
}

int file_read_knob_u64(const char *dir, const char *knob, uint64_t *ret) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", dir, knob);
    _cleanup_free_ char *s = NULL;
    int r = file_read_all(p, 4096, &s, NULL);
    if (r < 0)
        return r;
    if (strncmp(s, "max", 3) == 0) {
        *ret = UINT64_MAX;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    *ret = v;
    return 0;
}

int file_write_str(const char *path, const char *s) {
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    return fd_write_all(fd, s, strlen(s));
}

int mkdir_p(const char *path, mode_t mode) {
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int rm_rf_at(int dfd, const char *name) {
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        int q = rm_rf_at(dirfd(d), de->d_name);
        if (q < 0 && r == 0)
            r = q;
    }
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
        r = -errno;
    return r;
}

int rm_rf(const char *path) {
    return rm_rf_at(AT_FDCWD, path);
}
