/* Messages with descriptors attached (SCM_RIGHTS) on SOCK_SEQPACKET sockets: the one
 * implementation under both the daemon <-> shim protocol and the shim <-> init channel.
 * Async-signal-safe (no allocation), so it may run after fork(). */
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#define FDPASS_MAX_FDS 4

/* Send one message of n_iov parts with n_fds (<= FDPASS_MAX_FDS) descriptors. 0 or -errno. */
int fdpass_send(int sock, const struct iovec *iov, size_t n_iov, const int *fds, size_t n_fds);
/* Receive one message into buf. Up to max_fds received descriptors (CLOEXEC) land in fds, the
 * rest are closed. flags: recvmsg's, e.g. MSG_DONTWAIT (-EAGAIN rather than waiting on a blocking
 * socket). Returns the byte count, -ECONNRESET on EOF, -EAGAIN, -EPROTO when the message or its
 * descriptors were truncated (then every received descriptor is closed), or -errno. */
ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds,
                    int flags);
/* Close n descriptors of fds, setting each to -1. */
void fdpass_close_all(int *fds, size_t n);
