/* bench/exec_model.c: the least any daemon with helper processes could do for an exec on this
 * machine, as a model to measure the real one against (issue 28 goal 4; bench/exec_floor.py
 * --model). Usage: exec_model SOCK HOPS [pipes] [reaper|keep [norelease]]. It listens on the Unix
 * socket SOCK and, for each read from a client, has /bin/true run and answers "0" when it has
 * ended. The request travels through HOPS processes (0-3) after the listener, each a persistent
 * process that passes it on over a socketpair and the answer back; the last one runs the command
 * with posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK), as Python's subprocess does) and waits for
 * it. Every process waits in epoll_wait before it reads, as an event loop does. With "pipes"
 * the listener makes the command's stdout and stderr pipes for each request, sends their write
 * ends and /dev/null down the chain with SCM_RIGHTS, and answers after both pipes' ends too.
 * With "reaper" the last hop runs each command from a clone(CLONE_VM) child of its own (as
 * sandboxd's init does: it waits until the command has started, and reaps the child through a
 * signalfd), which waits for the command and sends the answer itself. With "keep" instead, the
 * last hop keeps one forked reaper for all commands: it sends it each request with its pipes
 * and waits until it has started the command (not with "norelease"); the reaper answers. No
 * HTTP, no JSON, no namespaces, no seccomp: a lower bound, not a sandbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static int use_pipes, use_reaper, use_keep, use_release = 1;
static int keeper = -1; /* the last hop's socket to its kept reaper */

static void die(const char *what) {
    perror(what);
    exit(1);
}

static int epoll_for(int fd) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll");
    return ep;
}

/* One message and up to 3 descriptors (*nf of them) from fd, after an epoll_wait on ep (-1:
 * none, the caller waited). */
static ssize_t recv_fds(int ep, int fd, char *buf, size_t len, int fds[3], int *nf) {
    struct epoll_event ev;
    while (ep >= 0 && epoll_wait(ep, &ev, 1, -1) < 0)
        ;
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(3 * sizeof(int))];
    } u;
    struct iovec io = {buf, len};
    struct msghdr m = {
        .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    *nf = c && c->cmsg_type == SCM_RIGHTS ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
    if (*nf)
        memcpy(fds, CMSG_DATA(c), (size_t)*nf * sizeof(int));
    return n;
}

static int send_fds(int fd, const char *buf, size_t len, const int *fds, int nf) {
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(3 * sizeof(int))];
    } u;
    struct iovec io = {(char *)buf, len};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1};
    if (nf) {
        m.msg_control = u.b;
        m.msg_controllen = CMSG_SPACE((size_t)nf * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nf * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nf * sizeof(int));
    }
    return sendmsg(fd, &m, 0) == (ssize_t)len ? 0 : -1;
}

