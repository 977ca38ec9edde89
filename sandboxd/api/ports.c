/* Inbound ports (docs/API.md "Ports"): GET/POST /v1/sandboxes/{id}/ports and the HTTP proxy
 * /v1/sandboxes/{id}/ports/{port}/REST. The proxy asks the shim for a socket connected to
 * 127.0.0.1:PORT inside the sandbox's network namespace (shimproto "port_connect"), writes the
 * request to it as HTTP/1.0 with Connection: close (the path escaped again: libmicrohttpd hands
 * it over decoded), reads the whole answer (bounded size and time; interim 1xx heads skipped; a
 * chunked body de-chunked) with a uv_poll on the loop and answers with its status, headers and
 * body. A WebSocket upgrade is sent on as HTTP/1.1; after the server's 101 the client is
 * answered 101 (libmicrohttpd's upgrade) and bytes are relayed both ways on the loop until either
 * side closes; any other answer to it is passed on like a plain one. Nothing here blocks the
 * loop. */
#include "sandboxd/api/api.h"

#include "common/jsonkeys.h"

#include "common/grow.h"
#include "common/macro.h"
#include "common/shimproto.h"
#include "policy/ports.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/shim_client.h"
#include "sandboxd/core/state.h"

#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT_ANSWER_MAX (16u << 20)
#define PORT_CONNECT_WAIT_MS 5000
#define PORT_ANSWER_WAIT_MS 30000

typedef struct port_proxy {
    sd_daemon *d;
    struct port_proxy *next, **pprev; /* d->proxies, until it is being freed */
    sd_request *req;                  /* NULL once answered or gone */
    char sb_id[64];
    unsigned port;
    int fd;
    bool polling, freeing, connected;
    bool head;      /* a HEAD request: its answer has no body whatever its head says */
    bool upgrade;   /* a WebSocket (or other) upgrade: relayed both ways after a 101 */
    bool upgrading; /* the client's 101 is queued: on_upgraded or req_gone comes, once */
    bool cut;       /* a pause came while upgrading: on_upgraded ends it */
    bool relaying;  /* upgraded: bytes go both ways between cfd and fd */
    int cfd;        /* the client's socket once the upgrade hands it over */
    void *urh;
    uv_poll_t poll, cpoll;
    char *c2u;
    size_t c2u_len, c2u_off, c2u_cap;
    uv_timer_t timer;
    int handles;
    const char *conn_list; /* the client's Connection header while build_request runs */
    char *out, *in;
    size_t out_len, out_off, out_cap, in_len, in_cap;
} port_proxy;

/* ---- GET / POST .../ports ---- */

static json_t *ports_json(const sd_sandbox *sb) {
    json_t *a = json_array();
    for (unsigned i = 0; a && i < sb->spec.n_ports; i++) {
        char url[160];
        snprintf(url, sizeof(url), "/v1/sandboxes/%s/ports/%u/", sb->id, sb->spec.ports[i]);
        json_array_append_new(a,
                              json_pack("{s:i,s:s}", "port", (int)sb->spec.ports[i], "url", url));
    }
    return a;
}

static void ports_add(sd_request *req, sd_sandbox *sb) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    static const char *const keys[] = {"port", NULL};
    error_rec err = {0};
    uint16_t p = 0;
    int r = !json_is_object(body) ? error_set(&err, -EINVAL, "body: must be a JSON object")
                                  : jsonkeys_check(body, keys, NULL, &err);
    if (r >= 0)
        r = policy_parse_port(json_object_get(body, "port"), "port", &p, &err);
    json_decref(body);
    if (r < 0)
        return sd_reply_error_rec(req, &err);
    if (sb->state == SD_ENDED)
        return sd_reply_error(req, 409, "sandbox_ended", "sandbox %s has ended", sb->id);
    if (sb->state == SD_PAUSED || sb->pausing) /* (as commands, files, commit and fork) */
        return sd_reply_error(req, 409, "conflict", "sandbox %s is %s", sb->id,
                              sb->pausing ? "pausing" : "paused (resume it first)");
    if (policy_ports_add(sb->spec.ports, &sb->spec.n_ports, p) < 0)
        return sd_reply_error(req, 400, "invalid_argument", "port: at most %d ports are open",
                              POLICY_PORTS_MAX);
    sd_state_save(sb);
    sd_reply_json(req, 200, ports_json(sb));
}

