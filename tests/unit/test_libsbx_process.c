/* Unit tests of libsbx's attached process (client/lib/process.c, process_async.c) against a
 * scripted WebSocket peer in a thread on a unix socket: what the client puts on the wire (the
 * upgrade headers, the exec body with the tty fields as the first message, masked frames,
 * stdin split into frames byte-exact, eof/resize/signal messages, a pong echoing the ping)
 * and what it makes of the answers (fragmented output on both channels, the exit record, the
 * close handshake, a refused upgrade's API error), in the sync and the async form. The real
 * daemon is exercised by tests/integration/test_cli_interactive.sh. */
#include "client/lib/process.h"
#include "client/lib/ws.h"
#include "tests/lib/test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#define BIG (600u * 1024) /* more than one stdin frame */

/* ---- the peer ---- */
typedef struct peer {
    int lfd;
    char path[108];
    /* what it saw */
    char request[4096];
    char first[4096];
    uint8_t *stdin_data;
    size_t stdin_len;
    int pongs_ok, eofs, resizes, signals, closes, unmasked;
    int port;         /* the TCP peer's (peer_start_tcp) */
    char moved[4096]; /* the request answered with a redirect */
    bool saw_resize_24x100, saw_sigint;
} peer;

static peer P;

typedef struct conn {
    int fd;
    sbxi_ws_parser parser;
    bool got_first, got_eof, got_close;
} conn;

static int peer_message(void *ud, int op, const uint8_t *d, size_t n) {
    conn *c = ud;
    if (op == SBXI_WS_TEXT && !c->got_first) {
        c->got_first = true;
        snprintf(P.first, sizeof(P.first), "%.*s", (int)n, (const char *)d);
    } else if (op == SBXI_WS_TEXT) {
        if (memmem(d, n, "\"eof\"", 5))
            P.eofs++, c->got_eof = true;
        if (memmem(d, n, "\"resize\"", 8)) {
            P.resizes++;
            P.saw_resize_24x100 |=
                memmem(d, n, "\"rows\":24", 9) && memmem(d, n, "\"cols\":100", 10);
        }
        if (memmem(d, n, "\"signal\"", 8)) {
            P.signals++;
            P.saw_sigint |= memmem(d, n, "\"INT\"", 5) != NULL;
        }
    } else if (op == SBXI_WS_BINARY && n >= 1 && d[0] == 0) {
        P.stdin_data = realloc(P.stdin_data, P.stdin_len + n - 1 + 1);
        memcpy(P.stdin_data + P.stdin_len, d + 1, n - 1);
        P.stdin_len += n - 1;
    } else if (op == SBXI_WS_PONG) {
        P.pongs_ok += n == 2 && memcmp(d, "pp", 2) == 0;
    } else if (op == SBXI_WS_CLOSE) {
        P.closes++;
        c->got_close = true;
    }
    return 0;
}

static void send_all(int fd, const void *d, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, d, n);
        if (w <= 0)
            return;
        d = (const char *)d + w;
        n -= (size_t)w;
    }
}

static void send_frame(conn *c, int op, bool fin, const void *d, size_t n) {
    sbxi_buf b = {0};
    sbxi_ws_frame(&b, op, fin, NULL, d, n, NULL, 0);
    send_all(c->fd, b.data, b.len);
    sbxi_buf_free(&b);
}

/* Read and parse until cond holds (or the client goes away). */
static void read_until(conn *c, bool *cond) {
    uint8_t buf[65536];
    while (!*cond) {
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n <= 0)
            return;
        if (sbxi_ws_parse(&c->parser, buf, (size_t)n) < 0) {
            P.unmasked++; /* the client sent something the server must refuse */
            return;
        }
    }
}

