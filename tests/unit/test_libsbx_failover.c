/* Unit tests of libsbx's create over several endpoints against fake daemons (loopback HTTP
 * servers in threads): a create whose answer is cut off after the request was sent is never sent
 * to the next endpoint (it may have made a sandbox there), sync and async; one that carries an
 * Idempotency-Key goes once more to the same endpoint (the daemon replays it); a connection
 * refused still goes on to the next endpoint; a create interrupted by the client's interrupt fd
 * (sbx_client_set_interrupt_fd) is sent nowhere again, and one interrupted while it asks for the
 * endpoints' free slots is not made; an open interrupted at one endpoint asks no other. */
#include "client/lib/internal.h"
#include "common/timeutil.h"
#include "tests/lib/test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

/* ---- a fake daemon: GET /v1/info with its free slots, POST /v1/sandboxes answered 201 or cut
 * (read whole, then the connection closed with no answer) ---- */
typedef struct fake {
    int fd, port;
    int free_slots;
    int cut_first;       /* creates cut before one is answered (-1: every one) */
    bool die_after_info; /* stops listening once it answered GET /v1/info: connects refused */
    int hold_ms;         /* a create is held this long before it is answered or cut */
    int hold_info_ms;    /* GET /v1/info is held this long before it is answered */
    int hold_get_ms;     /* GET /v1/sandboxes/ID is held this long, then answered 404 */
    atomic_int creates, keyed, gets;
} fake;

/* The request on c (head and Content-Length body) into req; false when it ended early. */
static bool read_request(int c, char *req, size_t cap) {
    size_t n = 0, clen = 0;
    char *end = NULL;
    while (!end) {
        ssize_t r = n < cap - 1 ? read(c, req + n, cap - 1 - n) : 0;
        if (r <= 0)
            return false;
        n += (size_t)r;
        req[n] = 0;
        end = strstr(req, "\r\n\r\n");
    }
    const char *cl = strcasestr(req, "Content-Length:");
    if (cl && cl < end)
        clen = strtoul(cl + 15, NULL, 10);
    for (size_t want = (size_t)(end + 4 - req) + clen; n < want;) {
        ssize_t r = n < cap - 1 ? read(c, req + n, cap - 1 - n) : 0;
        if (r <= 0)
            return false;
        n += (size_t)r;
    }
    return true;
}

static void answer(int c, int status, const char *body) {
    char buf[512];
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, strlen(body), body);
    CHECK(write(c, buf, (size_t)n) == n);
}

static void serve(fake *f, int c) {
    char req[16384], body[128];
    if (!read_request(c, req, sizeof(req)))
        return;
    if (strncmp(req, "GET /v1/info ", 13) == 0) {
        if (f->hold_info_ms)
            usleep((useconds_t)f->hold_info_ms * 1000);
        snprintf(body, sizeof(body), "{\"max_sandboxes\":20,\"free_slots\":%d}", f->free_slots);
        answer(c, 200, body);
        if (f->die_after_info)
            shutdown(f->fd, SHUT_RDWR); /* accept fails: fake_main returns */
        return;
    }
    if (strncmp(req, "GET /v1/sandboxes/", 18) == 0) {
        atomic_fetch_add(&f->gets, 1);
        usleep((useconds_t)f->hold_get_ms * 1000);
        answer(c, 404, "{\"code\":\"not_found\",\"message\":\"no such sandbox\"}");
        return;
    }
    if (strncmp(req, "POST /v1/sandboxes ", 19) != 0) {
        answer(c, 404, "{\"code\":\"not_found\",\"message\":\"no such path\"}");
        return;
    }
    int k = atomic_fetch_add(&f->creates, 1);
    if (strcasestr(req, "\r\nIdempotency-Key: key-1\r\n"))
        atomic_fetch_add(&f->keyed, 1);
    if (f->hold_ms)
        usleep((useconds_t)f->hold_ms * 1000);
    if (f->cut_first < 0 || k < f->cut_first)
        return; /* received whole, and no answer: the connection closes */
    snprintf(body, sizeof(body), "{\"id\":\"sb-fake%d\",\"state\":\"running\"}", f->port);
    answer(c, 201, body);
}

static void *fake_main(void *arg) {
    fake *f = arg;
    for (;;) {
        int c = accept4(f->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return NULL;
        serve(f, c);
        close(c);
    }
}

static int loopback_listener(int *ret_port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(sa);
    CHECK_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(fd, 16));
    CHECK_OK(getsockname(fd, (struct sockaddr *)&sa, &l));
    *ret_port = ntohs(sa.sin_port);
    return fd;
}

static void fake_start(fake *f, int free_slots, int cut_first) {
    f->fd = loopback_listener(&f->port);
    f->free_slots = free_slots;
    f->cut_first = cut_first;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fake_main, f) == 0);
    pthread_detach(t);
}

