/* WebSocket attachments (docs/API.md "Processes and attach"): the upgrade of GET
 * .../exec/attach and .../processes/{pid}/attach, then one connection per attachment, driven by
 * a uv_poll on the upgraded socket: frames in (api/websocket.c), control messages, stdin to the
 * process (core/process.c), output and the exit record out. Reads stop while the process holds
 * SD_EXEC_STDIN_HIGH bytes of our stdin or our unsent output is over WS_TX_HIGH; output stops
 * (the watch is full) while our unsent output is over WS_TX_HIGH. Our close frame out, the
 * connection lingers: the client's last frames are read and dropped until its close frame. */
#include "sandboxd/api/api.h"
#include "sandboxd/api/websocket.h"

#include "common/grow.h"
#include "common/jsonkeys.h"
#include "common/macro.h"
#include "sandboxd/core/process.h"
#include "sandboxd/core/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define WS_MSG_MAX (1u << 20)
#define WS_TX_HIGH (256u << 10)
#define WS_TX_LOW (64u << 10)
#define WS_READ_CHUNK 65536
#define WS_CLOSE_WAIT_MS 5000
#define WS_PROTOCOL "v1.sandboxd"

typedef struct ws_conn {
    sd_daemon *d;
    char sb_id[64];
    int fd; /* -1 until the upgrade hands it over */
    void *urh;
    uv_poll_t poll;
    uv_timer_t timer;
    int handles;
    unsigned char *rx, *msg, *tx;
    size_t rx_len, rx_cap, msg_len, msg_cap, tx_len, tx_off, tx_cap;
    unsigned msg_op;
    bool in_msg;
    sd_watch *w;
    bool starter;   /* exec/attach: the first message is the exec body */
    bool started;   /* the first message came */
    bool closing;   /* our close frame is queued: no more frames are parsed */
    bool lingering; /* our close frame is sent: frames are dropped until the client's close */
    bool got_close; /* the client's close frame came (ours answers it) */
    bool freeing;
    bool stalled; /* frames wait in rx while reads are paused */
} ws_conn;

static void ws_update(ws_conn *c);
static void ws_linger(ws_conn *c);
static void ws_parse_all(ws_conn *c);
static bool reads_paused(const ws_conn *c);

/* ---- teardown ---- */

static void handle_closed(uv_handle_t *h) {
    ws_conn *c = h->data;
    if (--c->handles > 0)
        return;
    if (c->urh)
        sd_upgrade_close(c->d, c->urh);
    free(c->rx);
    free(c->msg);
    free(c->tx);
    free(c);
}

/* The connection goes; the command goes on. */
static void ws_teardown(ws_conn *c) {
    if (c->freeing)
        return;
    c->freeing = true;
    if (c->w)
        sd_watch_leave(TAKE_PTR(c->w));
    if (c->fd < 0) {
        free(c->rx), free(c->msg), free(c->tx), free(c);
        return;
    }
    c->handles = 2;
    uv_close((uv_handle_t *)&c->poll, handle_closed);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
}

/* ---- sending ---- */

static size_t tx_pending(const ws_conn *c) {
    return c->tx_len - c->tx_off;
}

static void ws_flush(ws_conn *c) {
    while (c->fd >= 0 && !c->freeing && tx_pending(c) > 0) {
        ssize_t n = send(c->fd, c->tx + c->tx_off, tx_pending(c), MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n <= 0)
            return ws_teardown(c);
        c->tx_off += (size_t)n;
    }
    if (c->freeing)
        return;
    if (c->tx_off == c->tx_len)
        c->tx_off = c->tx_len = 0;
    if (c->stalled && !reads_paused(c) && !c->closing) {
        c->stalled = false;
        return ws_parse_all(c); /* flushes again */
    }
    if (c->w && tx_pending(c) < WS_TX_LOW)
        sd_watch_resume(c->w);
    if (c->closing && tx_pending(c) == 0 && c->fd >= 0)
        return c->got_close ? ws_teardown(c) : ws_linger(c); /* answered the client's close */
    ws_update(c);
}

