/* libFuzzer target: the daemon <-> shim protocol decoder. The input is sent as one packet over a
 * SOCK_SEQPACKET socketpair (the real transport) and decoded with shimproto_recv, then its
 * type and error fields are read as the daemon and shim do. */
#include "common/shimproto.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sv[2] = {-1, -1};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > SHIMPROTO_MSG_MAX + 16)
        return 0;
    if (sv[0] < 0) {
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
            abort();
        int sz = 4 * SHIMPROTO_MSG_MAX;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    }
    if (size == 0)
        return 0; /* an empty packet reads as a closed peer; covered by the unit tests */
    if (send(sv[0], data, size, MSG_NOSIGNAL) != (ssize_t)size)
        abort();
    json_t *msg = NULL;
    int fds[SHIMPROTO_MAX_FDS];
    size_t n_fds = 0;
    int r = shimproto_recv(sv[1], &msg, fds, &n_fds);
    if (r == 0) {
        if (!json_is_object(msg) || n_fds != 0)
            abort();
        const char *type = shimproto_type(msg);
        if (!type)
            abort();
        error_rec err = {0};
        int e = shimproto_error_parse(msg, &err);
        if (e > 0)
            abort();
        json_t *reply = shimproto_error(json_object_get(msg, "seq"), &err);
        json_decref(reply);
        json_decref(msg);
    } else if (r != -EPROTO) {
        abort(); /* a bad packet is EPROTO, never anything else */
    }
    return 0;
}
