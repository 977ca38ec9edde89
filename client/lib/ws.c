/* libsbx's WebSocket codec and handshake (RFC 6455, client side): frame headers and masking,
 * the incremental parser (fragments reassembled, control frames interleaved, limits), the
 * Sec-WebSocket-Key/Accept pair and the answer's head. Pure functions over buffers; the socket
 * lives in ws_conn.c. */
#include "client/lib/ws.h"

#include "common/b64.h"
#include "common/grow.h"

#include <errno.h>
#include <nettle/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

/* n random bytes from the kernel (masks and keys need not be secret, only unpredictable). */
static int random_fill(void *p, size_t n) {
    ssize_t r = getrandom(p, n, 0);
    return r == (ssize_t)n ? 0 : -EIO;
}

/* ---- buffers ---- */
int sbxi_buf_append(sbxi_buf *b, const void *data, size_t len) {
    if (b->off > 0 && b->off == b->len)
        b->off = b->len = 0;
    if (b->off > 65536 && b->off * 2 > b->len) { /* compact what was consumed */
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (grow_reserve((void **)&b->data, &b->cap, b->len + len, 1) < 0)
        return -ENOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

void sbxi_buf_consume(sbxi_buf *b, size_t n) {
    b->off += n < sbxi_buf_pending(b) ? n : sbxi_buf_pending(b);
    if (b->off == b->len)
        b->off = b->len = 0;
}

void sbxi_buf_free(sbxi_buf *b) {
    free(b->data);
    memset(b, 0, sizeof(*b));
}

/* ---- frames ---- */
size_t sbxi_ws_header(uint8_t *out, int opcode, bool fin, uint64_t len, const uint8_t *mask) {
    size_t n = 0;
    out[n++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    uint8_t m = mask ? 0x80 : 0;
    if (len < 126) {
        out[n++] = (uint8_t)(m | len);
    } else if (len <= 0xffff) {
        out[n++] = m | 126;
        out[n++] = (uint8_t)(len >> 8);
        out[n++] = (uint8_t)len;
    } else {
        out[n++] = m | 127;
        for (int i = 7; i >= 0; i--)
            out[n++] = (uint8_t)(len >> (8 * i));
    }
    if (mask) {
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

void sbxi_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t pos) {
    for (size_t i = 0; i < len; i++)
        data[i] ^= mask[(pos + i) & 3];
}

int sbxi_ws_frame(sbxi_buf *b, int opcode, bool fin, const uint8_t *mask, const void *p1, size_t n1,
                  const void *p2, size_t n2) {
    uint8_t h[SBXI_WS_MAX_HEADER];
    size_t hl = sbxi_ws_header(h, opcode, fin, (uint64_t)n1 + n2, mask);
    if (sbxi_buf_append(b, h, hl) < 0)
        return -ENOMEM;
    size_t start = b->len;
    if (sbxi_buf_append(b, p1, n1) < 0 || sbxi_buf_append(b, p2, n2) < 0)
        return -ENOMEM;
    if (mask)
        sbxi_ws_mask(b->data + start, n1 + n2, mask, 0);
    return 0;
}

int sbxi_ws_client_frame(sbxi_buf *b, int opcode, const void *p1, size_t n1, const void *p2,
                         size_t n2) {
    uint8_t mask[4];
    if (random_fill(mask, sizeof(mask)) < 0)
        return -EIO;
    return sbxi_ws_frame(b, opcode, true, mask, p1, n1, p2, n2);
}

int sbxi_ws_close_frame(sbxi_buf *b, uint16_t code, const char *reason, bool masked) {
    uint8_t c[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    size_t rl = reason ? strnlen(reason, 123) : 0;
    if (masked)
        return sbxi_ws_client_frame(b, SBXI_WS_CLOSE, c, 2, reason, rl);
    return sbxi_ws_frame(b, SBXI_WS_CLOSE, true, NULL, c, 2, reason, rl);
}

/* ---- the parser ---- */
void sbxi_ws_parser_init(sbxi_ws_parser *p, size_t max_message, sbxi_ws_message_fn fn, void *ud) {
    memset(p, 0, sizeof(*p));
    p->max_message = max_message;
    p->on_message = fn;
    p->ud = ud;
    p->msg_opcode = -1;
}

void sbxi_ws_parser_done(sbxi_ws_parser *p) {
    sbxi_buf_free(&p->in);
    sbxi_buf_free(&p->msg);
}

static int fail(sbxi_ws_parser *p, uint16_t code, const char *why) {
    p->failed = true;
    p->close_code = code;
    snprintf(p->error, sizeof(p->error), "%s", why);
    return code == SBXI_WS_TOO_BIG ? -EMSGSIZE : -EPROTO;
}

/* One complete frame: header fields decoded, payload (unmasked) at data. */
static int on_frame(sbxi_ws_parser *p, int op, bool fin, uint8_t *data, size_t len) {
    if (op >= 0x8) { /* control: never fragmented, at most 125 bytes (checked by the caller) */
        if (op != SBXI_WS_CLOSE && op != SBXI_WS_PING && op != SBXI_WS_PONG)
            return fail(p, SBXI_WS_PROTOCOL_ERROR, "unknown control opcode");
        if (op == SBXI_WS_CLOSE && len == 1)
            return fail(p, SBXI_WS_PROTOCOL_ERROR, "close frame with a 1-byte payload");
        return p->on_message(p->ud, op, data, len) < 0 ? fail(p, SBXI_WS_NORMAL, "stopped") : 0;
    }
    if (op == SBXI_WS_CONT && p->msg_opcode < 0)
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "continuation frame without a message");
    if (op != SBXI_WS_CONT && op != SBXI_WS_TEXT && op != SBXI_WS_BINARY)
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "unknown data opcode");
    if (op != SBXI_WS_CONT && p->msg_opcode >= 0)
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "new message inside a fragmented one");
    if (op != SBXI_WS_CONT && fin) /* the common case: one frame, no copy */
        return p->on_message(p->ud, op, data, len) < 0 ? fail(p, SBXI_WS_NORMAL, "stopped") : 0;
    if (sbxi_buf_pending(&p->msg) + len > p->max_message)
        return fail(p, SBXI_WS_TOO_BIG, "message larger than the limit");
    if (op != SBXI_WS_CONT)
        p->msg_opcode = op;
    if (sbxi_buf_append(&p->msg, data, len) < 0)
        return fail(p, SBXI_WS_TOO_BIG, "out of memory");
    if (!fin)
        return 0;
    int mop = p->msg_opcode;
    p->msg_opcode = -1;
    const uint8_t *whole = p->msg.data ? p->msg.data + p->msg.off : (const uint8_t *)"";
    int r = p->on_message(p->ud, mop, whole, sbxi_buf_pending(&p->msg));
    p->msg.off = p->msg.len = 0;
    return r < 0 ? fail(p, SBXI_WS_NORMAL, "stopped") : 0;
}

/* Parse one frame from the front of in: 1 done, 0 incomplete, < 0 error. */
static int parse_one(sbxi_ws_parser *p) {
    size_t avail = sbxi_buf_pending(&p->in), need = 2;
    if (avail < need)
        return 0;
    uint8_t *h = p->in.data + p->in.off;
    bool fin = h[0] & 0x80, masked = h[1] & 0x80;
    int op = h[0] & 0x0f;
    if (h[0] & 0x70)
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "reserved bits set (no extension was agreed)");
    if (masked && p->forbid_masked)
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "masked frame from the server");
    if (!masked && p->require_masked)
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "unmasked frame from the client");
    uint64_t len = h[1] & 0x7f;
    size_t ext = len == 126 ? 2 : len == 127 ? 8 : 0;
    need += ext + (masked ? 4 : 0);
    if (avail < need)
        return 0;
    if (ext) {
        len = 0;
        for (size_t i = 0; i < ext; i++)
            len = len << 8 | h[2 + i];
        if (ext == 8 && (len >> 63))
            return fail(p, SBXI_WS_PROTOCOL_ERROR, "64-bit length with the top bit set");
        if ((ext == 2 && len < 126) || (ext == 8 && len <= 0xffff))
            return fail(p, SBXI_WS_PROTOCOL_ERROR, "length not in its shortest form");
    }
    if (op >= 0x8 && (!fin || len > 125))
        return fail(p, SBXI_WS_PROTOCOL_ERROR, "fragmented or long control frame");
    if (len > p->max_message)
        return fail(p, SBXI_WS_TOO_BIG, "frame larger than the limit");
    if (avail - need < len)
        return 0;
    uint8_t *data = h + need;
    if (masked)
        sbxi_ws_mask(data, (size_t)len, h + need - 4, 0);
    int r = on_frame(p, op, fin, data, (size_t)len);
    sbxi_buf_consume(&p->in, need + (size_t)len);
    return r < 0 ? r : 1;
}

