/* libsbx's attached processes: the WebSocket stream to one command (upgrade, the first message
 * with the exec body, stdin/stdout/stderr channels, control messages, ping/pong, close) as a
 * non-blocking state machine over the socket, and the synchronous API on it (sbx_process_*,
 * a poll loop). The frame codec is ws.c; the async form is process_async.c. */
#include "client/lib/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Largest message taken from the daemon (output frames are far smaller). */
#define MAX_MESSAGE (16u << 20)

void sbx_process_opts_init(sbx_process_opts *o) {
    memset(o, 0, sizeof(*o));
}

char *sbxi_process_body(const sbx_exec_opts *exec, const sbx_process_opts *po, bool background,
                        bool strip_stdin, sbx_err *err) {
    if (po && po->tty && ((po->rows && (po->rows > 1000)) || (po->cols && po->cols > 1000))) {
        sbxi_err_set(err, SBX_E_INVALID, 0, "", "terminal size must be 1..1000 each");
        return NULL;
    }
    sbx_exec_opts e = *exec;
    if (strip_stdin)
        e.stdin_data = NULL, e.stdin_len = 0;
    _cleanup_free_ char *base = sbxi_exec_body(&e, err);
    if (!base)
        return NULL;
    json_t *o = json_loads(base, 0, NULL);
    if (!o) {
        sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
        return NULL;
    }
    if (po && po->tty) {
        json_object_set_new(o, "tty", json_true());
        if (po->rows || po->cols)
            json_object_set_new(o, "tty_size",
                                json_pack("{sIsI}", "rows", (json_int_t)(po->rows ? po->rows : 24),
                                          "cols", (json_int_t)(po->cols ? po->cols : 80)));
        if (po->term)
            json_object_set_new(o, "term", json_string(po->term));
    }
    if (background)
        json_object_set_new(o, "background", json_true());
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return s;
}

/* ---- the state machine ---- */
static sbx_code proc_fail(sbx_process *p, sbx_code code, long status, const char *api,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static sbx_code proc_fail(sbx_process *p, sbx_code code, long status, const char *api,
                          const char *fmt, ...) {
    if (!p->failed) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        p->failed = true;
        sbxi_err_set(&p->err, code, status, api, "%s", msg);
    }
    bool was_done = p->state == SBXI_PROC_DONE;
    p->state = SBXI_PROC_DONE;
    if (!was_done && p->hook)
        p->hook(p, SBXI_PROC_EV_DONE);
    return p->err.code;
}

static void proc_done(sbx_process *p) {
    if (p->state == SBXI_PROC_DONE)
        return;
    p->state = SBXI_PROC_DONE;
    if (p->hook)
        p->hook(p, SBXI_PROC_EV_DONE);
}

static int queue_control(sbx_process *p, json_t *msg) {
    char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    int r = s ? sbxi_ws_client_frame(&p->out, SBXI_WS_TEXT, s, strlen(s), NULL, 0) : -ENOMEM;
    free(s);
    if (r == 0 && p->hook)
        p->hook(p, SBXI_PROC_EV_QUEUED);
    return r;
}

static void on_text(sbx_process *p, const uint8_t *data, size_t len) {
    json_t *o = json_loadb((const char *)data, len, 0, NULL);
    const char *type = json_string_value(json_object_get(o, "type"));
    if (!type) {
        /* not ours: ignore (forward compatible) */
    } else if (strcmp(type, "start") == 0) {
        json_t *pid = json_object_get(o, "pid");
        p->pid = json_is_integer(pid) ? (long)json_integer_value(pid) : p->pid;
        if (p->state == SBXI_PROC_STARTING) {
            p->state = SBXI_PROC_RUNNING;
            if (p->hook)
                p->hook(p, SBXI_PROC_EV_STARTED);
        }
    } else if (strcmp(type, "exit") == 0) {
        const char *why = json_string_value(json_object_get(o, "reason"));
        const char *m = json_string_value(json_object_get(o, "message"));
        if (why && strcmp(why, "error") == 0)
            snprintf(p->exit_error, sizeof(p->exit_error), "%s",
                     m && *m ? m : "the command's end is not known (the daemon said \"error\")");
        sbx_exec_result r = {0};
        if (sbxi_exec_status_fill(o, &r, &p->err) == SBX_OK) {
            p->result = r;
            p->got_exit = true;
        }
    } else if (strcmp(type, "error") == 0) {
        const char *m = json_string_value(json_object_get(o, "message"));
        const char *c = json_string_value(json_object_get(o, "code"));
        snprintf(p->last_error, sizeof(p->last_error), "%s: %s", c ? c : "error",
                 m ? m : "(no message)");
        if (p->state == SBXI_PROC_STARTING) { /* the command did not start */
            c = c ? c : ""; /* the class a plain exec's answer has (pids_limit: 409) */
            proc_fail(p, sbxi_code_from_status(0, c), 0, c, "%s",
                      m ? m : "the daemon refused the command");
        }
    }
    json_decref(o);
}

