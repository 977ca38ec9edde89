/* Unit tests of libsbx's WebSocket codec (client/lib/ws.c) against RFC 6455's own examples
 * (section 5.7: masked and unmasked frames, fragments, ping/pong, 126/127 lengths; section
 * 1.3: the accept value), byte-at-a-time parsing, the protocol errors the parser must refuse,
 * and the answer head of the opening handshake. */
#include "client/lib/ws.h"
#include "common/macro.h"
#include "tests/lib/test.h"

#include <stdlib.h>
#include <string.h>

typedef struct seen {
    int n;
    int op[16];
    size_t len[16];
    uint8_t data[16][70000];
} seen;

static int record(void *ud, int op, const uint8_t *data, size_t len) {
    seen *s = ud;
    if (s->n >= 16)
        return -1;
    s->op[s->n] = op;
    s->len[s->n] = len;
    memcpy(s->data[s->n], data, len < 70000 ? len : 70000);
    s->n++;
    return 0;
}

/* Feed in chunks of step bytes (every split point is exercised with step 1). */
static int parse_in_steps(sbxi_ws_parser *p, const uint8_t *b, size_t n, size_t step) {
    for (size_t i = 0; i < n; i += step) {
        int r = sbxi_ws_parse(p, b + i, n - i < step ? n - i : step);
        if (r < 0)
            return r;
    }
    return 0;
}

static const uint8_t hello_unmasked[] = {0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f};
static const uint8_t hello_masked[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                       0x7f, 0x9f, 0x4d, 0x51, 0x58};
static const uint8_t mask_rfc[4] = {0x37, 0xfa, 0x21, 0x3d};

TEST(ws_encode_rfc_examples) {
    sbxi_buf b = {0};
    CHECK_OK(sbxi_ws_frame(&b, SBXI_WS_TEXT, true, NULL, "Hello", 5, NULL, 0));
    CHECK_EQ(b.len, sizeof(hello_unmasked));
    CHECK(memcmp(b.data, hello_unmasked, b.len) == 0);
    sbxi_buf_free(&b);
    /* masked, the payload given in two parts ("He" + "llo") as stdin frames are */
    CHECK_OK(sbxi_ws_frame(&b, SBXI_WS_TEXT, true, mask_rfc, "He", 2, "llo", 3));
    CHECK_EQ(b.len, sizeof(hello_masked));
    CHECK(memcmp(b.data, hello_masked, b.len) == 0);
    sbxi_buf_free(&b);
    /* masked pong "Hello": 0x8a 0x85 + the same masked bytes */
    CHECK_OK(sbxi_ws_frame(&b, SBXI_WS_PONG, true, mask_rfc, "Hello", 5, NULL, 0));
    CHECK_EQ(b.data[0], 0x8a);
    CHECK(memcmp(b.data + 1, hello_masked + 1, 10) == 0);
    sbxi_buf_free(&b);
    /* fragments: 0x01 0x03 "Hel", 0x80 0x02 "lo" */
    CHECK_OK(sbxi_ws_frame(&b, SBXI_WS_TEXT, false, NULL, "Hel", 3, NULL, 0));
    CHECK_OK(sbxi_ws_frame(&b, SBXI_WS_CONT, true, NULL, "lo", 2, NULL, 0));
    static const uint8_t frag[] = {0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f};
    CHECK_EQ(b.len, sizeof(frag));
    CHECK(memcmp(b.data, frag, b.len) == 0);
    sbxi_buf_free(&b);
}

TEST(ws_encode_lengths) {
    uint8_t h[SBXI_WS_MAX_HEADER];
    static const uint8_t h125[] = {0x82, 125};
    static const uint8_t h126[] = {0x82, 0x7e, 0x00, 126};
    static const uint8_t h256[] = {0x82, 0x7e, 0x01, 0x00};
    static const uint8_t h64k[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00};
    static const uint8_t h65535[] = {0x82, 0x7e, 0xff, 0xff};
    CHECK_EQ(sbxi_ws_header(h, SBXI_WS_BINARY, true, 125, NULL), 2);
    CHECK(memcmp(h, h125, 2) == 0);
    CHECK_EQ(sbxi_ws_header(h, SBXI_WS_BINARY, true, 126, NULL), 4);
    CHECK(memcmp(h, h126, 4) == 0);
    CHECK_EQ(sbxi_ws_header(h, SBXI_WS_BINARY, true, 256, NULL), 4); /* RFC's 256-byte example */
    CHECK(memcmp(h, h256, 4) == 0);
    CHECK_EQ(sbxi_ws_header(h, SBXI_WS_BINARY, true, 65535, NULL), 4);
    CHECK(memcmp(h, h65535, 4) == 0);
    CHECK_EQ(sbxi_ws_header(h, SBXI_WS_BINARY, true, 65536, NULL), 10); /* the 64 KiB example */
    CHECK(memcmp(h, h64k, 10) == 0);
    CHECK_EQ(sbxi_ws_header(h, SBXI_WS_BINARY, true, 65536, mask_rfc), 14);
    CHECK_EQ(h[1], 0xff);
    CHECK(memcmp(h + 10, mask_rfc, 4) == 0);
}

