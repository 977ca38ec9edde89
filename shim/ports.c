/* Inbound ports: the connect the daemon's port proxy asks for (shim/ports.h). The shim stays in
 * the host's network namespace; only the socket is made in the sandbox's (setns there and back),
 * so the connection is the sandbox's own loopback, reachable with network "none". */
#include "shim/ports.h"

#include "common/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int shim_socket_in_netns(pid_t init_pid, int domain, int type, int protocol, int *ret_fd,
                         error_rec *err) {
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)init_pid);
    _cleanup_close_ int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (own < 0)
        return error_set_errno(err, negative_errno(), "cannot open the shim's network namespace");
    _cleanup_close_ int ns = open(p, O_RDONLY | O_CLOEXEC);
    if (ns < 0)
        return error_set_errno(err, negative_errno(),
                               "cannot open the sandbox's network namespace");
    /* never the host's: init's pid, reused by another process, would name the shim's own (the
     * namespace compared is the one opened, so it cannot change between check and setns) */
    struct stat a, b;
    if (fstat(own, &a) < 0 || fstat(ns, &b) < 0)
        return error_set_errno(err, negative_errno(), "stat the network namespaces");
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return error_set(err, -EPERM, "the sandbox's network namespace is the shim's own");
    if (setns(ns, CLONE_NEWNET) < 0)
        return error_set(err, -errno, "cannot enter the sandbox's network namespace");
    int fd = socket(domain, type | SOCK_CLOEXEC, protocol);
    int saved = errno;
    if (setns(own, CLONE_NEWNET) < 0) { /* cannot happen: we came from there */
        if (fd >= 0)
            close(fd);
        return error_set(err, -errno, "cannot return to the shim's network namespace");
    }
    if (fd < 0)
        return error_set(err, -saved, "socket in the sandbox's network namespace");
    *ret_fd = fd;
    return 0;
}

int shim_port_connect(shim_sandbox *sb, int port, int *ret_fd, error_rec *err) {
    if (port < 1 || port > 65535)
        return error_set(err, -EINVAL, "port: must be 1..65535");
    if (sb->init_pid <= 0)
        return error_set(err, -ESRCH, "the sandbox is not running");
    _cleanup_close_ int fd = -1;
    int r = shim_socket_in_netns(sb->init_pid, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0, &fd, err);
    if (r < 0)
        return r;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (errno != EINPROGRESS)
            return error_set(err, -errno, "connect to port %d in the sandbox: %m", port);
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int n = poll(&pfd, 1, SHIM_PORT_CONNECT_MS);
        if (n == 0)
            return error_set(err, -ETIMEDOUT, "connect to port %d in the sandbox: timed out", port);
        int so = 0;
        socklen_t sl = sizeof(so);
        if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0)
            return error_set(err, -errno, "connect to port %d in the sandbox: %m", port);
        if (so) {
            errno = so;
            return error_set(err, -so, "connect to port %d in the sandbox: %m", port);
        }
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}