/* ---- the proxy ---- */

static void px_destroy(port_proxy *px) {
    if (px->urh)
        sd_upgrade_close(px->d, px->urh); /* closes cfd */
    free(px->c2u);
    safe_close(px->fd);
    free(px->out);
    free(px->in);
    free(px);
}

static void handle_closed(uv_handle_t *h) {
    port_proxy *px = h->data;
    if (--px->handles > 0 || px->upgrading) /* (upgrading: on_upgraded destroys it) */
        return;
    px_destroy(px);
}

static void px_free(port_proxy *px) {
    if (px->freeing)
        return;
    px->freeing = true;
    if ((*px->pprev = px->next))
        px->next->pprev = px->pprev;
    sd_sandbox *sb = sd_registry_find(px->d, px->sb_id);
    if (sb)
        sd_sandbox_connection(sb, false);
    if (!px->connected && sb && sb->shim)
        sd_shim_cancel(sb->shim, px);
    px->handles = 1 + px->polling + px->relaying;
    uv_close((uv_handle_t *)&px->timer, handle_closed);
    if (px->polling)
        uv_close((uv_handle_t *)&px->poll, handle_closed);
    if (px->relaying)
        uv_close((uv_handle_t *)&px->cpoll, handle_closed);
}

static void req_gone(sd_request *req, void *ud) {
    (void)req;
    port_proxy *px = ud;
    px->req = NULL;
    px->upgrading = false; /* (no on_upgraded comes for a request that went) */
    px_free(px);
}

static sd_request *px_take_req(port_proxy *px) {
    sd_request *req = TAKE_PTR(px->req);
    if (req)
        req->on_close = NULL;
    return req;
}

static void px_fail(port_proxy *px, unsigned status, const char *code, const char *msg) {
    sd_request *req = px_take_req(px);
    if (req)
        sd_reply_error(req, status, code, "port %u of sandbox %s: %s", px->port, px->sb_id, msg);
    px_free(px);
}

#define PORT_HEADERS_MAX 64

/* Headers that stay with the hop, by direction: the request to the port never carries the
 * daemon's token nor WebSocket extensions (the 101 the client gets names none, so the server
 * must not use any); the answer loses its framing and Date, which the daemon writes itself. */
enum { HOP_REQUEST = 1, HOP_ANSWER = 2, HOP_BOTH = HOP_REQUEST | HOP_ANSWER };
static const struct {
    const char *name;
    unsigned dir;
} hop_headers[] = {
    {"Connection", HOP_BOTH},
    {"Keep-Alive", HOP_BOTH},
    {"Proxy-Connection", HOP_BOTH},
    {"Transfer-Encoding", HOP_BOTH},
    {"Content-Length", HOP_BOTH},
    {"Upgrade", HOP_BOTH},
    {"TE", HOP_BOTH},
    {"Trailer", HOP_BOTH},
    {"Authorization", HOP_REQUEST},
    {"Proxy-Authorization", HOP_REQUEST},
    {"Expect", HOP_REQUEST},
    {"Sec-WebSocket-Extensions", HOP_REQUEST},
    {"Date", HOP_ANSWER},
    {"Proxy-Authenticate", HOP_ANSWER},
};

/* Whether the comma-separated list (a Connection header's value; NULL: none) names k[0..n). */
static bool list_names(const char *list, const char *k, size_t n) {
    for (const char *p = list; p && *p;) {
        p += strspn(p, " \t,");
        size_t m = strcspn(p, ","), t = m;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t == n && strncasecmp(p, k, n) == 0)
            return true;
        p += m;
    }
    return false;
}