static void serve(int fd) {
    conn c = {.fd = fd};
    sbxi_ws_parser_init(&c.parser, 1 << 20, peer_message, &c);
    c.parser.require_masked = true;
    size_t n = 0;
    P.request[0] = 0;
    while (n < sizeof(P.request) - 1 && !strstr(P.request, "\r\n\r\n")) {
        ssize_t r = read(fd, P.request + n, sizeof(P.request) - 1 - n);
        if (r <= 0)
            goto out;
        n += (size_t)r;
        P.request[n] = 0;
    }
    if (strstr(P.request, "/processes/7/attach")) { /* an ended process: a plain refusal */
        const char *body = "{\"code\":\"process_ended\",\"message\":\"process 7 has ended\"}";
        char h[256];
        int hl = snprintf(h, sizeof(h),
                          "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\n\r\n",
                          strlen(body));
        send_all(fd, h, (size_t)hl);
        send_all(fd, body, strlen(body));
        goto out;
    }
    if (strstr(P.request, "/sb-away/")) { /* another node's: 307 to the one that holds it */
        memcpy(P.moved, P.request, sizeof(P.moved));
        char h[256];
        int hl = snprintf(h, sizeof(h),
                          "HTTP/1.1 307 Temporary Redirect\r\nLocation: "
                          "http://127.0.0.1:%d/v1/sandboxes/sb-test/exec/attach\r\n"
                          "Content-Length: 0\r\n\r\n",
                          P.port);
        send_all(fd, h, (size_t)hl);
        goto out;
    }
    char key[64] = "", acc[29], resp[256];
    const char *k = strcasestr(P.request, "Sec-WebSocket-Key: ");
    if (k)
        sscanf(k + 19, "%63[^\r]", key);
    sbxi_ws_accept(key, acc);
    int rl = snprintf(resp, sizeof(resp),
                      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                      acc);
    send_all(fd, resp, (size_t)rl);
    read_until(&c, &c.got_first);
    if (strstr(P.request, "/sb-burst/")) { /* start, output and the end in one write */
        sbxi_buf b = {0};
        const char *st = "{\"type\":\"start\",\"pid\":42}",
                   *ex = "{\"type\":\"exit\",\"exit_code\":0,\"reason\":\"exited\"}";
        sbxi_ws_frame(&b, SBXI_WS_TEXT, true, NULL, st, strlen(st), NULL, 0);
        sbxi_ws_frame(&b, SBXI_WS_BINARY, true, NULL, "\x01x", 2, NULL, 0);
        sbxi_ws_frame(&b, SBXI_WS_BINARY, true, NULL, "\x01y", 2, NULL, 0);
        sbxi_ws_frame(&b, SBXI_WS_TEXT, true, NULL, ex, strlen(ex), NULL, 0);
        sbxi_ws_frame(&b, SBXI_WS_CLOSE, true, NULL, "\x03\xe8", 2, NULL, 0);
        send_all(fd, b.data, b.len);
        sbxi_buf_free(&b);
        read_until(&c, &c.got_close);
        goto out;
    }
    send_frame(&c, SBXI_WS_PING, true, "pp", 2);
    send_frame(&c, SBXI_WS_TEXT, true, "{\"type\":\"start\",\"pid\":42}", 25);
    read_until(&c, &c.got_eof);
    /* output: stdout in two fragments, then stderr, then the exit record and close */
    send_frame(&c, SBXI_WS_BINARY, false,
               "\x01"
               "ab",
               3);
    send_frame(&c, SBXI_WS_CONT, true, "cd", 2);
    send_frame(&c, SBXI_WS_BINARY, true,
               "\x02"
               "err",
               4);
    const char *ex = "{\"type\":\"exit\",\"exit_code\":3,\"signal\":null,\"reason\":\"exited\","
                     "\"duration\":0.5}";
    send_frame(&c, SBXI_WS_TEXT, true, ex, strlen(ex));
    send_frame(&c, SBXI_WS_CLOSE, true, "\x03\xe8", 2);
    read_until(&c, &c.got_close);
out:
    sbxi_ws_parser_done(&c.parser);
    close(fd);
}

static void *peer_main(void *arg) {
    int conns = (int)(intptr_t)arg;
    for (int i = 0; i < conns; i++) {
        int fd = accept(P.lfd, NULL, NULL);
        if (fd < 0)
            break;
        serve(fd);
    }
    return NULL;
}

