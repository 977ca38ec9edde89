/* libsbx's WebSocket layer (RFC 6455, client side), internal: the frame codec (headers,
 * masking, an incremental parser that reassembles fragmented messages and hands control frames
 * over as they come), the opening handshake (key, request, Sec-WebSocket-Accept check) and a
 * small connection interface (a raw connected socket to a unix: or http:// endpoint). The
 * process object (process.c) runs on top of it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    SBXI_WS_CONT = 0x0,
    SBXI_WS_TEXT = 0x1,
    SBXI_WS_BINARY = 0x2,
    SBXI_WS_CLOSE = 0x8,
    SBXI_WS_PING = 0x9,
    SBXI_WS_PONG = 0xA,
};

/* Close codes used here (RFC 6455 section 7.4.1). */
enum { SBXI_WS_NORMAL = 1000, SBXI_WS_PROTOCOL_ERROR = 1002, SBXI_WS_TOO_BIG = 1009 };

#define SBXI_WS_MAX_HEADER 14

/* A growable byte buffer with a read offset (what is sent or parsed from the front). */
typedef struct sbxi_buf {
    uint8_t *data;
    size_t off, len, cap; /* bytes [off, len) are pending */
} sbxi_buf;
int sbxi_buf_append(sbxi_buf *b, const void *data, size_t len); /* 0 or -ENOMEM */
static inline size_t sbxi_buf_pending(const sbxi_buf *b) {
    return b->len - b->off;
}
void sbxi_buf_consume(sbxi_buf *b, size_t n); /* drops n bytes from the front */
void sbxi_buf_free(sbxi_buf *b);

/* Write a frame header into out (room for SBXI_WS_MAX_HEADER bytes); returns its length.
 * mask NULL: an unmasked frame (what a server sends). */
size_t sbxi_ws_header(uint8_t *out, int opcode, bool fin, uint64_t len, const uint8_t *mask);
/* XOR data with the mask, data starting at byte offset pos of the payload. */
void sbxi_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t pos);
/* Append one frame (header, then the payload masked with mask when it is not NULL) to b. A
 * payload may be split over two parts (e.g. a channel byte and the data): p2 may be NULL. */
int sbxi_ws_frame(sbxi_buf *b, int opcode, bool fin, const uint8_t *mask, const void *p1, size_t n1,
                  const void *p2, size_t n2);
/* A masked frame from the client with a fresh random mask. */
int sbxi_ws_client_frame(sbxi_buf *b, int opcode, const void *p1, size_t n1, const void *p2,
                         size_t n2);
/* The payload of a close frame: the code in network order and the reason. */
int sbxi_ws_close_frame(sbxi_buf *b, uint16_t code, const char *reason, bool masked);

/* One whole message (data frames reassembled) or one control frame. */
typedef int (*sbxi_ws_message_fn)(void *ud, int opcode, const uint8_t *data, size_t len);

typedef struct sbxi_ws_parser {
    size_t max_message;  /* a longer message (all its fragments) is an error (1009) */
    bool require_masked; /* a server's parser: client frames must be masked */
    bool forbid_masked;  /* a client's parser: server frames must not be */
    sbxi_ws_message_fn on_message;
    void *ud;
    sbxi_buf in;         /* bytes not parsed yet */
    int msg_opcode;      /* opcode of the message being reassembled; -1 when none */
    sbxi_buf msg;        /* its payload so far */
    uint16_t close_code; /* after an error: the code to close with */
    char error[128];     /* after an error: why */
    bool failed;
} sbxi_ws_parser;

void sbxi_ws_parser_init(sbxi_ws_parser *p, size_t max_message, sbxi_ws_message_fn fn, void *ud);
/* Feed bytes; on_message runs for each complete message or control frame. Returns 0, or < 0
 * after a protocol error (p->error, p->close_code) or when on_message returned < 0. */
int sbxi_ws_parse(sbxi_ws_parser *p, const void *data, size_t len);
void sbxi_ws_parser_done(sbxi_ws_parser *p);

/* ---- the opening handshake ---- */
/* A fresh Sec-WebSocket-Key (base64 of 16 random bytes) into key[25]. 0 or -EIO. */
int sbxi_ws_key(char key[25]);
/* The Sec-WebSocket-Accept the server must answer for key, into out[29]. */
void sbxi_ws_accept(const char *key, char out[29]);

typedef struct sbxi_ws_answer {
    int status;    /* the HTTP status of the answer */
    bool upgraded; /* 101 with Upgrade: websocket and the right accept value */
    char content_type[96];
    size_t header_len;   /* bytes of the status line and headers, \r\n\r\n included */
    long content_length; /* -1 when absent */
    char why[128];       /* when a 101 is not a valid upgrade */
    char location[1024]; /* a redirect's Location ("" when absent or longer) */
} sbxi_ws_answer;
/* Parse the answer's head in data[0..len). Returns 1 when complete (ret filled), 0 when more
 * bytes are needed, -EPROTO when it is not HTTP (or over 16 KiB). */
int sbxi_ws_answer_parse(const char *data, size_t len, const char *key, sbxi_ws_answer *ret);

/* ---- the connection: a raw socket to an endpoint ---- */
/* How long a TCP connect may take (libcurl's limit for the plain requests, http.c). */
#define SBXI_CONNECT_TIMEOUT_MS 10000
/* Connect to a unix socket path, or to the host:port of an http:// base URL (a connect that
 * waits at most SBXI_CONNECT_TIMEOUT_MS), the descriptor then non-blocking. Returns the fd or
 * -errno; https:// gives -EPROTONOSUPPORT. */
int sbxi_conn_open(const char *unix_path, const char *base_url);
