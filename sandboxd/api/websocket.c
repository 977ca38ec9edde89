/* RFC 6455 framing, server side (see websocket.h). */
#include "sandboxd/api/websocket.h"

#include "common/b64.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

int ws_accept_key(const char *key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char *raw = NULL;
    size_t raw_len = 0, kl = key ? strlen(key) : 0;
    if (kl != 24 || b64_decode(key, kl, &raw, &raw_len) < 0)
        return -EINVAL;
    free(raw);
    if (raw_len != 16)
        return -EINVAL;
    char cat[24 + sizeof(guid)];
    memcpy(cat, key, 24);
    memcpy(cat + 24, guid, sizeof(guid));
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)cat, 24 + sizeof(guid) - 1, md);
    char *b = b64_encode(md, sizeof(md));
    if (!b || strlen(b) != 28) {
        free(b);
        return -ENOMEM;
    }
    memcpy(out, b, 29);
    free(b);
    return 0;
}

static long refuse(unsigned *close_code, const char **why, unsigned code, const char *msg) {
    *close_code = code;
    *why = msg;
    return -1;
}

static bool known_opcode(unsigned op) {
    return op == WS_OP_CONT || op == WS_OP_TEXT || op == WS_OP_BINARY || op == WS_OP_CLOSE ||
           op == WS_OP_PING || op == WS_OP_PONG;
}

long ws_parse(unsigned char *buf, size_t len, size_t max, ws_frame *f, unsigned *close_code,
              const char **why) {
    if (len < 2)
        return 0;
    unsigned op = buf[0] & 0x0f;
    bool fin = buf[0] & 0x80, masked = buf[1] & 0x80;
    uint64_t plen = buf[1] & 0x7f;
    size_t hl = 2;
    if (buf[0] & 0x70)
        return refuse(close_code, why, WS_CLOSE_PROTOCOL, "reserved bits set");
    if (!known_opcode(op))
        return refuse(close_code, why, WS_CLOSE_PROTOCOL, "unknown opcode");
    if (!masked)
        return refuse(close_code, why, WS_CLOSE_PROTOCOL, "client frames must be masked");
    if (op >= WS_OP_CLOSE && (!fin || plen > 125))
        return refuse(close_code, why, WS_CLOSE_PROTOCOL,
                      "control frames must not be fragmented or longer than 125 bytes");
    if (plen == 126) {
        if (len < 4)
            return 0;
        plen = (uint64_t)buf[2] << 8 | buf[3];
        hl = 4;
    } else if (plen == 127) {
        if (len < 10)
            return 0;
        plen = 0;
        for (int i = 0; i < 8; i++)
            plen = plen << 8 | buf[2 + i];
        hl = 10;
        if (plen >> 63)
            return refuse(close_code, why, WS_CLOSE_PROTOCOL, "bad payload length");
    }
    if (plen > max)
        return refuse(close_code, why, WS_CLOSE_TOO_BIG, "frame larger than 1 MiB");
    if (len < hl + 4 + plen)
        return 0;
    unsigned char *mask = buf + hl, *p = buf + hl + 4;
    for (uint64_t i = 0; i < plen; i++)
        p[i] ^= mask[i & 3];
    *f = (ws_frame){.fin = fin, .opcode = op, .payload = p, .len = (size_t)plen};
    return (long)(hl + 4 + plen);
}

size_t ws_header(unsigned opcode, size_t n, unsigned char hdr[WS_HEADER_MAX]) {
    hdr[0] = 0x80 | (opcode & 0x0f);
    if (n < 126) {
        hdr[1] = (unsigned char)n;
        return 2;
    }
    if (n <= 0xffff) {
        hdr[1] = 126;
        hdr[2] = (unsigned char)(n >> 8);
        hdr[3] = (unsigned char)n;
        return 4;
    }
    hdr[1] = 127;
    for (int i = 0; i < 8; i++)
        hdr[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
    return 10;
}

bool ws_utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
        if (k == 0 || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        if (k == 3 && ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] > 0x9f)))
            return false;
        if (k == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] > 0x8f)))
            return false;
        i += k;
    }
    return true;
}