/* A header that stays with the hop: one of hop_headers, or one the sender's Connection header
 * (conn) names (RFC 9110 7.6.1). */
static bool hop_header(const char *k, size_t n, unsigned dir, const char *conn) {
    for (size_t i = 0; i < ARRAY_SIZE(hop_headers); i++)
        if ((hop_headers[i].dir & dir) && strlen(hop_headers[i].name) == n &&
            strncasecmp(k, hop_headers[i].name, n) == 0)
            return true;
    return list_names(conn, k, n);
}

/* The value of header name in the answer's head (NUL-terminated at its blank line), or "". */
static void head_value(const char *head, const char *name, char *buf, size_t cap) {
    size_t nl = strlen(name);
    buf[0] = 0;
    for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n"))
        if (strncasecmp(l + 2, name, nl) == 0 && l[2 + nl] == ':') {
            const char *v = l + 3 + nl;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(buf, cap, "%.*s", (int)strcspn(v, "\r\n"), v);
            return;
        }
}

/* Split the answer's header lines (head NUL-terminated at its blank line) in place into
 * name, value pairs in hdrs (2 * PORT_HEADERS_MAX + 1 slots), hop-by-hop ones left out. */
static void answer_headers(char *head, const char **hdrs) {
    size_t n = 0;
    char conn[512];
    head_value(head, "Connection", conn, sizeof(conn));
    char *l = strstr(head, "\r\n");
    for (l = l ? l + 2 : NULL; l && *l && n < 2 * PORT_HEADERS_MAX;) {
        char *eol = strstr(l, "\r\n"), *colon = strchr(l, ':');
        if (!eol)
            break;
        *eol = 0;
        if (colon && colon > l && colon < eol &&
            !hop_header(l, (size_t)(colon - l), HOP_ANSWER, conn)) {
            *colon = 0;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            hdrs[n++] = l;
            hdrs[n++] = v;
        }
        l = eol + 2;
    }
    hdrs[n] = NULL;
}

/* The status of the head at in (NUL-terminated), or 0 when it is not an HTTP head. */
static unsigned head_status(const char *in) {
    unsigned status = 0;
    if (sscanf(in, "HTTP/%*d.%*d %u", &status) != 1 || status < 100 || status > 599)
        return 0;
    return status;
}

/* Interim answers (1xx: 100 Continue, 103 Early Hints; an upgrade's 101 is not one) before the
 * final one are for this hop only: their heads are dropped as they come whole. */
static void skip_interim(port_proxy *px) {
    for (;;) {
        char *he = px->in_len ? memmem(px->in, px->in_len, "\r\n\r\n", 4) : NULL;
        unsigned st = he ? head_status(px->in) : 0;
        if (st < 100 || st > 199 || st == 101)
            return;
        size_t off = (size_t)(he + 4 - px->in);
        memmove(px->in, px->in + off, px->in_len - off + 1); /* (with its NUL) */
        px->in_len -= off;
    }
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : isxdigit((unsigned char)c) ? tolower(c) - 'a' + 10 : -1;
}

/* A chunked body p[0..n) de-chunked into out (NULL: only measured; out may be p: the body only
 * shrinks): its length; -EAGAIN while its last chunk (and trailers) have not all come;
 * -EBADMSG when it is not chunked framing. */
static ssize_t dechunk(const char *p, size_t n, char *out) {
    size_t i = 0, len = 0;
    for (;;) {
        const char *eol = memmem(p + i, n - i, "\r\n", 2);
        size_t sz = 0, h = 0;
        for (int v; i + h < n && h < 8 && (v = hex_digit(p[i + h])) >= 0; h++)
            sz = sz * 16 + (size_t)v;
        if (!eol)
            return n - i > 4096 ? -EBADMSG : -EAGAIN;
        if (h == 0 || !p[i + h] || !strchr(";\r \t", p[i + h]))
            return -EBADMSG;
        i = (size_t)(eol + 2 - p);
        for (const char *t; sz == 0; i = (size_t)(t + 2 - p)) /* the trailers, to a blank line */
            if (!(t = memmem(p + i, n - i, "\r\n", 2)) || t == p + i)
                return t ? (ssize_t)len : -EAGAIN;
        if (n - i < sz + 2)
            return -EAGAIN;
        if (memcmp(p + i + sz, "\r\n", 2) != 0)
            return -EBADMSG;
        if (out)
            memmove(out + len, p + i, sz);
        len += sz, i += sz + 2;
    }
}

