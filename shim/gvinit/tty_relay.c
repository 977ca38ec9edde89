/* A command's terminal inside gVisor, the reaper's side (shim_exec_tty_relay; the host side and
 * the packets: shim/gvisor_tty.c). The reaper keeps gVisor's master and relays it to the host
 * terminal's keeper until the command ends: the bytes both ways, a new size (TIOCSWINSZ here:
 * gVisor sends the foreground its SIGWINCH), a signal for the foreground. What this gVisor
 * (20221219) lacks is done here: its line discipline takes the interrupt, quit and suspend
 * characters as plain input even with ISIG on, so they are turned into SIGINT, SIGQUIT and
 * SIGTSTP for the foreground group (as Linux does; no echo of "^C"); it answers TIOCGPGRP and
 * TIOCSIG on a master with ENOTTY, so the reaper leads the terminal's session and asks its
 * slave side for the foreground; and its master never reads EIO once the command is gone: the
 * end is the command's, then what is left is drained. */
#include "common/fdutil.h"
#include "common/macro.h"
#include "shim/gvisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#define CHUNK 4096
#define DRAIN_WAIT_MS 2000

static int tty = -1; /* the terminal's slave side: the reaper's controlling terminal */
static pid_t cmd;

/* A signal for the terminal's foreground group (the command's group if it cannot be found). */
static void fg_signal(int sig) {
    pid_t pg = 0;
    if (sig <= 0 || sig >= NSIG)
        return;
    if (ioctl(tty, TIOCGPGRP, &pg) < 0 || pg <= 0)
        pg = cmd;
    kill(-pg, sig);
}

/* Input for the command: with ISIG, its interrupt, quit and suspend characters become signals. */
static void input(int master, const char *p, size_t n) {
    struct termios t;
    if (tcgetattr(master, &t) < 0 || !(t.c_lflag & ISIG)) {
        fd_write_all(master, p, n);
        return;
    }
    const int cc[] = {VINTR, VQUIT, VSUSP}, sig[] = {SIGINT, SIGQUIT, SIGTSTP};
    size_t from = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ARRAY_SIZE(cc); k++)
            if (t.c_cc[cc[k]] != _POSIX_VDISABLE && (unsigned char)p[i] == t.c_cc[cc[k]]) {
                fd_write_all(master, p + from, i - from);
                from = i + 1;
                fg_signal(sig[k]);
            }
    fd_write_all(master, p + from, n - from);
}

/* One packet from the keeper. false: the keeper is gone. */
static bool from_host(int sock, int master) {
    static char buf[1 + 16384];
    ssize_t n = recv(sock, buf, sizeof(buf), 0);
    if (n <= 0)
        return false;
    const unsigned char *p = (const unsigned char *)buf + 1;
    if (buf[0] == SHIM_GVISOR_TTY_DATA) {
        input(master, buf + 1, (size_t)n - 1);
    } else if (buf[0] == SHIM_GVISOR_TTY_SIZE && n == 5) {
        struct winsize ws = {.ws_row = (unsigned short)(p[0] << 8 | p[1]),
                             .ws_col = (unsigned short)(p[2] << 8 | p[3])};
        ioctl(master, TIOCSWINSZ, &ws);
    } else if (buf[0] == SHIM_GVISOR_TTY_SIGNAL && n == 2) {
        fg_signal(p[0]);
    }
    return true;
}

/* What the command wrote, to the keeper; false when nothing was there. */
static bool to_host(int master, int sock) {
    char buf[1 + CHUNK];
    ssize_t n = read(master, buf + 1, CHUNK);
    if (n <= 0)
        return false;
    buf[0] = SHIM_GVISOR_TTY_DATA;
    send(sock, buf, (size_t)n + 1, MSG_NOSIGNAL);
    return true;
}

void shim_gvisor_tty_relay(int master, int slave, int sock, pid_t pid, const sigset_t *chld,
                           bool (*reaped)(void)) {
    tty = slave, cmd = pid;
    int sfd = signalfd(-1, chld, SFD_CLOEXEC | SFD_NONBLOCK);
    fd_set_nonblock(master, 1);
    bool done = reaped();
    while (!done && sfd >= 0) {
        struct pollfd p[3] = {{.fd = master, .events = POLLIN},
                              {.fd = sock, .events = POLLIN},
                              {.fd = sfd, .events = POLLIN}};
        if (poll(p, 3, -1) < 0 && errno != EINTR)
            break;
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == sizeof(si))
            ;
        done = reaped();
        if (p[0].revents)
            to_host(master, sock);
        if (p[1].revents && !from_host(sock, master))
            sock = safe_close(sock); /* the keeper is gone: the output has nowhere to go */
    }
    while (sock >= 0 && to_host(master, sock)) /* what is left, then the keeper writes it out */
        ;
    if (sock >= 0 && shutdown(sock, SHUT_WR) == 0) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        char c;
        while (poll(&p, 1, DRAIN_WAIT_MS) > 0 && recv(sock, &c, 1, 0) > 0)
            ;
    }
    safe_close(sock);
    safe_close(sfd);
    tty = safe_close(tty);
}
