/* Lingering close (RFC 9112 9.6) of a connection answered before its body was read (a framing
 * error, a TCP request without a token, a Content-Length over the limit: api/http.c).
 * libmicrohttpd then closes the socket with the body still coming, and most clients send their
 * whole body before they read: the close would reset the connection and lose their answer. The
 * daemon keeps a duplicate of the socket, reads and drops what still comes (nothing is kept), and
 * closes it at the client's end of stream, at an error, or after LINGER_MS; at most LINGER_MAX
 * connections linger at once (one descriptor each), any other closes at once. */
#include "sandboxd/api/http.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define LINGER_MAX 64
#define LINGER_MS 5000
#define LINGER_READS 16 /* reads of 16 KiB per wakeup: a fast sender does not hold the loop */

typedef struct lingering {
    uv_poll_t poll;
    uv_timer_t timer;
    int fd, handles;
} lingering;

static unsigned n_lingering; /* (one daemon per process) */

static void linger_closed(uv_handle_t *h) {
    lingering *l = h->data;
    if (--l->handles > 0)
        return;
    safe_close(l->fd);
    free(l);
    n_lingering--;
}

static void linger_end(lingering *l) {
    if (uv_is_closing((uv_handle_t *)&l->poll))
        return;
    uv_close((uv_handle_t *)&l->poll, linger_closed);
    uv_close((uv_handle_t *)&l->timer, linger_closed);
}

static void linger_timeout(uv_timer_t *t) {
    linger_end(t->data);
}

static void linger_read(uv_poll_t *p, int status, int events) {
    lingering *l = p->data;
    static char buf[16384];
    ssize_t n = 1;
    for (int i = 0; i < LINGER_READS && n > 0; i++)
        n = read(l->fd, buf, sizeof(buf));
    if (status < 0 || n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        linger_end(l);
}

void sd_http_linger(sd_daemon *d, int fd) {
    lingering *l = n_lingering < LINGER_MAX ? calloc(1, sizeof(*l)) : NULL;
    if (!l)
        return;
    l->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (l->fd < 0 || fd_set_nonblock(l->fd, 1) < 0 ||
        uv_poll_init_socket(d->loop, &l->poll, l->fd) < 0) {
        safe_close(l->fd);
        free(l);
        return;
    }
    uv_timer_init(d->loop, &l->timer);
    l->poll.data = l->timer.data = l;
    l->handles = 2;
    n_lingering++;
    uv_poll_start(&l->poll, UV_READABLE | UV_DISCONNECT, linger_read);
    uv_timer_start(&l->timer, linger_timeout, LINGER_MS, 0);
}
