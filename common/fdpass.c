/* SCM_RIGHTS message passing (see fdpass.h). */
#include "common/fdpass.h"

#include "common/macro.h"

#include <string.h>
#include <sys/socket.h>

typedef union {
    char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX_FDS)];
    struct cmsghdr align;
} fdpass_control;

int fdpass_send(int sock, const struct iovec *iov, size_t n_iov, const int *fds, size_t n_fds) {
    if (n_fds > FDPASS_MAX_FDS)
        return -EINVAL;
    fdpass_control control;
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = n_iov};
    if (n_fds > 0) {
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
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

void fdpass_close_all(int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        fds[i] = safe_close(fds[i]);
}

ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds,
                    int flags) {
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    fdpass_control control;
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof(control.buf)};
    ssize_t n;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;

    size_t got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < max_fds)
                fds[got++] = fd;
            else
                safe_close(fd);
        }
    }
    if (n == 0 && got == 0)
        return -ECONNRESET;
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        fdpass_close_all(fds, got);
        return -EPROTO;
    }
    *ret_n_fds = got;
    return n;
}
