/* sbx-gvisor-statx.so: preloaded into every command of a gvisor-class sandbox (shim/gvisor.h).
 * runsc 20221219 (Debian 12's) answers statx(2) and newfstatat(2) with EINVAL when the flags
 * carry AT_NO_AUTOMOUNT, which coreutils 9.1 (ls, stat, du, cp) passes on every call; gVisor
 * has no automounts, so the flag is dropped here and the C library's own function called.
 * Built with no C library of its own (-nostdlib) and no DT_NEEDED entry: the program's libc
 * (glibc or musl) resolves dlsym, so it loads into any image. */
#define _GNU_SOURCE
#include <dlfcn.h>

#ifndef AT_NO_AUTOMOUNT
#define AT_NO_AUTOMOUNT 0x800
#endif

struct statx;
struct stat;
typedef int (*statx_fn)(int, const char *, int, unsigned int, struct statx *);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf);
int fstatat(int dirfd, const char *path, struct stat *buf, int flags);
int fstatat64(int dirfd, const char *path, struct stat *buf, int flags);

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
    static statx_fn next;
    if (!next)
        next = (statx_fn)dlsym(RTLD_NEXT, "statx");
    return next(dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
    static fstatat_fn next;
    if (!next)
        next = (fstatat_fn)dlsym(RTLD_NEXT, "fstatat");
    return next(dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}

int fstatat64(int dirfd, const char *path, struct stat *buf, int flags) {
    static fstatat_fn next;
    if (!next)
        next = (fstatat_fn)dlsym(RTLD_NEXT, "fstatat64");
    return next(dirfd, path, buf, flags & ~AT_NO_AUTOMOUNT);
}
