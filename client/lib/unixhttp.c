/* libsbx's synchronous HTTP/1.1 client for the daemon's Unix socket, without libcurl: one
 * kept-alive connection per client, the request written with its body (in memory, or streamed
 * from a descriptor with Content-Length or chunked), the answer read with Content-Length,
 * chunked or close-delimited framing and handed to the same collection/streaming rules as the
 * libcurl path (sbxi_response), within the client's timeout_ms when it has one. TCP and TLS
 * endpoints still go through libcurl (http.c). */
#include "client/lib/internal.h"
#include "common/grow.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define HEAD_MAX (64 * 1024)

int sbxi_unix_connect(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {.tv_sec = 10}; /* like libcurl's connect timeout (a full backlog) */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int r;
    do
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        int e = errno == EINPROGRESS || errno == EAGAIN ? ETIMEDOUT : errno;
        close(fd);
        return -e;
    }
    tv.tv_sec = 0;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

/* ---- the failure record, in libcurl's terms (errors.c maps them to messages) ---- */
static int fail(sbxi_response *r, CURLcode code, int os_errno, const char *what) {
    r->curl_code = code;
    r->os_errno = os_errno;
    if (os_errno)
        snprintf(r->curl_error, sizeof(r->curl_error), "%s: %s", what, strerror(os_errno));
    else
        snprintf(r->curl_error, sizeof(r->curl_error), "%s", what);
    return -1;
}

/* ---- sending ---- */
/* a and then b (b may be empty) in as few calls as the socket takes: a request's head and body
 * in one, so that the daemon wakes once for it, not once for each. */
static int send_two(int fd, const void *a, size_t alen, const void *b, size_t blen) {
    struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
    struct iovec *v = iov;
    size_t nv = blen ? 2 : 1;
    while (nv > 0) {
        struct msghdr mh = {.msg_iov = v, .msg_iovlen = nv};
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        size_t k = (size_t)n;
        for (; nv > 0 && k >= v->iov_len; v++, nv--) /* the parts sent whole */
            k -= v->iov_len;
        if (nv > 0) { /* the rest of a part sent in part */
            v->iov_base = (char *)v->iov_base + k;
            v->iov_len -= k;
        }
    }
    return 0;
}

static int send_all(int fd, const void *data, size_t len) {
    return send_two(fd, data, len, NULL, 0);
}

/* The request line and headers. curl's conventions for the header list hold: "Name:" with
 * nothing after the colon removes a header, so it is not sent. */
static char *request_head(const char *method, const char *path, const struct curl_slist *hdrs,
                          bool has_body, int64_t body_len, size_t *ret_len) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "%s %s HTTP/1.1\r\nHost: localhost\r\n", method, path);
    for (const struct curl_slist *h = hdrs; h; h = h->next) {
        const char *colon = strchr(h->data, ':');
        if (colon && colon[1 + strspn(colon + 1, " ")] == 0)
            continue;
        fprintf(f, "%s\r\n", h->data);
    }
    if (has_body && body_len >= 0)
        fprintf(f, "Content-Length: %lld\r\n", (long long)body_len);
    else if (has_body)
        fputs("Transfer-Encoding: chunked\r\n", f);
    fputs("\r\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    *ret_len = len;
    return buf;
}

/* A body streamed from a descriptor: size bytes, or chunked to its end when size < 0. -errno
 * for a socket failure, 1 when reading the descriptor failed. */
static int send_fd_body(int sock, int fd, int64_t size) {
    char buf[65536 + 16];
    for (int64_t sent = 0; size < 0 || sent < size;) {
        size_t want = 65536;
        if (size >= 0 && (int64_t)want > size - sent)
            want = (size_t)(size - sent);
        ssize_t n = read(fd, buf + 10, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n == 0 && size >= 0))
            return 1; /* unreadable, or shorter than it said */
        if (size < 0) {
            char hdr[11];
            int h = snprintf(hdr, sizeof(hdr), "%zx\r\n", (size_t)n);
            memcpy(buf + 10 - h, hdr, (size_t)h);
            memcpy(buf + 10 + n, "\r\n", 2);
            int r = send_all(sock, buf + 10 - h, (size_t)(h + n + 2));
            if (r < 0)
                return r;
            if (n == 0)
                return 0; /* that was the last chunk, "0\r\n\r\n" */
        } else {
            int r = send_all(sock, buf + 10, (size_t)n);
            if (r < 0)
                return r;
        }
        sent += n;
    }
    return 0;
}

