/* One shim connection, driven by the loop (see shim_client.h). */
#include "sandboxd/core/shim_client.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "common/shimproto.h"

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef struct pending {
    struct pending *next;
    uint64_t seq;
    sd_shim_reply_fn cb;
    void *ud;
} pending;

struct sd_shim {
    uv_poll_t poll;
    int fd;
    uint64_t next_seq;
    pending *pending;
    sd_shim_ops ops;
    void *ud;
    bool closing, lost, in_dispatch;
    int *rx_fds; /* the descriptors of the message being handled */
    size_t rx_n;
};

static void shim_lost(sd_shim *s) {
    if (s->lost || s->closing)
        return;
    s->lost = true;
    uv_poll_stop(&s->poll);
    if (s->ops.lost)
        s->ops.lost(s->ud);
}

static void handle_message(sd_shim *s, json_t *msg) {
    json_t *seqj = json_object_get(msg, "seq");
    if (!json_is_integer(seqj)) {
        if (s->ops.event)
            s->ops.event(s->ud, msg);
        return;
    }
    uint64_t seq = (uint64_t)json_integer_value(seqj);
    for (pending **pp = &s->pending; *pp; pp = &(*pp)->next) {
        if ((*pp)->seq != seq)
            continue;
        pending *p = *pp;
        *pp = p->next;
        if (p->cb)
            p->cb(p->ud, msg);
        free(p);
        return;
    }
}

static void close_cb(uv_handle_t *h) {
    sd_shim *s = h->data;
    safe_close(s->fd);
    free(s);
}

/* One message: an error ends the shim's channel, EPROTO is ignored (as the protocol says), and
 * EAGAIN means nothing was there. */
static void receive_one(sd_shim *s) {
    json_t *msg = NULL;
    int fds[SHIMPROTO_MAX_FDS];
    size_t n_fds = 0;
    int r = shimproto_recv(s->fd, &msg, fds, &n_fds);
    if (r < 0) {
        if (r != -EAGAIN && r != -EPROTO)
            shim_lost(s);
        return;
    }
    s->rx_fds = fds;
    s->rx_n = n_fds;
    handle_message(s, msg);
    s->rx_fds = NULL;
    s->rx_n = 0;
    for (size_t k = 0; k < n_fds; k++)
        safe_close(fds[k]);
    json_decref(msg);
}

/* One message per call: the poll is level-triggered, so a next one that is already there calls
 * again at once, and the usual single message costs no receive that finds nothing. */
static void poll_cb(uv_poll_t *h, int status, int events) {
    sd_shim *s = h->data;
    s->in_dispatch = true;
    if (!s->closing && !s->lost)
        receive_one(s);
    if (status < 0 && !s->closing)
        shim_lost(s);
    s->in_dispatch = false;
    if (s->closing)
        uv_close((uv_handle_t *)&s->poll, close_cb);
}

int sd_shim_take_fd(sd_shim *s) {
    for (size_t k = 0; s && k < s->rx_n; k++)
        if (s->rx_fds[k] >= 0)
            return TAKE_FD(s->rx_fds[k]);
    return -1;
}

int sd_shim_connect(uv_loop_t *loop, const char *sock_path, const sd_shim_ops *ops, void *ud,
                    sd_shim **ret, error_rec *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(sock_path) >= sizeof(sa.sun_path))
        return error_set(err, -ENAMETOOLONG, "socket path too long: %s", sock_path);
    strcpy(sa.sun_path, sock_path);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return error_set_errno(err, negative_errno(), "connect %s", sock_path);
    fd_set_nonblock(fd, 1);
    sd_shim *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    s->fd = TAKE_FD(fd);
    s->ops = *ops;
    s->ud = ud;
    s->next_seq = 1;
    uv_poll_init(loop, &s->poll, s->fd);
    s->poll.data = s;
    uv_poll_start(&s->poll, UV_READABLE | UV_DISCONNECT, poll_cb);
    *ret = s;
    return 0;
}

int sd_shim_request(sd_shim *s, const char *type, json_t *fields, const int *fds, size_t n_fds,
                    sd_shim_reply_fn cb, void *ud) {
    json_t *msg = fields ? fields : json_object();
    if (!s || s->lost || s->closing) {
        json_decref(msg);
        return -ENOTCONN;
    }
    pending *p = calloc(1, sizeof(*p));
    if (!p) {
        json_decref(msg);
        return -ENOMEM;
    }
    p->seq = s->next_seq++;
    p->cb = cb;
    p->ud = ud;
    json_object_set_new(msg, "type", json_string(type));
    json_object_set_new(msg, "seq", json_integer((json_int_t)p->seq));
    int r = shimproto_send(s->fd, msg, fds, n_fds);
    json_decref(msg);
    if (r < 0) {
        free(p);
        return r;
    }
    p->next = s->pending;
    s->pending = p;
    return 0;
}

void sd_shim_cancel(sd_shim *s, void *ud) {
    if (!s)
        return;
    for (pending *p = s->pending; p; p = p->next)
        if (p->ud == ud)
            p->cb = NULL;
}

void sd_shim_close(sd_shim *s) {
    if (!s || s->closing)
        return;
    s->closing = true;
    while (s->pending) { /* answered now: owners may go away right after */
        pending *p = s->pending;
        s->pending = p->next;
        if (p->cb)
            p->cb(p->ud, NULL);
        free(p);
    }
    uv_poll_stop(&s->poll);
    if (!s->in_dispatch)
        uv_close((uv_handle_t *)&s->poll, close_cb);
}
