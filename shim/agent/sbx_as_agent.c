/* sbx-as-agent: the grader's way to run the agent's code in a grading sandbox (docs/GRPO.md
 * "Grading sandboxes"). It asks the shim, over the agent socket only the grader can reach, to
 * start ARGV as the agent user (a child of the sandbox's init, not of the grader), relays the
 * program's stdout and stderr from pipes it holds itself (bounded), and exits with the program's
 * status: its code, 124 on timeout, 128+N on signal N, 125 when this helper fails.
 * Built statically (make: build/sbx-as-agent) and bound read-only into grading sandboxes. */
#include "common/macro.h"
#include "common/shimproto.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define SOCK_PATH "/.sbx/run/agent.sock"
#define EXIT_FAULT 125

typedef struct opts {
    double timeout_s;
    unsigned long long max_output;
    const char *cwd, *stdin_path, *result;
    char **argv;
    int argc;
} opts;

typedef struct stream {
    int fd, out;
    unsigned long long bytes;
    bool eof;
} stream;

typedef struct run {
    opts o;
    int sock;
    stream s[2];
    json_t *xid;
    bool truncated, killed, done;
    int exit_code, signal;
    char reason[32];
} run;

static _Noreturn void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void fault(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sbx-as-agent: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_FAULT);
}

static void usage(void) {
    fault("usage: sbx-as-agent [--timeout SECONDS] [--max-output BYTES] [--cwd DIR] "
          "[--stdin FILE] [--result FILE] -- ARGV...");
}

static void parse_args(int argc, char **argv, opts *o) {
    *o = (opts){.timeout_s = 60, .max_output = 8ull << 20, .cwd = "/workspace"};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v)
            usage();
        if (!strcmp(k, "--timeout")) {
            o->timeout_s = strtod(v, &end);
            if (*end || o->timeout_s < 0 || o->timeout_s > 7 * 86400)
                fault("--timeout: seconds in [0, 604800] (0: none)");
        } else if (!strcmp(k, "--max-output")) {
            errno = 0;
            o->max_output = strtoull(v, &end, 10);
            if (*end || errno || o->max_output == 0)
                fault("--max-output: a positive number of bytes");
        } else if (!strcmp(k, "--cwd"))
            o->cwd = v;
        else if (!strcmp(k, "--stdin"))
            o->stdin_path = v;
        else if (!strcmp(k, "--result"))
            o->result = v;
        else
            usage();
    }
    if (i + 1 >= argc)
        usage();
    o->argv = argv + i + 1;
    o->argc = argc - i - 1;
}

static int connect_shim(void) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", SOCK_PATH);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        fault("cannot reach the shim at %s: %s (only the grader of a grading sandbox can)",
              SOCK_PATH, strerror(errno));
    return fd;
}

/* Send the exec request with the program's stdin and the write ends of our pipes. */
static void start(run *r) {
    int in = open(r->o.stdin_path ? r->o.stdin_path : "/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0)
        fault("--stdin %s: %s", r->o.stdin_path, strerror(errno));
    int p[2][2];
    for (int i = 0; i < 2; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0)
            fault("pipe: %s", strerror(errno));
    json_t *argv = json_array();
    for (int i = 0; i < r->o.argc; i++)
        json_array_append_new(argv, json_string(r->o.argv[i]));
    json_t *msg =
        json_pack("{s:s,s:i,s:s,s:o,s:s,s:I}", "type", "exec", "seq", 1, "xid", "x", "argv", argv,
                  "cwd", r->o.cwd, "timeout_ms", (json_int_t)(r->o.timeout_s * 1000.0 + 0.5));
    int fds[3] = {in, p[0][1], p[1][1]};
    int e = msg ? shimproto_send(r->sock, msg, fds, 3) : -ENOMEM;
    json_decref(msg);
    if (e < 0)
        fault("send the request: %s", strerror(-e));
    close(in);
    for (int i = 0; i < 2; i++) {
        close(p[i][1]);
        r->s[i] = (stream){.fd = p[i][0], .out = i + 1};
    }
}

static void write_all(int fd, const char *b, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* our reader went away: keep counting, stop relaying */
        b += w;
        n -= (size_t)w;
    }
}

