/* The asynchronous HTTP engine (see http_async.h): a curl multi handle whose sockets are watched
 * with uv_poll and whose timeout is a uv_timer, so any number of transfers share one libuv loop.
 * Completed transfers are called back from the loop, never from inside a submitting call. */
#include "client/lib/http_async.h"
#include "client/lib/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct areq {
    struct areq *prev, *next;
    CURL *easy;
    struct curl_slist *hdrs;
    char *body;
    sbxi_response resp;
    sbxi_http_cb cb;
    void *ud;
    bool doomed;   /* sbxi_http_async_cancel picked it */
    bool deadline; /* opts.timeout_ms was given: its expiry is resp.timed_out */
} areq;

typedef struct pollctx {
    uv_poll_t poll;
    struct pollctx *prev, *next;
    curl_socket_t fd;
    sbxi_http_async *e;
} pollctx;

struct sbxi_http_async {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    areq *reqs;
    pollctx *polls;
    size_t pending;
    int open_handles; /* libuv handles not closed yet: the engine is freed when this hits 0 */
    int in_dispatch;
    bool free_requested, freeing;
};

#define LIST_ADD(head, x)                                                                          \
    do {                                                                                           \
        (x)->prev = NULL;                                                                          \
        (x)->next = (head);                                                                        \
        if (head)                                                                                  \
            (head)->prev = (x);                                                                    \
        (head) = (x);                                                                              \
    } while (0)
#define LIST_DEL(head, x)                                                                          \
    do {                                                                                           \
        if ((x)->prev)                                                                             \
            (x)->prev->next = (x)->next;                                                           \
        else                                                                                       \
            (head) = (x)->next;                                                                    \
        if ((x)->next)                                                                             \
            (x)->next->prev = (x)->prev;                                                           \
    } while (0)

static void engine_destroy(sbxi_http_async *e);

static void handle_closed(uv_handle_t *h) {
    sbxi_http_async *e = h->data;
    if (h->type == UV_POLL)
        free(h);
    if (--e->open_handles == 0 && e->freeing)
        free(e);
}

static void poll_close(sbxi_http_async *e, pollctx *p) {
    LIST_DEL(e->polls, p);
    uv_poll_stop(&p->poll);
    uv_close((uv_handle_t *)&p->poll, handle_closed);
}

/* Run one request's callback and free it. */
static void complete(sbxi_http_async *e, areq *r, bool cancelled) {
    LIST_DEL(e->reqs, r);
    e->pending--;
    if (cancelled) {
        r->resp.curl_code = CURLE_ABORTED_BY_CALLBACK;
        snprintf(r->resp.curl_error, sizeof(r->resp.curl_error), "cancelled");
    }
    sbxi_http_result res = {
        .status = r->resp.curl_code ? 0 : r->resp.status, /* a cut answer is none */
        .body = r->resp.body ? r->resp.body : "",
        .len = r->resp.len,
        .content_type = r->resp.content_type,
        .retry_after = r->resp.retry_after,
        .curl_code = (int)r->resp.curl_code,
        .error = r->resp.curl_code ? r->resp.curl_error : "",
        .cancelled = cancelled,
        .detail = &r->resp,
    };
    e->in_dispatch++;
    r->cb(r->ud, &res);
    e->in_dispatch--;
    curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->hdrs);
    free(r->body);
    free(r->resp.body);
    free(r);
}

