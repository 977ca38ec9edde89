/* The HTTP layer: libmicrohttpd driven from the libuv loop (MHD_USE_EPOLL; a uv_poll on MHD's
 * epoll fd and a uv_timer from MHD_get_timeout). A request is read whole (bounded), handed to
 * the handler (api/router.c's sd_api_dispatch), and answered now or later (suspend/resume), as one
 * body or as a stream. */
#pragma once

#include "sandboxd/core/context.h"

#include <stddef.h>

typedef struct sd_request sd_request;
typedef struct sd_http sd_http;
/* See sd_reply_upgrade. */
typedef void (*sd_upgrade_fn)(void *ud, int fd, const char *extra, size_t extra_len, void *handle);

#define SD_BODY_MAX (1u << 20)
#define SD_SF_BODY_MAX (64u << 20) /* SandboxFusion bodies carry files as base64 */
#define SD_UPLOAD_MAX (256u << 20)
#define SD_MAX_REQUESTS 1024
#define SD_RETRY_AFTER_S 5 /* Retry-After on 503 node_full */

struct sd_request {
    sd_daemon *d;
    void *conn; /* struct MHD_Connection */
    const char *method;
    char *path;
    bool tcp;
    bool sandboxfusion; /* came in on the --sandboxfusion-listen socket */
    bool unauthorized;  /* TCP without a valid token: 401 before the body is read */
    bool early;         /* answered before the body was read: the connection lingers */
    char *body;
    size_t body_len, body_max, body_cap;
    bool too_large, dispatched, suspended, answered, closed;
    void *response; /* struct MHD_Response ready to queue */
    unsigned status;
    unsigned retry_after;
    /* streaming */
    bool stream, stream_done, stream_abort;
    bool peer_gone;        /* the client hung up while the stream waited for data */
    uv_poll_t *gone_watch; /* watching a waiting stream's socket for the client's hang-up */
    char *sbuf;
    size_t slen, scap;
    char *ctype;
    /* told when the request is over (completed or client gone) */
    void (*on_close)(sd_request *req, void *ud);
    void *close_ud;
    /* streaming backpressure: told when a full buffer (sd_stream_full) has drained to the client */
    void (*on_drain)(sd_request *req, void *ud);
    void *drain_ud;
    uint64_t start_us;
    /* POST /v1/images streams its body into this temp file (core/images.c), a files PUT into
     * an unlinked one in the state directory (upload_path NULL); a handler may take upload_fd */
    int upload_fd;     /* -1: the body is kept in memory */
    char *upload_path; /* removed when the request ends unless a handler took it */
    int upload_err;    /* -errno of a failed write (ENOSPC: 507) */
    /* WebSocket upgrade (sd_reply_upgrade) */
    sd_upgrade_fn upgrade_fn;
    void *upgrade_ud;
};

/* Called with every request read whole (api/router.c's sd_api_dispatch). */
typedef void (*sd_http_handler)(sd_daemon *d, sd_request *req);
int sd_http_start(sd_daemon *d, int unix_fd, int tcp_fd, sd_http_handler handler, error_rec *err);
void sd_http_stop(sd_daemon *d);
/* The --sandboxfusion-listen socket (after sd_http_start): SandboxFusion endpoints only. */
int sd_http_start_sandboxfusion(sd_daemon *d, int fd, error_rec *err);

const char *sd_req_header(sd_request *req, const char *name);
const char *sd_req_query(sd_request *req, const char *key);
/* All values of a repeated query argument (at most max); returns how many. */
size_t sd_req_query_all(sd_request *req, const char *key, const char **out, size_t max);
/* The first query parameter that is none of keys[0..n) (NULL entries end it early), has no value
 * ("?k"), or comes twice ("label" aside: each is a filter): its name, with why in *ret_why; NULL
 * when there is none. */
const char *sd_req_query_bad(sd_request *req, const char *const *keys, size_t n,
                             const char **ret_why);
/* The name of a query argument whose name or value holds an encoded NUL ("%00"), or NULL. */
const char *sd_req_query_with_nul(sd_request *req);
/* Parse the body as JSON (empty body: an empty object); on failure answers 400 and returns
 * NULL. */
json_t *sd_req_json(sd_request *req);
/* For a request that takes no fields: true when its body is empty or {}; else answers 400
 * (naming the first field, or saying it is not an object or not JSON) and returns false. */
bool sd_req_no_fields(sd_request *req);

