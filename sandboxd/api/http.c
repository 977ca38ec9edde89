/* libmicrohttpd on the libuv loop (see http.h). Each listening socket gets its own MHD daemon in
 * external-epoll mode; the loop polls MHD's epoll fd and runs MHD_run when it is readable or
 * when MHD's timeout expires. A resumed connection does not make the epoll fd readable (MHD
 * signals no resume there in this mode): http_kick runs MHD again at once (inst_run). */
#include "sandboxd/api/http.h"

#include "common/grow.h"
#include "common/jsonkeys.h"
#include "common/macro.h"
#include "common/fdutil.h"
#include "common/timeutil.h"
#include "sandboxd/core/images.h"

#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct http_inst {
    sd_http *http;
    struct MHD_Daemon *mhd;
    uv_poll_t poll;
    uv_timer_t timer;
    bool tcp, active;
    bool kicked;        /* a connection resumed (http_kick) since MHD_run began */
    bool sandboxfusion; /* the --sandboxfusion-listen socket: only those endpoints, no token */
} http_inst;

struct sd_http {
    sd_daemon *d;
    char *tls_cert, *tls_key; /* PEM text for the --tcp listener (kept while it serves) */
    sd_http_handler handler;
    http_inst inst[3]; /* Unix socket, --tcp, --sandboxfusion-listen */
};

static void inst_run(http_inst *in);

static void timer_cb(uv_timer_t *t) {
    inst_run(t->data);
}

static void poll_cb(uv_poll_t *p, int status, int events) {
    inst_run(p->data);
}

/* A connection resumed during this MHD_run (a DELETE's handler answering the create of the
 * sandbox it ended) is served by the next MHD_run, which neither MHD's timeout nor its epoll fd
 * asks for: kicked runs it at once. (The kick's 0 ms timer was restarted here with MHD's
 * timeout: the create was answered by the 1 s fallback, or up to 60 s later with an idle
 * connection open, unless another request came first.) */
static void inst_run(http_inst *in) {
    if (!in->mhd)
        return;
    in->kicked = false;
    MHD_run(in->mhd);
    MHD_UNSIGNED_LONG_LONG to;
    if (in->kicked)
        to = 0;
    else if (MHD_get_timeout(in->mhd, &to) != MHD_YES)
        to = 1000;
    uv_timer_start(&in->timer, timer_cb, MIN(to, 60000), 0);
}

static void http_kick(sd_daemon *d) {
    if (!d->http)
        return;
    for (int i = 0; i < 3; i++)
        if (d->http->inst[i].mhd) {
            d->http->inst[i].kicked = true;
            uv_timer_start(&d->http->inst[i].timer, timer_cb, 0, 0);
        }
}

static void req_resume(sd_request *req) {
    if (req->suspended && !req->closed) {
        req->suspended = false;
        MHD_resume_connection(req->conn);
        http_kick(req->d);
    }
}