static void ws_send(ws_conn *c, unsigned op, const void *a, size_t alen, const void *b,
                    size_t blen) {
    if (c->freeing || (c->closing && op != WS_OP_CLOSE))
        return;
    unsigned char hdr[WS_HEADER_MAX];
    size_t hl = ws_header(op, alen + blen, hdr);
    if (c->tx_off > 0 && c->tx_off == c->tx_len)
        c->tx_off = c->tx_len = 0;
    if (grow_reserve((void **)&c->tx, &c->tx_cap, c->tx_len + hl + alen + blen, 1) < 0)
        return ws_teardown(c);
    memcpy(c->tx + c->tx_len, hdr, hl);
    if (alen)
        memcpy(c->tx + c->tx_len + hl, a, alen);
    if (blen)
        memcpy(c->tx + c->tx_len + hl + alen, b, blen);
    c->tx_len += hl + alen + blen;
}

static void ws_send_json(ws_conn *c, json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(j);
    if (s)
        ws_send(c, WS_OP_TEXT, s, strlen(s), NULL, 0);
    free(s);
}

static void ws_error(ws_conn *c, const char *code, const char *fmt, ...) _printf_(3, 4);
static void ws_error(ws_conn *c, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *m = json_string(msg) ?: json_string("(message not UTF-8)");
    ws_send_json(c, json_pack("{s:s,s:s,s:o}", "type", "error", "code", code, "message", m));
}

static void timer_cb(uv_timer_t *t) {
    ws_teardown(t->data); /* the client did not take our close frame in time */
}

/* Queue a close frame; the connection ends once it is sent. The command goes on. */
static void ws_close(ws_conn *c, unsigned code, const char *why) {
    if (c->closing || c->freeing)
        return;
    unsigned char p[2] = {(unsigned char)(code >> 8), (unsigned char)code};
    ws_send(c, WS_OP_CLOSE, p, 2, why, MIN(strlen(why), 120));
    c->closing = true;
    if (c->w)
        sd_watch_leave(TAKE_PTR(c->w));
    if (c->fd >= 0)
        uv_timer_start(&c->timer, timer_cb, WS_CLOSE_WAIT_MS, 0);
    ws_flush(c);
}

/* ---- the process's news ---- */

/* The body's stdin is queued by now (core/exec.c): the frames that came before the start are
 * parsed (ws_flush), in order after it. */
static void w_started(void *ud, sd_process *p) {
    ws_conn *c = ud;
    ws_send_json(c, json_pack("{s:s,s:i}", "type", "start", "pid", p->pid));
    ws_flush(c);
}

static bool w_output(void *ud, int which, const char *data, size_t len) {
    ws_conn *c = ud;
    unsigned char ch = (unsigned char)(which + 1);
    ws_send(c, WS_OP_BINARY, &ch, 1, data, len);
    ws_flush(c);
    return !c->freeing && tx_pending(c) >= WS_TX_HIGH;
}

/* The caller's own mistake (a bad field, too large an argv and env: core/exec.h). */
static bool callers_error(int code) {
    return code == -EINVAL || code == SD_EXEC_E_TOO_BIG;
}

static const char *err_code(const error_rec *err) {
    return callers_error(err->code)      ? "invalid_argument"
           : err->code == SD_EXEC_E_PIDS ? "pids_limit"
           : err->code == -EBUSY         ? "conflict"
                                         : "internal";
}

static void w_ended(void *ud, json_t *exit, const error_rec *err) {
    ws_conn *c = ud;
    c->w = NULL; /* gone with this call */
    if (exit) {
        json_t *j = json_deep_copy(exit);
        json_object_set_new(j, "type", json_string("exit"));
        ws_send_json(c, j);
        ws_close(c, WS_CLOSE_NORMAL, "the command ended");
        return;
    }
    ws_error(c, err_code(err), "%s", err->message);
    ws_close(c, callers_error(err->code) ? WS_CLOSE_POLICY : WS_CLOSE_INTERNAL,
             "the command failed");
}

static void w_stdin_drained(void *ud) {
    ws_conn *c = ud;
    ws_flush(c); /* parses the frames left while stdin was full; polls again */
}

static const sd_watch_ops watch_ops = {
    .started = w_started, .output = w_output, .ended = w_ended, .stdin_drained = w_stdin_drained};

/* ---- messages in ---- */

static void start_command(ws_conn *c, json_t *body) {
    sd_sandbox *sb = sd_registry_find(c->d, c->sb_id);
    policy_exec pe = {0};
    policy_process pp = {0};
    error_rec err = {0};
    int r = sb ? sd_api_exec_parse(c->d, sb, body, &pe, &pp, &err)
               : error_set(&err, -EBUSY, "sandbox %s is gone", c->sb_id);
    pp.background = false;
    if (r >= 0)
        r = sd_process_start(sb, &pe, &pp, &watch_ops, c, &c->w, &err);
    policy_exec_done(&pe);
    if (r < 0) {
        ws_error(c, err_code(&err), "%s", err.message);
        ws_close(c, callers_error(r) ? WS_CLOSE_POLICY : WS_CLOSE_INTERNAL,
                 "the command did not start");
    }
}

