/* libsbx's raw connection for WebSocket streams: a connected, non-blocking socket to a unix:
 * endpoint or to the host:port of an http:// endpoint (libcurl keeps the plain requests; an
 * upgraded stream needs the socket itself; the unix connect is unixhttp.c's). https:// is not
 * supported yet. */
#include "client/lib/internal.h"
#include "client/lib/ws.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* host and port from "http://host:port[/...]" ("[v6]:port" too; port 80 by default). */
static int split_url(const char *url, char *host, size_t hn, char *port, size_t pn) {
    if (strncmp(url, "https://", 8) == 0)
        return -EPROTONOSUPPORT;
    if (strncmp(url, "http://", 7) != 0)
        return -EINVAL;
    const char *h = url + 7, *end = h + strcspn(h, "/?#"), *colon;
    if (*h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb)
            return -EINVAL;
        snprintf(host, hn, "%.*s", (int)(rb - h - 1), h + 1);
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        snprintf(host, hn, "%.*s", (int)((colon ? colon : end) - h), h);
    }
    snprintf(port, pn, "%.*s", colon ? (int)(end - colon - 1) : 2, colon ? colon + 1 : "80");
    return host[0] && port[0] ? 0 : -EINVAL;
}

/* Connect fd (non-blocking) to a, within SBXI_CONNECT_TIMEOUT_MS: a node that is down or
 * unreachable drops the SYNs, and a blocking connect would wait minutes for the kernel to give
 * up (libcurl's requests give up after the same limit). 0 or -errno. */
static int connect_within(int fd, const struct addrinfo *a) {
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return negative_errno();
    uint64_t deadline = now_mono_ms() + SBXI_CONNECT_TIMEOUT_MS;
    for (;;) {
        uint64_t now = now_mono_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int r = poll(&pfd, 1, (int)(deadline - now));
        if (r < 0 && errno != EINTR)
            return negative_errno();
        if (r > 0) {
            int e = 0;
            socklen_t l = sizeof(e);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
                return negative_errno();
            return -e;
        }
    }
}

static int connect_tcp(const char *url) {
    char host[256], port[16];
    int r = split_url(url, host, sizeof(host), port, sizeof(port));
    if (r < 0)
        return r;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -EHOSTUNREACH;
    r = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd =
            socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            r = negative_errno();
            continue;
        }
        r = connect_within(fd, a);
        if (r == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            r = fd;
            break;
        }
        safe_close(fd);
    }
    freeaddrinfo(ai);
    return r;
}

int sbxi_conn_open(const char *unix_path, const char *base_url) {
    int fd = unix_path ? sbxi_unix_connect(unix_path) : connect_tcp(base_url);
    if (fd < 0)
        return fd;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int r = negative_errno();
        safe_close(fd);
        return r;
    }
    return fd;
}