/* A client of a (placed first: more free slots) and b. */
static sbx_client *client_of(int a_port, int b_port) {
    char hosts[128];
    snprintf(hosts, sizeof(hosts), "http://127.0.0.1:%d,http://127.0.0.1:%d", a_port, b_port);
    sbx_client *c = NULL;
    CHECK_EQ(sbx_client_new(hosts, &c, NULL), SBX_OK);
    return c;
}

static sbx_code create_sync(sbx_client *c, const char *key, char *id, size_t id_len, sbx_err *e) {
    sbx_create_opts o;
    sbx_create_opts_init(&o);
    o.idempotency_key = key;
    sbx_sandbox *sb = NULL;
    sbx_code rc = sbx_sandbox_create(c, &o, &sb, e);
    snprintf(id, id_len, "%s", rc == SBX_OK ? sbx_sandbox_id(sb) : "");
    sbx_sandbox_free(sb);
    return rc;
}

TEST(sync_cut_answer_not_sent_elsewhere) {
    static fake a, b;
    fake_start(&a, 10, -1);
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    sbx_err e = {0};
    char id[64];
    CHECK_EQ(create_sync(c, NULL, id, sizeof(id), &e), SBX_E_CONNECT);
    CHECK_MSG(strstr(e.message, "the create may have been made on http://127.0.0.1:"), "%s",
              e.message);
    CHECK_EQ(atomic_load(&a.creates), 1);
    CHECK_EQ(atomic_load(&b.creates), 0); /* was 1: a second sandbox, on b */
    sbx_client_free(c);
}

TEST(sync_keyed_cut_answer_retried_on_the_same_endpoint) {
    static fake a, b;
    fake_start(&a, 10, 1);
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    sbx_err e = {0};
    char id[64], want[64];
    CHECK_EQ(create_sync(c, "key-1", id, sizeof(id), &e), SBX_OK);
    snprintf(want, sizeof(want), "sb-fake%d", a.port);
    CHECK_STREQ(id, want);
    CHECK_EQ(atomic_load(&a.creates), 2);
    CHECK_EQ(atomic_load(&a.keyed), 2); /* the same key both times: the daemon replays it */
    CHECK_EQ(atomic_load(&b.creates), 0);
    sbx_client_free(c);
}

TEST(sync_keyed_cut_twice_not_sent_elsewhere) {
    static fake a, b;
    fake_start(&a, 10, -1);
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    sbx_err e = {0};
    char id[64];
    CHECK_EQ(create_sync(c, "key-1", id, sizeof(id), &e), SBX_E_CONNECT);
    CHECK(strstr(e.message, "may have been made"));
    CHECK_EQ(atomic_load(&a.creates), 2); /* once more, then no further */
    CHECK_EQ(atomic_load(&b.creates), 0);
    sbx_client_free(c);
}

TEST(sync_refused_goes_to_the_next_endpoint) {
    static fake a = {.die_after_info = true}, b;
    fake_start(&a, 10, 0); /* placed first, then gone: its connect is refused */
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    sbx_err e = {0};
    char id[64], want[64];
    CHECK_EQ(create_sync(c, "key-1", id, sizeof(id), &e), SBX_OK);
    snprintf(want, sizeof(want), "sb-fake%d", b.port);
    CHECK_STREQ(id, want);
    CHECK_EQ(atomic_load(&a.creates), 0);
    CHECK_EQ(atomic_load(&b.creates), 1);
    sbx_client_free(c);
}

/* A SIGINT byte 0.3 s into the create on the pipe the client watches (a signal handler's). */
static void *interrupt_soon(void *arg) {
    usleep(300000);
    unsigned char b = SIGINT;
    CHECK(write(*(int *)arg, &b, 1) == 1);
    return NULL;
}

/* A keyed create to a (b second), or with open an open of a sandbox neither has, with a SIGINT
 * byte 0.3 s into it: SBX_E_INTERRUPTED soon. */
static sbx_code call_interrupted(fake *a, fake *b, bool open, sbx_err *e) {
    sbx_client *c = client_of(a->port, b->port);
    int p[2];
    CHECK_OK(pipe2(p, O_NONBLOCK | O_CLOEXEC));
    sbx_client_set_interrupt_fd(c, p[0], SIGINT);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, interrupt_soon, &p[1]) == 0);
    char id[64];
    sbx_sandbox *sb = NULL;
    uint64_t t0 = now_mono_ms();
    sbx_code rc = open ? sbx_sandbox_open(c, "sb-0123456789abcdef", &sb, e)
                       : create_sync(c, "key-1", id, sizeof(id), e); /* (retried if cut) */
    uint64_t took = now_mono_ms() - t0;
    pthread_join(t, NULL);
    CHECK_MSG(rc == SBX_E_INTERRUPTED && took < 2000, "%s after %llu ms: %s", sbx_code_name(rc),
              (unsigned long long)took, e->message);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    close(p[0]);
    close(p[1]);
    return rc;
}