static bool is_type(json_t *j, const char *t) {
    const char *s = json_string_value(json_object_get(j, "type"));
    return s && strcmp(s, t) == 0;
}

static void stdin_error(ws_conn *c, int r) {
    if (r == -EPERM)
        ws_error(c, "invalid_argument", "this attachment does not own the command's stdin");
    else if (r == -EPIPE)
        ws_error(c, "invalid_argument", "the command's stdin is closed");
    else if (r < 0)
        ws_error(c, "internal", "stdin: %s", strerror(-r));
}

/* The keys each control message may carry (common/jsonkeys.h). */
static const char *const eof_keys[] = {"type", NULL};
static const char *const resize_keys[] = {"type", "rows", "cols", NULL};
static const char *const signal_keys[] = {"type", "signal", NULL};

static void control(ws_conn *c, json_t *j) {
    error_rec err = {0};
    sd_process *p = c->w ? sd_watch_process(c->w) : NULL;
    if (!p)
        return ws_error(c, "invalid_argument", "the command has ended");
    const char *const *keys = is_type(j, "eof")      ? eof_keys
                              : is_type(j, "resize") ? resize_keys
                              : is_type(j, "signal") ? signal_keys
                                                     : NULL;
    if (keys && jsonkeys_check(j, keys, NULL, &err) < 0)
        return ws_error(c, "invalid_argument", "%s", err.message);
    if (is_type(j, "eof"))
        return stdin_error(c, sd_watch_close_stdin(c->w));
    if (is_type(j, "resize")) {
        unsigned rows, cols;
        if (policy_tty_size_parse(j, "resize", &rows, &cols, &err) < 0)
            return ws_error(c, "invalid_argument", "%s", err.message);
        int r = sd_process_resize(p, rows, cols);
        if (r == -ENOTTY)
            return ws_error(c, "invalid_argument", "resize: the command has no tty");
        if (r < 0)
            ws_error(c, "invalid_argument", "resize: %s", strerror(-r));
        return;
    }
    if (is_type(j, "signal")) {
        int signo;
        if (policy_signal_parse(json_object_get(j, "signal"), &signo, &err) < 0)
            return ws_error(c, "invalid_argument", "%s", err.message);
        int r = sd_process_signal(p, signo);
        if (r < 0)
            ws_error(c, "internal", "signal: %s", strerror(-r));
        return;
    }
    ws_error(c, "invalid_argument",
             "unknown control message (types: \"eof\", \"resize\", \"signal\")");
}

static void text_message(ws_conn *c, const unsigned char *data, size_t len) {
    if (!ws_utf8_ok(data, len))
        return ws_close(c, WS_CLOSE_BAD_DATA, "text frames must be UTF-8");
    json_error_t je;
    json_t *j = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        if (c->starter && !c->started) {
            ws_error(c, "invalid_argument",
                     "the first message must be the exec body (a JSON "
                     "object)");
            return ws_close(c, WS_CLOSE_POLICY, "bad exec body");
        }
        return ws_error(c, "invalid_argument", "control messages are JSON objects: %s", je.text);
    }
    if (c->starter && !c->started) {
        c->started = true;
        start_command(c, j);
    } else {
        control(c, j);
    }
    json_decref(j);
}

static void binary_message(ws_conn *c, const unsigned char *data, size_t len) {
    if (c->starter && !c->started) {
        ws_error(c, "invalid_argument", "the first message must be the exec body (a text frame)");
        return ws_close(c, WS_CLOSE_POLICY, "expected the exec body");
    }
    if (len == 0 || data[0] != 0)
        return ws_error(c, "invalid_argument",
                        "binary frames from the client carry channel 0 (stdin) first");
    if (!c->w)
        return ws_error(c, "invalid_argument", "the command has ended");
    stdin_error(c, sd_watch_write(c->w, data + 1, len - 1));
}

static void message(ws_conn *c, unsigned op, const unsigned char *data, size_t len) {
    if (op == WS_OP_TEXT)
        text_message(c, data, len);
    else
        binary_message(c, data, len);
}

/* A status code a close frame may carry (RFC 6455 7.4, and the IANA registry's 1012-1014):
 * not 1004 (reserved), 1005, 1006 or 1015 (never sent), 1016-2999 (reserved) or past 4999. */