static pthread_t peer_start(int conns) {
    memset(&P, 0, sizeof(P));
    snprintf(P.path, sizeof(P.path), "%s/ws.sock", test_tmpdir());
    unlink(P.path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", P.path);
    P.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(P.lfd >= 0);
    CHECK_OK(bind(P.lfd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(P.lfd, 4));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, peer_main, (void *)(intptr_t)conns) == 0);
    return t;
}

/* The same peer on 127.0.0.1 (P.port), for http:// endpoints. */
static pthread_t peer_start_tcp(int conns) {
    memset(&P, 0, sizeof(P));
    P.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK_OK(bind(P.lfd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(P.lfd, 4));
    CHECK_OK(getsockname(P.lfd, (struct sockaddr *)&sa, &sl));
    P.port = ntohs(sa.sin_port);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, peer_main, (void *)(intptr_t)conns) == 0);
    return t;
}

/* ---- the client ---- */
typedef struct got {
    char out[64], err[64];
    size_t out_len, err_len;
    long start_pid;
    int exit_code, exits;
    bool stopped;
} got;

static void on_output(void *ud, enum sbx_stream s, const char *d, size_t n) {
    got *g = ud;
    char *dst = s == SBX_STREAM_STDERR ? g->err : g->out;
    size_t *len = s == SBX_STREAM_STDERR ? &g->err_len : &g->out_len;
    if (*len + n < 64) {
        memcpy(dst + *len, d, n);
        *len += n;
    }
}

static uint8_t *big_input(void) {
    uint8_t *in = malloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        in[i] = (uint8_t)(i * 31 + (i >> 10));
    return in;
}

static void check_wire(const uint8_t *in) {
    CHECK(strstr(P.request, "GET /v1/sandboxes/sb-test/exec/attach HTTP/1.1\r\n") == P.request);
    CHECK(strcasestr(P.request, "\r\nUpgrade: websocket\r\n"));
    CHECK(strcasestr(P.request, "\r\nConnection: Upgrade\r\n"));
    CHECK(strcasestr(P.request, "\r\nSec-WebSocket-Version: 13\r\n"));
    CHECK(!strcasestr(P.request, "Authorization:")); /* a unix socket: no token */
    json_t *f = json_loads(P.first, 0, NULL);
    CHECK(json_is_object(f));
    CHECK_STREQ(json_string_value(json_array_get(json_object_get(f, "argv"), 0)), "cat");
    CHECK(json_is_true(json_object_get(f, "tty")));
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(f, "tty_size"), "rows")), 30);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(f, "tty_size"), "cols")), 90);
    CHECK_STREQ(json_string_value(json_object_get(f, "term")), "xterm-256color");
    json_decref(f);
    CHECK_EQ(P.unmasked, 0);
    CHECK_EQ(P.pongs_ok, 1);
    CHECK_EQ(P.stdin_len, BIG);
    CHECK(memcmp(P.stdin_data, in, BIG) == 0);
    CHECK_EQ(P.eofs, 1);
}

static void client_setup(sbx_client **c, sbx_sandbox **sb) {
    char host[160];
    snprintf(host, sizeof(host), "unix:%s", P.path);
    sbx_err err;
    CHECK_EQ(sbx_client_new(host, c, &err), SBX_OK);
    *sb = sbxi_sandbox_new(*c, "sb-test", 0);
    CHECK(*sb);
}

static void fill_opts(sbx_exec_opts *o, sbx_process_opts *po, const char *const *argv, got *g) {
    sbx_exec_opts_init(o);
    o->argv = argv;
    o->on_output = on_output;
    o->userdata = g;
    sbx_process_opts_init(po);
    po->tty = 1;
    po->rows = 30;
    po->cols = 90;
    po->term = "xterm-256color";
}

