/* Unit tests of the WebSocket frame codec (sandboxd/api/websocket.c: the RFC 6455 accept key,
 * masked client frames, lengths, what a server refuses) and of policy/process (signal names,
 * terminal sizes, the tty/background fields). */
#include "policy/process.h"
#include "sandboxd/api/websocket.h"
#include "tests/lib/test.h"

#include <string.h>

TEST(ws_accept_key_rfc_example) {
    char out[29];
    CHECK_OK(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out));
    CHECK_STREQ(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    CHECK_EQ(ws_accept_key("short", out), -EINVAL);
    CHECK_EQ(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ", out), -EINVAL);
    CHECK_EQ(ws_accept_key(NULL, out), -EINVAL);
}

/* A masked client frame of payload p (len n) with opcode op into buf; returns its length. */
static size_t client_frame(unsigned char *buf, unsigned op, bool fin, const char *p, size_t n) {
    size_t hl = ws_header(op, n, buf);
    buf[0] = (unsigned char)((fin ? 0x80 : 0) | op);
    buf[1] |= 0x80;
    unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
    memcpy(buf + hl, mask, 4);
    for (size_t i = 0; i < n; i++)
        buf[hl + 4 + i] = (unsigned char)p[i] ^ mask[i & 3];
    return hl + 4 + n;
}

TEST(ws_parse_masked_frames_of_each_length) {
    static unsigned char buf[70000 + 14];
    static char payload[70000];
    size_t sizes[] = {0, 5, 125, 126, 65535, 65536, 70000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        for (size_t i = 0; i < n; i++)
            payload[i] = (char)('a' + i % 26);
        size_t len = client_frame(buf, WS_OP_BINARY, true, payload, n);
        ws_frame f;
        unsigned code = 0;
        const char *why = NULL;
        CHECK_EQ(ws_parse(buf, len - 1, 1 << 20, &f, &code, &why), 0); /* incomplete */
        CHECK_EQ(ws_parse(buf, len, 1 << 20, &f, &code, &why), (long)len);
        CHECK(f.fin && f.opcode == WS_OP_BINARY && f.len == n);
        CHECK(memcmp(f.payload, payload, n) == 0);
    }
}

TEST(ws_parse_refuses_what_a_server_must) {
    ws_frame f;
    unsigned code = 0;
    const char *why = NULL;
    unsigned char unmasked[] = {0x82, 0x01, 0x00};
    CHECK_EQ(ws_parse(unmasked, sizeof(unmasked), 1 << 20, &f, &code, &why), -1);
    CHECK_EQ(code, WS_CLOSE_PROTOCOL);
    unsigned char rsv[] = {0xc2, 0x80, 0, 0, 0, 0};
    CHECK_EQ(ws_parse(rsv, sizeof(rsv), 1 << 20, &f, &code, &why), -1);
    unsigned char opcode[] = {0x83, 0x80, 0, 0, 0, 0};
    CHECK_EQ(ws_parse(opcode, sizeof(opcode), 1 << 20, &f, &code, &why), -1);
    unsigned char frag_ping[] = {0x09, 0x80, 0, 0, 0, 0};
    CHECK_EQ(ws_parse(frag_ping, sizeof(frag_ping), 1 << 20, &f, &code, &why), -1);
    unsigned char long_ping[] = {0x89, 0xfe, 0x00, 0x7e};
    CHECK_EQ(ws_parse(long_ping, sizeof(long_ping), 1 << 20, &f, &code, &why), -1);
    /* too big is known from the header alone */
    unsigned char big[] = {0x82, 0xff, 0, 0, 0, 0, 0, 0x20, 0, 0};
    CHECK_EQ(ws_parse(big, sizeof(big), 1 << 20, &f, &code, &why), -1);
    CHECK_EQ(code, WS_CLOSE_TOO_BIG);
    unsigned char huge[] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0};
    CHECK_EQ(ws_parse(huge, sizeof(huge), 1 << 20, &f, &code, &why), -1);
}

TEST(ws_utf8) {
    CHECK(ws_utf8_ok((const unsigned char *)"h\xc3\xa9llo", 6));
    CHECK(!ws_utf8_ok((const unsigned char *)"\xff\xfe", 2));
    CHECK(!ws_utf8_ok((const unsigned char *)"\xc3", 1));
    CHECK(!ws_utf8_ok((const unsigned char *)"\xed\xa0\x80", 3)); /* a surrogate */
}

static int sig(const char *json) {
    json_t *j = json_loads(json, JSON_DECODE_ANY, NULL);
    int s = 0;
    error_rec err = {0};
    int r = policy_signal_parse(j, &s, &err);
    json_decref(j);
    return r < 0 ? r : s;
}

TEST(signal_names_and_numbers) {
    CHECK_EQ(sig("\"INT\""), 2);
    CHECK_EQ(sig("\"SIGINT\""), 2);
    CHECK_EQ(sig("\"term\""), 15);
    CHECK_EQ(sig("\"KILL\""), 9);
    CHECK_EQ(sig("9"), 9);
    CHECK_EQ(sig("64"), 64);
    CHECK_EQ(sig("\"15\""), 15);
    CHECK_EQ(sig("0"), -EINVAL);
    CHECK_EQ(sig("65"), -EINVAL);
    CHECK_EQ(sig("\"NOPE\""), -EINVAL);
    CHECK_EQ(sig("\"SIG\""), -EINVAL);
    CHECK_EQ(sig("null"), -EINVAL);
    CHECK_EQ(sig("{}"), -EINVAL);
}

static int proc(const char *json, policy_process *p) {
    json_t *j = json_loads(json, 0, NULL);
    error_rec err = {0};
    int r = policy_process_parse(j, p, &err);
    json_decref(j);
    return r;
}

TEST(process_fields) {
    policy_process p;
    CHECK_OK(proc("{}", &p));
    CHECK(!p.tty && !p.background && p.rows == 24 && p.cols == 80);
    CHECK_STREQ(p.term, "xterm");
    CHECK_OK(proc(
        "{\"tty\":true,\"tty_size\":{\"rows\":50,\"cols\":132},\"term\":\"xterm-256color\"}", &p));
    CHECK(p.tty && p.rows == 50 && p.cols == 132);
    CHECK_STREQ(p.term, "xterm-256color");
    CHECK_OK(proc("{\"background\":true}", &p));
    CHECK(p.background);
    CHECK_EQ(proc("{\"tty\":1}", &p), -EINVAL);
    CHECK_EQ(proc("{\"tty\":true,\"tty_size\":{\"rows\":0,\"cols\":0}}", &p), -EINVAL);
    CHECK_EQ(proc("{\"tty\":true,\"tty_size\":{\"rows\":1001,\"cols\":80}}", &p), -EINVAL);
    CHECK_EQ(proc("{\"tty\":true,\"tty_size\":[24,80]}", &p), -EINVAL);
    CHECK_EQ(proc("{\"tty\":true,\"term\":\"a b\"}", &p), -EINVAL);
    CHECK_EQ(proc("{\"term\":\"xterm\"}", &p), -EINVAL); /* without a tty */
}