static void check_done(sbxi_http_async *e) {
    CURLMsg *m;
    int left;
    while (!e->freeing && (m = curl_multi_info_read(e->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *h = m->easy_handle;
        CURLcode rc = m->data.result;
        areq *r = NULL;
        curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
        curl_multi_remove_handle(e->multi, h);
        sbxi_response_finish(h, rc, &r->resp);
        r->resp.timed_out = r->deadline && rc == CURLE_OPERATION_TIMEDOUT;
        complete(e, r, false);
    }
    if (e->free_requested && e->in_dispatch == 0 && !e->freeing)
        engine_destroy(e);
}

static void on_poll(uv_poll_t *h, int status, int events) {
    pollctx *p = (pollctx *)h;
    sbxi_http_async *e = p->e;
    int flags = 0, running;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    e->in_dispatch++;
    curl_multi_socket_action(e->multi, p->fd, flags, &running);
    e->in_dispatch--;
    check_done(e);
}

static void on_timer(uv_timer_t *t) {
    sbxi_http_async *e = t->data;
    int running;
    e->in_dispatch++;
    curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    e->in_dispatch--;
    check_done(e);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    sbxi_http_async *e = userp;
    pollctx *p = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (p) {
            poll_close(e, p);
            curl_multi_assign(e->multi, s, NULL);
        }
        return 0;
    }
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return -1;
        if (uv_poll_init_socket(e->loop, &p->poll, s) < 0) {
            free(p);
            return -1;
        }
        p->poll.data = e;
        p->fd = s;
        p->e = e;
        e->open_handles++;
        LIST_ADD(e->polls, p);
        curl_multi_assign(e->multi, s, p);
    }
    int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
    uv_poll_start(&p->poll, ev, on_poll);
    return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
    sbxi_http_async *e = userp;
    if (timeout_ms < 0)
        uv_timer_stop(&e->timer);
    else
        uv_timer_start(&e->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

int sbxi_http_async_new(uv_loop_t *loop, sbxi_http_async **ret) {
    if (!loop || !ret)
        return -EINVAL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -ENOMEM;
    sbxi_http_async *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->loop = loop;
    e->multi = curl_multi_init();
    if (!e->multi) {
        free(e);
        return -ENOMEM;
    }
    uv_timer_init(loop, &e->timer);
    e->timer.data = e;
    e->open_handles = 1;
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
    *ret = e;
    return 0;
}

static void engine_destroy(sbxi_http_async *e) {
    e->freeing = true;
    while (e->reqs) {
        areq *r = e->reqs;
        curl_multi_remove_handle(e->multi, r->easy);
        complete(e, r, true);
    }
    curl_multi_cleanup(e->multi);
    while (e->polls)
        poll_close(e, e->polls);
    uv_timer_stop(&e->timer);
    uv_close((uv_handle_t *)&e->timer, handle_closed);
}

void sbxi_http_async_free(sbxi_http_async *e) {
    if (!e || e->free_requested)
        return;
    e->free_requested = true;
    if (e->in_dispatch == 0)
        engine_destroy(e);
}

int sbxi_http_async_request_ex(sbxi_http_async *e, const char *method, const char *url,
                               const char *const *headers, const void *body, size_t len,
                               const sbxi_http_opts *opts, sbxi_http_cb cb, void *ud) {
    if (!e || !method || !url || !cb || (!body && len))
        return -EINVAL;
    if (e->free_requested)
        return -ESHUTDOWN;
    areq *r = calloc(1, sizeof(*r));
    if (!r || !(r->easy = curl_easy_init()))
        goto oom;
    if (body && !(r->body = malloc(len ? len : 1)))
        goto oom;
    if (body && len)
        memcpy(r->body, body, len);
    r->hdrs = sbxi_headers(opts ? opts->content_type : NULL, opts ? opts->accept : NULL,
                           opts ? opts->bearer_token : NULL, opts ? opts->extra_header : NULL);
    for (size_t i = 0; r->hdrs && headers && headers[i]; i++) {
        struct curl_slist *n = curl_slist_append(r->hdrs, headers[i]);
        if (!n)
            goto oom;
        r->hdrs = n;
    }
    if (!r->hdrs)
        goto oom;
    r->cb = cb;
    r->ud = ud;
    if (opts) {
        r->resp.on_chunk = opts->on_chunk;
        r->resp.chunk_ud = opts->chunk_ud;
    }
    sbxi_easy_setup(r->easy, method, url, opts ? opts->unix_path : NULL, r->hdrs, r->body, len,
                    &r->resp);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    if (opts && opts->timeout_ms > 0) {
        curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, opts->timeout_ms);
        r->deadline = true;
    }
    if (opts && opts->connect_timeout_ms > 0)
        curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, opts->connect_timeout_ms);
    if (curl_multi_add_handle(e->multi, r->easy) != CURLM_OK)
        goto oom;
    LIST_ADD(e->reqs, r);
    e->pending++;
    return 0;
oom:
    if (r) {
        if (r->easy)
            curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->hdrs);
        free(r->body);
        free(r);
    }
    return -ENOMEM;
}

int sbxi_http_async_request(sbxi_http_async *e, const char *method, const char *url,
                            const char *const *headers, const void *body, size_t len,
                            sbxi_http_cb cb, void *ud) {
    return sbxi_http_async_request_ex(e, method, url, headers, body, len, NULL, cb, ud);
}

static areq *first_doomed(sbxi_http_async *e) {
    areq *r = e->reqs;
    while (r && !r->doomed)
        r = r->next;
    return r;
}

void sbxi_http_async_cancel(sbxi_http_async *e) {
    if (!e || e->freeing)
        return;
    for (areq *r = e->reqs; r; r = r->next)
        r->doomed = true;
    e->in_dispatch++;
    for (areq *r; !e->freeing && (r = first_doomed(e));) {
        curl_multi_remove_handle(e->multi, r->easy);
        complete(e, r, true);
    }
    e->in_dispatch--;
    if (e->free_requested && e->in_dispatch == 0 && !e->freeing)
        engine_destroy(e);
}

size_t sbxi_http_async_pending(const sbxi_http_async *e) {
    return e ? e->pending : 0;
}
