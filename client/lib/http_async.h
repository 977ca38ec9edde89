/* libsbx's asynchronous HTTP engine: libcurl's multi socket API driven by a libuv loop
 * (CURLMOPT_SOCKETFUNCTION/TIMERFUNCTION backed by uv_poll/uv_timer). libsbx's async API runs on
 * it, and other parts of the client (the GRPO runner) use it for their own HTTP calls, e.g. to a
 * trainer's http://host:port endpoints. Internal: not installed, not exported from libsbx.so
 * (link libsbx.a or the objects).
 *
 * Usage:
 *     sbxi_http_async *e;
 *     sbxi_http_async_new(loop, &e);
 *     const char *hdrs[] = {"Content-Type: application/json", NULL};
 *     sbxi_http_async_request(e, "POST", "http://127.0.0.1:8000/v1/completions", hdrs,
 *                             body, strlen(body), on_done, ud);
 *     uv_run(loop, UV_RUN_DEFAULT);   // on_done(ud, &result) runs on the loop
 *     sbxi_http_async_free(e);        // cancels what is in flight (their callbacks run first,
 *                                     // with result->cancelled = 1)
 *     uv_run(loop, UV_RUN_DEFAULT);   // lets the engine's libuv handles close
 *
 * The callback runs exactly once per accepted request, never from inside the submitting call.
 * The body is copied, so it may be freed as soon as the call returns. The result (body included)
 * is valid only during the callback. Callbacks may submit new requests, and may call
 * sbxi_http_async_free (the engine is torn down once the callback returns). Cancelled requests
 * are called back from inside sbxi_http_async_free. Not thread-safe: use it from the loop's
 * thread only. Functions return 0 or a negative errno (-ESHUTDOWN once freeing started). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct uv_loop_s;
struct sbxi_response;
typedef struct sbxi_http_async sbxi_http_async;

typedef struct sbxi_http_result {
    long status;                        /* HTTP status; 0 when no whole answer came (see error),
                                           also when the transfer failed after a status line */
    const char *body;                   /* NUL-terminated answer ("" when streamed to on_chunk) */
    size_t len;                         /* bytes in body */
    const char *content_type;           /* "" when absent */
    long retry_after;                   /* seconds from a Retry-After header, else 0 */
    int curl_code;                      /* CURLcode of the transfer, 0 when it completed */
    const char *error;                  /* "" when curl_code is 0; libcurl's message otherwise */
    int cancelled;                      /* 1 when sbxi_http_async_free or _cancel cancelled it */
    const struct sbxi_response *detail; /* libsbx-internal detail (errno for messages) */
} sbxi_http_result;

typedef void (*sbxi_http_cb)(void *ud, const sbxi_http_result *res);

/* Every request carries the headers of sbxi_headers (internal.h): Content-Type (none unless
 * content_type is set), Accept (application/json unless accept is set), the bearer token, one
 * extra header; then the request's own list. */
typedef struct sbxi_http_opts {
    const char *unix_path;    /* connect to this Unix socket instead of the URL's host */
    const char *bearer_token; /* adds Authorization: Bearer <token> */
    const char *content_type; /* of the body, e.g. "application/json"; NULL: none */
    const char *accept;       /* NULL: application/json */
    const char *extra_header; /* one more "Name: value", or NULL */
    /* When set, the body of a 2xx answer is handed over as it arrives instead of collected. */
    void (*on_chunk)(void *chunk_ud, const char *data, size_t len);
    void *chunk_ud;
    long timeout_ms;         /* whole-transfer timeout (its expiry: detail->timed_out); 0: none */
    long connect_timeout_ms; /* 0: libcurl's default */
} sbxi_http_opts;

int sbxi_http_async_new(struct uv_loop_s *loop, sbxi_http_async **ret);
void sbxi_http_async_free(sbxi_http_async *e); /* accepts NULL */

/* One HTTP request to url (http:// or https://). method: "GET", "POST", "PUT", "DELETE", ...
 * headers: NULL-terminated list of "Name: value", or NULL. body/len may be NULL/0. */
int sbxi_http_async_request(sbxi_http_async *e, const char *method, const char *url,
                            const char *const *headers, const void *body, size_t len,
                            sbxi_http_cb cb, void *ud);
/* The same with options (opts may be NULL). */
int sbxi_http_async_request_ex(sbxi_http_async *e, const char *method, const char *url,
                               const char *const *headers, const void *body, size_t len,
                               const sbxi_http_opts *opts, sbxi_http_cb cb, void *ud);
/* Cancel every request in flight now (their callbacks run from inside this call, with
 * result->cancelled = 1); the engine stays usable, and requests submitted by those callbacks
 * go on. */
void sbxi_http_async_cancel(sbxi_http_async *e); /* accepts NULL */
/* Requests accepted and not yet called back. */
size_t sbxi_http_async_pending(const sbxi_http_async *e);
