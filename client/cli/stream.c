/* The attached side of `sbx exec -i/-t` and `sbx attach`: the local terminal in raw mode
 * (restored on every exit path: normal, error, a fatal signal), SIGWINCH forwarded as a resize,
 * SIGINT/SIGTERM/SIGHUP forwarded to the command (exec, no raw mode), stdin forwarded as it arrives
 * (flow-controlled by libsbx's queue), output written as it comes (also for the plain exec:
 * cli_stream_output), and the exit status of the command. */
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
static int sig_pipe[2] = {-1, -1}; /* the numbers of the signals caught while a command runs */
/* What cli_stream_run forwards to the command (as `docker run` proxies them). */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};

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

static void on_signal(int sig) {
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], &c, 1) < 0) {
        /* full pipe: signals are already pending */
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
        exit(cli_exit_failure); /* the stream closes with us; the command goes on */
    }
}

/* What cli_signals_watch set up (one attached command at a time). */
static struct {
    bool on, tty, fwd;
    struct sigaction old[sizeof(forwarded) / sizeof(forwarded[0])]; /* put back at the end */
} watch;

int cli_signals_watch(bool tty, bool fwd) {
    if (watch.on)
        return 0;
    watch.on = true, watch.tty = tty, watch.fwd = fwd;
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaction(forwarded[i], NULL, &watch.old[i]);
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    int r = pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK);
    if (r == 0 && tty)
        r = sigaction(SIGWINCH, &sa, NULL);
    for (size_t i = 0; r == 0 && fwd && i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        r = sigaction(forwarded[i], &sa, NULL);
    if (r < 0) {
        int e = errno;
        cli_signals_unwatch();
        return cli_error("cannot watch signals: %s", strerror(e));
    }
    return 0;
}

void cli_signals_unwatch(void) {
    if (!watch.on)
        return;
    if (watch.tty)
        signal(SIGWINCH, SIG_DFL);
    for (size_t i = 0; watch.fwd && i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaction(forwarded[i], &watch.old[i], NULL);
    if (sig_pipe[0] >= 0) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
    }
    sig_pipe[0] = sig_pipe[1] = -1;
    watch.on = false;
}

/* The signals caught since the last call: a window change becomes a resize, SIGINT, SIGTERM or
 * SIGHUP goes to the command (over HTTP, which data queued on the stream cannot hold up); the
 * command's exit record then comes as usual. */
static void forward_signals(sbx_process *p, sbx_sandbox *sb) {
    unsigned char sigs[64];
    bool winch = false;
    ssize_t n;
    sbx_err err;
    while ((n = read(sig_pipe[0], sigs, sizeof(sigs))) > 0)
        for (ssize_t i = 0; i < n; i++) {
            char name[8];
            snprintf(name, sizeof(name), "%d", sigs[i]);
            if (sigs[i] == SIGWINCH)
                winch = true;
            else if (sb) /* an ended process: the loop sees its exit */
                sbx_sandbox_process_signal(sb, sbx_process_pid(p), name, &err);
        }
    unsigned rows, cols;
    if (winch && cli_tty_size(&rows, &cols) == 0)
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

int cli_stream_run(sbx_process *p, sbx_sandbox *sig_to, bool with_stdin, bool tty,
                   sbx_exec_result *ret) {
    if (cli_signals_watch(tty, sig_to) != 0)
        return cli_exit_failure;
    bool in_open = with_stdin;
    int rc = 0;
    sbx_err err = {0};
    while (rc == 0 && !sbx_process_done(p)) {
        struct pollfd fds[3] = {
            {.fd = sbx_process_fd(p), .events = sbx_process_poll_events(p)},
            {.fd = in_open && sbx_process_write_pending(p) < STDIN_HIGH_WATER ? 0 : -1,
             .events = POLLIN},
            {.fd = sig_pipe[0], .events = POLLIN},
        };
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = cli_error("poll: %s", strerror(errno));
            break;
        }
        if (fds[2].revents)
            forward_signals(p, sig_to);
        if (fds[1].revents)
            rc = forward_stdin(p, &in_open);
        if (rc == 0 && fds[0].revents && sbx_process_dispatch(p, &err) != SBX_OK)
            break;
    }
    cli_signals_unwatch();
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