const char *sd_req_header(sd_request *req, const char *name) {
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

json_t *sd_req_json(sd_request *req) {
    if (req->body_len == 0)
        return json_object();
    json_error_t je;
    json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        sd_reply_error(req, 400, "invalid_json", "request body is not valid JSON: %s (line %d)",
                       je.text, je.line);
    return j;
}

bool sd_req_no_fields(sd_request *req) {
    static const char *const none[] = {NULL};
    json_t *body = sd_req_json(req);
    if (!body)
        return false;
    error_rec err = {0};
    int r = json_is_object(body) ? jsonkeys_check(body, none, NULL, &err)
                                 : error_set(&err, -EINVAL, "the body must be a JSON object");
    json_decref(body);
    if (r < 0)
        sd_reply_error_rec(req, &err);
    return r >= 0;
}

static void set_response(sd_request *req, unsigned status, struct MHD_Response *resp) {
    if (!resp) {
        status = 500;
        static const char oom[] = "{\"message\":\"out of memory\",\"code\":\"internal\"}";
        resp =
            MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    if (req->retry_after) {
        char s[16];
        snprintf(s, sizeof(s), "%u", req->retry_after);
        MHD_add_response_header(resp, "Retry-After", s);
    }
    req->response = resp;
    req->status = status;
    req->answered = true;
    req_resume(req);
}

void sd_reply_json(sd_request *req, unsigned status, json_t *body) {
    if (req->answered || req->closed) {
        json_decref(body);
        return;
    }
    char *s = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(body);
    size_t n = s ? strlen(s) : 0;
    if (s) {
        s[n] = 0;
        char *t = realloc(s, n + 2);
        if (t) {
            s = t;
            s[n++] = '\n';
        }
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        n, s ? s : (void *)"", s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (r && s)
        MHD_add_response_header(r, "Content-Type", "application/json");
    set_response(req, status, r);
}

/* Messages quote what the client sent (a path, an id) and may be cut at any byte: replace
 * every byte that does not start a well-formed UTF-8 sequence, so the answer stays JSON. */
static void utf8_sanitize(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : *p < 0xc2 ? 0 : *p < 0xe0 ? 2 : *p < 0xf0 ? 3 : *p < 0xf5 ? 4 : 0;
        bool ok = n > 0;
        for (int i = 1; ok && i < n; i++)
            ok = (p[i] & 0xc0) == 0x80;
        if (!ok)
            *p++ = '?';
        else
            p += n;
    }
}

void sd_reply_error(sd_request *req, unsigned status, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_debug("request failed path=%s status=%u code=%s message=\"%s\"", req->path, status, code,
              msg);
    json_t *m = json_string(msg);
    if (!m) {
        utf8_sanitize(msg);
        m = json_string(msg) ?: json_string("(the message is not valid UTF-8)");
    }
    sd_reply_json(req, status, json_pack("{s:o,s:s}", "message", m, "code", code));
}

/* The error codes of the core (and of policy/) as HTTP answers. */
void sd_reply_error_rec(sd_request *req, const error_rec *err) {
    static const struct {
        int code;
        unsigned status;
        const char *name;
    } map[] = {
        {-EINVAL, 400, "invalid_argument"},
        {-ENOENT, 404, "not_found"},
        {-EBUSY, 409, "conflict"},
        {-EAGAIN, 503, "node_full"},
        {-EDQUOT, 507, "insufficient_storage"},
        {-ENODEV, 409, "gpu_unavailable"},                /* GPUs: core/gpu.c */
        {-EPROTONOSUPPORT, 501, "isolation_unavailable"}, /* core/gvisor.c */
        {-EOPNOTSUPP, 501, "unsupported"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(map); i++)
        if (err->code == map[i].code) {
            if (map[i].status == 503)
                req->retry_after = SD_RETRY_AFTER_S;
            sd_reply_error(req, map[i].status, map[i].name, "%s", err->message);
            return;
        }
    sd_reply_error(req, 500, "internal", "%s", err->message);
}

void sd_reply_redirect(sd_request *req, const char *location) {
    if (req->answered || req->closed)
        return;
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (r)
        MHD_add_response_header(r, "Location", location);
    set_response(req, 307, r);
}

void sd_reply_data(sd_request *req, unsigned status, const char *ctype, void *data, size_t len) {
    if (req->answered || req->closed) {
        free(data);
        return;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, data ? data : (void *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r)
        free(data); /* not taken */
    else if (ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    set_response(req, status, r);
}

void sd_reply_data_headers(sd_request *req, unsigned status, const char *const *hdrs, void *data,
                           size_t len) {
    if (req->answered || req->closed) {
        free(data);
        return;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, data ? data : (void *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    for (size_t i = 0; r && hdrs && hdrs[i] && hdrs[i + 1]; i += 2)
        MHD_add_response_header(r, hdrs[i], hdrs[i + 1]);
    set_response(req, status, r);
}

void sd_reply_fd(sd_request *req, const char *ctype, int fd, uint64_t size) {
    if (req->answered || req->closed) {
        safe_close(fd);
        return;
    }
    struct MHD_Response *r = MHD_create_response_from_fd64(size, fd);
    if (!r)
        safe_close(fd);
    else
        MHD_add_response_header(r, "Content-Type", ctype);
    set_response(req, 200, r);
}

static void upgraded_cb(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
                        size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
    sd_request *req = cls;
    req->on_close = NULL; /* the upgraded connection is the handler's now */
    fd_set_nonblock(sock, 1);
    req->upgrade_fn(req->upgrade_ud, sock, extra, extra_len, urh);
}

void sd_reply_upgrade(sd_request *req, const char *accept, const char *protocol, sd_upgrade_fn fn,
                      void *ud) {
    if (req->answered || req->closed)
        return;
    req->upgrade_fn = fn;
    req->upgrade_ud = ud;
    struct MHD_Response *r = MHD_create_response_for_upgrade(upgraded_cb, req);
    if (r) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, "websocket");
        MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
        if (protocol)
            MHD_add_response_header(r, "Sec-WebSocket-Protocol", protocol);
    }
    set_response(req, r ? MHD_HTTP_SWITCHING_PROTOCOLS : 500, r);
}

void sd_upgrade_close(sd_daemon *d, void *handle) {
    MHD_upgrade_action(handle, MHD_UPGRADE_ACTION_CLOSE);
    http_kick(d);
}

typedef struct body_reader {
    sd_body_read_fn read;
    void (*done)(void *ud);
    void *ud;
} body_reader;

static ssize_t body_reader_cb(void *cls, uint64_t pos, char *buf, size_t max) {
    body_reader *b = cls;
    size_t n = max ? b->read(b->ud, buf, max) : 0;
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void body_reader_free(void *cls) {
    body_reader *b = cls;
    b->done(b->ud);
    free(b);
}

void sd_reply_reader(sd_request *req, unsigned status, const char *ctype, sd_body_read_fn read,
                     void (*done)(void *ud), void *ud) {
    body_reader *b = req->answered || req->closed ? NULL : malloc(sizeof(*b));
    if (!b) {
        done(ud);
        if (!req->answered && !req->closed)
            set_response(req, 500, NULL);
        return;
    }
    *b = (body_reader){.read = read, .done = done, .ud = ud};
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 << 10,
                                                               body_reader_cb, b, body_reader_free);
    if (!r)
        body_reader_free(b);
    else
        MHD_add_response_header(r, "Content-Type", ctype);
    set_response(req, status, r);
}

static void watch_closed(uv_handle_t *h) {
    free(h);
}

static void unwatch(sd_request *req) {
    if (req->gone_watch)
        uv_close((uv_handle_t *)TAKE_PTR(req->gone_watch), watch_closed);
}

/* A suspended connection is not polled by MHD: a client that hangs up while its stream has
 * nothing to send (a command past its max_output) would go unnoticed, and its command's output
 * read for nobody. Resume it on the hang-up so that MHD ends it (completed_cb tells the owner). */
static void gone_cb(uv_poll_t *p, int status, int events) {
    sd_request *req = p->data;
    unwatch(req);
    req->peer_gone = true;
    req_resume(req);
}

static void watch_hangup(sd_request *req) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (req->gone_watch || !ci || !(req->gone_watch = calloc(1, sizeof(uv_poll_t))))
        return;
    req->gone_watch->data = req;
    if (uv_poll_init_socket(req->d->loop, req->gone_watch, ci->connect_fd) < 0) {
        free(TAKE_PTR(req->gone_watch));
        return;
    }
    uv_poll_start(req->gone_watch, UV_DISCONNECT, gone_cb);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    sd_request *req = cls;
    unwatch(req);
    if (req->peer_gone)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (req->slen > 0) {
        size_t n = MIN(max, req->slen);
        memcpy(buf, req->sbuf, n);
        memmove(req->sbuf, req->sbuf + n, req->slen - n);
        req->slen -= n;
        if (req->on_drain && req->slen <= SD_STREAM_LOW)
            req->on_drain(req, req->drain_ud);
        return (ssize_t)n;
    }
    if (req->stream_done)
        return req->stream_abort ? MHD_CONTENT_READER_END_WITH_ERROR
                                 : MHD_CONTENT_READER_END_OF_STREAM;
    req->suspended = true;
    MHD_suspend_connection(req->conn);
    watch_hangup(req);
    return 0;
}

void sd_stream_begin(sd_request *req, const char *ctype) {
    if (req->answered || req->closed)
        return;
    req->ctype = strdup(ctype);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, req, NULL);
    if (r && req->ctype)
        MHD_add_response_header(r, "Content-Type", req->ctype);
    req->stream = true;
    set_response(req, 200, r);
}

void sd_stream_write(sd_request *req, const char *data, size_t len) {
    if (!req->stream || req->closed || req->stream_done)
        return;
    if (grow_reserve((void **)&req->sbuf, &req->scap, req->slen + len, 1) < 0)
        return;
    memcpy(req->sbuf + req->slen, data, len);
    req->slen += len;
    req_resume(req);
}

bool sd_stream_full(const sd_request *req) {
    return req->stream && !req->closed && req->slen >= SD_STREAM_HIGH;
}

void sd_stream_end(sd_request *req) {
    if (!req->stream || req->closed)
        return;
    req->stream_done = true;
    req_resume(req);
}

void sd_stream_abort(sd_request *req) {
    if (req->stream && !req->closed)
        req->stream_abort = true;
    sd_stream_end(req);
}

/* The SandboxFusion endpoints (api/sandboxfusion.c) take files as base64 in their body. */
static bool sf_body(const char *url) {
    return strcmp(url, "/run_code") == 0 || strcmp(url, "/run_jupyter") == 0;
}

static bool token_eq(const char *h, const char *tok) {
    if (!tok || !*tok)
        return false;
    size_t a = strlen(h), b = strlen(tok);
    unsigned char diff = a != b;
    for (size_t i = 0; i < b; i++)
        diff |= (unsigned char)(tok[i] ^ (i < a ? h[i] : 0));
    return diff == 0;
}

/* The request carries the daemon's --token or the fleet's --fleet-token (docs/FLEET.md): every
 * TCP request needs one. */
static bool token_ok(sd_daemon *d, sd_request *req) {
    const char *h = sd_req_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) /* (the scheme: any case, RFC 9110) */
        return false;
    bool a = token_eq(h + 7, d->cfg.token), b = token_eq(h + 7, d->cfg.fleet_token);
    return a | b;
}

/* PUT /v1/sandboxes/{id}/files: the body is spooled to disk, never held in memory. */
static bool files_put(const char *method, const char *url) {
    const char *pre = "/v1/sandboxes/", *id = url + strlen(pre);
    if (strcmp(method, "PUT") != 0 || strncmp(url, pre, strlen(pre)) != 0)
        return false;
    const char *slash = strchr(id, '/');
    return slash && slash > id && strcmp(slash, "/files") == 0;
}

/* An unlinked file in the state directory for a body (nothing to remove, even after a crash). */
static int spool_open(sd_daemon *d) {
    int fd = open(d->cfg.state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
        return fd >= 0 ? fd : -errno;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/upload-XXXXXX", d->cfg.state_dir);
    if ((fd = mkostemp(p, O_CLOEXEC)) < 0)
        return -errno;
    unlink(p);
    return fd;
}

static void upload_open(sd_request *req, int fd) {
    if (fd >= 0)
        req->upload_fd = fd;
    else
        req->upload_err = fd;
}

/* Bodies are held in memory up to SD_BODY_MAX (SandboxFusion's, SD_SF_BODY_MAX); only the two
 * uploads, which go to disk, may be larger. A TCP request without a valid token is answered 401
 * before its body is read (access_cb): it gets no upload file and no upload's limit. */
static void body_limit(sd_request *req, const char *method, const char *url) {
    req->body_max = sf_body(url) ? SD_SF_BODY_MAX : SD_BODY_MAX;
    uint64_t max = 0;
    if (req->sandboxfusion || req->unauthorized)
        return; /* neither upload is served here */
    if (strcmp(method, "POST") == 0 && strcmp(url, "/v1/images") == 0) {
        upload_open(req, sd_images_upload_open(req->d, &req->upload_path, &max));
        if (req->upload_fd >= 0)
            req->body_max = max;
    } else if (files_put(method, url)) {
        req->body_max = SD_UPLOAD_MAX;
        upload_open(req, spool_open(req->d));
    }
}

static sd_request *req_new(http_inst *in, struct MHD_Connection *conn, const char *url,
                           const char *method) {
    sd_request *req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->d = in->http->d;
    req->conn = conn;
    req->method = method;
    req->path = strdup(url);
    req->tcp = in->tcp;
    req->sandboxfusion = in->sandboxfusion;
    req->start_us = now_mono_us();
    req->upload_fd = -1;
    req->unauthorized = req->tcp && !token_ok(req->d, req);
    body_limit(req, method, url);
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > req->body_max)
        req->too_large = true;
    req->d->active_requests++;
    return req;
}

static void req_body(sd_request *req, const char *data, size_t len) {
    if (req->upload_fd >= 0 || req->upload_err) { /* streamed to the upload file */
        if (req->too_large || req->upload_err || req->body_len + len > req->body_max) {
            req->too_large = !req->upload_err;
            return;
        }
        int r = fd_write_all(req->upload_fd, data, len);
        if (r < 0) {
            req->upload_err = r;
            req->upload_fd = safe_close(req->upload_fd);
        }
        req->body_len += len;
        return;
    }
    if (req->too_large || req->body_len + len > req->body_max) {
        req->too_large = true;
        return;
    }
    if (grow_reserve((void **)&req->body, &req->body_cap, req->body_len + len + 1, 1) < 0) {
        req->too_large = true;
        return;
    }
    memcpy(req->body + req->body_len, data, len);
    req->body_len += len;
    req->body[req->body_len] = 0;
}

static enum MHD_Result queue_answer(sd_request *req) {
    struct MHD_Response *r = req->response;
    req->response = NULL;
    enum MHD_Result ret = MHD_queue_response(req->conn, req->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Answered before the body is read (libmicrohttpd then reads no body and closes the
 * connection): a framing error, a TCP request without a valid token (nothing of an
 * unauthenticated client's body is held), a Content-Length over the route's limit. */
static bool refused_early(sd_request *req, const char *version) {
    char msg[192];
    if (sd_http_framing_error(req->conn, version, msg, sizeof(msg)))
        sd_reply_error(req, 400, "invalid_argument", "%s", msg);
    else if (req->unauthorized)
        sd_reply_error(req, 401, "unauthorized", "a valid bearer token is required");
    else if (req->too_large)
        sd_reply_error(req, 413, "too_large", "request body is larger than %zu bytes",
                       req->body_max);
    else
        return false;
    req->dispatched = req->early = true;
    if (req->response) /* (for a GET too: it lingers, sd_http_linger) */
        MHD_add_response_header(req->response, "Connection", "close");
    return true;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
    http_inst *in = cls;
    sd_request *req = *con_cls;
    if (!req) {
        *con_cls = req = req_new(in, conn, url, method);
        if (!req)
            return MHD_NO;
        return refused_early(req, version) ? queue_answer(req) : MHD_YES;
    }
    if (*upload_data_size) {
        if (!req->dispatched) /* (nothing is kept after an answer) */
            req_body(req, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!req->dispatched) {
        req->dispatched = true;
        if (req->too_large)
            sd_reply_error(req, 413, "too_large", "request body is larger than %zu bytes",
                           req->body_max);
        else if (sd_req_query_with_nul(req))
            sd_reply_error(req, 400, "invalid_argument", "%s: must not contain a NUL byte",
                           sd_req_query_with_nul(req));
        else if (req->d->active_requests > SD_MAX_REQUESTS)
            sd_reply_error(req, 429, "too_many_requests", "too many concurrent requests");
        else
            req->d->http->handler(req->d, req);
    }
    if (req->response)
        return queue_answer(req);
    if (!req->answered) {
        req->suspended = true;
        MHD_suspend_connection(conn);
    }
    return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    sd_request *req = *con_cls;
    if (!req)
        return;
    req->closed = true;
    unwatch(req);
    if (req->on_close)
        req->on_close(req, req->close_ud);
    log_debug("request method=%s path=%s status=%u duration_ms=%.3f", req->method, req->path,
              req->status, (double)(now_mono_us() - req->start_us) / 1000.0);
    req->d->active_requests--;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (req->early && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && ci)
        sd_http_linger(req->d, ci->connect_fd);
    safe_close(req->upload_fd);
    if (req->upload_path)
        unlink(req->upload_path);
    free(req->upload_path);
    if (req->response)
        MHD_destroy_response(req->response);
    free(req->path);
    free(req->body);
    free(req->sbuf);
    free(req->ctype);
    free(req);
    *con_cls = NULL;
}

static void mhd_logger(void *cls, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = 0;
    log_debug("libmicrohttpd: %s", buf);
}

/* An idle connection costs one descriptor and a little memory, nothing else: allow many (half
 * the descriptor limit, the rest is for sandboxes and commands), so that clients holding
 * thousands of connections open cannot lock others out. Requests in flight are capped
 * separately (SD_MAX_REQUESTS, 429). */
static unsigned connection_limit(void) {
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur / 2 : 0;
    if (n > 65536)
        n = 65536;
    return n < SD_MAX_REQUESTS + 64 ? SD_MAX_REQUESTS + 64 : (unsigned)n;
}

/* --tls-cert/--tls-key: the PEM files' text (libmicrohttpd keeps pointers to it). */
static int tls_load(sd_daemon *d, error_rec *err) {
    sd_http *h = d->http;
    size_t n;
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return error_set(err, -ENOTSUP,
                         "--tls-cert: this libmicrohttpd is built without TLS (GnuTLS)");
    int r = file_read_all(d->cfg.tls_cert, 1u << 20, &h->tls_cert, &n);
    if (r < 0)
        return error_set_errno(err, r, "--tls-cert %s", d->cfg.tls_cert);
    if ((r = file_read_all(d->cfg.tls_key, 1u << 20, &h->tls_key, &n)) < 0)
        return error_set_errno(err, r, "--tls-key %s", d->cfg.tls_key);
    return 0;
}

/* GnuTLS's defaults less TLS 1.0 and 1.1 (deprecated, RFC 8996): TLS 1.2 and 1.3 only. */
#define TLS_PRIORITIES "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1"

static struct MHD_Daemon *mhd_start(sd_http *h, http_inst *in, int fd, bool tls) {
    unsigned flags =
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
    if (tls)
        return MHD_start_daemon(
            flags | MHD_USE_TLS, 0, NULL, NULL, access_cb, in, MHD_OPTION_EXTERNAL_LOGGER,
            mhd_logger, NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
            completed_cb, in, MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_HTTPS_MEM_CERT, h->tls_cert,
            MHD_OPTION_HTTPS_MEM_KEY, h->tls_key, MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES,
            MHD_OPTION_END);
    return MHD_start_daemon(flags, 0, NULL, NULL, access_cb, in, MHD_OPTION_EXTERNAL_LOGGER,
                            mhd_logger, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed_cb, in,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
}

static int inst_start(sd_daemon *d, http_inst *in, int fd, bool tcp, error_rec *err) {
    in->http = d->http;
    in->tcp = tcp;
    bool tls = tcp && d->cfg.tls_cert;
    int r;
    if (tls && (r = tls_load(d, err)) < 0)
        return r;
    in->mhd = mhd_start(d->http, in, fd, tls);
    if (!in->mhd)
        return error_set(err, -EIO, "libmicrohttpd failed to start on fd %d", fd);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(in->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info)
        return error_set(err, -EIO, "libmicrohttpd has no epoll fd");
    uv_poll_init(d->loop, &in->poll, info->epoll_fd);
    in->poll.data = in;
    uv_poll_start(&in->poll, UV_READABLE, poll_cb);
    uv_timer_init(d->loop, &in->timer);
    in->timer.data = in;
    in->active = true;
    inst_run(in);
    return 0;
}

int sd_http_start(sd_daemon *d, int unix_fd, int tcp_fd, sd_http_handler handler, error_rec *err) {
    d->http = calloc(1, sizeof(*d->http));
    if (!d->http)
        return error_set(err, -ENOMEM, "out of memory");
    d->http->d = d;
    d->http->handler = handler;
    int r = inst_start(d, &d->http->inst[0], unix_fd, false, err);
    if (r >= 0 && tcp_fd >= 0)
        r = inst_start(d, &d->http->inst[1], tcp_fd, true, err);
    return r;
}

int sd_http_start_sandboxfusion(sd_daemon *d, int fd, error_rec *err) {
    d->http->inst[2].sandboxfusion = true;
    return inst_start(d, &d->http->inst[2], fd, false, err);
}

void sd_http_stop(sd_daemon *d) {
    if (!d->http)
        return;
    for (int i = 0; i < 3; i++) {
        http_inst *in = &d->http->inst[i];
        if (!in->active)
            continue;
        for (int k = 0; k < 3; k++) /* answers already given (sd_sf_done's) go out, not lost */
            MHD_run(in->mhd);
        uv_poll_stop(&in->poll);
        uv_timer_stop(&in->timer);
        int fd = MHD_quiesce_daemon(in->mhd);
        safe_close(fd);
    }
}