int sbxi_ws_parse(sbxi_ws_parser *p, const void *data, size_t len) {
    if (p->failed)
        return -EPROTO;
    if (sbxi_buf_append(&p->in, data, len) < 0)
        return fail(p, SBXI_WS_TOO_BIG, "out of memory");
    int r;
    while ((r = parse_one(p)) > 0)
        ;
    return r;
}

/* ---- handshake ---- */
int sbxi_ws_key(char key[25]) {
    uint8_t raw[16];
    if (random_fill(raw, sizeof(raw)) < 0)
        return -EIO;
    char *s = b64_encode(raw, sizeof(raw));
    if (!s)
        return -ENOMEM;
    snprintf(key, 25, "%s", s);
    free(s);
    return 0;
}

void sbxi_ws_accept(const char *key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char cat[128];
    int n = snprintf(cat, sizeof(cat), "%s%s", key, guid);
    uint8_t md[SHA1_DIGEST_SIZE];
    out[0] = 0;
    if (n < 0 || (size_t)n >= sizeof(cat))
        return;
    struct sha1_ctx ctx;
    sha1_init(&ctx);
    sha1_update(&ctx, (size_t)n, (const uint8_t *)cat);
    sha1_digest(&ctx, sizeof(md), md);
    char *s = b64_encode(md, sizeof(md));
    snprintf(out, 29, "%s", s ? s : "");
    free(s);
}