static bool close_code_ok(unsigned code) {
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

static void close_frame(ws_conn *c, const ws_frame *f) {
    c->got_close = true;
    unsigned code = f->len >= 2 ? (unsigned)f->payload[0] << 8 | f->payload[1] : WS_CLOSE_NORMAL;
    if (f->len == 1 || (f->len >= 2 && !close_code_ok(code)))
        return ws_close(c, WS_CLOSE_PROTOCOL, "bad close frame");
    if (f->len > 2 && !ws_utf8_ok(f->payload + 2, f->len - 2))
        return ws_close(c, WS_CLOSE_BAD_DATA, "a close reason must be UTF-8");
    ws_close(c, code, "");
}

static void frame_in(ws_conn *c, const ws_frame *f) {
    switch (f->opcode) {
    case WS_OP_PING:
        ws_send(c, WS_OP_PONG, f->payload, f->len, NULL, 0);
        return;
    case WS_OP_PONG:
        return;
    case WS_OP_CLOSE:
        return close_frame(c, f);
    case WS_OP_CONT:
        if (!c->in_msg)
            return ws_close(c, WS_CLOSE_PROTOCOL, "continuation frame without a message");
        if (c->msg_len + f->len > WS_MSG_MAX)
            return ws_close(c, WS_CLOSE_TOO_BIG, "message larger than 1 MiB");
        break;
    default: /* text, binary */
        if (c->in_msg)
            return ws_close(c, WS_CLOSE_PROTOCOL, "a new message inside a fragmented one");
        if (f->fin)
            return message(c, f->opcode, f->payload, f->len);
        c->in_msg = true;
        c->msg_op = f->opcode;
        c->msg_len = 0;
    }
    if (grow_reserve((void **)&c->msg, &c->msg_cap, c->msg_len + f->len + 1, 1) < 0)
        return ws_close(c, WS_CLOSE_INTERNAL, "out of memory");
    memcpy(c->msg + c->msg_len, f->payload, f->len);
    c->msg_len += f->len;
    if (f->fin) {
        c->in_msg = false;
        message(c, c->msg_op, c->msg, c->msg_len);
    }
}

/* The process holds enough of our stdin, or the client is not taking what we send, or the
 * starter's command has not started yet: frames sent before the start wait in rx until
 * w_started, so that they reach the command after the body's stdin (docs/API.md). */
static bool reads_paused(const ws_conn *c) {
    return tx_pending(c) >= WS_TX_HIGH || (c->w && !sd_watch_process(c->w)->running) ||
           (c->w && sd_watch_has_stdin(c->w) && sd_watch_stdin_pending(c->w) >= SD_EXEC_STDIN_HIGH);
}

static void ws_parse_all(ws_conn *c) {
    size_t off = 0;
    while (!c->closing && !c->freeing && !reads_paused(c)) {
        ws_frame f;
        unsigned code;
        const char *why;
        long k = ws_parse(c->rx + off, c->rx_len - off, WS_MSG_MAX, &f, &code, &why);
        if (k == 0)
            break;
        if (k < 0) {
            ws_close(c, code, why);
            break;
        }
        off += (size_t)k;
        frame_in(c, &f);
    }
    if (c->freeing)
        return;
    c->stalled = !c->closing && reads_paused(c) && c->rx_len > off;
    if (off) {
        memmove(c->rx, c->rx + off, c->rx_len - off);
        c->rx_len -= off;
    }
    ws_flush(c);
}

/* What the socket holds, appended to rx: true when bytes came. The client gone (or out of
 * memory): torn down, false; the command goes on. */
static bool rx_fill(ws_conn *c) {
    if (grow_reserve((void **)&c->rx, &c->rx_cap, c->rx_len + WS_READ_CHUNK, 1) < 0) {
        ws_teardown(c);
        return false;
    }
    ssize_t n = recv(c->fd, c->rx + c->rx_len, WS_READ_CHUNK, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    if (n <= 0) {
        ws_teardown(c);
        return false;
    }
    c->rx_len += (size_t)n;
    return true;
}

static void ws_read(ws_conn *c) {
    if (rx_fill(c))
        ws_parse_all(c);
}

/* Lingering: whole frames in rx are dropped (rx holds at most one frame, as ws_parse refuses
 * one over 1 MiB); the client's close frame or a bad frame ends the connection. */
static void linger_parse(ws_conn *c) {
    if (c->rx_len == 0)
        return;
    size_t off = 0;
    ws_frame f;
    unsigned code;
    const char *why;
    long k;
    while ((k = ws_parse(c->rx + off, c->rx_len - off, WS_MSG_MAX, &f, &code, &why)) > 0) {
        if (f.opcode == WS_OP_CLOSE)
            return ws_teardown(c);
        off += (size_t)k;
    }
    if (k < 0)
        return ws_teardown(c);
    if (off) {
        memmove(c->rx, c->rx + off, c->rx_len - off);
        c->rx_len -= off;
    }
}

/* Lingering: read; the client's EOF or an error ends the connection too. */
static void ws_drain(ws_conn *c) {
    if (rx_fill(c))
        linger_parse(c);
}

static void poll_cb(uv_poll_t *h, int status, int events);

/* Everything we send is out, our close frame last: wait (the close timer bounds it) for the
 * client's close frame, reading and dropping what comes before it, then close. Closing now,
 * with the client's last frames unread (an eof, its echo of our close), would send a reset,
 * and the kernel drops with it what it still holds of ours: the exit record and the close
 * frame could be lost. (No shutdown(SHUT_WR) first: on TLS the fd is libmicrohttpd's
 * socketpair, which would not pass a half close on.) */
static void ws_linger(ws_conn *c) {
    c->lingering = true;
    /* Nothing is parsed here (ws_parse_all may be the caller, with rx in use): frames left
     * unparsed in rx are dropped with the next read; reads stopped when we began to close,
     * so the client's answer to our close is still in the socket. */
    uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, poll_cb);
}

static void poll_cb(uv_poll_t *h, int status, int events) {
    ws_conn *c = h->data;
    if (status < 0)
        return ws_teardown(c);
    if (c->lingering)
        return ws_drain(c);
    if (events & UV_WRITABLE)
        ws_flush(c);
    if (!c->freeing && (events & UV_READABLE) && !c->closing && !reads_paused(c))
        ws_read(c);
    else if (!c->freeing && (events & UV_DISCONNECT) && !(events & UV_READABLE))
        ws_teardown(c);
}

static void ws_update(ws_conn *c) {
    if (c->fd < 0 || c->freeing)
        return;
    int ev = UV_DISCONNECT;
    if (!c->closing && !reads_paused(c))
        ev |= UV_READABLE;
    if (tx_pending(c) > 0)
        ev |= UV_WRITABLE;
    uv_poll_start(&c->poll, ev, poll_cb);
}

/* ---- the upgrade ---- */

static void upgraded(void *ud, int fd, const char *extra, size_t extra_len, void *urh) {
    ws_conn *c = ud;
    c->urh = urh;
    uv_timer_init(c->d->loop, &c->timer);
    c->timer.data = c;
    c->fd = fd;
    if (uv_poll_init_socket(c->d->loop, &c->poll, fd) < 0) {
        c->freeing = true;
        if (c->w)
            sd_watch_leave(TAKE_PTR(c->w));
        c->handles = 1;
        uv_close((uv_handle_t *)&c->timer, handle_closed);
        return;
    }
    c->poll.data = c;
    if (extra_len && grow_reserve((void **)&c->rx, &c->rx_cap, c->rx_len + extra_len + 1, 1) == 0) {
        memcpy(c->rx + c->rx_len, extra, extra_len);
        c->rx_len += extra_len;
    }
    if (c->closing) /* ended before the hand-over: send what is queued, then close */
        uv_timer_start(&c->timer, timer_cb, WS_CLOSE_WAIT_MS, 0);
    ws_parse_all(c);
}

static void req_gone(sd_request *req, void *ud) {
    ws_teardown(ud); /* before the hand-over */
}

static bool header_has(sd_request *req, const char *name, const char *token) {
    const char *v = sd_req_header(req, name);
    for (size_t n = strlen(token); v && *v; v++)
        if (strncasecmp(v, token, n) == 0 && (v[n] == 0 || v[n] == ',' || v[n] == ' '))
            return true;
    return false;
}

/* 426 with the version we speak (RFC 6455 4.4), which sd_reply_error cannot add. */
static void reply_version(sd_request *req) {
    static const char body[] =
        "{\"message\":\"Sec-WebSocket-Version must be 13\",\"code\":\"upgrade_required\"}\n";
    static const char *const hdrs[] = {"Content-Type", "application/json", "Sec-WebSocket-Version",
                                       "13", NULL};
    char *b = strdup(body);
    sd_reply_data_headers(req, 426, hdrs, b, b ? strlen(b) : 0);
}

/* Checks the upgrade request; answers it (and returns NULL) when it is not one. */
static ws_conn *handshake(sd_daemon *d, sd_request *req, sd_sandbox *sb, char accept[29]) {
    const char *ver = sd_req_header(req, "Sec-WebSocket-Version");
    if (!header_has(req, "Upgrade", "websocket") || !header_has(req, "Connection", "upgrade")) {
        sd_reply_error(req, 400, "invalid_argument",
                       "this endpoint needs a WebSocket upgrade (Upgrade: websocket, "
                       "Connection: Upgrade)");
        return NULL;
    }
    if (!ver || strcmp(ver, "13") != 0) {
        reply_version(req);
        return NULL;
    }
    if (ws_accept_key(sd_req_header(req, "Sec-WebSocket-Key"), accept) < 0) {
        sd_reply_error(req, 400, "invalid_argument",
                       "Sec-WebSocket-Key must be 16 bytes in base64");
        return NULL;
    }
    if (sb->state != SD_RUNNING) {
        sd_reply_error(req, 409, "conflict", "sandbox %s is %s", sb->id, sd_state_name(sb->state));
        return NULL;
    }
    ws_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    c->d = d;
    c->fd = -1;
    snprintf(c->sb_id, sizeof(c->sb_id), "%s", sb->id);
    return c;
}

static void upgrade(sd_request *req, ws_conn *c, const char *accept) {
    req->on_close = req_gone;
    req->close_ud = c;
    sd_reply_upgrade(req, accept,
                     header_has(req, "Sec-WebSocket-Protocol", WS_PROTOCOL) ? WS_PROTOCOL : NULL,
                     upgraded, c);
}

void sd_api_exec_attach(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    char accept[29];
    ws_conn *c = handshake(d, req, sb, accept);
    if (!c)
        return;
    c->starter = true;
    upgrade(req, c, accept);
}

/* A flag in the query: absent, 0 or false is false, 1 or true is true; any other value is
 * answered 400 naming it (never taken as false) and returns -EINVAL. */
static int query_flag(sd_request *req, const char *key, bool *ret) {
    const char *v = sd_req_query(req, key);
    if (!v || strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
        *ret = false;
    else if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
        *ret = true;
    else {
        sd_reply_error(req, 400, "invalid_argument", "%s: must be 1 or true, 0 or false", key);
        return -EINVAL;
    }
    return 0;
}

static void replay(ws_conn *c, sd_process *p) {
    for (int i = 0; i < 2; i++) {
        char *data;
        size_t len;
        if (sd_process_tail(p, i, SIZE_MAX, &data, &len) < 0)
            continue;
        for (size_t off = 0; off < len; off += 65536) {
            unsigned char ch = (unsigned char)(i + 1);
            ws_send(c, WS_OP_BINARY, &ch, 1, data + off, MIN(65536, len - off));
        }
        free(data);
    }
}

void sd_api_process_attach(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *pid_s) {
    size_t n = strcspn(pid_s, "/");
    long pid = n > 0 && n < 10 && strspn(pid_s, "0123456789") == n ? strtol(pid_s, NULL, 10) : 0;
    sd_process *p = pid > 0 ? sd_process_find(sb, (int)pid) : NULL;
    if (!p || strcmp(pid_s + n, "/attach") != 0) {
        sd_reply_error(req, 404, "not_found", "no process %.*s in sandbox %s", (int)MIN(n, 32),
                       pid_s, sb->id);
        return;
    }
    if (!p->running) {
        sd_reply_error(req, 409, "process_ended", "process %d has ended", p->pid);
        return;
    }
    bool want_stdin, want_replay;
    if (query_flag(req, "stdin", &want_stdin) < 0 || query_flag(req, "replay", &want_replay) < 0)
        return;
    char accept[29];
    ws_conn *c = handshake(d, req, sb, accept);
    if (!c)
        return;
    error_rec err = {0};
    int r = sd_process_attach(p, want_stdin, &watch_ops, c, &c->w, &err);
    if (r < 0) {
        free(c);
        sd_reply_error(req, 409,
                       r == -EBUSY    ? "stdin_taken"
                       : r == -EMLINK ? "too_many_attachments"
                                      : "process_ended",
                       "%s", err.message);
        return;
    }
    if (want_replay)
        replay(c, p);
    upgrade(req, c, accept);
}
