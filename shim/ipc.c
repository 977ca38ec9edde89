/* Send/receive of shim <-> init records (see ipc.h). Async-signal-safe. */
#include "shim/ipc.h"

#include "common/fdpass.h"
#include "common/macro.h"

#include <stddef.h>
#include <string.h>

int shim_ipc_send(int fd, uint32_t type, uint64_t id, int32_t a, int32_t b, const void *data,
                  size_t len, const int *fds, size_t n_fds) {
    if (len > SHIM_IPC_MAX - sizeof(shim_ipc_msg) || n_fds > 3)
        return -EMSGSIZE;
    shim_ipc_msg hdr = {.type = type, .a = a, .b = b, .len = (uint32_t)len, .id = id};
    struct iovec iov[2] = {{.iov_base = &hdr, .iov_len = sizeof(hdr)},
                           {.iov_base = (void *)data, .iov_len = len}};
    return fdpass_send(fd, iov, len ? 2 : 1, fds, n_fds);
}

static int recv_record(int fd, shim_ipc_msg *buf, int fds[3], size_t *n_fds, int flags) {
    *n_fds = 0;
    size_t got = 0;
    ssize_t n = fdpass_recv(fd, buf, SHIM_IPC_MAX, fds, 3, &got, flags);
    if (n < 0)
        return (int)n;
    if ((size_t)n < sizeof(shim_ipc_msg) || buf->len != (size_t)n - sizeof(shim_ipc_msg)) {
        fdpass_close_all(fds, got);
        return -EPROTO;
    }
    *n_fds = got;
    return 0;
}

int shim_ipc_recv(int fd, shim_ipc_msg *buf, int fds[3], size_t *n_fds) {
    return recv_record(fd, buf, fds, n_fds, 0);
}

int shim_ipc_recv_nowait(int fd, shim_ipc_msg *buf, int fds[3], size_t *n_fds) {
    return recv_record(fd, buf, fds, n_fds, MSG_DONTWAIT);
}

socklen_t shim_ipc_pause_addr(struct sockaddr_un *a) {
    *a = (struct sockaddr_un){.sun_family = AF_UNIX};
    memcpy(a->sun_path + 1, SHIM_IPC_PAUSE_ADDR, sizeof(SHIM_IPC_PAUSE_ADDR) - 1);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(SHIM_IPC_PAUSE_ADDR));
}
