/* RFC 6455 frames, server side: the handshake's accept key, an incremental frame parser over a
 * receive buffer (unmasks in place, checks what a server must check) and frame headers for what
 * the server sends (never masked). No I/O here; api/attach.c drives the socket. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xA

#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_BAD_DATA 1007
#define WS_CLOSE_POLICY 1008
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_INTERNAL 1011

#define WS_HEADER_MAX 14

typedef struct ws_frame {
    bool fin;
    unsigned opcode;
    unsigned char *payload; /* inside the caller's buffer, unmasked */
    size_t len;
} ws_frame;

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (base64 of 16 bytes): 28 characters
 * and a NUL into out. Returns 0, or -EINVAL for a key that is not 16 bytes in base64. */
int ws_accept_key(const char *key, char out[29]);

/* Parse one frame at the start of buf[0..len). Returns the bytes it takes (> 0) with *f filled,
 * 0 when more bytes are needed, or -1 with *close_code and *why set for a frame the server must
 * refuse: unmasked, reserved bits, unknown opcode, a fragmented or long (> 125) control frame,
 * or a payload over max. */
long ws_parse(unsigned char *buf, size_t len, size_t max, ws_frame *f, unsigned *close_code,
              const char **why);

/* The header of an unmasked server frame (fin set) into hdr; returns its length. */
size_t ws_header(unsigned opcode, size_t payload_len, unsigned char hdr[WS_HEADER_MAX]);

/* Whether s[0..n) is well-formed UTF-8 (text frames must be). */
bool ws_utf8_ok(const unsigned char *s, size_t n);