/* The framing of the answer's body: its head ends at he (the blank line's CRLFCRLF). */
typedef enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_TO_CLOSE } body_kind;

static body_kind body_framing(port_proxy *px, char *he, unsigned long long *ret_len) {
    unsigned st = head_status(px->in);
    if (st < 200 || st == 204 || st == 304 || px->head)
        return BODY_NONE;
    char te[256], cl[32], save = *he;
    *he = 0;
    head_value(px->in, "Transfer-Encoding", te, sizeof(te));
    head_value(px->in, "Content-Length", cl, sizeof(cl));
    *he = save;
    size_t tn = strlen(te);
    while (tn && (te[tn - 1] == ' ' || te[tn - 1] == '\t'))
        tn--;
    if (tn >= 7 && strncasecmp(te + tn - 7, "chunked", 7) == 0) /* (the last coding) */
        return BODY_CHUNKED;
    if (*te || !*cl)
        return BODY_TO_CLOSE;
    *ret_len = strtoull(cl, NULL, 10);
    return BODY_LENGTH;
}

/* The answer is whole: its head and its body as its framing says came (or the connection
 * ended: the caller sees that). */
static bool answer_whole(port_proxy *px, char **ret_head_end) {
    char *he = px->in_len ? memmem(px->in, px->in_len, "\r\n\r\n", 4) : NULL;
    *ret_head_end = he;
    if (!he)
        return false;
    size_t have = px->in_len - (size_t)(he + 4 - px->in);
    unsigned long long cl = 0;
    switch (body_framing(px, he, &cl)) {
    case BODY_NONE:
        return true;
    case BODY_LENGTH:
        return have >= cl;
    case BODY_CHUNKED:
        return dechunk(he + 4, have, NULL) != -EAGAIN;
    default:
        return false;
    }
}

/* The answer read whole: "HTTP/1.x NNN reason\r\nheaders\r\n\r\nbody": its status, headers
 * (less hop-by-hop ones) and body (de-chunked, cut to its Content-Length) go back. */
static void px_answer(port_proxy *px) {
    char *head_end = px->in_len ? memmem(px->in, px->in_len, "\r\n\r\n", 4) : NULL;
    unsigned status = head_end ? head_status(px->in) : 0;
    if (!status)
        return px_fail(px, 502, "port_bad_answer", "the answer is not HTTP");
    if (status < 200)
        return px_fail(px, 502, "port_bad_answer", "no final answer after an interim one");
    size_t off = (size_t)(head_end + 4 - px->in), len = px->in_len - off;
    unsigned long long cl = 0;
    body_kind bk = body_framing(px, head_end, &cl);
    ssize_t n = bk == BODY_CHUNKED ? dechunk(px->in + off, len, px->in + off) : 0;
    if (n < 0)
        return px_fail(px, 502, "port_bad_answer",
                       n == -EAGAIN ? "the chunked answer ended early" : "bad chunked framing");
    len = bk == BODY_CHUNKED              ? (size_t)n
          : bk == BODY_NONE               ? 0
          : bk == BODY_LENGTH && cl < len ? cl
                                          : len;
    head_end[2] = 0; /* the head keeps its last line's CRLF */
    const char *hdrs[2 * PORT_HEADERS_MAX + 1];
    answer_headers(px->in, hdrs);
    char *body = malloc(len ? len : 1);
    if (!body)
        return px_fail(px, 500, "internal", "out of memory");
    memcpy(body, px->in + off, len);
    sd_request *req = px_take_req(px);
    if (req)
        sd_reply_data_headers(req, status, hdrs, body, len);
    else
        free(body);
    px_free(px);
}