TEST(process_sync_wire_and_answers) {
    pthread_t t = peer_start(1);
    sbx_client *c;
    sbx_sandbox *sb;
    client_setup(&c, &sb);
    static const char *const argv[] = {"cat", NULL};
    got g = {0};
    sbx_exec_opts o;
    sbx_process_opts po;
    fill_opts(&o, &po, argv, &g);
    sbx_process *p = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_process_start(sb, &o, &po, &p, &err), SBX_OK);
    CHECK_EQ(sbx_process_pid(p), 42);
    uint8_t *in = big_input();
    CHECK_EQ(sbx_process_write(p, in, BIG, &err), SBX_OK);
    CHECK(sbx_process_write_pending(p) > BIG); /* queued, not sent: write never blocks */
    CHECK_EQ(sbx_process_resize(p, 24, 100, &err), SBX_OK);
    CHECK_EQ(sbx_process_resize(p, 0, 100, &err), SBX_E_INVALID);
    CHECK_EQ(sbx_process_signal(p, "INT", &err), SBX_OK);
    CHECK_EQ(sbx_process_close_stdin(p, &err), SBX_OK);
    CHECK_EQ(sbx_process_write(p, "x", 1, &err), SBX_E_CONFLICT); /* after eof */
    sbx_exec_result r = {0};
    CHECK_EQ(sbx_process_wait(p, &r, &err), SBX_OK);
    CHECK_EQ(r.exit_code, 3);
    CHECK_STREQ(r.reason, "exited");
    CHECK(sbx_process_done(p));
    CHECK_EQ(g.out_len, 4);
    CHECK(memcmp(g.out, "abcd", 4) == 0); /* fragments reassembled */
    CHECK_EQ(g.err_len, 3);
    CHECK(memcmp(g.err, "err", 3) == 0);
    sbx_process_free(p);
    pthread_join(t, NULL); /* the peer has seen everything */
    check_wire(in);
    CHECK_EQ(P.resizes, 1);
    CHECK(P.saw_resize_24x100);
    CHECK(P.saw_sigint);
    CHECK_EQ(P.closes, 1); /* the client answered the server's close */
    free(P.stdin_data);
    close(P.lfd);
    t = peer_start(1);

    /* attach to an ended process: the plain HTTP refusal becomes the API's error */
    CHECK_EQ(sbx_process_attach(sb, 7, SBX_ATTACH_STDIN, on_output, &g, &p, &err), SBX_E_CONFLICT);
    CHECK_STREQ(err.api_code, "process_ended");
    CHECK(strstr(err.message, "has ended"));
    pthread_join(t, NULL);
    CHECK(strstr(P.request, "/processes/7/attach?stdin=1 HTTP/1.1"));
    free(in);
    close(P.lfd);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* ---- the async form ---- */
static void a_start(void *ud, sbx_process *p, long pid, const sbx_err *e) {
    got *g = ud;
    g->start_pid = e ? -2 : pid;
    if (!e) {
        uint8_t *in = big_input();
        sbx_err err;
        sbx_process_write(p, in, BIG, &err);
        sbx_process_close_stdin(p, &err);
        free(in);
    }
}

static void a_exit(void *ud, sbx_process *p, const sbx_exec_result *res, const sbx_err *e) {
    got *g = ud;
    g->exits++;
    g->exit_code = res ? res->exit_code : -100;
    sbx_process_free(p); /* freeing from inside its own callback is allowed */
}

