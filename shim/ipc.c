/* Send/receive of shim <-> init records (see ipc.h). Async-signal-safe. */
#include "shim/ipc.h"

#include "common/macro.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

int shim_ipc_send(int fd, uint32_t type, uint64_t id, int32_t a, int32_t b, const void *data,
                  size_t len, const int *fds, size_t n_fds) {
    if (len > SHIM_IPC_MAX - sizeof(shim_ipc_msg) || n_fds > 3)
        return -EMSGSIZE;
    shim_ipc_msg hdr = {.type = type, .a = a, .b = b, .len = (uint32_t)len, .id = id};
    struct iovec iov[2] = {{.iov_base = &hdr, .iov_len = sizeof(hdr)},
                           {.iov_base = (void *)data, .iov_len = len}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 3)];
        struct cmsghdr align;
    } control;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (n_fds) {
        memset(&control, 0, sizeof(control));
        mh.msg_control = control.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
    }
    for (;;) {
        if (sendmsg(fd, &mh, MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

int shim_ipc_recv(int fd, shim_ipc_msg *buf, int fds[3], size_t *n_fds) {
    struct iovec iov = {.iov_base = buf, .iov_len = SHIM_IPC_MAX};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 3)];
        struct cmsghdr align;
    } control;
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof(control.buf)};
    ssize_t n;
    do
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    size_t got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int p[8];
        memcpy(p, CMSG_DATA(c), sizeof(int) * MIN(k, (size_t)8));
        for (size_t i = 0; i < k && i < 8; i++) {
            if (got < 3)
                fds[got++] = p[i];
            else
                safe_close(p[i]);
        }
    }
    *n_fds = got;
    if (n == 0 && got == 0)
        return -ECONNRESET;
    if ((size_t)n < sizeof(shim_ipc_msg) || buf->len != (size_t)n - sizeof(shim_ipc_msg) ||
        (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        for (size_t i = 0; i < got; i++)
            safe_close(fds[i]);
        *n_fds = 0;
        return -EPROTO;
    }
    return 0;
}
