/* A command's terminal in the gvisor class (SHIM_IPC_TTY; shim/gvisor.h), init's side. gVisor's
 * pseudo-terminal cannot leave its kernel, so a command gets two: the reaper inside gVisor makes
 * the command's own (shim/gvinit/tty_relay.c) and relays it over a SEQPACKET socket to a host
 * terminal made here, from a private devpts instance. The daemon gets that host terminal's
 * master as in the native class. A small host process per terminal (the "keeper", init's child)
 * holds its slave side in raw mode as its controlling terminal, so that what the daemon does to
 * the master reaches the command: the bytes (the keeper relays them), a resize (SIGWINCH to the
 * keeper: the new size is sent on) and a signal to the foreground (TIOCSIG or kill of the
 * terminal's group: the keeper is that group; the signal is sent on). The packets (one byte of
 * type, then the payload) are SHIM_GVISOR_TTY_*; from inside only data is taken. */
#include "shim/gvisor.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "shim/ipc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#define MAX_PENDING 64

static int pts_dir = -1; /* the private devpts instance */
static struct {
    uint64_t id;
    int master; /* -1: free */
} pending[MAX_PENDING];

int shim_gvisor_tty_prepare(const char *dir, error_rec *err) {
    for (size_t i = 0; i < MAX_PENDING; i++)
        pending[i].master = -1;
    if (mkdir(dir, 0755) < 0 ||
        mount("sbx-gvisor-pts", dir, "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0600") < 0 ||
        (pts_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return error_set_errno(err, negative_errno(), "a devpts instance at %s", dir);
    return 0;
}

static void send_packet(int sock, char type, const void *p, size_t n) {
    char buf[1 + 8];
    buf[0] = type;
    memcpy(buf + 1, p, MIN(n, sizeof(buf) - 1));
    ssize_t _unused_ w = send(sock, buf, 1 + MIN(n, sizeof(buf) - 1), MSG_NOSIGNAL);
}

/* A signal the keeper got: a new size, or one for the command's foreground. */
static void keeper_signal(int tty, int sock, int sig) {
    struct winsize ws;
    if (sig == SIGWINCH && ioctl(tty, TIOCGWINSZ, &ws) == 0) {
        unsigned char p[4] = {ws.ws_row >> 8, ws.ws_row & 0xff, ws.ws_col >> 8, ws.ws_col & 0xff};
        send_packet(sock, SHIM_GVISOR_TTY_SIZE, p, sizeof(p));
    } else if (sig != SIGWINCH && sig != SIGCHLD) {
        unsigned char s = (unsigned char)sig;
        send_packet(sock, SHIM_GVISOR_TTY_SIGNAL, &s, 1);
    }
}

/* The keeper: 0 = the host terminal's slave side (raw), 1 = the socket to the reaper. Ends when
 * the reaper closes its end. */
static _Noreturn void keeper_main(void) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0 || setsid() < 0 || ioctl(0, TIOCSCTTY, 0) < 0)
        _exit(1);
    static char buf[1 + 16384];
    int in = 0; /* -1 once the daemon closed the master */
    for (;;) {
        struct pollfd p[3] = {{.fd = in, .events = POLLIN},
                              {.fd = 1, .events = POLLIN},
                              {.fd = sfd, .events = POLLIN}};
        if (poll(p, 3, -1) < 0 && errno != EINTR)
            _exit(1);
        struct signalfd_siginfo si;
        while (p[2].revents && read(sfd, &si, sizeof(si)) == sizeof(si))
            keeper_signal(0, 1, (int)si.ssi_signo);
        if (p[1].revents) {
            ssize_t n = recv(1, buf, sizeof(buf), 0);
            if (n <= 0)
                _exit(0);
            if (buf[0] == SHIM_GVISOR_TTY_DATA) /* the command's output; nothing else from inside */
                fd_write_all(0, buf + 1, (size_t)n - 1);
        }
        if (p[0].revents) {
            ssize_t n = read(0, buf + 1, sizeof(buf) - 1);
            buf[0] = SHIM_GVISOR_TTY_DATA;
            if (n > 0)
                send(1, buf, (size_t)n + 1, MSG_NOSIGNAL);
            else if (n == 0 || errno != EAGAIN)
                in = -1;
        }
    }
}

/* The host terminal: its master (returned) and its slave side in raw mode, sized rows x cols. */
static int host_tty(unsigned rows, unsigned cols, int *ret_slave) {
    int m = openat(pts_dir, "ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC), unlock = 0, s = -1;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    struct termios t;
    if (m < 0 || ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
        (s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || tcgetattr(s, &t) < 0) {
        int r = negative_errno();
        safe_close(m), safe_close(s);
        return r;
    }
    cfmakeraw(&t);
    tcsetattr(s, TCSANOW, &t);
    *ret_slave = s;
    return m;
}

int shim_gvisor_tty_exec(const shim_ipc_msg *m, int fds[3], size_t nf) {
    size_t slot = 0;
    while (slot < MAX_PENDING && pending[slot].master >= 0)
        slot++;
    if (nf != 3 || m->len < 4 || pts_dir < 0)
        return -EINVAL;
    if (slot == MAX_PENDING)
        return -EAGAIN;
    const unsigned char *p = (const unsigned char *)m->data;
    int slave = -1, sp[2];
    int master = host_tty((unsigned)p[0] << 8 | p[1], (unsigned)p[2] << 8 | p[3], &slave);
    if (master < 0)
        return master;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        int r = negative_errno();
        close(master), close(slave);
        return r;
    }
    pid_t pid = fork();
    if (pid == 0) {
        if (dup2(slave, 0) < 0 || dup2(sp[0], 1) < 0)
            _exit(1);
        close_range(3, ~0U, 0); /* init's channels, the master and the log stay with init */
        keeper_main();
    }
    int r = pid < 0 ? negative_errno() : 0;
    close(slave), close(sp[0]);
    if (r < 0) {
        close(master), close(sp[1]);
        return r;
    }
    close(fds[0]); /* the command's stdin (unused: the terminal is its stdio) */
    fds[0] = sp[1];
    pending[slot].id = m->id;
    pending[slot].master = master;
    return 0;
}

int shim_gvisor_tty_take(uint64_t id) {
    for (size_t i = 0; i < MAX_PENDING; i++)
        if (pending[i].master >= 0 && pending[i].id == id) {
            int fd = pending[i].master;
            pending[i].master = -1;
            return fd;
        }
    return -1;
}
