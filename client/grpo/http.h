/* The runner's asynchronous HTTP client, on libsbx's engine (libcurl multi driven by the libuv
 * loop). The runner uses it for the generation/training server and for sandboxd's documented
 * wire API (docs/API.md). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct uv_loop_s;
typedef struct grpo_http grpo_http;

typedef struct grpo_http_req {
    const char *method;       /* "GET", "POST", "PUT", "DELETE" */
    const char *url;          /* "http://x/v1/..." */
    const char *unix_socket;  /* NULL: TCP */
    const char *bearer;       /* NULL: no Authorization header */
    const char *content_type; /* for a body; NULL: application/json */
    const char *accept;       /* NULL: none */
    const void *body;         /* copied; NULL: none */
    size_t body_len;
    uint64_t timeout_ms; /* 0: none */
} grpo_http_req;

typedef struct grpo_http_resp {
    int transport_error; /* non-zero: no HTTP answer (curl failed); error says why */
    long status;
    const char *error; /* curl's message when transport_error */
    char *body;        /* NUL-terminated; valid during the callback only */
    size_t len;
} grpo_http_resp;

typedef void (*grpo_http_cb)(void *userdata, const grpo_http_resp *resp);

int grpo_http_new(struct uv_loop_s *loop, grpo_http **ret);
/* Cancels what is in flight (their callbacks do not run) and frees; accepts NULL. Run the loop
 * afterwards until it has no more handles. */
void grpo_http_free(grpo_http *h);
/* Start a request; cb runs exactly once on the loop (never from inside this call). */
int grpo_http_submit(grpo_http *h, const grpo_http_req *req, grpo_http_cb cb, void *userdata);
size_t grpo_http_pending(const grpo_http *h);
