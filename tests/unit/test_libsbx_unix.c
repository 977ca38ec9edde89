/* Unit tests of libsbx's own HTTP/1.1 client for the Unix socket (client/lib/unixhttp.c)
 * against a tiny scripted server in a thread: keep-alive reuse, Content-Length, chunked and
 * close-delimited answers, NDJSON streamed to on_chunk, an error answer collected even when
 * streaming was asked, Retry-After, a kept connection the server closed (transparent
 * reconnect), uploads from a descriptor (sized and chunked), removed headers, a socket nobody
 * listens on, and that none of it loads libcurl; sbx_client_info refusing a /v1/info answer
 * that is not an object. */
#include "client/lib/internal.h"
#include "tests/lib/test.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int srv_fd = -1;
static char srv_path[108];
static atomic_int accepts;

/* ---- the server ---- */
typedef struct conn {
    int fd;
    char buf[1 << 20];
    size_t len;
} conn;

static bool need(conn *c, size_t n) {
    while (c->len < n) {
        ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (r <= 0)
            return false;
        c->len += (size_t)r;
        c->buf[c->len] = 0;
    }
    return true;
}

/* One request: headers into head, body (de-chunked) into body. false at the end. */
static bool read_request(conn *c, char *head, size_t hcap, char *body, size_t *blen) {
    char *end;
    c->buf[c->len] = 0;
    while (!(end = strstr(c->buf, "\r\n\r\n")))
        if (!need(c, c->len + 1))
            return false;
    size_t hl = (size_t)(end + 4 - c->buf);
    snprintf(head, hcap, "%.*s", (int)hl, c->buf);
    memmove(c->buf, c->buf + hl, c->len - hl + 1);
    c->len -= hl;
    *blen = 0;
    const char *cl = strcasestr(head, "Content-Length:");
    if (cl) {
        size_t n = strtoul(cl + 15, NULL, 10);
        if (!need(c, n))
            return false;
        memcpy(body, c->buf, n);
        *blen = n;
        memmove(c->buf, c->buf + n, c->len - n + 1);
        c->len -= n;
    } else if (strcasestr(head, "Transfer-Encoding: chunked")) {
        for (;;) {
            char *nl;
            while (!(nl = strstr(c->buf, "\r\n")))
                if (!need(c, c->len + 1))
                    return false;
            size_t n = strtoul(c->buf, NULL, 16), skip = (size_t)(nl + 2 - c->buf);
            if (!need(c, skip + n + 2))
                return false;
            memcpy(body + *blen, c->buf + skip, n);
            *blen += n;
            memmove(c->buf, c->buf + skip + n + 2, c->len - skip - n - 2 + 1);
            c->len -= skip + n + 2;
            if (n == 0)
                break;
        }
    }
    return true;
}

static bool put(int fd, const char *s) {
    return write(fd, s, strlen(s)) == (ssize_t)strlen(s);
}

