/* Unit tests of the async HTTP engine (client/lib/http_async.h) against a tiny loopback HTTP
 * server in a thread: arbitrary http:// URLs with headers and bodies (how the GRPO runner calls a
 * trainer), many requests in flight on one loop, streamed bodies, error statuses, freeing the
 * engine from inside a callback, and cancelling what is in flight. */
#include "client/lib/http_async.h"
#include "tests/lib/test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

/* ---- the server: answers each connection with an echo of what it got ---- */
static int srv_fd = -1;
static int srv_port;

static void serve_one(int c) {
    char req[65536];
    size_t n = 0;
    char *end = NULL;
    while (n < sizeof(req) - 1) { /* headers */
        ssize_t r = read(c, req + n, sizeof(req) - 1 - n);
        if (r <= 0)
            return;
        n += (size_t)r;
        req[n] = 0;
        if ((end = strstr(req, "\r\n\r\n")))
            break;
    }
    if (!end)
        return;
    size_t hlen = (size_t)(end + 4 - req), clen = 0;
    const char *cl = strcasestr(req, "Content-Length:");
    if (cl && cl < end)
        clen = strtoul(cl + 15, NULL, 10);
    while (n < hlen + clen && n < sizeof(req) - 1) {
        ssize_t r = read(c, req + n, sizeof(req) - 1 - n);
        if (r <= 0)
            return;
        n += (size_t)r;
    }
    req[n] = 0;
    char method[16] = "", path[256] = "";
    sscanf(req, "%15s %255s", method, path);
    int status = strcmp(path, "/missing") == 0 ? 404 : 200;
    const char *auth = strcasestr(req, "Authorization: Bearer t0k");
    char body[70000];
    int blen;
    if (strcmp(path, "/stream") == 0)
        blen = snprintf(body, sizeof(body), "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
    else
        blen =
            snprintf(body, sizeof(body), "%s %s auth=%d x=%s body=%.*s", method, path, auth != NULL,
                     strcasestr(req, "X-Test: yes") ? "yes" : "no", (int)(n - hlen), req + hlen);
    char head[256];
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n",
                      status, blen);
    if (write(c, head, (size_t)hl) != hl || write(c, body, (size_t)blen) != blen)
        return;
}

static void *server(void *arg) {
    for (;;) {
        int c = accept4(srv_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return NULL;
        serve_one(c);
        close(c);
    }
}

static void start_server(void) {
    srv_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_OK(bind(srv_fd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(srv_fd, 256));
    socklen_t l = sizeof(sa);
    CHECK_OK(getsockname(srv_fd, (struct sockaddr *)&sa, &l));
    srv_port = ntohs(sa.sin_port);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, server, NULL) == 0);
    pthread_detach(t);
}

/* A listening socket that never answers; its URL into url. */
static int mute_listener(char *url, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(fd, 4));
    CHECK_OK(getsockname(fd, (struct sockaddr *)&sa, &sl));
    snprintf(url, len, "http://127.0.0.1:%d/never", ntohs(sa.sin_port));
    return fd;
}

/* ---- callbacks ---- */
struct got {
    int calls;
    long status;
    char body[512];
    int cancelled;
    int curl_code;
};

static void on_res(void *ud, const sbxi_http_result *r) {
    struct got *g = ud;
    g->calls++;
    g->status = r->status;
    g->cancelled = r->cancelled;
    g->curl_code = r->curl_code;
    snprintf(g->body, sizeof(g->body), "%.*s", (int)r->len, r->body);
}

