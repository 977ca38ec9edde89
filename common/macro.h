/* Small language helpers shared by every folder: cleanup attributes with explicit ownership
 * transfer (TAKE_PTR, TAKE_FD), array sizes, likely/unlikely. Modelled on systemd's macro.h. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _nodiscard_ __attribute__((warn_unused_result))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand ownership out of a _cleanup_ variable: the variable is reset so cleanup does nothing. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _tp = (p);                                                                   \
        (p) = NULL;                                                                                \
        _tp;                                                                                       \
    })
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _tf = (fd);                                                                            \
        (fd) = -1;                                                                                 \
        _tf;                                                                                       \
    })

/* Close a descriptor, keeping errno; accepts -1. Returns -1 so `fd = safe_close(fd)` resets. */
static inline int safe_close(int fd) {
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return -1;
}

static inline void freep(void *p) {
    free(*(void **)p);
}
static inline void closep(int *fd) {
    safe_close(*fd);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* -errno of the last failed libc call, never 0 (for code paths where errno might be unset). */
static inline int negative_errno(void) {
    return errno > 0 ? -errno : -EIO;
}
