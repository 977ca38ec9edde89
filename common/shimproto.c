/* Encoding and decoding of daemon <-> shim messages (see shimproto.h). */
#include "common/shimproto.h"

#include "common/fdpass.h"
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
    return fdpass_send(sock, &iov, 1, fds, n_fds);
}

static int recv_msg(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds, int flags) {
    _cleanup_free_ char *buf = malloc(SHIMPROTO_MSG_MAX + 1);
    if (!buf)
        return -ENOMEM;
    int tmp[SHIMPROTO_MAX_FDS];
    size_t got = 0;
    ssize_t n = fdpass_recv(sock, buf, SHIMPROTO_MSG_MAX, tmp, SHIMPROTO_MAX_FDS, &got, flags);
    if (n < 0)
        return (int)n;
    buf[n] = '\0';
    json_t *msg = n > 0 ? json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (!msg || !json_is_object(msg) ||
        json_integer_value(json_object_get(msg, "v")) != SHIMPROTO_VERSION ||
        !json_is_string(json_object_get(msg, "type"))) {
        json_decref(msg);
        fdpass_close_all(tmp, got);
        return -EPROTO;
    }
    if (fds)
        memcpy(fds, tmp, sizeof(int) * got);
    else
        fdpass_close_all(tmp, got);
    if (n_fds)
        *n_fds = fds ? got : 0;
    *ret = msg;
    return 0;
}

int shimproto_recv(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds) {
    return recv_msg(sock, ret, fds, n_fds, 0);
}

int shimproto_recv_nowait(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds) {
    return recv_msg(sock, ret, fds, n_fds, MSG_DONTWAIT);
}

json_t *shimproto_error(json_t *seq, const error_rec *err) {
    return json_pack("{s:s, s:O?, s:i, s:s}", "type", "error", "seq", seq, "errno",
                     err->code < 0 ? -err->code : EIO, "message", err->message);
}

int shimproto_error_parse(json_t *msg, error_rec *err) {
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