/* /bin/true with fds (nf of them) as its 0, 1, 2; its pid, or -1. */
static pid_t spawn_true(const int *fds, int nf) {
    char *argv[] = {"true", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < nf; i++)
        posix_spawn_file_actions_adddup2(&fa, fds[i], i);
    pid_t pid;
    int r = posix_spawn(&pid, "/bin/true", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return r == 0 ? pid : -1;
}

static char wait_answer(pid_t pid) {
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return '1';
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? '0' : '1';
}

/* ---- the reaper: a clone(CLONE_VM) child of the last hop for each command ---- */
#define REAPER_STACK (128 * 1024)
#define N_STACKS 8
static struct {
    char *stack;
    pid_t pid; /* the reaper on it, 0 when free */
} stacks[N_STACKS];

struct reaper_args {
    int in, release, fds[3], nf;
};

static int reaper_main(void *arg) {
    const struct reaper_args *a = arg; /* on the hop's stack: read before the release only */
    int in = a->in;
    pid_t pid = spawn_true(a->fds, a->nf);
    close(a->release); /* the hop goes on */
    char answer = wait_answer(pid);
    _exit(write(in, &answer, 1) == 1 ? 0 : 1);
}

/* A reaper has ended: its stack is free. */
static void reaped(pid_t pid) {
    for (int i = 0; i < N_STACKS; i++)
        if (stacks[i].pid == pid)
            stacks[i].pid = 0;
}

static int free_stack(void) {
    for (;;) {
        for (int i = 0; i < N_STACKS; i++)
            if (stacks[i].pid == 0)
                return i;
        reaped(waitpid(-1, NULL, 0));
    }
}

/* Run one command from a reaper, which answers on in; returns when the command has started. */
static void run_reaped(int in, const int *fds, int nf) {
    int rel[2], k = free_stack();
    if (pipe2(rel, O_CLOEXEC) < 0)
        die("pipe2");
    if (!stacks[k].stack && !(stacks[k].stack = malloc(REAPER_STACK)))
        die("malloc");
    struct reaper_args a = {.in = in, .release = rel[1], .nf = nf};
    memcpy(a.fds, fds, (size_t)nf * sizeof(int));
    stacks[k].pid = clone(reaper_main, stacks[k].stack + REAPER_STACK, CLONE_VM | SIGCHLD, &a);
    if (stacks[k].pid < 0)
        die("clone");
    close(rel[1]);
    struct pollfd p = {.fd = rel[0], .events = POLLIN};
    while (poll(&p, 1, -1) < 0)
        ;
    close(rel[0]);
}

/* A reaper kept for the next command (keep): a forked child of the last hop that runs each
 * command it is sent, tells the hop it has started (unless norelease: the hop waits for that,
 * as sandboxd's init waits for its reaper's start), and answers on in itself. */
static _Noreturn void keeper_main(int in, int ch) {
    char buf[16];
    int fds[3], nf;
    while (recv_fds(-1, ch, buf, sizeof(buf), fds, &nf) > 0) {
        pid_t pid = spawn_true(fds, nf);
        for (int i = 0; i < nf; i++)
            close(fds[i]);
        if (use_release && write(ch, "r", 1) != 1)
            break;
        char answer = wait_answer(pid);
        if (write(in, &answer, 1) != 1)
            break;
    }
    _exit(0);
}

/* A child on a socketpair: returns its pid and our end in *sock, or 0 in the child with its end
 * in *sock (it dies with its parent). */
static pid_t fork_peer(int *sock) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        die("socketpair");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(sp[pid == 0 ? 0 : 1]);
    *sock = sp[pid == 0 ? 1 : 0];
    return pid;
}

static void keeper_start(int in) {
    int ch;
    if (fork_peer(&ch) == 0)
        keeper_main(in, ch);
    keeper = ch;
}

static void run_kept(const int *fds, int nf) {
    char r;
    if (send_fds(keeper, "x", 1, fds, nf) < 0 || (use_release && read(keeper, &r, 1) != 1))
        die("keeper");
}

/* ---- the chain ---- */

/* The listener's wait for the answer from next (-1: none) and, with out, both pipes' ends. */
static char await_all(int next, const int out[2]) {
    int ep = epoll_create1(EPOLL_CLOEXEC), left = 0;
    char answer = '1';
    for (int i = 0; i < 3; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = i ? (out ? out[i - 1] : -1) : next};
        if (ev.data.fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) == 0)
            left++;
    }
    while (left > 0) {
        struct epoll_event ev[3];
        int n = epoll_wait(ep, ev, 3, -1);
        for (int i = 0; i < n; i++) {
            char b[4096];
            ssize_t k = read(ev[i].data.fd, b, sizeof(b));
            if (ev[i].data.fd == next && k == 1)
                answer = b[0];
            if (ev[i].data.fd == next || k <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, ev[i].data.fd, NULL);
                left--;
            }
        }
    }
    close(ep);
    return answer;
}