/* ---- receiving ---- */
typedef struct reader {
    int fd;
    size_t off, end;
    bool got_any;            /* a byte of the answer arrived */
    uint64_t deadline_ms;    /* monotonic; 0: none */
    int intr_fd, intr_signo; /* sbx_client_set_interrupt_fd's (-1: none) */
    char buf[65536];
} reader;

/* 0 once rd's socket is readable, -ETIMEDOUT at the deadline, -EINTR when the interrupt signal
 * came, -errno. */
static int wait_readable(const reader *rd) {
    for (;;) {
        int ms = -1;
        if (rd->deadline_ms) {
            uint64_t now = now_mono_ms();
            if (now >= rd->deadline_ms)
                return -ETIMEDOUT;
            uint64_t left = rd->deadline_ms - now;
            ms = left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct pollfd pfd[2] = {{.fd = rd->fd, .events = POLLIN},
                                {.fd = rd->intr_fd, .events = POLLIN}};
        int r = poll(pfd, rd->intr_fd >= 0 ? 2 : 1, ms);
        if (r > 0 && pfd[1].revents && rd->intr_fd >= 0 &&
            sbxi_interrupt_came(rd->intr_fd, rd->intr_signo))
            return -EINTR;
        if (r > 0 && pfd[0].revents)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* More bytes into the buffer: > 0, 0 at the end of the stream, -errno (-ETIMEDOUT past the
 * deadline, -EINTR for the interrupt signal). */
static ssize_t fill(reader *rd) {
    int w = rd->deadline_ms || rd->intr_fd >= 0 ? wait_readable(rd) : 0;
    if (w < 0)
        return w;
    if (rd->off == rd->end)
        rd->off = rd->end = 0;
    if (rd->end == sizeof(rd->buf)) {
        memmove(rd->buf, rd->buf + rd->off, rd->end - rd->off);
        rd->end -= rd->off;
        rd->off = 0;
    }
    for (;;) {
        ssize_t n = recv(rd->fd, rd->buf + rd->end, sizeof(rd->buf) - rd->end, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        rd->end += (size_t)n;
        if (n > 0)
            rd->got_any = true;
        return n;
    }
}

/* One CRLF-terminated line (without it) into line. 0, or -1 with resp's error set. */
static int read_line(reader *rd, char *line, size_t cap, sbxi_response *resp) {
    for (;;) {
        char *nl = memchr(rd->buf + rd->off, '\n', rd->end - rd->off);
        if (nl) {
            size_t n = (size_t)(nl - (rd->buf + rd->off));
            if (n >= cap)
                return fail(resp, CURLE_WEIRD_SERVER_REPLY, 0, "header line too long");
            memcpy(line, rd->buf + rd->off, n);
            if (n && line[n - 1] == '\r')
                n--;
            line[n] = 0;
            rd->off += (size_t)(nl - (rd->buf + rd->off)) + 1;
            return 0;
        }
        if (rd->end - rd->off >= cap)
            return fail(resp, CURLE_WEIRD_SERVER_REPLY, 0, "header line too long");
        ssize_t n = fill(rd);
        if (n <= 0)
            return rd->got_any ? fail(resp, CURLE_RECV_ERROR, n < 0 ? (int)-n : 0,
                                      n < 0 ? "recv failure" : "connection closed mid-answer")
                               : fail(resp, CURLE_GOT_NOTHING, n < 0 ? (int)-n : 0,
                                      "Empty reply from server");
    }
}

/* Body bytes: to on_chunk for a 2xx answer that streams, else collected (like http.c). */
static int deliver(sbxi_response *r, const char *data, size_t len) {
    if (r->on_chunk && r->status >= 200 && r->status < 300) {
        r->on_chunk(r->chunk_ud, data, len);
        return 0;
    }
    if (r->len + len + 1 > SBXI_MAX_RESPONSE ||
        grow_reserve((void **)&r->body, &r->cap, r->len + len + 1, 1) < 0) {
        r->overflow = true;
        return fail(r, CURLE_WRITE_ERROR, 0, "answer too large");
    }
    memcpy(r->body + r->len, data, len);
    r->len += len;
    r->body[r->len] = 0;
    return 0;
}

/* n bytes of body (n < 0: up to the end of the stream). */
static int read_body(reader *rd, int64_t n, sbxi_response *resp) {
    while (n != 0) {
        if (rd->off == rd->end) {
            ssize_t got = fill(rd);
            if (got < 0)
                return fail(resp, CURLE_RECV_ERROR, (int)-got, "recv failure");
            if (got == 0)
                return n < 0 ? 0 : fail(resp, CURLE_PARTIAL_FILE, 0, "the answer ended early");
        }
        size_t take = rd->end - rd->off;
        if (n >= 0 && (int64_t)take > n)
            take = (size_t)n;
        if (deliver(resp, rd->buf + rd->off, take) < 0)
            return -1;
        rd->off += take;
        if (n > 0)
            n -= (int64_t)take;
    }
    return 0;
}

static int read_chunked(reader *rd, sbxi_response *resp) {
    char line[256];
    for (;;) {
        if (read_line(rd, line, sizeof(line), resp) < 0)
            return -1;
        char *end;
        errno = 0;
        unsigned long long n = strtoull(line, &end, 16);
        if (end == line || errno)
            return fail(resp, CURLE_RECV_ERROR, 0, "bad chunk size in the answer");
        if (n == 0)
            break;
        if (read_body(rd, (int64_t)n, resp) < 0 || read_line(rd, line, sizeof(line), resp) < 0)
            return -1;
    }
    do /* trailers, up to the empty line */
        if (read_line(rd, line, sizeof(line), resp) < 0)
            return -1;
    while (line[0]);
    return 0;
}

typedef struct head_info {
    int64_t content_length; /* -1 when absent */
    bool chunked, close;
} head_info;

static void header_line(const char *line, sbxi_response *resp, head_info *hi) {
    const char *colon = strchr(line, ':');
    if (!colon)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1 + strspn(colon + 1, " \t");
#define IS(name) (nlen == sizeof(name) - 1 && strncasecmp(line, name, nlen) == 0)
    if (IS("Content-Type"))
        snprintf(resp->content_type, sizeof(resp->content_type), "%s", v);
    else if (IS("Content-Length"))
        hi->content_length = strtoll(v, NULL, 10);
    else if (IS("Transfer-Encoding"))
        hi->chunked = strcasestr(v, "chunked") != NULL;
    else if (IS("Connection"))
        hi->close = strcasestr(v, "close") != NULL;
    else if (IS("Retry-After"))
        resp->retry_after = strtol(v, NULL, 10);
#undef IS
}

/* Status line and headers (skipping 1xx answers). */
static int read_head(reader *rd, sbxi_response *resp, head_info *hi) {
    char line[8192];
    for (;;) {
        if (read_line(rd, line, sizeof(line), resp) < 0)
            return -1;
        int minor = 0;
        long status = 0;
        if (sscanf(line, "HTTP/1.%d %ld", &minor, &status) != 2 || status < 100 || status > 999)
            return fail(resp, CURLE_WEIRD_SERVER_REPLY, 0, "not an HTTP answer");
        *hi = (head_info){.content_length = -1, .close = minor == 0};
        resp->status = status;
        size_t total = 0;
        for (;;) {
            if (read_line(rd, line, sizeof(line), resp) < 0)
                return -1;
            if (!line[0])
                break;
            if ((total += strlen(line)) > HEAD_MAX)
                return fail(resp, CURLE_WEIRD_SERVER_REPLY, 0, "headers too large");
            header_line(line, resp, hi);
        }
        if (status >= 200)
            return 0;
        resp->content_type[0] = 0; /* a 100 Continue: the real answer follows */
    }
}

/* ---- one exchange ---- */
typedef struct req {
    const char *method, *path;
    const struct curl_slist *hdrs;
    const void *body;
    size_t len;
    int body_fd;
    int64_t fd_size;
    uint64_t deadline_ms; /* monotonic; 0: none */
    int intr_fd, intr_signo;
} req;

/* Send the request and read the answer on fd. 0, 1 (the connection must not be reused), or -1
 * with resp's error set; *retryable tells whether nothing at all came back. */
static int exchange(int fd, const req *q, sbxi_response *resp, bool *retryable) {
    *retryable = false;
    bool has_body = q->body_fd >= 0 || q->body || strcmp(q->method, "POST") == 0 ||
                    strcmp(q->method, "PUT") == 0;
    has_body = has_body && strcmp(q->method, "GET") != 0;
    size_t hlen = 0;
    _cleanup_free_ char *head = request_head(q->method, q->path, q->hdrs, has_body,
                                             q->body_fd >= 0 ? q->fd_size : (int64_t)q->len, &hlen);
    if (!head)
        return fail(resp, CURLE_OUT_OF_MEMORY, 0, "out of memory");
    int r = send_two(fd, head, hlen, q->body, q->body_fd < 0 && q->body ? q->len : 0);
    if (r < 0) {
        *retryable = r == -EPIPE || r == -ECONNRESET;
        return fail(resp, CURLE_SEND_ERROR, -r, "send failure");
    }
    if (q->body_fd >= 0 && (r = send_fd_body(fd, q->body_fd, q->fd_size)) != 0)
        return r > 0 ? fail(resp, CURLE_READ_ERROR, 0, "cannot read the body to upload")
                     : fail(resp, CURLE_SEND_ERROR, -r, "send failure");
    _cleanup_free_ reader *rd = malloc(sizeof(*rd)); /* (its 64 KiB buffer is not zeroed) */
    if (!rd)
        return fail(resp, CURLE_OUT_OF_MEMORY, 0, "out of memory");
    rd->fd = fd;
    rd->off = rd->end = 0;
    rd->got_any = false;
    rd->deadline_ms = q->deadline_ms;
    rd->intr_fd = q->intr_fd;
    rd->intr_signo = q->intr_signo;
    head_info hi;
    if (read_head(rd, resp, &hi) < 0) {
        *retryable = !rd->got_any && q->body_fd < 0 && resp->os_errno != ETIMEDOUT &&
                     resp->os_errno != EINTR;
        return -1;
    }
    bool no_body = strcmp(q->method, "HEAD") == 0 || resp->status == 204 || resp->status == 304;
    if (!no_body && hi.chunked)
        r = read_chunked(rd, resp);
    else if (!no_body)
        r = read_body(rd, hi.content_length, resp);
    if (r < 0)
        return -1;
    return hi.close || (!hi.chunked && hi.content_length < 0 && !no_body) ? 1 : 0;
}

void sbxi_unix_request(sbx_client *c, size_t ep, const char *method, const char *path,
                       const struct curl_slist *hdrs, const void *body, size_t len, int body_fd,
                       int64_t fd_size, sbxi_response *resp) {
    uint64_t deadline = c->timeout_ms ? now_mono_ms() + c->timeout_ms : 0;
    const req q = {method,  path,    hdrs,     body,       len,
                   body_fd, fd_size, deadline, c->intr_fd, c->intr_signo};
    if (c->ufd >= 0 && c->ufd_ep != ep) {
        close(c->ufd);
        c->ufd = -1;
    }
    if (c->intr_fd >= 0 && sbxi_interrupt_came(c->intr_fd, c->intr_signo)) {
        /* the signal came just before the call: nothing is sent */
        fail(resp, CURLE_RECV_ERROR, EINTR, "interrupted before sending");
        resp->interrupted = true;
    }
    for (int attempt = 0; !resp->interrupted; attempt++) {
        bool reused = c->ufd >= 0;
        if (!reused) {
            int fd = sbxi_unix_connect(c->eps[ep].unix_path);
            if (fd < 0) {
                fail(resp, CURLE_COULDNT_CONNECT, -fd, "cannot connect");
                break;
            }
            c->ufd = fd;
            c->ufd_ep = ep;
        }
        bool retryable;
        int r = exchange(c->ufd, &q, resp, &retryable);
        if (r < 0 && q.deadline_ms && resp->os_errno == ETIMEDOUT) {
            resp->curl_code = CURLE_OPERATION_TIMEDOUT;
            resp->timed_out = true;
            snprintf(resp->curl_error, sizeof(resp->curl_error), "timed out after %llu ms",
                     (unsigned long long)c->timeout_ms);
        }
        resp->interrupted = r < 0 && resp->os_errno == EINTR; /* (only fill's -EINTR says it) */
        if (r != 0) {
            close(c->ufd);
            c->ufd = -1;
        }
        if (r < 0 && reused && retryable && attempt == 0) {
            /* the daemon closed the idle kept-alive connection: once more on a new one */
            sbxi_response_reset(resp);
            continue;
        }
        break;
    }
    if (!resp->body) {
        resp->body = calloc(1, 1);
        resp->cap = resp->body ? 1 : 0;
    }
}