TEST(process_async_wire_and_answers) {
    pthread_t t = peer_start(1);
    sbx_client *c;
    sbx_sandbox *sb;
    client_setup(&c, &sb);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    static const char *const argv[] = {"cat", NULL};
    got g = {0};
    sbx_exec_opts o;
    sbx_process_opts po;
    fill_opts(&o, &po, argv, &g);
    sbx_process_cbs cbs = {
        .on_start = a_start, .on_output = on_output, .on_exit = a_exit, .userdata = &g};
    sbx_process *p = NULL;
    CHECK_EQ(sbx_async_process_start(as, sb, &o, &po, &cbs, &p, &err), SBX_OK);
    CHECK_EQ(g.start_pid, 0); /* nothing runs inside the call */
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(g.start_pid, 42);
    CHECK_EQ(g.exits, 1);
    CHECK_EQ(g.exit_code, 3);
    CHECK(g.out_len == 4 && memcmp(g.out, "abcd", 4) == 0);
    CHECK(g.err_len == 3 && memcmp(g.err, "err", 3) == 0);
    pthread_join(t, NULL);
    uint8_t *in = big_input();
    check_wire(in);
    free(in);
    free(P.stdin_data);
    close(P.lfd);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* https:// endpoints: a clear "not supported yet", no connection attempt. */
TEST(process_https_not_supported) {
    CHECK_EQ(sbxi_conn_open(NULL, "https://127.0.0.1:1"), -EPROTONOSUPPORT);
    CHECK_EQ(sbxi_conn_open(NULL, "ftp://x"), -EINVAL);
    sbx_client *c;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new("https://127.0.0.1:1", &c, &err), SBX_OK);
    sbx_sandbox *sb = sbxi_sandbox_new(c, "sb-test", 0);
    static const char *const argv[] = {"cat", NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = argv;
    sbx_process *p = NULL;
    CHECK_EQ(sbx_process_start(sb, &o, NULL, &p, &err), SBX_E_INVALID);
    CHECK(strstr(err.message, "not supported yet"));
    CHECK(p == NULL);
    CHECK_EQ(sbx_process_start(sb, &o, NULL, &p, NULL), SBX_E_INVALID); /* err is optional */
    sbx_process_opts po;
    sbx_process_opts_init(&po);
    po.tty = 1, po.rows = 2000, po.cols = 80;
    CHECK_EQ(sbx_process_start(sb, &o, &po, &p, NULL),
             SBX_E_INVALID); /* refused before connecting */
    CHECK_EQ(sbx_sandbox_process_start(sb, &o, &po, NULL, NULL, NULL), SBX_E_INVALID);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* A node of a fleet answers the upgrade for a sandbox another node holds with 307 (docs/FLEET.md
 * "Routing"): the stream goes to the Location on a new connection with the token, in the sync
 * and the async form (the socket keeps its number under the uv_poll). It was an error, "HTTP
 * 307". */
TEST(process_follows_a_redirect) {
    for (int async = 0; async < 2; async++) {
        pthread_t t = peer_start_tcp(2);
        char host[64];
        snprintf(host, sizeof(host), "http://127.0.0.1:%d", P.port);
        sbx_client *c;
        sbx_err err = {0};
        CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
        CHECK_EQ(sbx_client_set_token(c, "fleet-tok"), SBX_OK);
        sbx_sandbox *sb = sbxi_sandbox_new(c, "sb-away", 0);
        static const char *const argv[] = {"cat", NULL};
        got g = {0};
        sbx_exec_opts o;
        sbx_process_opts po;
        fill_opts(&o, &po, argv, &g);
        sbx_process *p = NULL;
        uint8_t *in = big_input();
        if (async) {
            uv_loop_t loop;
            uv_loop_init(&loop);
            sbx_async *as = NULL;
            CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
            sbx_process_cbs cbs = {
                .on_start = a_start, .on_output = on_output, .on_exit = a_exit, .userdata = &g};
            CHECK_EQ(sbx_async_process_start(as, sb, &o, &po, &cbs, &p, &err), SBX_OK);
            uv_run(&loop, UV_RUN_DEFAULT);
            CHECK_EQ(g.start_pid, 42);
            CHECK_EQ(g.exits, 1);
            CHECK_EQ(g.exit_code, 3);
            sbx_async_free(as);
            uv_run(&loop, UV_RUN_DEFAULT);
            CHECK_EQ(uv_loop_close(&loop), 0);
        } else {
            CHECK_MSG(sbx_process_start(sb, &o, &po, &p, &err) == SBX_OK, "start: %s", err.message);
            CHECK_EQ(sbx_process_pid(p), 42);
            CHECK_EQ(sbx_process_write(p, in, BIG, &err), SBX_OK);
            CHECK_EQ(sbx_process_close_stdin(p, &err), SBX_OK);
            sbx_exec_result r = {0};
            CHECK_EQ(sbx_process_wait(p, &r, &err), SBX_OK);
            CHECK_EQ(r.exit_code, 3);
            sbx_process_free(p);
        }
        pthread_join(t, NULL);
        CHECK(g.out_len == 4 && memcmp(g.out, "abcd", 4) == 0);
        CHECK(strstr(P.moved, "GET /v1/sandboxes/sb-away/exec/attach HTTP/1.1\r\n") == P.moved);
        CHECK(strstr(P.request, "GET /v1/sandboxes/sb-test/exec/attach HTTP/1.1\r\n") == P.request);
        snprintf(host, sizeof(host), "\r\nHost: 127.0.0.1:%d\r\n", P.port);
        CHECK(strstr(P.request, host));
        CHECK(strstr(P.request, "\r\nAuthorization: Bearer fleet-tok\r\n")); /* kept */
        CHECK_EQ(P.stdin_len, BIG); /* written on the stream the command got */
        CHECK(memcmp(P.stdin_data, in, BIG) == 0);
        CHECK_EQ(P.unmasked, 0);
        free(in);
        free(P.stdin_data);
        close(P.lfd);
        sbx_sandbox_free(sb);
        sbx_client_free(c);
    }
}

/* sbx_process_free inside on_output, with the rest of the stream (more output, the exit record)
 * in the same read: no callback after it (on_output and on_exit ran on a freed handle). */
typedef struct burst {
    sbx_process *p;
    int outputs, exits, starts;
} burst;

static void b_output(void *ud, enum sbx_stream s, const char *d, size_t n) {
    burst *b = ud;
    if (b->outputs++ == 0)
        sbx_process_free(b->p);
}

static void b_start(void *ud, sbx_process *p, long pid, const sbx_err *e) {
    ((burst *)ud)->starts++;
}

static void b_exit(void *ud, sbx_process *p, const sbx_exec_result *res, const sbx_err *e) {
    ((burst *)ud)->exits++;
}

TEST(process_async_free_inside_a_callback) {
    pthread_t t = peer_start(1);
    sbx_client *c;
    sbx_sandbox *sb;
    client_setup(&c, &sb);
    sbx_sandbox *bsb = sbxi_sandbox_new(c, "sb-burst", 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    static const char *const argv[] = {"true", NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = argv;
    burst b = {0};
    sbx_process_cbs cbs = {
        .on_start = b_start, .on_output = b_output, .on_exit = b_exit, .userdata = &b};
    CHECK_EQ(sbx_async_process_start(as, bsb, &o, NULL, &cbs, &b.p, &err), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL); /* the peer saw the client's close */
    CHECK_EQ(b.starts, 1);
    CHECK_MSG(b.outputs == 1 && b.exits == 0,
              "%d output and %d exit callbacks after sbx_process_free in the first", b.outputs - 1,
              b.exits);
    CHECK_EQ(P.closes, 1);
    close(P.lfd);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_sandbox_free(bsb);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

/* A node that does not answer the SYN (down, or a full backlog here): the connect gives up as
 * libcurl's requests do (after 10 s) instead of waiting minutes for the kernel, inside the
 * call (the async start blocks its loop while it connects). */
TEST_T(process_connect_gives_up, 45) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK_OK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(lfd, 0));
    CHECK_OK(getsockname(lfd, (struct sockaddr *)&sa, &sl));
    int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* the backlog's one place */
    CHECK_OK(connect(filler, (struct sockaddr *)&sa, sizeof(sa)));
    char host[64];
    snprintf(host, sizeof(host), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    sbx_client *c;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    sbx_sandbox *sb = sbxi_sandbox_new(c, "sb-test", 0);
    static const char *const argv[] = {"true", NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = argv;
    sbx_process *p = NULL;
    CHECK_EQ(sbx_process_start(sb, &o, NULL, &p, &err), SBX_E_CONNECT);
    CHECK(p == NULL);
    CHECK_MSG(strstr(err.message, host) && strstr(err.message, "timed out"), "message: %s",
              err.message);
    close(filler);
    close(lfd);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}
