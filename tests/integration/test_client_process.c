/* libsbx's attached and background processes against a real sandboxd: stdin streamed byte-exact
 * while output comes back (sync, poll loop), a terminal's size and device, a signal to a running
 * command, a background command attached later with replay and the one-writer rule, several
 * attached commands at once on one libuv loop, an attached command refused at the pids
 * limit (the class a plain exec's 409 pids_limit has), and a plain exec ended by a signal
 * handler's byte on the client's interrupt fd (Ctrl-C in the Python SDK), on a Unix socket and
 * on TCP. */
#include "client/lib/internal.h"
#include "common/timeutil.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sbx.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#define LEN (3u << 20)

typedef struct sink {
    char *out;
    size_t out_len, out_cap;
    char err[256];
    size_t err_len;
} sink;

static void on_output(void *ud, enum sbx_stream s, const char *d, size_t n) {
    sink *k = ud;
    if (s == SBX_STREAM_STDERR) {
        if (k->err_len + n < sizeof(k->err))
            memcpy(k->err + k->err_len, d, n), k->err_len += n;
        return;
    }
    if (k->out_len + n > k->out_cap) {
        k->out_cap = (k->out_len + n) * 2;
        k->out = realloc(k->out, k->out_cap);
    }
    memcpy(k->out + k->out_len, d, n);
    k->out_len += n;
}

static bool has(const sink *k, const char *s) {
    return k->out && memmem(k->out, k->out_len, s, strlen(s));
}

static sbx_sandbox *created(sbx_client *c) {
    sbx_err err = {0};
    sbx_create_opts o;
    sbx_create_opts_init(&o);
    o.memory = 256u << 20;
    sbx_sandbox *sb = NULL;
    CHECK_MSG(sbx_sandbox_create(c, &o, &sb, &err) == SBX_OK, "create: %s", err.message);
    return sb;
}

static sbx_sandbox *sandbox(sbx_client **c) {
    const char *sock = test_daemon_up("d", &(test_daemon_opts){.log_level = ""})->sock;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(sock, c, &err), SBX_OK);
    return created(*c);
}

static char *pattern(void) {
    char *in = malloc(LEN);
    for (size_t i = 0; i < LEN; i++)
        in[i] = (char)('a' + (i * 7 + i / 4096) % 26);
    return in;
}

static void exec_opts(sbx_exec_opts *o, const char *const *argv, sink *k) {
    sbx_exec_opts_init(o);
    o->argv = argv;
    o->on_output = on_output;
    o->userdata = k;
}