static void kill_program(run *r) {
    if (r->killed || !r->xid)
        return;
    r->killed = true;
    json_t *m =
        json_pack("{s:s,s:i,s:O,s:i}", "type", "kill", "seq", 2, "xid", r->xid, "signal", SIGKILL);
    if (m)
        shimproto_send(r->sock, m, NULL, 0);
    json_decref(m);
}

/* Read what is there; relay up to the bound. */
static void pump(run *r, stream *st) {
    char buf[65536];
    ssize_t n = read(st->fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        st->eof = true;
        return;
    }
    unsigned long long room = st->bytes < r->o.max_output ? r->o.max_output - st->bytes : 0;
    write_all(st->out, buf, (size_t)MIN((unsigned long long)n, room));
    st->bytes += (unsigned long long)n;
    if (st->bytes > r->o.max_output) {
        r->truncated = true;
        kill_program(r);
    }
}

static void on_message(run *r) {
    json_t *m = NULL;
    int fds[SHIMPROTO_MAX_FDS];
    size_t nf = 0;
    int e = shimproto_recv(r->sock, &m, fds, &nf);
    for (size_t i = 0; i < nf; i++)
        close(fds[i]);
    if (e == -EAGAIN || e == -EINTR)
        return;
    if (e < 0)
        fault("the shim closed the connection: %s", strerror(-e));
    const char *type = shimproto_type(m);
    if (!strcmp(type, "started")) {
        r->xid = json_incref(json_object_get(m, "xid"));
        if (r->truncated) /* it overflowed before we knew its name */
            kill_program(r);
    } else if (!strcmp(type, "error") && json_integer_value(json_object_get(m, "seq")) == 1) {
        fault("the program did not start: %s",
              json_string_value(json_object_get(m, "message")) ?: "error");
    } else if (!strcmp(type, "exit")) {
        r->exit_code = (int)json_integer_value(json_object_get(m, "exit_code"));
        r->signal = (int)json_integer_value(json_object_get(m, "signal"));
        snprintf(r->reason, sizeof(r->reason), "%s",
                 json_string_value(json_object_get(m, "reason")) ?: "exited");
        r->done = true;
    }
    json_decref(m);
}

/* After the exit: what the program wrote is in the pipes already; whatever still holds them
 * (its tree is killed first, but a killed reaper leaves orphans) is not waited for. */
static void drain(run *r) {
    for (int i = 0; i < 2; i++) {
        fcntl(r->s[i].fd, F_SETFL, O_NONBLOCK);
        while (!r->s[i].eof) {
            unsigned long long before = r->s[i].bytes;
            pump(r, &r->s[i]);
            if (!r->s[i].eof && r->s[i].bytes == before)
                break;
        }
    }
}

static void loop(run *r) {
    while (!r->done) {
        struct pollfd p[3] = {{.fd = r->sock, .events = POLLIN},
                              {.fd = r->s[0].eof ? -1 : r->s[0].fd, .events = POLLIN},
                              {.fd = r->s[1].eof ? -1 : r->s[1].fd, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            fault("poll: %s", strerror(errno));
        }
        for (int i = 0; i < 2; i++)
            if (p[i + 1].revents)
                pump(r, &r->s[i]);
        if (p[0].revents)
            on_message(r);
    }
    drain(r);
}

static int status_of(run *r) {
    if (r->truncated) {
        snprintf(r->reason, sizeof(r->reason), "output_limit");
        return 128 + SIGKILL;
    }
    if (!strcmp(r->reason, "command_timeout"))
        return 124;
    if (r->signal > 0)
        return 128 + r->signal;
    return r->exit_code;
}

static void write_result(run *r) {
    json_t *j = json_pack("{s:i,s:i,s:s,s:I,s:I,s:b}", "exit_code", r->exit_code, "signal",
                          r->signal, "reason", r->reason, "stdout_bytes", (json_int_t)r->s[0].bytes,
                          "stderr_bytes", (json_int_t)r->s[1].bytes, "truncated", r->truncated);
    if (!j || json_dump_file(j, r->o.result, JSON_COMPACT) < 0)
        fault("--result %s: cannot write it", r->o.result);
    json_decref(j);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    run r = {.sock = -1};
    parse_args(argc, argv, &r.o);
    r.sock = connect_shim();
    start(&r);
    loop(&r);
    int st = status_of(&r);
    if (r.o.result)
        write_result(&r);
    json_decref(r.xid);
    return st;
}