TEST(sync_interrupted_create_not_sent_again) {
    static fake a = {.hold_ms = 3000}, b;
    fake_start(&a, 10, -1); /* holds the create, then cuts it */
    fake_start(&b, 5, 0);
    sbx_err e = {0};
    CHECK_EQ(call_interrupted(&a, &b, false, &e), SBX_E_INTERRUPTED);
    CHECK_STREQ(e.api_code, "interrupted");
    CHECK_EQ(atomic_load(&a.creates), 1); /* not again to a, */
    CHECK_EQ(atomic_load(&b.creates), 0); /* nor to b */
}

/* The same while the create asks the endpoints for their free slots first: none is made. */
TEST(sync_interrupted_before_the_create_makes_none) {
    static fake a = {.hold_info_ms = 3000}, b;
    fake_start(&a, 10, 0);
    fake_start(&b, 5, 0);
    sbx_err e = {0};
    CHECK_EQ(call_interrupted(&a, &b, false, &e), SBX_E_INTERRUPTED);
    CHECK_EQ(atomic_load(&a.creates), 0);
    CHECK_EQ(atomic_load(&b.creates), 0); /* was 1: the create went on after the Ctrl-C */
}

/* An open interrupted while it asks the first endpoint asks no other: it ends there. */
TEST(sync_interrupted_open_asks_no_other_endpoint) {
    static fake a = {.hold_get_ms = 3000}, b;
    fake_start(&a, 10, 0);
    fake_start(&b, 5, 0);
    sbx_err e = {0};
    CHECK_EQ(call_interrupted(&a, &b, true, &e), SBX_E_INTERRUPTED);
    CHECK_EQ(atomic_load(&a.gets), 1);
    CHECK_EQ(atomic_load(&b.gets), 0); /* was 1: the open went on to b after the Ctrl-C */
}

/* ---- the same through the async API ---- */
struct acb {
    int calls;
    sbx_err err;
    char id[64];
};

static void on_create(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    struct acb *r = ud;
    r->calls++;
    if (err)
        r->err = *err;
    snprintf(r->id, sizeof(r->id), "%s", sb ? sbx_sandbox_id(sb) : "");
    sbx_sandbox_free(sb);
}

static struct acb create_async(sbx_client *c, const char *key) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, NULL), SBX_OK);
    sbx_create_opts o;
    sbx_create_opts_init(&o);
    o.idempotency_key = key;
    struct acb r = {0};
    CHECK_EQ(sbx_async_create(as, &o, on_create, &r), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    CHECK_EQ(r.calls, 1);
    return r;
}

TEST(async_cut_answer_not_sent_elsewhere) {
    static fake a, b;
    fake_start(&a, 10, -1);
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    struct acb r = create_async(c, NULL);
    CHECK_STREQ(r.id, "");
    CHECK_EQ(r.err.code, SBX_E_CONNECT);
    CHECK_MSG(strstr(r.err.message, "the create may have been made on"), "%s", r.err.message);
    CHECK_EQ(atomic_load(&a.creates), 1);
    CHECK_EQ(atomic_load(&b.creates), 0);
    sbx_client_free(c);
}

TEST(async_keyed_cut_answer_retried_on_the_same_endpoint) {
    static fake a, b;
    fake_start(&a, 10, 1);
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    struct acb r = create_async(c, "key-1");
    char want[64];
    snprintf(want, sizeof(want), "sb-fake%d", a.port);
    CHECK_MSG(strcmp(r.id, want) == 0, "id %s, error %s", r.id, r.err.message);
    CHECK_EQ(atomic_load(&a.creates), 2);
    CHECK_EQ(atomic_load(&a.keyed), 2);
    CHECK_EQ(atomic_load(&b.creates), 0);
    sbx_client_free(c);
}

TEST(async_refused_goes_to_the_next_endpoint) {
    static fake a = {.die_after_info = true}, b;
    fake_start(&a, 10, 0);
    fake_start(&b, 5, 0);
    sbx_client *c = client_of(a.port, b.port);
    struct acb r = create_async(c, NULL);
    char want[64];
    snprintf(want, sizeof(want), "sb-fake%d", b.port);
    CHECK_MSG(strcmp(r.id, want) == 0, "id %s, error %s", r.id, r.err.message);
    CHECK_EQ(atomic_load(&a.creates), 0);
    CHECK_EQ(atomic_load(&b.creates), 1);
    sbx_client_free(c);
}
