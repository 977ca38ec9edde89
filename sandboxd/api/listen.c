/* Listening sockets and systemd integration without libsystemd: the Unix socket (mode 0660,
 * group `sandboxd` when it exists), the optional TCP socket, a socket passed by systemd
 * (LISTEN_FDS/LISTEN_PID, fd 3) and the READY=1 notification (NOTIFY_SOCKET). */
#include "sandboxd/api/listen.h"

#include "common/log.h"

#include <limits.h>

#include "common/fdutil.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int sd_listen_unix(const char *path, int *ret_fd, error_rec *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return error_set(err, -ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        mkdir_p(dir, 0755);
    }
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path); /* stale socket of an earlier run */
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "socket");
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return error_set_errno(err, negative_errno(), "bind %s", path);
    struct group *g = getgrnam("sandboxd");
    if (g && chown(path, 0, g->gr_gid) < 0)
        return error_set_errno(err, negative_errno(), "chown %s", path);
    if (chmod(path, 0660) < 0)
        return error_set_errno(err, negative_errno(), "chmod %s", path);
    if (listen(fd, 512) < 0)
        return error_set_errno(err, negative_errno(), "listen %s", path);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int sd_listen_tcp(const char *what, const char *hostport, int *ret_fd, error_rec *err) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof(host))
        return error_set(err, -EINVAL, "%s: expected HOST:PORT, got \"%s\"", what, hostport);
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || errno || port < 1 || port > 65535)
        return error_set(err, -EINVAL, "%s %s: the port must be a number in [1, 65535]", what,
                         hostport);
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = 0;
        h++;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai;
    int r = getaddrinfo(h, colon + 1, &hints, &ai);
    if (r != 0)
        return error_set(err, -EINVAL, "%s %s: %s", what, hostport, gai_strerror(r));
    _cleanup_close_ int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 512) < 0) {
        r = negative_errno();
        freeaddrinfo(ai);
        return error_set_errno(err, r, "listen on %s", hostport);
    }
    freeaddrinfo(ai);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int sd_listen_activated(void) {
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds || strtol(pid, NULL, 10) != getpid() || strtol(fds, NULL, 10) < 1)
        return -1;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    fd_set_cloexec(3, 1);
    return 3;
}

void sd_notify_ready(void) {
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
        return;
    strcpy(sa.sun_path, path);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    if (path[0] == '@')
        sa.sun_path[0] = 0;
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    static const char msg[] = "READY=1\nSTATUS=serving";
    if (fd >= 0 && sendto(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
        log_warn("sd_notify failed: %m");
}

bool sd_listen_is_loopback(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return false;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}