TEST_T(process_sync_stdin_tty_signal, 120) {
    sbx_client *c;
    sbx_sandbox *sb = sandbox(&c);
    sbx_err err = {0};
    /* stdin in pieces while the echo comes back: no deadlock, byte-exact */
    static const char *const cat[] = {"sh", "-c", "cat; echo err >&2; exit 3", NULL};
    sink k = {0};
    sbx_exec_opts o;
    exec_opts(&o, cat, &k);
    sbx_process *p = NULL;
    CHECK_MSG(sbx_process_start(sb, &o, NULL, &p, &err) == SBX_OK, "start: %s", err.message);
    CHECK(sbx_process_pid(p) > 0);
    char *in = pattern();
    for (size_t off = 0; off < LEN;) {
        if (sbx_process_write_pending(p) < (1u << 20)) {
            size_t n = LEN - off < 100000 ? LEN - off : 100000;
            CHECK_EQ(sbx_process_write(p, in + off, n, &err), SBX_OK);
            off += n;
        }
        struct pollfd pf = {.fd = sbx_process_fd(p), .events = sbx_process_poll_events(p)};
        poll(&pf, 1, 1000);
        CHECK_EQ(sbx_process_dispatch(p, &err), SBX_OK);
    }
    CHECK_EQ(sbx_process_close_stdin(p, &err), SBX_OK);
    sbx_exec_result r = {0};
    CHECK_MSG(sbx_process_wait(p, &r, &err) == SBX_OK, "wait: %s", err.message);
    CHECK_EQ(r.exit_code, 3);
    CHECK_EQ(k.out_len, LEN);
    CHECK(memcmp(k.out, in, LEN) == 0);
    CHECK(k.err_len == 4 && memcmp(k.err, "err\n", 4) == 0);
    sbx_process_free(p);
    free(k.out);
    free(in);

    /* a terminal: its size, a device of the sandbox's devpts, one stream */
    static const char *const tty[] = {"sh", "-c", "stty size; tty; echo e >&2", NULL};
    sink t = {0};
    exec_opts(&o, tty, &t);
    sbx_process_opts po;
    sbx_process_opts_init(&po);
    po.tty = 1, po.rows = 33, po.cols = 77;
    CHECK_MSG(sbx_process_start(sb, &o, &po, &p, &err) == SBX_OK, "tty: %s", err.message);
    CHECK_EQ(sbx_process_wait(p, &r, &err), SBX_OK);
    CHECK_EQ(r.exit_code, 0);
    CHECK(has(&t, "33 77"));
    CHECK(has(&t, "/dev/pts/"));
    CHECK(has(&t, "e\r\n")); /* stderr on the terminal too */
    CHECK_EQ(t.err_len, 0);
    sbx_process_free(p);
    free(t.out);

    /* a signal to a running command */
    static const char *const trap[] = {
        "sh", "-c", "trap 'echo got-int; exit 9' INT; echo ready; while :; do sleep 0.05; done",
        NULL};
    sink s = {0};
    exec_opts(&o, trap, &s);
    CHECK_EQ(sbx_process_start(sb, &o, NULL, &p, &err), SBX_OK);
    while (!has(&s, "ready")) {
        struct pollfd pf = {.fd = sbx_process_fd(p), .events = sbx_process_poll_events(p)};
        poll(&pf, 1, 1000);
        CHECK_EQ(sbx_process_dispatch(p, &err), SBX_OK);
        CHECK(!sbx_process_done(p));
    }
    CHECK_EQ(sbx_process_signal(p, "INT", &err), SBX_OK);
    CHECK_EQ(sbx_process_wait(p, &r, &err), SBX_OK);
    CHECK_EQ(r.exit_code, 9);
    CHECK(has(&s, "got-int"));
    sbx_process_free(p);
    free(s.out);
    sbx_sandbox_terminate(sb, &err);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

TEST_T(process_background_attach, 120) {
    sbx_client *c;
    sbx_sandbox *sb = sandbox(&c);
    sbx_err err = {0};
    static const char *const argv[] = {"sh", "-c", "echo early; cat; exit 4", NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = argv;
    long pid = 0;
    char *json = NULL;
    CHECK_MSG(sbx_sandbox_process_start(sb, &o, NULL, &pid, &json, &err) == SBX_OK, "bg: %s",
              err.message);
    CHECK(pid > 0);
    CHECK(strstr(json, "\"running\""));
    free(json);
    sink k = {0};
    sbx_process *p = NULL, *q = NULL;
    CHECK_MSG(sbx_process_attach(sb, pid, SBX_ATTACH_STDIN | SBX_ATTACH_REPLAY, on_output, &k, &p,
                                 &err) == SBX_OK,
              "attach: %s", err.message);
    /* one stdin writer: a second one is refused, a reader is not */
    CHECK_EQ(sbx_process_attach(sb, pid, SBX_ATTACH_STDIN, on_output, &k, &q, &err),
             SBX_E_CONFLICT);
    CHECK_STREQ(err.api_code, "stdin_taken");
    sink reader = {0};
    CHECK_EQ(sbx_process_attach(sb, pid, 0, on_output, &reader, &q, &err), SBX_OK);
    CHECK_EQ(sbx_process_write(p, "late\n", 5, &err), SBX_OK);
    CHECK_EQ(sbx_process_close_stdin(p, &err), SBX_OK);
    sbx_exec_result r = {0};
    CHECK_MSG(sbx_process_wait(p, &r, &err) == SBX_OK, "wait: %s", err.message);
    CHECK_EQ(r.exit_code, 4);
    CHECK(k.out_len == 11 && memcmp(k.out, "early\nlate\n", 11) == 0);
    CHECK_EQ(sbx_process_wait(q, &r, &err), SBX_OK); /* the reader sees the end too */
    CHECK_EQ(r.exit_code, 4);
    CHECK(has(&reader, "late\n"));
    sbx_process_free(q);
    sbx_process_free(p);
    /* the table and the decoded logs */
    CHECK_EQ(sbx_sandbox_process_list(sb, &json, &err), SBX_OK);
    CHECK(strstr(json, "\"processes\""));
    free(json);
    CHECK_EQ(sbx_sandbox_process_logs(sb, pid, 0, &r, &err), SBX_OK);
    CHECK(r.stdout_len == 11 && memcmp(r.stdout_data, "early\nlate\n", 11) == 0);
    CHECK_STREQ(r.reason, "exited");
    CHECK_EQ(r.exit_code, 4);
    sbx_exec_result_free(&r);
    CHECK_EQ(sbx_process_attach(sb, pid, 0, on_output, &k, &q, &err), SBX_E_CONFLICT);
    CHECK_STREQ(err.api_code, "process_ended");
    CHECK_EQ(sbx_sandbox_process_signal(sb, pid, "TERM", &err), SBX_E_CONFLICT);
    CHECK_EQ(sbx_sandbox_process_kill(sb, 999999, &err), SBX_E_NOT_FOUND);
    free(k.out);
    free(reader.out);
    sbx_sandbox_terminate(sb, &err);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* The sandbox ends under an attached command: no exit status, SBX_E_CONFLICT with the daemon's
 * message, as the plain exec's 409 (it was SBX_OK with reason "error" and no message, which
 * sbx reported as a silent exit 1). */
typedef struct ended {
    long pid;
    int exits;
    sbx_err err;
} ended;

static void e_started(void *ud, sbx_process *p, long pid, const sbx_err *e) {
    CHECK_MSG(!e, "async start: %s", e ? e->message : "");
    ((ended *)ud)->pid = pid;
}

static void e_exited(void *ud, sbx_process *p, const sbx_exec_result *res, const sbx_err *e) {
    ended *x = ud;
    CHECK_MSG(!res, "an exit record: reason %s", res ? res->reason : "");
    x->exits++;
    if (e)
        x->err = *e;
    sbx_process_free(p);
}

TEST_T(process_sandbox_ends_under_it, 120) {
    sbx_client *c;
    sbx_sandbox *sb = sandbox(&c);
    sbx_err err = {0};
    static const char *const argv[] = {"sleep", "60", NULL};
    sink k = {0};
    sbx_exec_opts o;
    exec_opts(&o, argv, &k);
    sbx_process *p = NULL;
    CHECK_MSG(sbx_process_start(sb, &o, NULL, &p, &err) == SBX_OK, "start: %s", err.message);
    /* the async form on its own loop, same sandbox */
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    ended x = {0};
    sbx_process_cbs cbs = {.on_start = e_started, .on_exit = e_exited, .userdata = &x};
    sbx_process *q = NULL;
    CHECK_EQ(sbx_async_process_start(as, sb, &o, NULL, &cbs, &q, &err), SBX_OK);
    while (x.pid <= 0 && uv_run(&loop, UV_RUN_ONCE)) {
    }
    CHECK(x.pid > 0);
    CHECK_MSG(sbx_sandbox_terminate(sb, &err) == SBX_OK, "terminate: %s", err.message);
    sbx_exec_result r = {0};
    CHECK_EQ(sbx_process_wait(p, &r, &err), SBX_E_CONFLICT);
    CHECK_STREQ(err.api_code, "conflict");
    CHECK_MSG(strstr(err.message, "ended while the command ran"), "message: %s", err.message);
    sbx_process_free(p);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(x.exits, 1);
    CHECK_EQ(x.err.code, SBX_E_CONFLICT);
    CHECK_MSG(strstr(x.err.message, "ended while the command ran"), "async: %s", x.err.message);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    free(k.out);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* ---- several at once on one loop ---- */
#define NPROC 4
typedef struct slot {
    sink k;
    int exit_code, exits;
    char *in;
} slot;

static void a_start(void *ud, sbx_process *p, long pid, const sbx_err *e) {
    slot *s = ud;
    CHECK_MSG(!e, "async start: %s", e ? e->message : "");
    sbx_err err;
    CHECK_EQ(sbx_process_write(p, s->in, LEN, &err), SBX_OK);
    CHECK_EQ(sbx_process_close_stdin(p, &err), SBX_OK);
}

static void a_exit(void *ud, sbx_process *p, const sbx_exec_result *res, const sbx_err *e) {
    slot *s = ud;
    CHECK_MSG(res, "async exit: %s", e ? e->message : "");
    s->exits++;
    s->exit_code = res->exit_code;
    sbx_process_free(p);
}

TEST_T(process_async_many, 120) {
    sbx_client *c;
    sbx_sandbox *sb = sandbox(&c);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    static const char *const argv[] = {"cat", NULL};
    static slot slots[NPROC];
    char *in = pattern();
    for (int i = 0; i < NPROC; i++) {
        slots[i].in = in;
        sbx_exec_opts o;
        exec_opts(&o, argv, &slots[i].k);
        sbx_process_cbs cbs = {
            .on_start = a_start, .on_output = on_output, .on_exit = a_exit, .userdata = &slots[i]};
        sbx_process *p = NULL;
        CHECK_EQ(sbx_async_process_start(as, sb, &o, NULL, &cbs, &p, &err), SBX_OK);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < NPROC; i++) {
        CHECK_EQ(slots[i].exits, 1);
        CHECK_EQ(slots[i].exit_code, 0);
        CHECK_EQ(slots[i].k.out_len, LEN);
        CHECK(memcmp(slots[i].k.out, in, LEN) == 0);
        free(slots[i].k.out);
    }
    free(in);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_sandbox_terminate(sb, &err);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* ---- refused at the pids limit: SBX_E_CONFLICT "pids_limit", as the plain exec's 409 ---- */
TEST_T(process_refused_at_pids_limit, 120) {
    const char *sock = test_daemon_up("d", &(test_daemon_opts){.log_level = ""})->sock;
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(sock, &c, &err), SBX_OK);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 256u << 20;
    co.pids = 8;
    sbx_sandbox *sb = NULL;
    CHECK_MSG(sbx_sandbox_create(c, &co, &sb, &err) == SBX_OK, "create: %s", err.message);
    /* forks until the kernel refuses, marks /workspace/full and holds every pid */
    static const char *const fill[] = {
        "python3", "-c",
        "import os,time\nwhile True:\n    try:\n        pid=os.fork()\n    except OSError:\n"
        "        break\n    if pid==0:\n        time.sleep(60); os._exit(0)\n"
        "open('/workspace/full','w').write('1')\ntime.sleep(60)\n",
        NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = fill;
    long pid = 0;
    CHECK_MSG(sbx_sandbox_process_start(sb, &o, NULL, &pid, NULL, &err) == SBX_OK, "fill: %s",
              err.message);
    void *data = NULL;
    size_t len = 0;
    for (int i = 0; i < 200 && sbx_sandbox_read_file(sb, "/workspace/full", &data, &len, &err); i++)
        usleep(50 * 1000);
    CHECK_MSG(data != NULL, "the filler did not reach the pids limit: %s", err.message);
    free(data);
    static const char *const t[] = {"true", NULL};
    sink k = {0};
    exec_opts(&o, t, &k);
    sbx_process *p = NULL;
    CHECK_EQ(sbx_process_start(sb, &o, NULL, &p, &err), SBX_E_CONFLICT);
    CHECK_STREQ(err.api_code, "pids_limit");
    CHECK(p == NULL);
    CHECK_EQ(sbx_sandbox_terminate(sb, &err), SBX_OK);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* sbx_client_set_interrupt_fd: a SIGALRM handler 0.3 s into the exec writes intr_byte to the
 * pipe the client watches, as Python's wakeup fd gets a signal's number. */
static int intr_pipe[2] = {-1, -1};
static volatile sig_atomic_t intr_byte;

static void on_alarm(int sig) {
    unsigned char b = (unsigned char)intr_byte;
    if (write(intr_pipe[1], &b, 1) < 0) {
        /* (a full pipe holds bytes enough) */
    }
    (void)sig;
}

static sbx_code exec_alarmed(sbx_sandbox *sb, const char *script, int byte, sink *k,
                             sbx_exec_result *r, uint64_t *took_ms, sbx_err *err) {
    const char *const argv[] = {"sh", "-c", script, NULL};
    sbx_exec_opts o;
    exec_opts(&o, argv, k);
    if (!k)
        o.on_output = NULL; /* the JSON answer */
    intr_byte = byte;
    struct itimerval it = {.it_value = {.tv_usec = 300000}};
    CHECK_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
    uint64_t t0 = now_mono_ms();
    sbx_code rc = sbx_sandbox_exec(sb, &o, r, err);
    *took_ms = now_mono_ms() - t0;
    return rc;
}

/* The new connections libcurl made for the client's last TCP request (0: a kept-alive one). */
static long tcp_connects(sbx_client *c) {
    long n = -1;
    CHECK(c->easy && curl_easy_getinfo(c->easy, CURLINFO_NUM_CONNECTS, &n) == CURLE_OK);
    return n;
}

/* c's interrupt fd watched through sb's execs (c on a Unix socket or, tcp, on TCP). */
static void interrupt_checks(sbx_client *c, sbx_sandbox *sb, bool tcp) {
    sbx_err err = {0};
    sbx_exec_result r = {0};
    uint64_t took;
    CHECK_EQ(pipe2(intr_pipe, O_NONBLOCK | O_CLOEXEC), 0);
    struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART, as Python's handlers */
    CHECK_EQ(sigaction(SIGALRM, &sa, NULL), 0);
    sbx_client_set_interrupt_fd(c, intr_pipe[0], SIGINT);
    /* the JSON answer and the NDJSON stream: the wait ends at the byte, not at the command's end */
    sbx_code rc = exec_alarmed(sb, "sleep 30", SIGINT, NULL, &r, &took, &err);
    CHECK_MSG(rc == SBX_E_INTERRUPTED && took < 1500, "JSON exec: %s after %llu ms (%s)",
              sbx_code_name(rc), (unsigned long long)took, err.message);
    CHECK(strcmp(err.api_code, "interrupted") == 0);
    sink k = {0};
    rc = exec_alarmed(sb, "echo up; sleep 30", SIGINT, &k, &r, &took, &err);
    CHECK_MSG(rc == SBX_E_INTERRUPTED && took < 1500, "NDJSON exec: %s after %llu ms (%s)",
              sbx_code_name(rc), (unsigned long long)took, err.message);
    CHECK(has(&k, "up"));
    /* another signal's byte is read and dropped: the exec goes on to its end */
    rc = exec_alarmed(sb, "sleep 1; echo done", SIGCHLD, NULL, &r, &took, &err);
    CHECK_MSG(rc == SBX_OK, "a SIGCHLD byte: %s (%s)", sbx_code_name(rc), err.message);
    CHECK(took >= 1000 && r.stdout_data && strcmp(r.stdout_data, "done\n") == 0);
    sbx_exec_result_free(&r);
    if (tcp) /* the interrupted call's connection was closed, not used again */
        CHECK_MSG(tcp_connects(c) == 1, "%ld new connections", tcp_connects(c));
    /* a SIGINT byte already there when a call starts (the signal came just before it) ends the
     * call at once, before anything is sent: the command never runs */
    unsigned char early = SIGINT;
    CHECK_EQ(write(intr_pipe[1], &early, 1), 1);
    rc = exec_alarmed(sb, "touch /tmp/early; sleep 30", SIGCHLD, NULL, &r, &took, &err);
    CHECK_MSG(rc == SBX_E_INTERRUPTED && took < 1000,
              "a SIGINT byte there at the start: %s after %llu ms (%s)", sbx_code_name(rc),
              (unsigned long long)took, err.message);
    rc = exec_alarmed(sb, "test -e /tmp/early || echo absent", SIGCHLD, NULL, &r, &took, &err);
    CHECK_MSG(rc == SBX_OK && r.stdout_data && strcmp(r.stdout_data, "absent\n") == 0,
              "after the early interrupt: %s, stdout %s (the command ran)", sbx_code_name(rc),
              r.stdout_data ? r.stdout_data : "(none)");
    sbx_exec_result_free(&r);
    rc = exec_alarmed(sb, "sleep 1; echo done", SIGCHLD, NULL, &r, &took, &err);
    CHECK_MSG(rc == SBX_OK, "a SIGCHLD byte: %s (%s)", sbx_code_name(rc), err.message);
    sbx_exec_result_free(&r);
    if (tcp) /* a watched call keeps its connection alive for the next one */
        CHECK_MSG(tcp_connects(c) == 0, "%ld new connections", tcp_connects(c));
    /* the next call after an interrupted one (whose connection was closed) works; and the fd is
     * no longer watched after sbx_client_set_interrupt_fd(c, -1, 0) */
    sbx_client_set_interrupt_fd(c, -1, 0);
    rc = exec_alarmed(sb, "sleep 1; echo done", SIGINT, NULL, &r, &took, &err);
    CHECK_MSG(rc == SBX_OK, "not watched: %s (%s)", sbx_code_name(rc), err.message);
    CHECK(took >= 1000 && r.stdout_data && strcmp(r.stdout_data, "done\n") == 0);
    sbx_exec_result_free(&r);
    signal(SIGALRM, SIG_DFL);
    close(intr_pipe[0]);
    close(intr_pipe[1]);
    free(k.out);
    sbx_sandbox_terminate(sb, &err);
}

TEST_T(exec_interrupted_by_its_signal, 120) {
    sbx_client *c;
    sbx_sandbox *sb = sandbox(&c);
    interrupt_checks(c, sb, false);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* A loopback port nothing listens on, below the ephemeral range (as daemon.sh's free_port). */
static unsigned free_port(void) {
    for (int i = 0; i < 50; i++) {
        unsigned p = 20000 + (unsigned)(now_mono_ms() * 7919 + (uint64_t)i * 104729) % 12000;
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)p),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return p;
    }
    test_fail(__FILE__, __LINE__, "no free TCP port in 20000-31999");
}

/* The same over a TCP endpoint (libcurl's path: a remote daemon, a fleet's nodes): the wait
 * ends at the byte there too, the interrupted connection is not used again. */
TEST_T(exec_interrupted_by_its_signal_tcp, 120) {
    char hostport[32], url[48];
    snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", free_port());
    snprintf(url, sizeof(url), "http://%s", hostport);
    const char *const flags[] = {"--tcp", hostport, "--token", "intr-tok", NULL};
    test_daemon_up("d", &(test_daemon_opts){.log_level = "", .flags = flags});
    sbx_client *c;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(url, &c, &err), SBX_OK);
    CHECK_EQ(sbx_client_set_token(c, "intr-tok"), SBX_OK);
    sbx_sandbox *sb = created(c);
    interrupt_checks(c, sb, true);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}