TEST(ws_parse_rfc_examples_any_split) {
    static seen s;
    for (size_t step = 1; step <= 12; step++) {
        memset(&s, 0, sizeof(s));
        sbxi_ws_parser p;
        sbxi_ws_parser_init(&p, 1 << 20, record, &s);
        static const uint8_t stream[] = {
            0x81, 0x05, 'H',  'e',  'l', 'l', 'o', /* text */
            0x01, 0x03, 'H',  'e',  'l',           /* fragment 1 */
            0x89, 0x05, 'H',  'e',  'l', 'l', 'o', /* ping in between */
            0x80, 0x02, 'l',  'o',                 /* last fragment */
            0x8a, 0x00,                            /* empty pong */
            0x88, 0x02, 0x03, 0xe8,                /* close 1000 */
        };
        CHECK_OK(parse_in_steps(&p, stream, sizeof(stream), step));
        CHECK_EQ(s.n, 5);
        CHECK_EQ(s.op[0], SBXI_WS_TEXT);
        CHECK(s.len[0] == 5 && memcmp(s.data[0], "Hello", 5) == 0);
        CHECK_EQ(s.op[1], SBXI_WS_PING); /* control frames come as they arrive */
        CHECK_EQ(s.op[2], SBXI_WS_TEXT);
        CHECK(s.len[2] == 5 && memcmp(s.data[2], "Hello", 5) == 0);
        CHECK_EQ(s.op[3], SBXI_WS_PONG);
        CHECK_EQ(s.len[3], 0);
        CHECK_EQ(s.op[4], SBXI_WS_CLOSE);
        CHECK(s.len[4] == 2 && s.data[4][0] == 0x03 && s.data[4][1] == 0xe8);
        sbxi_ws_parser_done(&p);
    }
    /* the masked example decodes to "Hello" (a server's parser) */
    memset(&s, 0, sizeof(s));
    sbxi_ws_parser p;
    sbxi_ws_parser_init(&p, 1 << 20, record, &s);
    p.require_masked = true;
    CHECK_OK(parse_in_steps(&p, hello_masked, sizeof(hello_masked), 1));
    CHECK(s.n == 1 && s.len[0] == 5 && memcmp(s.data[0], "Hello", 5) == 0);
    sbxi_ws_parser_done(&p);
}

/* Empty fragments make one empty message (found by fuzz_ws: no arithmetic on a NULL buffer). */
TEST(ws_parse_empty_fragments) {
    static seen s;
    memset(&s, 0, sizeof(s));
    static const uint8_t b[] = {0x01, 0x00, 0x00, 0x00, 0x80, 0x00};
    sbxi_ws_parser p;
    sbxi_ws_parser_init(&p, 1024, record, &s);
    CHECK_OK(sbxi_ws_parse(&p, b, sizeof(b)));
    CHECK_EQ(s.n, 1);
    CHECK_EQ(s.op[0], SBXI_WS_TEXT);
    CHECK_EQ(s.len[0], 0);
    sbxi_ws_parser_done(&p);
}

TEST(ws_parse_long_lengths) {
    static seen s;
    for (int k = 0; k < 2; k++) {
        size_t n = k ? 65536 : 256;
        uint8_t *f = malloc(n + 10);
        size_t hl = k ? 10 : 4;
        static const uint8_t h256[] = {0x82, 0x7e, 0x01, 0x00};
        static const uint8_t h64k[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00};
        memcpy(f, k ? h64k : h256, hl);
        for (size_t i = 0; i < n; i++)
            f[hl + i] = (uint8_t)(i * 7);
        memset(&s, 0, sizeof(s));
        sbxi_ws_parser p;
        sbxi_ws_parser_init(&p, 1 << 20, record, &s);
        CHECK_OK(parse_in_steps(&p, f, hl + n, 1000));
        CHECK_EQ(s.n, 1);
        CHECK_EQ(s.op[0], SBXI_WS_BINARY);
        CHECK_EQ(s.len[0], n);
        CHECK(memcmp(s.data[0], f + hl, n) == 0);
        sbxi_ws_parser_done(&p);
        free(f);
    }
}

/* A round trip through our own encoder with masks, any size class. */
TEST(ws_roundtrip_masked) {
    static seen s;
    memset(&s, 0, sizeof(s));
    sbxi_buf b = {0};
    static uint8_t payload[66000];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i ^ (i >> 8));
    size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 66000};
    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++)
        CHECK_OK(sbxi_ws_client_frame(&b, SBXI_WS_BINARY, payload, sizes[i], NULL, 0));
    sbxi_ws_parser p;
    sbxi_ws_parser_init(&p, 1 << 20, record, &s);
    p.require_masked = true;
    CHECK_OK(parse_in_steps(&p, b.data, b.len, 4093));
    CHECK_EQ(s.n, (int)ARRAY_SIZE(sizes));
    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
        CHECK_EQ(s.len[i], sizes[i]);
        CHECK(memcmp(s.data[i], payload, sizes[i]) == 0);
    }
    sbxi_ws_parser_done(&p);
    sbxi_buf_free(&b);
}