static int on_message(void *ud, int op, const uint8_t *data, size_t len) {
    sbx_process *p = ud;
    switch (op) {
    case SBXI_WS_BINARY:
        if (len > 1 && p->on_output && (data[0] == 1 || data[0] == 2))
            p->on_output(p->userdata, data[0] == 2 ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT,
                         (const char *)data + 1, len - 1);
        break;
    case SBXI_WS_TEXT:
        on_text(p, data, len);
        break;
    case SBXI_WS_PING:
        if (sbxi_ws_client_frame(&p->out, SBXI_WS_PONG, data, len, NULL, 0) < 0)
            return -ENOMEM;
        break;
    case SBXI_WS_CLOSE:
        if (!p->sent_close) {
            uint16_t code = len >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : SBXI_WS_NORMAL;
            sbxi_ws_close_frame(&p->out, code, NULL, true);
            p->sent_close = true;
        }
        if (!p->got_exit && len > 2 && !p->last_error[0])
            snprintf(p->last_error, sizeof(p->last_error), "closed: %.*s", (int)(len - 2),
                     (const char *)data + 2);
        break;
    default: /* pong */
        break;
    }
    return 0;
}

static const sbxi_endpoint *proc_ep(const sbx_process *p) {
    return &p->client->eps[p->ep];
}

/* The upgrade request for path to host, at the front of out (before what waits there). */
static int queue_upgrade(sbx_process *p, const char *path, const char *host, int host_len) {
    _cleanup_free_ char *req = NULL;
    const char *b = p->bearer;
    int n = asprintf(&req,
                     "GET %s HTTP/1.1\r\nHost: %.*s\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v1.sandboxd\r\n"
                     "%s%s%s\r\n",
                     path, host_len, host, p->key, b ? "Authorization: Bearer " : "", b ? b : "",
                     b ? "\r\n" : "");
    sbxi_buf nb = {0};
    /* an older request's unsent rest is dropped; frames queued behind it stay */
    size_t skip = p->hs_left, rest = sbxi_buf_pending(&p->out) - skip;
    if (n < 0 || sbxi_buf_append(&nb, req, (size_t)n) < 0 ||
        (rest && sbxi_buf_append(&nb, p->out.data + p->out.off + skip, rest) < 0)) {
        sbxi_buf_free(&nb);
        return -ENOMEM;
    }
    sbxi_buf_free(&p->out);
    p->out = nb;
    p->hs_left = (size_t)n;
    return 0;
}

/* A fleet node answers 307 for a sandbox another node holds (docs/FLEET.md): the upgrade goes
 * again to the Location on a new connection, with the token, as libcurl follows plain requests
 * (http.c). The socket keeps its descriptor number (the caller's poll or uv_poll watches it). */
static sbx_code follow(sbx_process *p, const char *location) {
    const sbxi_endpoint *ep = proc_ep(p);
    if (p->redirects++ >= 3)
        return proc_fail(p, SBX_E_PROTOCOL, 0, "", "too many redirects (last to %s)", location);
    if (strncmp(location, "https://", 8) == 0)
        return proc_fail(p, SBX_E_INVALID, 0, "",
                         "attached processes over https:// are not supported yet (%s redirected "
                         "to %s)",
                         ep->display, location);
    const char *host = location + 7, *path = host + strcspn(host, "/?#");
    if (strncmp(location, "http://", 7) != 0 || *path != '/' || path == host)
        return proc_fail(p, SBX_E_PROTOCOL, 0, "", "%s redirected to \"%s\", not an http:// URL",
                         ep->display, location);
    int fd = sbxi_conn_open(NULL, location);
    if (fd < 0)
        return proc_fail(
            p, SBX_E_NODE_UNAVAILABLE, 0, "node_unavailable",
            "the node that holds it (%.180s, where %s redirected) is not answering: %s", location,
            ep->display, strerror(-fd));
    if (p->hook)
        p->hook(p, SBXI_PROC_EV_RECONNECT);
    int r = dup3(fd, p->fd, O_CLOEXEC) < 0 ? negative_errno() : 0;
    safe_close(fd);
    if (r < 0)
        return proc_fail(p, SBX_E_IO, 0, "", "following the redirect: %s", strerror(-r));
    sbxi_buf_free(&p->head);
    if (queue_upgrade(p, path, host, (int)(path - host)) < 0)
        return proc_fail(p, SBX_E_NOMEM, 0, "", "%s", "out of memory");
    return SBX_OK;
}