/* Answers; the first one counts. A handler that returns without answering leaves the
 * connection suspended until one of these is called (from any later loop callback). */
void sd_reply_json(sd_request *req, unsigned status, json_t *body /* stolen; NULL: none */);
void sd_reply_error(sd_request *req, unsigned status, const char *code, const char *fmt, ...)
    _printf_(4, 5);
/* err->code as the status: -EINVAL 400, -ENOENT 404, -EBUSY 409, -EAGAIN 503 node_full (with
 * Retry-After), -EDQUOT 507, anything else 500. */
void sd_reply_error_rec(sd_request *req, const error_rec *err);

/* RFC 9112 framing (framing.c): true, with a message naming the problem in msg, for a request
 * head a proxy could frame differently than libmicrohttpd does: two different Content-Lengths,
 * a header name that is not a token (whitespace before the colon), a line not ended by CRLF
 * (bare LF or CR) or a value holding CR or LF,
 * a Transfer-Encoding other than one "chunked", or both. conn is the MHD_Connection, version
 * the access callback's; call it on the request's first callback, before the body is read. */
bool sd_http_framing_error(void *conn, const char *version, char *msg, size_t cap);
/* After a connection answered before its body was read (linger.c): keep a duplicate of its
 * socket fd, reading and dropping what still comes, so that libmicrohttpd's close does not reset
 * the connection before the client, still sending, has read the answer. */
void sd_http_linger(sd_daemon *d, int fd);
/* 307 Temporary Redirect to location (the fleet's routing: docs/FLEET.md). */
void sd_reply_redirect(sd_request *req, const char *location);
/* The request's query string, re-encoded ("?a=b&c", "" when none), without argument skip,
 * with "add" (already encoded, "placed=1") appended; malloc'ed, NULL on ENOMEM. */
char *sd_req_query_string(sd_request *req, const char *skip, const char *add);
/* A decoded path (libmicrohttpd's url) escaped again for a URL or a request line: every byte
 * but RFC 3986's path characters (unreserved, sub-delims, ':', '@', '/') as %XX, so an encoded
 * '?', '#', '%', space, CR or LF stays data. Malloc'ed, NULL on ENOMEM. */
char *sd_url_path_escape(const char *path);
void sd_reply_data(sd_request *req, unsigned status, const char *ctype, void *data /* stolen */,
                   size_t len);
/* The same with headers: hdrs is name, value, name, value, ..., NULL (copied). */
void sd_reply_data_headers(sd_request *req, unsigned status, const char *const *hdrs,
                           void *data /* stolen */, size_t len);
void sd_reply_fd(sd_request *req, const char *ctype, int fd /* stolen */, uint64_t size);
/* WebSocket upgrade (api/attach.c): answer 101 with Upgrade: websocket, accept as
 * Sec-WebSocket-Accept and protocol (may be NULL) as Sec-WebSocket-Protocol. Once libmicrohttpd
 * hands the socket over, fn gets it (nonblocking), the bytes it had read past the head and a
 * handle; from then on the request is the caller's (req->on_close is not called) until it calls
 * sd_upgrade_close(handle), which closes the socket. A client that goes before the hand-over
 * ends the request as usual (on_close). */
void sd_reply_upgrade(sd_request *req, const char *accept, const char *protocol, sd_upgrade_fn fn,
                      void *ud);
void sd_upgrade_close(sd_daemon *d, void *handle);
/* An answer written as the client takes it (chunked): read fills buf with 1..max bytes and
 * returns how many, or 0 at the end; done(ud) runs once the answer is over (sent, or the client
 * gone), also when the answer could not be made. */
typedef size_t (*sd_body_read_fn)(void *ud, char *buf, size_t max);
void sd_reply_reader(sd_request *req, unsigned status, const char *ctype, sd_body_read_fn read,
                     void (*done)(void *ud), void *ud);
/* Streaming answer (200, chunked). */
void sd_stream_begin(sd_request *req, const char *ctype);
void sd_stream_write(sd_request *req, const char *data, size_t len);
void sd_stream_end(sd_request *req);
/* End a stream badly: the client sees the connection close without the final chunk. */
void sd_stream_abort(sd_request *req);
/* True when the stream holds SD_STREAM_HIGH bytes the client has not taken yet: the producer
 * should stop reading its source until on_drain is called (below SD_STREAM_LOW). */
#define SD_STREAM_HIGH (256u << 10)
#define SD_STREAM_LOW (64u << 10)
bool sd_stream_full(const sd_request *req);