/* The listener's side of one request: the pipes, the request down the chain, the answer. */
static char listener_request(int next) {
    int out[2] = {-1, -1}, err[2] = {-1, -1}, fds[3] = {-1, -1, -1}, nf = 0;
    if (use_pipes) {
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
            (fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
            die("pipes");
        fds[1] = out[1];
        fds[2] = err[1];
        nf = 3;
    }
    char answer = '1';
    if (next < 0)
        answer = wait_answer(spawn_true(fds, nf));
    else if (send_fds(next, "x", 1, fds, nf) < 0)
        die("send");
    for (int i = 0; i < nf; i++)
        close(fds[i]);
    int rd[2] = {out[0], err[0]};
    if (next >= 0 || use_pipes) {
        char a = await_all(next, use_pipes ? rd : NULL);
        if (next >= 0)
            answer = a;
    }
    if (use_pipes) {
        close(out[0]);
        close(err[0]);
    }
    return answer;
}

/* A hop's side of one request (fds from the hop before): on down the chain, or run it. */
static void hop_request(int in, int next, int ep_next, const int *fds, int nf) {
    char answer = '1';
    if (next >= 0) {
        if (send_fds(next, "x", 1, fds, nf) < 0)
            die("send");
        int f[3], k;
        if (recv_fds(ep_next, next, &answer, 1, f, &k) != 1)
            answer = '1';
    } else if (use_keep) {
        run_kept(fds, nf);
        return; /* the kept reaper answers */
    } else if (use_reaper) {
        run_reaped(in, fds, nf);
        return; /* the reaper answers */
    } else {
        answer = wait_answer(spawn_true(fds, nf));
    }
    if (write(in, &answer, 1) != 1)
        die("write");
}

/* Serve requests from in; the listener (listener true) answers its client with one byte. */
static void serve(int in, int next, int listener) {
    int ep = epoll_for(in), sfd = -1;
    int ep_next = !listener && next >= 0 ? epoll_for(next) : -1; /* (the listener: await_all) */
    if (!listener && next < 0 && use_keep)
        keeper_start(in);
    if (!listener && next < 0 && use_reaper) { /* reapers end as SIGCHLD, read by a signalfd */
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = sfd};
        if (sfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
            die("signalfd");
    }
    for (;;) {
        char buf[4096];
        int fds[3], nf = 0;
        struct epoll_event ev;
        while (epoll_wait(ep, &ev, 1, -1) < 0)
            ;
        if (sfd >= 0 && ev.data.fd == sfd) { /* a reaper ended */
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            pid_t p;
            while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
                reaped(p);
            continue;
        }
        ssize_t n;
        if (listener) {
            if ((n = read(in, buf, sizeof(buf))) <= 0)
                break;
            char answer = listener_request(next);
            if (write(in, &answer, 1) != 1)
                break;
            continue;
        }
        n = recv_fds(-1, in, buf, sizeof(buf), fds, &nf);
        if (n <= 0)
            break;
        hop_request(in, next, ep_next, fds, nf);
        for (int i = 0; i < nf; i++)
            close(fds[i]);
    }
    close(ep);
    if (ep_next >= 0)
        close(ep_next);
}

static pid_t hop_pids[3];
static int n_hops;

/* SIGTERM: the hops end with the listener, and what they started (a reaper kept by the last
 * one comes to the listener, a subreaper, when its hop ends, and is killed by its
 * PR_SET_PDEATHSIG): all reaped here, with async-signal-safe calls only. */
static void on_term(int sig) {
    (void)sig;
    for (int i = 0; i < n_hops; i++)
        kill(hop_pids[i], SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    _exit(0);
}

/* The chain below the listener: hops persistent processes, children of the listener, each
 * holding the socket to the next; returns the socket to the first (-1 for none). */
static int chain(int hops) {
    int prev = -1;
    for (int h = hops; h > 0; h--) { /* built from the last hop up */
        int sock;
        pid_t pid = fork_peer(&sock);
        if (pid == 0) {
            serve(sock, prev, 0);
            _exit(0);
        }
        hop_pids[n_hops++] = pid;
        if (prev >= 0)
            close(prev);
        prev = sock;
    }
    return prev;
}

int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[2]) < 0 || atoi(argv[2]) > 3) {
        fprintf(stderr, "usage: exec_model SOCK HOPS(0-3) [pipes] [reaper|keep [norelease]]\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        use_pipes |= strcmp(argv[i], "pipes") == 0;
        use_reaper |= strcmp(argv[i], "reaper") == 0;
        use_keep |= strcmp(argv[i], "keep") == 0;
        use_release &= strcmp(argv[i], "norelease") != 0;
    }
    if ((use_reaper || use_keep) && atoi(argv[2]) == 0) {
        fprintf(stderr, "exec_model: a reaper needs a hop\n");
        return 2;
    }
    if (use_reaper && use_keep) {
        fprintf(stderr, "exec_model: reaper or keep, not both\n");
        return 2;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int first = chain(atoi(argv[2]));
    signal(SIGTERM, on_term); /* (before: the hops' PR_SET_PDEATHSIG) */
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[1]);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4) < 0)
        die("listen");
    for (;;) { /* one client at a time, as the benchmark's loop is */
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        serve(c, first, 1);
        close(c);
    }
}
