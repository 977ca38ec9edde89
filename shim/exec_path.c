/* A command's last steps before its execve (see exec_path.h). */
#include "shim/exec_path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static size_t str_len(const char *s) {
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

int shim_exec_cloexec_walk(int low) {
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
    if (dfd < 0)
        return -errno;
    char buf[4096];
    long got;
    while ((got = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
        for (long off = 0; off < got;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            long fd = d->d_name[0] ? 0 : -1;
            for (const char *c = d->d_name; *c && fd >= 0 && fd <= 0x7fffffff; c++)
                fd = *c >= '0' && *c <= '9' ? fd * 10 + (*c - '0') : -1;
            if (fd >= low && fd != dfd && fd <= 0x7fffffff &&
                fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0 && r == 0)
                r = -errno;
        }
    if (got < 0 && r == 0)
        r = -errno;
    close(dfd);
    return r;
}

int shim_exec_cloexec_from(int low) {
    if (close_range((unsigned)low, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return 0;
    return shim_exec_cloexec_walk(low);
}

static const char *env_path(char *const envp[]) {
    for (size_t i = 0; envp[i]; i++)
        if (strncmp(envp[i], "PATH=", 5) == 0)
            return envp[i] + 5;
    return DEFAULT_PATH;
}

int shim_exec_search(char *const argv[], char *const envp[]) {
    const char *file = argv[0];
    if (strchr(file, '/')) {
        execve(file, argv, envp);
        return -errno;
    }
    int best = -ENOENT;
    const char *p = env_path(envp);
    char buf[4096];
    size_t fl = str_len(file);
    while (*p) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : str_len(p);
        if (dl + fl + 2 <= sizeof(buf)) {
            memcpy(buf, dl ? p : ".", dl ? dl : 1);
            size_t o = dl ? dl : 1;
            buf[o] = '/';
            memcpy(buf + o + 1, file, fl + 1);
            execve(buf, argv, envp);
            if (errno != ENOENT && errno != ENOTDIR)
                best = -errno;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return best;
}
