/* libcurl multi on a libuv loop (see http.h): one uv_poll per socket curl asks to watch, one
 * uv_timer for curl's timeouts, completed transfers delivered from curl_multi_info_read. */
#include "client/grpo/http.h"

#include "common/macro.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <uv.h>

#define HTTP_MAX_BODY (512u << 20)

typedef struct http_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    grpo_http *h;
    struct http_sock *next, *prev;
} http_sock;

typedef struct http_xfer {
    CURL *easy;
    struct curl_slist *headers;
    char *buf;
    size_t len, cap;
    bool too_big;
    grpo_http_cb cb;
    void *ud;
    char errbuf[CURL_ERROR_SIZE];
    struct http_xfer *next, *prev;
} http_xfer;

struct grpo_http {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    http_sock *socks;
    http_xfer *xfers;
    size_t pending;
};

#define LIST_ADD(head, e)                                                                          \
    do {                                                                                           \
        (e)->prev = NULL;                                                                          \
        (e)->next = (head);                                                                        \
        if (head)                                                                                  \
            (head)->prev = (e);                                                                    \
        (head) = (e);                                                                              \
    } while (0)
#define LIST_DEL(head, e)                                                                          \
    do {                                                                                           \
        if ((e)->prev)                                                                             \
            (e)->prev->next = (e)->next;                                                           \
        else                                                                                       \
            (head) = (e)->next;                                                                    \
        if ((e)->next)                                                                             \
            (e)->next->prev = (e)->prev;                                                           \
    } while (0)

static void xfer_free(http_xfer *x) {
    if (!x)
        return;
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x->buf);
    free(x);
}

static void check_done(grpo_http *h) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(h->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        http_xfer *x = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(h->multi, x->easy);
        LIST_DEL(h->xfers, x);
        h->pending--;
        grpo_http_resp resp = {.body = x->buf ? x->buf : (char *)"", .len = x->len};
        if (rc != CURLE_OK || x->too_big) {
            resp.transport_error = 1;
            resp.error = x->too_big     ? "response too large"
                         : x->errbuf[0] ? x->errbuf
                                        : curl_easy_strerror(rc);
        } else {
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &resp.status);
        }
        x->cb(x->ud, &resp);
        xfer_free(x);
    }
}

static void on_poll(uv_poll_t *p, int status, int events) {
    http_sock *s = p->data;
    grpo_http *h = s->h;
    int flags = 0, running;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(h->multi, s->fd, flags, &running);
    check_done(h);
}

static void on_timer(uv_timer_t *t) {
    grpo_http *h = t->data;
    int running;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(h);
}

static void sock_closed(uv_handle_t *handle) {
    free(handle->data);
}

static void sock_close(grpo_http *h, http_sock *s) {
    LIST_DEL(h->socks, s);
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, sock_closed);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
    grpo_http *h = userp;
    http_sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            curl_multi_assign(h->multi, fd, NULL);
            sock_close(h, s);
        }
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s || uv_poll_init_socket(h->loop, &s->poll, fd) < 0) {
            free(s);
            return -1;
        }
        s->fd = fd;
        s->h = h;
        s->poll.data = s;
        LIST_ADD(h->socks, s);
        curl_multi_assign(h->multi, fd, s);
    }
    int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, ev, on_poll);
    return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
    grpo_http *h = userp;
    if (timeout_ms < 0)
        uv_timer_stop(&h->timer);
    else
        uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static void global_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int grpo_http_new(uv_loop_t *loop, grpo_http **ret) {
    static uv_once_t once = UV_ONCE_INIT;
    uv_once(&once, global_init);
    grpo_http *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->loop = loop;
    h->multi = curl_multi_init();
    if (!h->multi) {
        free(h);
        return -ENOMEM;
    }
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 64L);
    *ret = h;
    return 0;
}

static void http_closed(uv_handle_t *handle) {
    free(handle->data);
}

void grpo_http_free(grpo_http *h) {
    if (!h)
        return;
    while (h->xfers) {
        http_xfer *x = h->xfers;
        curl_multi_remove_handle(h->multi, x->easy);
        LIST_DEL(h->xfers, x);
        xfer_free(x);
    }
    curl_multi_cleanup(h->multi);
    while (h->socks)
        sock_close(h, h->socks);
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, http_closed);
}

size_t grpo_http_pending(const grpo_http *h) {
    return h ? h->pending : 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    http_xfer *x = ud;
    size_t n = size * nmemb;
    if (x->len + n + 1 > HTTP_MAX_BODY) {
        x->too_big = true;
        return 0;
    }
    if (x->len + n + 1 > x->cap) {
        size_t cap = MAX(x->cap * 2, x->len + n + 1);
        char *nb = realloc(x->buf, MAX(cap, 4096));
        if (!nb)
            return 0;
        x->buf = nb;
        x->cap = MAX(cap, 4096);
    }
    memcpy(x->buf + x->len, ptr, n);
    x->len += n;
    x->buf[x->len] = 0;
    return n;
}

static int add_header(http_xfer *x, const char *name, const char *v) {
    char line[1024];
    snprintf(line, sizeof(line), "%s%s", name, v);
    struct curl_slist *l = curl_slist_append(x->headers, line);
    if (!l)
        return -ENOMEM;
    x->headers = l;
    return 0;
}

static int xfer_setup(http_xfer *x, const grpo_http_req *req) {
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (req->timeout_ms)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
    if (req->unix_socket)
        curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
    int r = add_header(x, "Expect:", "");
    if (r >= 0 && req->bearer)
        r = add_header(x, "Authorization: Bearer ", req->bearer);
    if (r >= 0 && req->accept)
        r = add_header(x, "Accept: ", req->accept);
    if (r >= 0 && req->body)
        r = add_header(
            x, "Content-Type: ", req->content_type ? req->content_type : "application/json");
    if (r < 0)
        return r;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    if (req->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, req->body);
    }
    if (strcmp(req->method, "POST") != 0 && strcmp(req->method, "GET") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    else if (strcmp(req->method, "POST") == 0 && !req->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, "");
    }
    return 0;
}

int grpo_http_submit(grpo_http *h, const grpo_http_req *req, grpo_http_cb cb, void *userdata) {
    http_xfer *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->cb = cb;
    x->ud = userdata;
    x->easy = curl_easy_init();
    if (!x->easy || xfer_setup(x, req) < 0) {
        xfer_free(x);
        return -ENOMEM;
    }
    if (curl_multi_add_handle(h->multi, x->easy) != CURLM_OK) {
        xfer_free(x);
        return -EIO;
    }
    LIST_ADD(h->xfers, x);
    h->pending++;
    return 0;
}