static bool is_redirect(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* The answer's head is complete: upgraded, or a refusal whose body we may still need. */
static sbx_code on_head(sbx_process *p) {
    sbxi_ws_answer a;
    int r = sbxi_ws_answer_parse((const char *)p->head.data, p->head.len, p->key, &a);
    if (r < 0)
        return proc_fail(p, SBX_E_PROTOCOL, 0, "", "%s", "the daemon's answer is not HTTP");
    if (r == 0)
        return SBX_OK;
    if (a.status == 101 && !a.upgraded)
        return proc_fail(p, SBX_E_PROTOCOL, 101, "", "bad WebSocket upgrade: %s", a.why);
    if (is_redirect(a.status) && a.location[0] && !proc_ep(p)->unix_path)
        return follow(p, a.location); /* (a unix socket's daemon is not followed, as http.c) */
    if (a.status != 101) {
        size_t have = p->head.len - a.header_len;
        if (a.content_length > 0 && have < (size_t)a.content_length)
            return SBX_OK; /* the error body is still coming */
        sbxi_response resp = {
            .status = a.status, .body = (char *)p->head.data + a.header_len, .len = have};
        snprintf(resp.content_type, sizeof(resp.content_type), "%s", a.content_type);
        sbx_err e;
        sbx_code code = sbxi_err_from_response(proc_ep(p), &resp, &e);
        if (code == SBX_OK)
            code = SBX_E_PROTOCOL, snprintf(e.message, sizeof(e.message), "no upgrade");
        return proc_fail(p, code, a.status, e.api_code, "%s", e.message);
    }
    p->state = p->expect_start ? SBXI_PROC_STARTING : SBXI_PROC_RUNNING;
    if (p->first_msg && sbxi_ws_client_frame(&p->out, SBXI_WS_TEXT, p->first_msg,
                                             strlen(p->first_msg), NULL, 0) < 0)
        return proc_fail(p, SBX_E_NOMEM, 0, "", "%s", "out of memory");
    if (!p->expect_start && p->hook)
        p->hook(p, SBXI_PROC_EV_STARTED);
    size_t rest = p->head.len - a.header_len;
    if (rest && sbxi_ws_parse(&p->parser, p->head.data + a.header_len, rest) < 0)
        return proc_fail(p, SBX_E_PROTOCOL, 101, "", "bad WebSocket stream: %s", p->parser.error);
    sbxi_buf_free(&p->head);
    return SBX_OK;
}

static sbx_code on_eof(sbx_process *p) {
    if (p->state == SBXI_PROC_HANDSHAKE)
        return proc_fail(p, SBX_E_PROTOCOL, 0, "", "%s",
                         "the daemon closed the connection during the upgrade");
    if (!p->got_exit && p->state != SBXI_PROC_DONE) {
        if (p->state == SBXI_PROC_STARTING || !p->sent_close)
            return proc_fail(p, SBX_E_IO, 0, "", "the stream ended without an exit record%s%s",
                             p->last_error[0] ? ": " : "", p->last_error);
    }
    proc_done(p);
    return SBX_OK;
}

static sbx_code do_read(sbx_process *p) {
    uint8_t buf[65536];
    for (int round = 0; round < 16 && p->state != SBXI_PROC_DONE; round++) {
        ssize_t n = recv(p->fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return SBX_OK;
        if (n < 0 && errno != ECONNRESET)
            return proc_fail(p, SBX_E_IO, 0, "", "reading the stream: %s", strerror(errno));
        if (n <= 0)
            return on_eof(p);
        if (p->state == SBXI_PROC_HANDSHAKE) {
            if (sbxi_buf_append(&p->head, buf, (size_t)n) < 0)
                return proc_fail(p, SBX_E_NOMEM, 0, "", "%s", "out of memory");
            sbx_code rc = on_head(p);
            if (rc != SBX_OK)
                return rc;
            continue;
        }
        if (sbxi_ws_parse(&p->parser, buf, (size_t)n) < 0)
            return proc_fail(p, SBX_E_PROTOCOL, 101, "", "bad WebSocket stream: %s",
                             p->parser.error);
        if (p->got_exit && p->sent_close && sbxi_buf_pending(&p->out) == 0)
            break;
    }
    return SBX_OK;
}

/* Bytes of out that may go now: during the upgrade only the request (frames wait for it). */
static size_t sendable(const sbx_process *p) {
    size_t n = sbxi_buf_pending(&p->out);
    return p->state == SBXI_PROC_HANDSHAKE && n > p->hs_left ? p->hs_left : n;
}

static sbx_code do_write(sbx_process *p) {
    while (sendable(p)) {
        ssize_t n = send(p->fd, p->out.data + p->out.off, sendable(p), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return SBX_OK;
        if (n < 0) {
            if (p->got_exit || errno == EPIPE || errno == ECONNRESET) {
                p->out.off = p->out.len = 0; /* the daemon is gone; reading tells the rest */
                return SBX_OK;
            }
            return proc_fail(p, SBX_E_IO, 0, "", "writing the stream: %s", strerror(errno));
        }
        sbxi_buf_consume(&p->out, (size_t)n);
        p->hs_left -= (size_t)n < p->hs_left ? (size_t)n : p->hs_left;
    }
    return SBX_OK;
}

sbx_code sbxi_process_io(sbx_process *p, short revents) {
    if (p->state == SBXI_PROC_DONE)
        return p->failed ? p->err.code : SBX_OK;
    sbx_code rc = SBX_OK;
    if (revents & POLLOUT)
        rc = do_write(p);
    if (rc == SBX_OK && (revents & (POLLIN | POLLHUP | POLLERR)))
        rc = do_read(p);
    if (rc == SBX_OK && p->state != SBXI_PROC_DONE && sendable(p))
        rc = do_write(p); /* pongs, the first message, a redirected request */
    if (rc == SBX_OK && p->got_exit && p->state != SBXI_PROC_DONE && p->sent_close)
        proc_done(p); /* exit record and close: nothing more to wait for */
    return rc;
}

short sbxi_process_events(const sbx_process *p) {
    if (p->state == SBXI_PROC_DONE)
        return 0;
    return (short)(POLLIN | (sendable(p) ? POLLOUT : 0));
}

sbx_code sbxi_process_open(sbx_sandbox *sb, const char *path, char *first_msg,
                           sbx_output_cb on_output, void *userdata, sbx_process **ret,
                           sbx_err *err) {
    _cleanup_free_ char *msg = first_msg;
    const sbxi_endpoint *ep = &sb->client->eps[sb->ep];
    sbx_process *p = calloc(1, sizeof(*p));
    if (!p)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    p->client = sb->client;
    p->ep = sb->ep;
    p->fd = -1;
    p->pid = -1;
    p->on_output = on_output;
    p->userdata = userdata;
    sbxi_ws_parser_init(&p->parser, MAX_MESSAGE, on_message, p);
    p->parser.forbid_masked = true;
    int fd = sbxi_ws_key(p->key) < 0 ? -EIO : sbxi_conn_open(ep->unix_path, ep->base_url);
    if (fd < 0) {
        sbxi_process_release(p);
        if (fd == -EPROTONOSUPPORT)
            return sbxi_err_set(err, SBX_E_INVALID, 0, "",
                                "attached processes over https:// are not supported yet (%s)",
                                ep->display);
        return sbxi_err_set(err, SBX_E_CONNECT, 0, "", "cannot reach sandboxd at %s: %s",
                            ep->display, strerror(-fd));
    }
    p->fd = fd;
    const char *bearer = sbxi_bearer(sb->client, ep);
    const char *host = ep->unix_path ? "localhost" : ep->base_url + strcspn(ep->base_url, "/") + 2;
    if ((bearer && !(p->bearer = strdup(bearer))) ||
        queue_upgrade(p, path, host, (int)strcspn(host, "/?#")) < 0) {
        sbxi_process_release(p);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    }
    p->first_msg = TAKE_PTR(msg);
    p->expect_start = p->first_msg != NULL;
    *ret = p;
    return SBX_OK;
}

void sbxi_process_release(sbx_process *p) {
    if (!p)
        return;
    safe_close(p->fd);
    sbxi_buf_free(&p->out);
    sbxi_buf_free(&p->head);
    sbxi_ws_parser_done(&p->parser);
    free(p->first_msg);
    free(p->bearer);
    free(p);
}

/* ---- the synchronous API ---- */
/* Poll and run rounds until until(p) holds or the process is done. */
static sbx_code run_until(sbx_process *p, bool (*until)(const sbx_process *), sbx_err *err) {
    while (p->state != SBXI_PROC_DONE && !until(p)) {
        struct pollfd pfd = {.fd = p->fd, .events = sbxi_process_events(p)};
        int r = poll(&pfd, 1, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sbxi_err_set(err, SBX_E_IO, 0, "", "poll: %s", strerror(errno));
        sbxi_process_io(p, pfd.revents);
    }
    if (p->failed) {
        if (err)
            *err = p->err;
        return p->err.code;
    }
    return SBX_OK;
}

static bool started(const sbx_process *p) {
    return p->state >= SBXI_PROC_RUNNING;
}

static sbx_code open_sync(sbx_sandbox *sb, const char *path, char *msg, sbx_output_cb cb, void *ud,
                          sbx_process **ret, sbx_err *err) {
    sbx_process *p = NULL;
    sbx_code rc = sbxi_process_open(sb, path, msg, cb, ud, &p, err);
    if (rc == SBX_OK)
        rc = run_until(p, started, err);
    if (rc == SBX_OK && !started(p) && !p->got_exit)
        rc = sbxi_err_set(err, SBX_E_PROTOCOL, 0, "", "the stream ended before the start");
    if (rc != SBX_OK) {
        sbxi_process_release(p);
        return rc;
    }
    *ret = p;
    return SBX_OK;
}

sbx_code sbx_process_start(sbx_sandbox *sb, const sbx_exec_opts *exec,
                           const sbx_process_opts *popts, sbx_process **ret, sbx_err *err) {
    if (!sb || !exec || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, exec options or ret is NULL");
    sbx_err local, *e = err ? err : &local; /* err may be NULL */
    char *body = sbxi_process_body(exec, popts, false, true, e);
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/exec/attach");
    if (!body || !path) {
        free(body);
        return body ? sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory") : e->code;
    }
    sbx_process *p = NULL;
    sbx_code rc = open_sync(sb, path, body, exec->on_output, exec->userdata, &p, err);
    if (rc == SBX_OK && exec->stdin_data && exec->stdin_len)
        rc = sbx_process_write(p, exec->stdin_data, exec->stdin_len, err);
    if (rc != SBX_OK) {
        sbx_process_free(p);
        return rc;
    }
    *ret = p;
    return SBX_OK;
}

/* "/v1/sandboxes/ID/processes/PID<suffix>" */
char *sbxi_process_path(const sbx_sandbox *sb, long pid, const char *suffix) {
    char s[96];
    snprintf(s, sizeof(s), "/processes/%ld%s", pid, suffix);
    return sbxi_sandbox_path(sb, s);
}

char *sbxi_process_attach_path(const sbx_sandbox *sb, long pid, unsigned flags) {
    char q[32];
    snprintf(
        q, sizeof(q), "/attach%s%s%s", flags ? "?" : "", flags & SBX_ATTACH_STDIN ? "stdin=1" : "",
        flags & SBX_ATTACH_REPLAY ? (flags & SBX_ATTACH_STDIN ? "&replay=1" : "replay=1") : "");
    return sbxi_process_path(sb, pid, q);
}

sbx_code sbx_process_attach(sbx_sandbox *sb, long pid, unsigned flags, sbx_output_cb on_output,
                            void *userdata, sbx_process **ret, sbx_err *err) {
    if (!sb || !ret || pid <= 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, pid or ret missing");
    _cleanup_free_ char *path = sbxi_process_attach_path(sb, pid, flags);
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbx_code rc = open_sync(sb, path, NULL, on_output, userdata, ret, err);
    if (rc == SBX_OK)
        (*ret)->pid = pid;
    return rc;
}

long sbx_process_pid(const sbx_process *p) {
    return p ? p->pid : -1;
}

static sbx_code check_open(sbx_process *p, sbx_err *err) {
    if (!p)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "process is NULL");
    if (p->state == SBXI_PROC_DONE || p->sent_close)
        return sbxi_err_set(err, SBX_E_CONFLICT, 0, "process_ended", "the process has ended");
    return SBX_OK;
}

sbx_code sbx_process_write(sbx_process *p, const void *data, size_t len, sbx_err *err) {
    sbx_code rc = check_open(p, err);
    if (rc != SBX_OK)
        return rc;
    if (p->stdin_closed)
        return sbxi_err_set(err, SBX_E_CONFLICT, 0, "", "stdin is closed");
    static const uint8_t chan = 0;
    const uint8_t *d = data;
    while (len > 0) {
        size_t n = len < SBXI_PROC_STDIN_FRAME ? len : SBXI_PROC_STDIN_FRAME;
        if (sbxi_ws_client_frame(&p->out, SBXI_WS_BINARY, &chan, 1, d, n) < 0)
            return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
        d += n;
        len -= n;
    }
    if (p->hook)
        p->hook(p, SBXI_PROC_EV_QUEUED);
    return SBX_OK;
}

size_t sbx_process_write_pending(const sbx_process *p) {
    return p ? sbxi_buf_pending(&p->out) : 0;
}

static sbx_code control(sbx_process *p, json_t *msg, sbx_err *err) {
    sbx_code rc = check_open(p, err);
    if (rc != SBX_OK) {
        json_decref(msg);
        return rc;
    }
    if (queue_control(p, msg) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return SBX_OK;
}

sbx_code sbx_process_close_stdin(sbx_process *p, sbx_err *err) {
    if (p && p->stdin_closed)
        return SBX_OK;
    sbx_code rc = control(p, json_pack("{ss}", "type", "eof"), err);
    if (rc == SBX_OK)
        p->stdin_closed = true;
    return rc;
}

sbx_code sbx_process_resize(sbx_process *p, unsigned rows, unsigned cols, sbx_err *err) {
    if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "terminal size must be 1..1000 each");
    return control(
        p,
        json_pack("{sssIsI}", "type", "resize", "rows", (json_int_t)rows, "cols", (json_int_t)cols),
        err);
}

sbx_code sbx_process_signal(sbx_process *p, const char *sig, sbx_err *err) {
    if (!sig || !*sig || !sbxi_header_safe(sig))
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "no signal given");
    return control(p, json_pack("{ssss}", "type", "signal", "signal", sig), err);
}

int sbx_process_fd(const sbx_process *p) {
    return p ? p->fd : -1;
}

short sbx_process_poll_events(const sbx_process *p) {
    return p ? sbxi_process_events(p) : 0;
}

sbx_code sbx_process_dispatch(sbx_process *p, sbx_err *err) {
    if (!p)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "process is NULL");
    struct pollfd pfd = {.fd = p->fd, .events = sbxi_process_events(p)};
    if (pfd.events && poll(&pfd, 1, 0) > 0)
        sbxi_process_io(p, pfd.revents);
    if (p->failed) {
        if (err)
            *err = p->err;
        return p->err.code;
    }
    return SBX_OK;
}

int sbx_process_done(const sbx_process *p) {
    return !p || p->state == SBXI_PROC_DONE;
}

static bool never(const sbx_process *p) {
    return false;
}

sbx_code sbx_process_wait(sbx_process *p, sbx_exec_result *ret, sbx_err *err) {
    if (!p || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "process or ret is NULL");
    sbx_code rc = run_until(p, never, err);
    if (rc != SBX_OK)
        return rc;
    if (!p->got_exit)
        return sbxi_err_set(err, SBX_E_IO, 0, "", "the stream ended without an exit record%s%s",
                            p->last_error[0] ? ": " : "", p->last_error);
    if (p->exit_error[0]) /* as the JSON exec answers it: 409 */
        return sbxi_err_set(err, SBX_E_CONFLICT, 409, "conflict", "%s", p->exit_error);
    *ret = p->result;
    return SBX_OK;
}

void sbx_process_free(sbx_process *p) {
    if (!p)
        return;
    if (p->fd >= 0 && !p->sent_close && p->state != SBXI_PROC_HANDSHAKE &&
        sbxi_ws_close_frame(&p->out, SBXI_WS_NORMAL, "client done", true) == 0) {
        p->sent_close = true;
        do_write(p); /* best effort: the daemon treats a vanished client the same way */
    }
    p->on_output = NULL; /* freed inside a callback of the async form: no more output */
    if (p->on_free)
        p->on_free(p);
    else
        sbxi_process_release(p);
}