/* Answers by path; false when the connection is to be closed. */
static bool answer(int fd, const char *head, const char *body, size_t blen) {
    char method[16] = "", path[256] = "", echo[1024], out[2048];
    sscanf(head, "%15s %255s", method, path);
    unsigned sum = 0;
    for (size_t i = 0; i < blen; i++)
        sum = sum * 31 + (unsigned char)body[i];
    snprintf(echo, sizeof(echo), "M=%s P=%s CT=%d EXPECT=%d CHUNKED=%d LEN=%zu SUM=%u", method,
             path, strcasestr(head, "Content-Type:") != NULL, strcasestr(head, "Expect:") != NULL,
             strcasestr(head, "Transfer-Encoding: chunked") != NULL, blen, sum);
    if (strcmp(path, "/chunked") == 0) { /* NDJSON in pieces, split mid-line */
        return put(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n") &&
               put(fd, "5\r\n{\"n\":\r\n") && put(fd, "7\r\n1}\n{\"n\"\r\n") &&
               put(fd, "4\r\n:2}\n\r\n0\r\n\r\n");
    }
    if (strcmp(path, "/err") == 0) {
        const char *e = "{\"code\":\"node_full\",\"message\":\"full\"}";
        snprintf(out, sizeof(out),
                 "HTTP/1.1 503 No\r\nContent-Type: application/json\r\nRetry-After: 7\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
                 strlen(e), e);
        return put(fd, out);
    }
    if (strcmp(path, "/v1/info") == 0) /* JSON, but not the object sandboxd sends */
        return put(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Content-Length: 5\r\n\r\n[1,2]");
    if (strcmp(path, "/close") == 0) { /* no length: the body ends with the connection */
        snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n%s", echo);
        put(fd, out);
        return false;
    }
    snprintf(out, sizeof(out),
             "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(echo), echo);
    /* /bye: answers, then drops the kept-alive connection without saying so (an idle timeout) */
    return put(fd, out) && strcmp(path, "/bye") != 0;
}

static void *server(void *arg) {
    (void)arg;
    static conn c;
    static char head[65536], body[1 << 20];
    for (;;) {
        int fd = accept4(srv_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return NULL;
        atomic_fetch_add(&accepts, 1);
        c.fd = fd;
        c.len = 0;
        size_t blen;
        while (read_request(&c, head, sizeof(head), body, &blen) && answer(fd, head, body, blen))
            ;
        close(fd);
    }
}

static bool stop_server(void) {
    if (srv_fd >= 0)
        shutdown(srv_fd, SHUT_RDWR);
    unlink(srv_path);
    return true;
}

static sbx_client *start(void) {
    snprintf(srv_path, sizeof(srv_path), "%s/unixhttp.sock", test_tmpdir());
    unlink(srv_path);
    srv_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", srv_path);
    CHECK_OK(bind(srv_fd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(srv_fd, 16));
    test_at_teardown(stop_server);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, server, NULL) == 0);
    pthread_detach(t);
    char hosts[200];
    snprintf(hosts, sizeof(hosts), "unix:%s", srv_path);
    sbx_client *c = NULL;
    sbx_err err;
    CHECK_EQ(sbx_client_new(hosts, &c, &err), SBX_OK);
    return c;
}

static sbx_code req(sbx_client *c, const char *method, const char *path, const char *body,
                    sbxi_response *r, sbx_err *err) {
    return sbxi_request(c, 0, method, path, body ? "application/json" : NULL, NULL, NULL, body,
                        body ? strlen(body) : 0, r, err);
}

static char streamed[256];
static void on_chunk(void *ud, const char *data, size_t len) {
    (void)ud;
    strncat(streamed, data, len < sizeof(streamed) - strlen(streamed) - 1 ? len : 0);
}

TEST(unix_http_keepalive_framing_streaming) {
    sbx_client *c = start();
    sbxi_response r = {0};
    sbx_err err;
    CHECK_EQ(req(c, "GET", "/a", NULL, &r, &err), SBX_OK);
    CHECK_EQ(r.status, 200);
    CHECK_STREQ(r.content_type, "text/plain");
    CHECK_STREQ(r.body, "M=GET P=/a CT=0 EXPECT=0 CHUNKED=0 LEN=0 SUM=0");
    CHECK_EQ(req(c, "POST", "/b", "{\"x\":1}", &r, &err), SBX_OK);
    CHECK(strstr(r.body, "M=POST P=/b CT=1 EXPECT=0 CHUNKED=0 LEN=7 ") != NULL);
    CHECK_EQ(req(c, "DELETE", "/c", NULL, &r, &err), SBX_OK);
    CHECK(strstr(r.body, "M=DELETE P=/c CT=0") != NULL);
    CHECK_EQ(atomic_load(&accepts), 1); /* one kept-alive connection for all three */

    r.on_chunk = on_chunk;
    CHECK_EQ(req(c, "POST", "/chunked", "{}", &r, &err), SBX_OK);
    CHECK_STREQ(streamed, "{\"n\":1}\n{\"n\":2}\n");
    CHECK_EQ(r.len, 0u);
    CHECK_EQ(req(c, "POST", "/err", "{}", &r, &err),
             SBX_E_UNAVAILABLE); /* collected, not streamed */
    CHECK_EQ(r.status, 503);
    CHECK_EQ(r.retry_after, 7);
    CHECK(strstr(err.message, "full") != NULL);
    CHECK_STREQ(err.api_code, "node_full");
    r.on_chunk = NULL;
    CHECK_EQ(atomic_load(&accepts), 1);

    CHECK_EQ(req(c, "GET", "/close", NULL, &r, &err), SBX_OK);
    CHECK(strstr(r.body, "M=GET P=/close") != NULL);
    CHECK_EQ(req(c, "GET", "/after-close", NULL, &r, &err), SBX_OK);
    CHECK_EQ(atomic_load(&accepts), 2);
    CHECK_EQ(req(c, "GET", "/bye", NULL, &r, &err), SBX_OK); /* the server drops it silently */
    usleep(20000);
    CHECK_EQ(req(c, "POST", "/again", "{}", &r, &err), SBX_OK);
    CHECK(strstr(r.body, "M=POST P=/again") != NULL);
    CHECK_EQ(atomic_load(&accepts), 3);
    free(r.body);
    CHECK_MSG(dlopen("libcurl.so.4", RTLD_NOLOAD | RTLD_LAZY) == NULL,
              "requests over the Unix socket loaded libcurl");
    sbx_client_free(c);
}

TEST(unix_http_uploads_from_a_descriptor) {
    sbx_client *c = start();
    char path[300];
    snprintf(path, sizeof(path), "%s/upload", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    unsigned sum = 0;
    for (int i = 0; i < 200000; i++) { /* several socket writes, not a multiple of 64 KiB */
        fputc('a' + i % 26, f);
        sum = sum * 31 + (unsigned)('a' + i % 26);
    }
    fclose(f);
    char want[128];
    snprintf(want, sizeof(want), "LEN=200000 SUM=%u", sum);
    sbx_err err;
    char *json = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    CHECK_EQ(sbx_image_import(c, "img/x", fd, 0, &json, &err), SBX_OK); /* sized */
    close(fd);
    CHECK(strstr(json, "M=POST P=/v1/images?name=img%2Fx CT=1 EXPECT=0 CHUNKED=0 ") != NULL);
    CHECK(strstr(json, want) != NULL);
    free(json);
    int p[2];
    CHECK_OK(pipe(p));
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        FILE *w = fdopen(p[1], "w"), *rf = fopen(path, "r");
        int ch;
        while ((ch = fgetc(rf)) != EOF)
            fputc(ch, w);
        fclose(w);
        _exit(0);
    }
    close(p[1]);
    CHECK_EQ(sbx_image_import(c, "y", p[0], 0, &json, &err), SBX_OK); /* a pipe: chunked */
    close(p[0]);
    waitpid(pid, NULL, 0);
    CHECK(strstr(json, "CHUNKED=1") != NULL);
    CHECK(strstr(json, want) != NULL);
    free(json);
    sbx_client_free(c);
}

/* A /v1/info answer that is not an object: an error naming the endpoint with one endpoint (it
 * was returned as the daemon's info), as in each entry with several. */
TEST(unix_http_info_not_an_object) {
    sbx_client *c = start();
    sbx_err err;
    char *js = NULL;
    CHECK_EQ(sbx_client_info(c, &js, &err), SBX_E_PROTOCOL);
    CHECK(js == NULL);
    CHECK_MSG(strstr(err.message, "not an object for /v1/info") && strstr(err.message, srv_path),
              "message: %s", err.message);
    sbx_client_free(c);
    char hosts[300];
    snprintf(hosts, sizeof(hosts), "unix:%s,unix:%s", srv_path, srv_path);
    CHECK_EQ(sbx_client_new(hosts, &c, &err), SBX_OK);
    CHECK_EQ(sbx_client_info(c, &js, &err), SBX_OK);
    CHECK_MSG(strstr(js, "not an object for /v1/info"), "info: %s", js);
    free(js);
    sbx_client_free(c);
}

TEST(unix_http_nobody_listening) {
    char hosts[300];
    snprintf(hosts, sizeof(hosts), "unix:%s/nothing-here.sock", test_tmpdir());
    sbx_client *c = NULL;
    sbx_err err;
    CHECK_EQ(sbx_client_new(hosts, &c, &err), SBX_OK);
    sbxi_response r = {0};
    CHECK_EQ(req(c, "GET", "/v1/info", NULL, &r, &err), SBX_E_CONNECT);
    CHECK_MSG(strstr(err.message, "No such file or directory") != NULL, "message: %s", err.message);
    free(r.body);
    sbx_client_free(c);
}
