/* The attached side of `sbx exec -i/-t` and `sbx attach`: the local terminal in raw mode
 * (restored on every exit path: normal, error, a fatal signal), SIGWINCH forwarded as a resize,
 * stdin forwarded as it arrives (flow-controlled by libsbx's queue), output written as it comes
 * (also for the plain exec: cli_stream_output), and the exit status of the command. */
#include "client/cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* Stop reading stdin while this much is queued for the daemon. */
#define STDIN_HIGH_WATER (1u << 20)

static struct termios saved_tio;
static volatile sig_atomic_t raw_on;
static int sig_pipe[2] = {-1, -1};

static void restore_tty(void) {
    if (raw_on) {
        tcsetattr(0, TCSAFLUSH, &saved_tio);
        raw_on = 0;
    }
}

static void on_fatal(int sig) {
    restore_tty(); /* tcsetattr is async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_winch(int sig) {
    int saved = errno;
    char c = 'w';
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], &c, 1) < 0) {
        /* full pipe: a resize is already pending */
    }
    errno = saved;
}

int cli_tty_size(unsigned *rows, unsigned *cols) {
    struct winsize ws = {0}; /* stdin's terminal, else stdout's or stderr's (-t without -i) */
    int fd = 0;
    while (fd <= 2 && (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0))
        fd++;
    if (fd > 2)
        return -1;
    *rows = ws.ws_row;
    *cols = ws.ws_col;
    return 0;
}

int cli_tty_raw(void) {
    if (!isatty(0) || tcgetattr(0, &saved_tio) < 0)
        return -1;
    static bool hooked;
    if (!hooked) {
        atexit(restore_tty);
        int fatal[] = {SIGTERM, SIGHUP, SIGQUIT, SIGINT, SIGABRT, SIGSEGV, SIGBUS};
        for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
            signal(fatal[i], on_fatal);
        hooked = true;
    }
    struct termios raw = saved_tio;
    cfmakeraw(&raw); /* no echo, no line editing, Ctrl-C a byte; the remote pty does all that */
    if (tcsetattr(0, TCSAFLUSH, &raw) < 0)
        return -1;
    raw_on = 1;
    return 0;
}

void cli_tty_restore(void) {
    restore_tty();
}

void cli_stream_output(void *ud, enum sbx_stream s, const char *data, size_t len) {
    fflush(stdout);
    int fd = s == SBX_STREAM_STDERR ? 2 : 1;
    int r = cli_write_all(fd, data, len);
    if (r == -EPIPE)         /* the reader is gone (`| head`): quietly, with SIGPIPE's status */
        exit(128 + SIGPIPE); /* (sbx ignores SIGPIPE, so that its exit handlers run) */
    if (r < 0) {
        if (fd == 1) /* else there is nowhere to say it */
            cli_error("cannot write the command's output: %s", strerror(-r));
        exit(CLI_EXIT_ERROR); /* the stream closes with us; the command goes on */
    }
}

static int setup_winch(void) {
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGWINCH, &sa, NULL);
}

static void forward_resize(sbx_process *p) {
    char buf[64];
    while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
        ;
    unsigned rows, cols;
    sbx_err err;
    if (cli_tty_size(&rows, &cols) == 0)
        sbx_process_resize(p, rows, cols, &err); /* an ended process: the loop sees it */
}

/* Read what stdin has and queue it; at end of input, close the command's stdin. */
static int forward_stdin(sbx_process *p, bool *open) {
    char buf[65536];
    ssize_t n = read(0, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    sbx_err err;
    if (n <= 0) {
        *open = false;
        if (sbx_process_close_stdin(p, &err) != SBX_OK && err.code != SBX_E_CONFLICT)
            return cli_sbx_error(&err);
        return 0;
    }
    if (sbx_process_write(p, buf, (size_t)n, &err) != SBX_OK) {
        *open = false; /* the command ended: its exit record is on the way */
        if (err.code != SBX_E_CONFLICT)
            return cli_sbx_error(&err);
    }
    return 0;
}

int cli_stream_run(sbx_process *p, bool with_stdin, bool tty, sbx_exec_result *ret) {
    if (tty && setup_winch() < 0)
        return cli_error("cannot watch window changes: %s", strerror(errno));
    bool in_open = with_stdin;
    int rc = 0;
    sbx_err err = {0};
    while (rc == 0 && !sbx_process_done(p)) {
        struct pollfd fds[3] = {
            {.fd = sbx_process_fd(p), .events = sbx_process_poll_events(p)},
            {.fd = in_open && sbx_process_write_pending(p) < STDIN_HIGH_WATER ? 0 : -1,
             .events = POLLIN},
            {.fd = tty ? sig_pipe[0] : -1, .events = POLLIN},
        };
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = cli_error("poll: %s", strerror(errno));
            break;
        }
        if (fds[2].revents)
            forward_resize(p);
        if (fds[1].revents)
            rc = forward_stdin(p, &in_open);
        if (rc == 0 && fds[0].revents && sbx_process_dispatch(p, &err) != SBX_OK)
            break;
    }
    if (tty) {
        signal(SIGWINCH, SIG_DFL);
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
    }
    restore_tty();
    if (rc)
        return rc;
    sbx_exec_result r = {0};
    if (sbx_process_wait(p, &r, &err) != SBX_OK)
        return cli_sbx_error(&err);
    int status = cli_exit_status(&r);
    if (ret) {
        *ret = r;
        return status;
    }
    if (strcmp(r.reason, "command_timeout") == 0)
        cli_error("the command timed out after %.1fs", r.duration_s);
    else if (strcmp(r.reason, "oom_killed") == 0)
        cli_error("the command was killed: out of memory");
    return status;
}