static void expect_error(const uint8_t *b, size_t n, uint16_t code, bool forbid_masked,
                         size_t max) {
    static seen s;
    memset(&s, 0, sizeof(s));
    sbxi_ws_parser p;
    sbxi_ws_parser_init(&p, max, record, &s);
    p.forbid_masked = forbid_masked;
    CHECK(sbxi_ws_parse(&p, b, n) < 0);
    CHECK_EQ(p.close_code, code);
    CHECK(p.error[0]);
    CHECK(sbxi_ws_parse(&p, hello_unmasked, sizeof(hello_unmasked)) < 0); /* stays failed */
    sbxi_ws_parser_done(&p);
}

TEST(ws_parse_errors) {
    static const uint8_t rsv[] = {0xc1, 0x00};
    static const uint8_t cont_first[] = {0x80, 0x01, 'x'};
    static const uint8_t frag_ping[] = {0x09, 0x00};
    static const uint8_t long_ping[] = {0x89, 0x7e, 0x00, 0x7e};
    static const uint8_t bad_op[] = {0x83, 0x00};
    static const uint8_t bad_ctl[] = {0x8b, 0x00};
    static const uint8_t new_in_frag[] = {0x01, 0x01, 'a', 0x81, 0x01, 'b'};
    static const uint8_t not_shortest[] = {0x82, 0x7e, 0x00, 0x05, 1, 2, 3, 4, 5};
    static const uint8_t top_bit[] = {0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 1};
    static const uint8_t close1[] = {0x88, 0x01, 0x03};
    static const uint8_t big[] = {0x82, 0x7e, 0x01, 0x00};
    static const uint8_t frag_big[] = {0x02, 0x7e, 0x00, 0x80};
    expect_error(rsv, sizeof(rsv), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(cont_first, sizeof(cont_first), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(frag_ping, sizeof(frag_ping), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(long_ping, sizeof(long_ping), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(bad_op, sizeof(bad_op), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(bad_ctl, sizeof(bad_ctl), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(new_in_frag, sizeof(new_in_frag), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(not_shortest, sizeof(not_shortest), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(top_bit, sizeof(top_bit), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(close1, sizeof(close1), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(hello_masked, sizeof(hello_masked), SBXI_WS_PROTOCOL_ERROR, true, 1024);
    expect_error(big, sizeof(big), SBXI_WS_TOO_BIG, true, 255); /* one frame over the limit */
    /* fragments that add up past the limit (each one under it) */
    static uint8_t two[2 * (4 + 128)];
    memcpy(two, frag_big, 4);
    two[4 + 128] = 0x80, two[4 + 128 + 1] = 0x7e, two[4 + 128 + 3] = 0x80;
    expect_error(two, sizeof(two), SBXI_WS_TOO_BIG, true, 200);
}

TEST(ws_handshake) {
    char acc[29];
    sbxi_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", acc); /* RFC 6455 section 1.3 */
    CHECK_STREQ(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    char k1[25], k2[25];
    CHECK_OK(sbxi_ws_key(k1));
    CHECK_OK(sbxi_ws_key(k2));
    CHECK_EQ(strlen(k1), 24);
    CHECK(strcmp(k1, k2) != 0);

    const char *key = "dGhlIHNhbXBsZSBub25jZQ==";
    const char ok[] =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nsec-websocket-accept:  s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
        "\r\n\x81\x02hi";
    sbxi_ws_answer a;
    for (size_t n = 0; n < sizeof(ok) - 5; n++)
        CHECK_EQ(sbxi_ws_answer_parse(ok, n, key, &a), 0); /* incomplete until \r\n\r\n */
    CHECK_EQ(sbxi_ws_answer_parse(ok, sizeof(ok) - 1, key, &a), 1);
    CHECK_EQ(a.status, 101);
    CHECK(a.upgraded);
    CHECK_EQ(a.header_len, sizeof(ok) - 1 - 4); /* the frame after the head is not part of it */

    const char wrong[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n";
    CHECK_EQ(sbxi_ws_answer_parse(wrong, sizeof(wrong) - 1, key, &a), 1);
    CHECK(!a.upgraded);
    CHECK(a.why[0]);

    const char refused[] = "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
                           "Content-Length: 17\r\n\r\n{\"code\":\"x\"}";
    CHECK_EQ(sbxi_ws_answer_parse(refused, sizeof(refused) - 1, key, &a), 1);
    CHECK_EQ(a.status, 409);
    CHECK(!a.upgraded);
    CHECK_EQ(a.content_length, 17);
    CHECK_STREQ(a.content_type, "application/json");
    CHECK(sbxi_ws_answer_parse("SSH-2.0\r\n\r\n", 11, key, &a) < 0);
    /* a status that is not three digits; nothing read past the head (found by fuzz_ws) */
    static const char bad[] = {'H', 'T', 'T', 'P', '/', '1', '.', 'a', '=', '\r', '\n', '\r', '\n'};
    CHECK(sbxi_ws_answer_parse(bad, sizeof(bad), key, &a) < 0);
}
