/* The runner's HTTP client (see http.h): a thin adapter over libsbx's asynchronous engine
 * (client/lib/http_async.h: libcurl multi driven by the libuv loop), which also carries the
 * libsbx async API. It adds the request/response shapes the runner uses and drops callbacks of
 * requests cancelled by grpo_http_free. */
#include "client/grpo/http.h"

#include "client/lib/http_async.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

struct grpo_http {
    sbxi_http_async *engine;
};

typedef struct http_call {
    grpo_http_cb cb;
    void *ud;
} http_call;

int grpo_http_new(struct uv_loop_s *loop, grpo_http **ret) {
    grpo_http *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    int r = sbxi_http_async_new(loop, &h->engine);
    if (r < 0) {
        free(h);
        return r;
    }
    *ret = h;
    return 0;
}

void grpo_http_free(grpo_http *h) {
    if (!h)
        return;
    sbxi_http_async_free(h->engine);
    free(h);
}

size_t grpo_http_pending(const grpo_http *h) {
    return h ? sbxi_http_async_pending(h->engine) : 0;
}

static void on_done(void *ud, const sbxi_http_result *res) {
    http_call *c = ud;
    if (!res->cancelled) {
        grpo_http_resp resp = {
            .transport_error = res->status == 0,
            .status = res->status,
            .error = res->error && *res->error ? res->error : "no answer",
            .body = (char *)(res->body ? res->body : ""),
            .len = res->body ? res->len : 0,
        };
        c->cb(c->ud, &resp);
    }
    free(c);
}

int grpo_http_submit(grpo_http *h, const grpo_http_req *req, grpo_http_cb cb, void *userdata) {
    char ctype[128], accept[128];
    const char *headers[4] = {NULL};
    size_t n = 0;
    if (req->body) {
        snprintf(ctype, sizeof(ctype), "Content-Type: %s",
                 req->content_type ? req->content_type : "application/json");
        headers[n++] = ctype;
    }
    if (req->accept) {
        snprintf(accept, sizeof(accept), "Accept: %s", req->accept);
        headers[n++] = accept;
    }
    sbxi_http_opts opts = {
        .unix_path = req->unix_socket,
        .bearer_token = req->bearer,
        .timeout_ms = (long)req->timeout_ms,
        .connect_timeout_ms = 5000,
    };
    http_call *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->cb = cb;
    c->ud = userdata;
    int r = sbxi_http_async_request_ex(h->engine, req->method, req->url, headers, req->body,
                                       req->body ? req->body_len : 0, &opts, on_done, c);
    if (r < 0)
        free(c);
    return r;
}
