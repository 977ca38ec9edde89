/* The atomic-file writer (common/filereplace.h). */
#include "common/filereplace.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fsync_dir_of(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = slash == dir ? (slash[1] = '\0', '/') : '\0';
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0)
        fsync(dfd);
}

static int replace(const char *path, const void *buf, size_t len, mode_t mode, bool durable) {
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int r = fd_write_all(fd, buf, len);
    if (r == 0 && durable && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return r;
    }
    if (durable)
        fsync_dir_of(path);
    return 0;
}

int file_write_atomic(const char *path, const void *buf, size_t len, mode_t mode) {
    return replace(path, buf, len, mode, true);
}

int file_replace_nosync(const char *path, const void *buf, size_t len, mode_t mode) {
    return replace(path, buf, len, mode, false);
}

#define REWRITE_MAX 4096 /* one page: a single pwrite of it is all or nothing for a crash */

int file_rewrite_nosync(const char *path, const void *buf, size_t len, mode_t mode) {
    _cleanup_close_ int fd =
        len <= REWRITE_MAX ? open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > REWRITE_MAX)
        return replace(path, buf, len, mode, false);
    size_t total = MAX(len, (size_t)st.st_size);
    char page[REWRITE_MAX];
    memcpy(page, buf, len);
    memset(page + len, ' ', total - len);
    ssize_t n = pwrite(fd, page, total, 0);
    if (n == (ssize_t)total)
        return 0;
    return n < 0 ? -errno : -EIO;
}
