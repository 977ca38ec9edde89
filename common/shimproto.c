/* Encoding and decoding of daemon <-> shim messages (see shimproto.h). */
#include "common/shimproto.h"

#include "common/macro.h"

#include <string.h>
#include <sys/socket.h>

int shimproto_send(int sock, json_t *msg, const int *fds, size_t n_fds) {
    if (n_fds > SHIMPROTO_MAX_FDS)
        return -EINVAL;
    if (json_object_set_new(msg, "v", json_integer(SHIMPROTO_VERSION)) < 0)
        return -ENOMEM;
    _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return -ENOMEM;
    size_t len = strlen(text);
    if (len > SHIMPROTO_MSG_MAX)
        return -EMSGSIZE;

    struct iovec iov = {.iov_base = text, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SHIMPROTO_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n_fds > 0) {
        memset(&control, 0, sizeof(control));
        mh.msg_control = control.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

static void close_all(int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        fds[i] = safe_close(fds[i]);
}

int shimproto_recv(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds) {
    _cleanup_free_ char *buf = malloc(SHIMPROTO_MSG_MAX + 1);
    if (!buf)
        return -ENOMEM;
    struct iovec iov = {.iov_base = buf, .iov_len = SHIMPROTO_MSG_MAX};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SHIMPROTO_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof(control.buf)};
    ssize_t n;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;

    size_t got = 0;
    int tmp[SHIMPROTO_MAX_FDS];
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *p = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < k; i++) {
            if (got < SHIMPROTO_MAX_FDS)
                tmp[got++] = p[i];
            else
                safe_close(p[i]);
        }
    }
    if (n == 0 && got == 0)
        return -ECONNRESET;
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n == 0) {
        close_all(tmp, got);
        return -EPROTO;
    }
    buf[n] = '\0';
    json_t *msg = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
    if (!msg || !json_is_object(msg) ||
        json_integer_value(json_object_get(msg, "v")) != SHIMPROTO_VERSION ||
        !json_is_string(json_object_get(msg, "type"))) {
        json_decref(msg);
        close_all(tmp, got);
        return -EPROTO;
    }
    if (fds)
        memcpy(fds, tmp, sizeof(int) * got);
    else
        close_all(tmp, got);
    if (n_fds)
        *n_fds = fds ? got : 0;
    *ret = msg;
    return 0;
}

json_t *shimproto_error(json_t *seq, const sbx_error *err) {
    return json_pack("{s:s, s:O?, s:i, s:s}", "type", "error", "seq", seq, "errno",
                     err->code < 0 ? -err->code : EIO, "message", err->message);
}

int shimproto_error_parse(json_t *msg, sbx_error *err) {
    int e = (int)json_integer_value(json_object_get(msg, "errno"));
    const char *m = json_string_value(json_object_get(msg, "message"));
    if (e <= 0)
        e = EIO;
    return error_set(err, -e, "%s", m ? m : "unknown error");
}

const char *shimproto_type(json_t *msg) {
    const char *t = json_string_value(json_object_get(msg, "type"));
    return t ? t : "";
}
