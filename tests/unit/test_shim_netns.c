/* Unit tests of shim_socket_in_netns and shim_port_connect (shim/ports.h): a socket is made in
 * the network namespace of the sandbox's init and never in the shim's own, which init's pid
 * names once another process of the host has it. A child in a network namespace of its own
 * stands in for init; the only address used is loopback. */
#include "shim/ports.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child = -1;

static bool end_child(void) {
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        child = -1;
    }
    return true;
}

/* A child that waits, in a network namespace of its own when own_ns (else in ours). */
static pid_t waiting_child(bool own_ns) {
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        signal(SIGTERM, SIG_DFL); /* (not the test library's handler) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char ok = !own_ns || unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    static bool registered;
    if (!registered)
        test_at_teardown(end_child), registered = true;
    close(p[1]);
    char ok = 0;
    CHECK(read(p[0], &ok, 1) == 1 && ok == 'y');
    close(p[0]);
    return child;
}

static ino_t netns_of(pid_t pid) {
    char p[64];
    struct stat st;
    snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
    CHECK(stat(p, &st) == 0);
    return st.st_ino;
}

/* A TCP listener on the shim's own loopback (port chosen by the kernel), nonblocking. */
static int host_listener(int *ret_port) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    CHECK(l >= 0);
    CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 8) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
    *ret_port = ntohs(a.sin_port);
    return l;
}

TEST(socket_in_netns_is_made_there) {
    test_require_root();
    ino_t ours = netns_of(getpid());
    pid_t init = waiting_child(true);
    CHECK(netns_of(init) != ours);
    int fd = -1;
    error_rec err = {0};
    CHECK_OK(shim_socket_in_netns(init, AF_INET, SOCK_STREAM, 0, &fd, &err));
    int ns = ioctl(fd, SIOCGSKNS); /* the namespace the socket belongs to */
    struct stat st;
    CHECK(ns >= 0 && fstat(ns, &st) == 0);
    CHECK_EQ(st.st_ino, netns_of(init));
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    CHECK_EQ(netns_of(getpid()), ours); /* the caller came back */
    close(ns);
    close(fd);
}

TEST(socket_in_netns_refuses_the_shims_own) {
    test_require_root();
    /* init's pid reused: by the shim itself, or by another process of the host's namespace */
    pid_t pids[] = {getpid(), waiting_child(false)};
    for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++) {
        int fd = -1;
        error_rec err = {0};
        CHECK_EQ(shim_socket_in_netns(pids[i], AF_INET, SOCK_STREAM, 0, &fd, &err), -EPERM);
        CHECK_MSG(strstr(err.message, "the shim's own"), "message: %s", err.message);
        CHECK_EQ(fd, -1);
    }
    int fd = -1;
    error_rec err = {0};
    CHECK_EQ(shim_socket_in_netns(999999999, AF_INET, SOCK_STREAM, 0, &fd, &err), -ENOENT);
    CHECK_MSG(strstr(err.message, "cannot open the sandbox's network namespace"), "message: %s",
              err.message); /* (no such pid) */
    CHECK_EQ(fd, -1);
}

TEST(port_connect_never_reaches_the_hosts_loopback) {
    test_require_root();
    int port, fd = -1;
    int l = host_listener(&port);
    error_rec err = {0};
    shim_sandbox sb = {.init_pid = waiting_child(false)}; /* init's pid, now the host's */
    CHECK_EQ(shim_port_connect(&sb, port, &fd, &err), -EPERM);
    CHECK_EQ(fd, -1);
    end_child();
    /* a sandbox's own namespace has nothing on that port (its loopback is not even up) */
    sb.init_pid = waiting_child(true);
    CHECK(shim_port_connect(&sb, port, &fd, &err) < 0);
    CHECK_EQ(fd, -1);
    CHECK(accept(l, NULL, NULL) < 0 && errno == EAGAIN); /* nothing reached the host's server */
    close(l);
}