/* The value of header name in head (case-insensitive name), trimmed, into out. */
static bool header_value(const char *head, size_t hlen, const char *name, char *out, size_t n) {
    size_t nl = strlen(name);
    const char *end = head + hlen;
    for (const char *l = memchr(head, '\n', hlen); l && l + 1 < end;
         l = memchr(l + 1, '\n', (size_t)(end - l - 1))) {
        const char *s = l + 1;
        if ((size_t)(end - s) > nl && strncasecmp(s, name, nl) == 0 && s[nl] == ':') {
            s += nl + 1;
            while (s < end && (*s == ' ' || *s == '\t'))
                s++;
            const char *e = s;
            while (e < end && *e != '\r' && *e != '\n')
                e++;
            snprintf(out, n, "%.*s", (int)(e - s), s);
            return true;
        }
    }
    return false;
}

int sbxi_ws_answer_parse(const char *data, size_t len, const char *key, sbxi_ws_answer *ret) {
    const char *end = memmem(data, len, "\r\n\r\n", 4);
    if (!end)
        return len > 16384 ? -EPROTO : 0;
    size_t hlen = (size_t)(end + 4 - data);
    sbxi_ws_answer a = {.content_length = -1, .header_len = hlen};
    if (hlen < 12 || strncmp(data, "HTTP/1.", 7) != 0 || data[8] != ' ')
        return -EPROTO;
    for (size_t i = 9; i < 12; i++) { /* three digits, read within the bounded head */
        if (data[i] < '0' || data[i] > '9')
            return -EPROTO;
        a.status = a.status * 10 + (data[i] - '0');
    }
    char v[128];
    if (header_value(data, hlen, "Content-Type", v, sizeof(v)))
        snprintf(a.content_type, sizeof(a.content_type), "%s", v);
    if (header_value(data, hlen, "Content-Length", v, sizeof(v)))
        a.content_length = strtol(v, NULL, 10);
    char loc[sizeof(a.location) + 1]; /* one byte more: a longer one is cut, so refused */
    if (a.status / 100 == 3 && header_value(data, hlen, "Location", loc, sizeof(loc)) &&
        strlen(loc) < sizeof(a.location))
        snprintf(a.location, sizeof(a.location), "%s", loc);
    if (a.status == 101) {
        char want[29];
        sbxi_ws_accept(key, want);
        if (!header_value(data, hlen, "Upgrade", v, sizeof(v)) || strcasecmp(v, "websocket"))
            snprintf(a.why, sizeof(a.why), "101 without Upgrade: websocket");
        else if (!header_value(data, hlen, "Sec-WebSocket-Accept", v, sizeof(v)) ||
                 strcmp(v, want) != 0)
            snprintf(a.why, sizeof(a.why), "101 with a wrong Sec-WebSocket-Accept");
        else
            a.upgraded = true;
    }
    *ret = a;
    return 1;
}