TEST(async_http_tcp_requests) {
    start_server();
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbxi_http_async *e = NULL;
    CHECK_OK(sbxi_http_async_new(&loop, &e));
    char url[128];
    enum { N = 50 };
    static struct got g[N];
    const char *hdrs[] = {"Content-Type: application/json", "X-Test: yes", NULL};
    for (int i = 0; i < N; i++) {
        char body[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/item/%d", srv_port, i);
        snprintf(body, sizeof(body), "{\"i\":%d}", i);
        CHECK_OK(sbxi_http_async_request(e, "POST", url, hdrs, body, strlen(body), on_res, &g[i]));
    }
    CHECK_EQ(sbxi_http_async_pending(e), N);
    CHECK_EQ(g[0].calls, 0); /* never from inside the submitting call */
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(sbxi_http_async_pending(e), 0);
    for (int i = 0; i < N; i++) {
        char want[128];
        snprintf(want, sizeof(want), "POST /v1/item/%d auth=0 x=yes body={\"i\":%d}", i, i);
        CHECK_EQ(g[i].calls, 1);
        CHECK_EQ(g[i].status, 200);
        CHECK_STREQ(g[i].body, want);
    }
    /* options: bearer token, a GET, an error status */
    struct got a = {0}, b = {0};
    sbxi_http_opts o = {.bearer_token = "t0k", .timeout_ms = 5000};
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/tokened", srv_port);
    CHECK_OK(sbxi_http_async_request_ex(e, "GET", url, NULL, NULL, 0, &o, on_res, &a));
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/missing", srv_port);
    CHECK_OK(sbxi_http_async_request(e, "DELETE", url, NULL, NULL, 0, on_res, &b));
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_STREQ(a.body, "GET /tokened auth=1 x=no body=");
    CHECK_EQ(b.status, 404);
    CHECK_EQ(b.curl_code, 0);
    /* a closed port: no answer, a curl error */
    struct got d = {0};
    CHECK_OK(sbxi_http_async_request(e, "GET", "http://127.0.0.1:1/x", NULL, NULL, 0, on_res, &d));
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(d.calls == 1 && d.status == 0 && d.curl_code != 0);
    CHECK_EQ(sbxi_http_async_request(e, "GET", NULL, NULL, NULL, 0, on_res, &d), -EINVAL);
    sbxi_http_async_free(e);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

struct chunks {
    char data[256];
    size_t len;
    int pieces;
};

static void on_chunk(void *ud, const char *data, size_t len) {
    struct chunks *c = ud;
    CHECK(c->len + len < sizeof(c->data));
    memcpy(c->data + c->len, data, len);
    c->len += len;
    c->pieces++;
}

static sbxi_http_async *engine_to_free;
static struct got late;

static void free_from_callback(void *ud, const sbxi_http_result *r) {
    on_res(ud, r);
    sbxi_http_async_free(engine_to_free); /* allowed: deferred until the callback returns */
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/late", srv_port);
    CHECK_EQ(sbxi_http_async_request(engine_to_free, "GET", url, NULL, NULL, 0, on_res, &late),
             -ESHUTDOWN);
}

TEST(async_http_stream_and_free_in_callback) {
    start_server();
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbxi_http_async *e = NULL;
    CHECK_OK(sbxi_http_async_new(&loop, &e));
    struct chunks ch = {0};
    struct got g = {0};
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/stream", srv_port);
    sbxi_http_opts o = {.on_chunk = on_chunk, .chunk_ud = &ch};
    CHECK_OK(sbxi_http_async_request_ex(e, "GET", url, NULL, NULL, 0, &o, on_res, &g));
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(g.status, 200);
    CHECK_STREQ(g.body, ""); /* streamed, not collected */
    CHECK(ch.len == 24 && memcmp(ch.data, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n", 24) == 0);

    /* free from inside a callback: the other request in flight is cancelled */
    engine_to_free = e;
    struct got first = {0}, second = {0};
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/one", srv_port);
    CHECK_OK(sbxi_http_async_request(e, "GET", url, NULL, NULL, 0, free_from_callback, &first));
    char mute_url[128];
    int mute = mute_listener(mute_url, sizeof(mute_url));
    CHECK_OK(sbxi_http_async_request(e, "GET", mute_url, NULL, NULL, 0, on_res, &second));
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(first.calls, 1);
    CHECK_EQ(first.status, 200);
    CHECK_EQ(second.calls, 1);
    CHECK_EQ(second.cancelled, 1);
    CHECK_EQ(late.calls, 0);
    CHECK_EQ(uv_loop_close(&loop), 0);
    close(mute);
}

static sbxi_http_async *engine_to_reuse;
static struct got after;

/* A cancelled request's callback submits another, which goes on. */
static void resubmit_on_cancel(void *ud, const sbxi_http_result *r) {
    on_res(ud, r);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/after", srv_port);
    CHECK_OK(sbxi_http_async_request(engine_to_reuse, "GET", url, NULL, NULL, 0, on_res, &after));
}

/* sbxi_http_async_cancel: what is in flight is called back cancelled from inside the call; the
 * engine stays usable. */
TEST(async_http_cancel) {
    start_server();
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbxi_http_async *e = NULL;
    CHECK_OK(sbxi_http_async_new(&loop, &e));
    engine_to_reuse = e;
    char mute_url[128];
    int mute = mute_listener(mute_url, sizeof(mute_url));
    struct got a = {0}, b = {0};
    CHECK_OK(sbxi_http_async_request(e, "GET", mute_url, NULL, NULL, 0, resubmit_on_cancel, &a));
    CHECK_OK(sbxi_http_async_request(e, "POST", mute_url, NULL, "{}", 2, on_res, &b));
    for (int i = 0; i < 5; i++)
        uv_run(&loop, UV_RUN_NOWAIT); /* connected, waiting for an answer */
    sbxi_http_async_cancel(e);
    CHECK(a.calls == 1 && a.cancelled == 1 && a.status == 0);
    CHECK(b.calls == 1 && b.cancelled == 1 && b.status == 0);
    CHECK_EQ(sbxi_http_async_pending(e), 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(after.calls == 1 && after.cancelled == 0 && after.status == 200);
    CHECK_STREQ(after.body, "GET /after auth=0 x=no body=");
    sbxi_http_async_cancel(e); /* nothing in flight */
    sbxi_http_async_cancel(NULL);
    CHECK_EQ(a.calls + b.calls + after.calls, 3);
    sbxi_http_async_free(e);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    close(mute);
}