/* ---- after an upgrade: bytes both ways (u2c: in[out_off..in_len), c2u: c2u[c2u_off..]) ---- */

static void on_relay(uv_poll_t *h, int status, int events);

static void relay_update(port_proxy *px) {
    if (px->freeing)
        return;
    bool u2c = px->out_off < px->in_len, c2u = px->c2u_off < px->c2u_len;
    int ue = (u2c ? 0 : UV_READABLE) | (c2u ? UV_WRITABLE : 0);
    int ce = (c2u ? 0 : UV_READABLE) | (u2c ? UV_WRITABLE : 0);
    uv_poll_start(&px->poll, ue, on_relay);
    uv_poll_start(&px->cpoll, ce, on_relay);
}

/* Move what is pending to `to`, then read from `from` when nothing is pending. */
static bool relay_step(port_proxy *px, int events, int from, int to, char **buf, size_t *off,
                       size_t *len, size_t *cap) {
    if (*off < *len) {
        ssize_t n = send(to, *buf + *off, *len - *off, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (n > 0)
            *off += (size_t)n;
    }
    if (*off == *len)
        *off = *len = 0;
    if (*len == 0 && (events & UV_READABLE)) {
        if (grow_reserve((void **)buf, cap, 65536, 1) < 0)
            return false;
        ssize_t n = recv(from, *buf, 65536, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return false;
        if (n > 0)
            *len = (size_t)n;
    }
    return true;
}

static void on_relay(uv_poll_t *h, int status, int events) {
    port_proxy *px = h->data;
    if (px->freeing)
        return;
    bool up = h == &px->poll, ok = status >= 0;
    /* readable on one side feeds the other; writable on one side drains what the other sent */
    if (ok && up)
        ok = relay_step(px, events, px->fd, px->cfd, &px->in, &px->out_off, &px->in_len,
                        &px->in_cap) &&
             (!(events & UV_WRITABLE) || relay_step(px, 0, px->cfd, px->fd, &px->c2u, &px->c2u_off,
                                                    &px->c2u_len, &px->c2u_cap));
    else if (ok)
        ok = relay_step(px, events, px->cfd, px->fd, &px->c2u, &px->c2u_off, &px->c2u_len,
                        &px->c2u_cap) &&
             (!(events & UV_WRITABLE) ||
              relay_step(px, 0, px->fd, px->cfd, &px->in, &px->out_off, &px->in_len, &px->in_cap));
    if (!ok)
        return px_free(px); /* either side gone: both go */
    relay_update(px);
}

/* A client over TCP that vanishes without closing (its host gone, a NAT entry dropped) would
 * hold the relay, and with it the sandbox's idle timeout, until the sandbox's lifetime: the
 * kernel probes a silent connection after 60 s and gives up after 6 unanswered probes. */
static void keepalive(int fd) {
    int domain = 0, on = 1, idle = 60, intvl = 10, cnt = 6;
    socklen_t len = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 ||
        (domain != AF_INET && domain != AF_INET6))
        return; /* (a Unix socket's peer closes it when it dies) */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static void on_upgraded(void *ud, int fd, const char *extra, size_t extra_len, void *handle) {
    port_proxy *px = ud;
    px->req = NULL; /* the connection is ours now */
    px->upgrading = false;
    px->cfd = fd;
    px->urh = handle;
    if (px->freeing) { /* its handles are closing (or closed: then it is ours to end) */
        if (px->handles == 0)
            px_destroy(px);
        return;
    }
    if (px->cut)
        return px_free(px);
    if (uv_poll_init(px->d->loop, &px->cpoll, fd) < 0)
        return px_free(px);
    px->cpoll.data = px;
    px->relaying = true;
    keepalive(fd);
    if (extra_len && (grow_reserve((void **)&px->c2u, &px->c2u_cap, extra_len, 1) < 0 ||
                      !memcpy(px->c2u, extra, extra_len)))
        return px_free(px);
    px->c2u_len = extra_len;
    relay_update(px);
}

/* The head of the server's 101: the client is answered 101 with its accept and protocol, then
 * bytes are relayed (what the server sent past its head first). */
static void px_upgrade(port_proxy *px, char *head_end) {
    *head_end = 0;
    char accept[128], proto[256];
    head_value(px->in, "Sec-WebSocket-Accept", accept, sizeof(accept));
    head_value(px->in, "Sec-WebSocket-Protocol", proto, sizeof(proto));
    if (!*accept)
        return px_fail(px, 502, "port_bad_answer", "a 101 without Sec-WebSocket-Accept");
    uv_timer_stop(&px->timer);
    uv_poll_stop(&px->poll);
    size_t off = (size_t)(head_end + 4 - px->in);
    memmove(px->in, px->in + off, px->in_len - off);
    px->in_len -= off;
    px->out_off = 0; /* from here on out_off is the offset of u2c in `in` */
    if (!px->req)
        return px_free(px);
    px->upgrading = true;
    sd_reply_upgrade(px->req, accept, *proto ? proto : NULL, on_upgraded, px);
}

static void on_io(uv_poll_t *h, int status, int events) {
    port_proxy *px = h->data;
    if (px->freeing)
        return;
    if (status < 0)
        return px_fail(px, 502, "port_unreachable", "the connection failed");
    if ((events & UV_WRITABLE) && px->out_off < px->out_len) {
        ssize_t n = send(px->fd, px->out + px->out_off, px->out_len - px->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return px_fail(px, 502, "port_unreachable", "the server closed the connection");
        if (n > 0)
            px->out_off += (size_t)n;
        if (px->out_off == px->out_len) {
            if (!px->upgrade)
                shutdown(px->fd, SHUT_WR);
            uv_poll_start(&px->poll, UV_READABLE | UV_DISCONNECT, on_io);
        }
    }
    if (events & (UV_READABLE | UV_DISCONNECT)) {
        for (;;) {
            if (px->in_len >= PORT_ANSWER_MAX)
                return px_fail(px, 502, "port_answer_too_large", "the answer is over 16 MiB");
            if (grow_reserve((void **)&px->in, &px->in_cap, px->in_len + 65537, 1) < 0)
                return px_fail(px, 500, "internal", "out of memory");
            ssize_t n = recv(px->fd, px->in + px->in_len, 65536, 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            if (n < 0 && px->in_len == 0)
                return px_fail(px, 502, "port_unreachable", "the server reset the connection");
            if (n <= 0) {
                px->in[px->in_len] = 0;
                return px_answer(px);
            }
            px->in_len += (size_t)n;
            px->in[px->in_len] = 0;
            skip_interim(px);
            char *he = NULL;
            bool whole = answer_whole(px, &he);
            if (he && px->upgrade && px->in_len > 12 && strncmp(px->in + 8, " 101", 4) == 0)
                return px_upgrade(px, he);
            if (whole)
                return px_answer(px);
        }
    }
}

static void on_timeout(uv_timer_t *t) {
    port_proxy *px = t->data;
    px_fail(px, 504, "port_timeout",
            px->connected ? "no whole answer in time" : "the connection was not made in time");
}

static int put(port_proxy *px, const char *s, size_t n) {
    if (grow_reserve((void **)&px->out, &px->out_cap, px->out_len + n, 1) < 0)
        return -ENOMEM;
    memcpy(px->out + px->out_len, s, n);
    px->out_len += n;
    return 0;
}

static enum MHD_Result header_cb(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    port_proxy *px = cls;
    if (!hop_header(k, strlen(k), HOP_REQUEST, px->conn_list) && v && !strpbrk(v, "\r\n"))
        if (put(px, k, strlen(k)) < 0 || put(px, ": ", 2) < 0 || put(px, v, strlen(v)) < 0 ||
            put(px, "\r\n", 2) < 0)
            return MHD_NO;
    return MHD_YES;
}

/* The path rest as libmicrohttpd hands it over, decoded, escaped again for the request line:
 * a byte that is not a path character of RFC 3986 (unreserved, sub-delims, ':', '@', '/') goes
 * as %XX, so an encoded space, '?', '%', CR or LF reaches the server encoded as the client sent
 * it, never as request syntax. (An encoded '/' or unreserved byte reaches it decoded.) */
static int put_path(port_proxy *px, const char *rest) {
    _cleanup_free_ char *p = sd_url_path_escape(rest);
    if (!p || put(px, "/", 1) < 0 || put(px, p, strlen(p)) < 0)
        return -ENOMEM;
    return 0;
}

/* The request to the port: METHOD /REST?query HTTP/1.0, its headers less hop-by-hop ones and
 * the daemon's token, Content-Length, Connection: close, the body. A WebSocket upgrade goes as
 * HTTP/1.1 with Upgrade: websocket and Connection: Upgrade. */
static int build_request(port_proxy *px, sd_request *req, const char *rest) {
    _cleanup_free_ char *q = sd_req_query_string(req, NULL, NULL);
    _cleanup_free_ char *line = NULL;
    char cl[64];
    if (!q || put(px, req->method, strlen(req->method)) < 0 || put(px, " ", 1) < 0 ||
        put_path(px, rest) < 0 || asprintf(&line, "%s HTTP/1.%d\r\n", q, px->upgrade) < 0)
        return -ENOMEM;
    if (put(px, line, strlen(line)) < 0)
        return -ENOMEM;
    px->conn_list = sd_req_header(req, "Connection");
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, header_cb, px);
    px->conn_list = NULL;
    int n = px->upgrade
                ? snprintf(cl, sizeof(cl), "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                : snprintf(cl, sizeof(cl), "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                           req->body_len);
    if (put(px, cl, (size_t)n) < 0 || (req->body_len && put(px, req->body, req->body_len) < 0))
        return -ENOMEM;
    return 0;
}

static void on_connected(void *ud, json_t *reply) {
    port_proxy *px = ud;
    if (px->freeing)
        return;
    sd_sandbox *sb = sd_registry_find(px->d, px->sb_id);
    px->connected = true;
    if (!reply)
        return px_fail(px, 502, "port_unreachable", "the sandbox went away");
    if (strcmp(shimproto_type(reply), "connected") != 0) {
        error_rec err = {0};
        int r = shimproto_error_parse(reply, &err);
        char msg[300];
        snprintf(msg, sizeof(msg), "%s%s",
                 r == -ECONNREFUSED ? "nothing listens there (connection refused): " : "",
                 err.message);
        return r == -ETIMEDOUT ? px_fail(px, 504, "port_timeout", msg)
                               : px_fail(px, 502, "port_unreachable", msg);
    }
    px->fd = sb && sb->shim ? sd_shim_take_fd(sb->shim) : -1;
    if (px->fd < 0)
        return px_fail(px, 502, "port_unreachable", "no connection came from the sandbox");
    if (uv_poll_init(px->d->loop, &px->poll, px->fd) < 0)
        return px_fail(px, 500, "internal", "cannot watch the connection");
    px->poll.data = px;
    px->polling = true;
    uv_timer_start(&px->timer, on_timeout, PORT_ANSWER_WAIT_MS, 0);
    uv_poll_start(&px->poll, UV_WRITABLE | UV_READABLE | UV_DISCONNECT, on_io);
}

static void proxy(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *sub) {
    size_t digits = strspn(sub, "0123456789");
    const char *end = sub + digits;
    unsigned long port = digits && digits <= 5 && *sub != '0' ? strtoul(sub, NULL, 10) : 0;
    if (port < 1 || port > 65535 || (*end && *end != '/'))
        return sd_reply_error(req, 400, "invalid_argument", "port: must be an integer 1..65535");
    if (sd_req_query_with_nul(req))
        return sd_reply_error(req, 400, "invalid_argument", "the query holds an encoded NUL");
    if (sb->state == SD_ENDED) /* its ports end with it */
        return sd_reply_error(req, 404, "port_not_open",
                              "sandbox %s has ended: its ports are closed", sb->id);
    if (!policy_ports_has(sb->spec.ports, sb->spec.n_ports, (uint16_t)port))
        return sd_reply_error(req, 404, "port_not_open",
                              "port %lu of sandbox %s is not open (open it at create with "
                              "\"ports\" or with POST .../ports)",
                              port, sb->id);
    if (sb->state != SD_RUNNING || !sb->shim || sb->pausing)
        return sd_reply_error(req, 409, "sandbox_not_running", "sandbox %s is %s", sb->id,
                              sb->pausing ? "pausing" : sd_state_name(sb->state));
    const char *up = sd_req_header(req, "Upgrade");
    if (up && strcasecmp(up, "websocket") != 0)
        return sd_reply_error(req, 400, "invalid_argument",
                              "Upgrade: only websocket upgrades are proxied");
    if (up && req->body_len) /* (it goes unframed: a server that declines would read a request) */
        return sd_reply_error(req, 400, "invalid_argument",
                              "Upgrade: a websocket upgrade carries no body");
    port_proxy *px = calloc(1, sizeof(*px));
    if (!px)
        return sd_reply_error(req, 500, "internal", "out of memory");
    *px = (port_proxy){.d = d,
                       .req = req,
                       .port = (unsigned)port,
                       .fd = -1,
                       .cfd = -1,
                       .upgrade = up != NULL,
                       .head = strcmp(req->method, "HEAD") == 0};
    snprintf(px->sb_id, sizeof(px->sb_id), "%s", sb->id);
    if (build_request(px, req, *end ? end + 1 : "") < 0) {
        free(px->out), free(px);
        return sd_reply_error(req, 500, "internal", "out of memory");
    }
    if ((px->next = d->proxies))
        px->next->pprev = &px->next;
    px->pprev = &d->proxies, d->proxies = px;
    sd_sandbox_connection(sb, true); /* until px_free */
    uv_timer_init(d->loop, &px->timer);
    px->timer.data = px;
    req->on_close = req_gone;
    req->close_ud = px;
    if (sd_shim_request(sb->shim, "port_connect", json_pack("{s:i}", "port", (int)port), NULL, 0,
                        on_connected, px) < 0) {
        px->connected = true;
        return px_fail(px, 502, "port_unreachable", "cannot reach the sandbox's shim");
    }
    uv_timer_start(&px->timer, on_timeout, PORT_CONNECT_WAIT_MS, 0);
}

/* A pause of sb begins: its proxied connections end (a request not yet answered is 502; a
 * WebSocket's client sees its connection close). Each is shut down here, before the shim
 * hears of the pause, so that the server's socket has its end queued before the freeze rather
 * than a peer that never answers again after the resume. */
static void on_pausing(void *ud, sd_sandbox *sb) {
    sd_daemon *d = ud;
    for (port_proxy *px = d->proxies, *next; px; px = next) {
        next = px->next;
        if (strcmp(px->sb_id, sb->id) != 0)
            continue;
        if (px->fd >= 0)
            shutdown(px->fd, SHUT_RDWR);
        if (px->upgrading) /* its client is answered already: ended once it is upgraded */
            px->cut = true;
        else
            px_fail(px, 502, "port_unreachable", "the sandbox is pausing");
    }
}

static const sd_listener listener = {.pausing = on_pausing};

int sd_api_ports_init(sd_daemon *d, error_rec *err) {
    if (sd_listener_add(d, &listener, d) < 0)
        return error_set(err, -ENOSPC, "too many listeners");
    return 0;
}

void sd_api_ports_route(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *rest) {
    if (!*rest || strcmp(rest, "/") == 0) {
        if (strcmp(req->method, "GET") == 0)
            sd_reply_json(req, 200, ports_json(sb));
        else if (strcmp(req->method, "POST") == 0)
            ports_add(req, sb);
        else
            sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                           req->method, req->path);
        return;
    }
    proxy(d, req, sb, rest + 1);
}
