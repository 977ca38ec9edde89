/* Unit tests of common/: units parsing, the error record, the shim protocol codec, file helpers,
 * the piecewise JSON string writer, base64, pool shapes (a create against a published pool) and
 * capture_run (a helper's output, its status, a deadline). */
#include "common/b64.h"
#include "common/capture.h"
#include "common/fdutil.h"
#include "common/jsonstr.h"
#include "common/poolshape.h"
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "common/units.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>

TEST(units_size) {
    static const struct {
        const char *in;
        int ok;
        uint64_t out;
    } cases[] = {
        {"0", 1, 0},
        {"1024", 1, 1024},
        {"512Mi", 1, 512ull << 20},
        {"2Gi", 1, 2ull << 30},
        {"1G", 1, 1000000000ull},
        {"1.5Ki", 1, 1536},
        {"1GiB", 1, 1ull << 30},
        {"", 0, 0},
        {"-1", 0, 0},
        {"12Q", 0, 0},
        {"0x10", 0, 0},
        {"1e3", 0, 0},
        {"0.5", 0, 0},
        {"99999999999Ti", 0, 0},
        {" 1", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 7;
        int r = units_parse_size(cases[i].in, &v);
        CHECK_MSG((r == 0) == cases[i].ok, "parse_size(\"%s\") = %d", cases[i].in, r);
        if (cases[i].ok)
            CHECK_EQ(v, cases[i].out);
        else
            CHECK_EQ(v, 7); /* ret_ written only on success */
    }
    char buf[32];
    units_format_size(2ull << 30, buf, sizeof(buf));
    CHECK_STREQ(buf, "2Gi");
    units_format_size(1000, buf, sizeof(buf));
    CHECK_STREQ(buf, "1000");
}

TEST(units_duration) {
    static const struct {
        const char *in;
        int ok;
        uint64_t ms;
    } cases[] = {
        {"30s", 1, 30000}, {"5m", 1, 300000},    {"1h", 1, 3600000}, {"250ms", 1, 250},
        {"1.5", 1, 1500},  {"2d", 1, 172800000}, {"", 0, 0},         {"5x", 0, 0},
        {"-3s", 0, 0},     {"inf", 0, 0},        {"nan", 0, 0},      {"1e99", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 0;
        int r = units_parse_duration(cases[i].in, &v);
        CHECK_MSG((r == 0) == cases[i].ok, "parse_duration(\"%s\") = %d", cases[i].in, r);
        if (cases[i].ok)
            CHECK_EQ(v, cases[i].ms);
    }
}

TEST(error_record) {
    error_rec e = {0};
    CHECK_EQ(error_set_errno(&e, -ENOENT, "open %s", "/x"), -ENOENT);
    CHECK_STREQ(e.message, "open /x: No such file or directory");
    error_prefix(&e, "step %s", "mounts");
    CHECK_STREQ(e.message, "step mounts: open /x: No such file or directory");
    CHECK_EQ(error_set(NULL, -EINVAL, "ignored"), -EINVAL);
}

TEST(shimproto_roundtrip_with_fds) {
    int sv[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
    int p[2];
    CHECK_OK(pipe2(p, O_CLOEXEC));
    json_t *m = json_pack("{s:s, s:i, s:[s,s]}", "type", "exec", "xid", 42, "argv", "echo", "hi");
    CHECK_OK(shimproto_send(sv[0], m, p, 2));
    json_decref(m);
    json_t *got = NULL;
    int fds[SHIMPROTO_MAX_FDS];
    size_t n = 0;
    CHECK_OK(shimproto_recv(sv[1], &got, fds, &n));
    CHECK_STREQ(shimproto_type(got), "exec");
    CHECK_EQ(json_integer_value(json_object_get(got, "xid")), 42);
    CHECK_EQ(n, 2);
    CHECK(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
    CHECK_OK(write(fds[1], "x", 1));
    char c;
    CHECK_EQ(read(p[0], &c, 1), 1);
    json_decref(got);

    /* wrong version and garbage are -EPROTO, not a crash */
    CHECK_OK(send(sv[0], "{\"v\":99,\"type\":\"hello\"}", 23, 0));
    CHECK_EQ(shimproto_recv(sv[1], &got, fds, &n), -EPROTO);
    CHECK_OK(send(sv[0], "not json", 8, 0));
    CHECK_EQ(shimproto_recv(sv[1], &got, fds, &n), -EPROTO);
    close(sv[0]);
    CHECK_EQ(shimproto_recv(sv[1], &got, fds, &n), -ECONNRESET);
}

TEST(shimproto_error_record) {
    error_rec e;
    error_set(&e, -EACCES, "mount /proc failed");
    json_t *seq = json_integer(3);
    json_t *m = shimproto_error(seq, &e);
    error_rec back;
    CHECK_EQ(shimproto_error_parse(m, &back), -EACCES);
    CHECK_STREQ(back.message, "mount /proc failed");
    json_decref(m);
    json_decref(seq);
}

TEST(file_atomic_and_rm_rf) {
    char path[512];
    snprintf(path, sizeof(path), "%s/a/b/c", test_tmpdir());
    CHECK_OK(mkdir_p(path, 0755));
    strcat(path, "/f");
    CHECK_OK(file_write_atomic(path, "hello", 5, 0600));
    char *s = NULL;
    size_t n = 0;
    CHECK_OK(file_read_all(path, 1024, &s, &n));
    CHECK_STREQ(s, "hello");
    CHECK_EQ(n, 5);
    free(s);
    CHECK_EQ(file_read_all(path, 2, &s, &n), -EFBIG);
    snprintf(path, sizeof(path), "%s/a", test_tmpdir());
    CHECK_OK(rm_rf(path));
    CHECK(access(path, F_OK) < 0);
    CHECK_OK(rm_rf(path)); /* idempotent */
}

/* The escaper, called with every buffer size from 6 up, writes what jansson writes for the
 * whole string; the UTF-8 check says what jansson's json_stringn says. */
TEST(jsonstr_pieces_match_jansson) {
    char text[600];
    size_t len = 0;
    for (int c = 0; c < 128; c++)
        text[len++] = (char)c;
    const char *more = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \"q\" back\\slash /";
    memcpy(text + len, more, strlen(more));
    len += strlen(more);
    json_t *s = json_stringn(text, len);
    CHECK(s != NULL);
    CHECK(jsonstr_utf8_valid(text, len));
    char *want = json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(s);
    size_t want_len = strlen(want) - 2; /* without the quotes */
    for (size_t cap = 6; cap < 40; cap++) {
        char got[4096], buf[64];
        size_t pos = 0, n = 0, w;
        while ((w = jsonstr_escape(text, len, &pos, buf, cap)) > 0) {
            CHECK(w <= cap);
            memcpy(got + n, buf, w);
            n += w;
        }
        CHECK_EQ(pos, len);
        CHECK_EQ(n, want_len);
        CHECK(memcmp(got, want + 1, want_len) == 0);
    }
    free(want);
    static const char *const seqs[] = {
        "\xc3\xa9", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf0\x9f\x98",
        "\xff",     "\x80",     "ok",           "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf"};
    for (size_t i = 0; i < ARRAY_SIZE(seqs); i++) {
        json_t *j = json_stringn(seqs[i], strlen(seqs[i]));
        CHECK_MSG(jsonstr_utf8_valid(seqs[i], strlen(seqs[i])) == (j != NULL), "sequence %zu", i);
        json_decref(j);
    }
    CHECK_EQ(jsonstr_utf8_whole_len("ab\xe2\x82", 4), 2);
    CHECK_EQ(jsonstr_utf8_whole_len("ab\xe2\x82\xac", 5), 5);
}

TEST(b64_pieces) {
    unsigned char data[100];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 37 + 11);
    for (size_t len = 0; len <= sizeof(data); len++) {
        char *whole = b64_encode(data, len), got[200];
        size_t n = 0;
        for (size_t at = 0; at < len; at += 6) /* pieces of 6 bytes, the last shorter */
            n += b64_encode_into(data + at, MIN((size_t)6, len - at), got + n);
        CHECK_EQ(n, strlen(whole));
        CHECK(memcmp(got, whole, n) == 0);
        free(whole);
    }
}

/* Wrapped base64 (MIME lines, Python's encodebytes) decodes as the unwrapped text does; the
 * plain decoder still refuses whitespace, and the wrapped one anything else that is not base64. */
TEST(b64_wrapped) {
    static const struct {
        const char *in;
        const char *out; /* NULL: -EINVAL */
    } cases[] = {
        {"aGVs\nbG8=\n", "hello"}, {"aGVs\r\nbG8=", "hello"},
        {" aGk= \t", "hi"},        {"\n\n", ""},
        {"aG\nk", NULL},           {"aG!k", NULL},
        {"aGk=\nx", NULL},         {"aGk=aGk=", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const char *in = cases[i].in;
        unsigned char *out = NULL;
        size_t n = 0;
        int r = b64_decode_wrapped(in, strlen(in), &out, &n);
        CHECK_MSG(r == (cases[i].out ? 0 : -EINVAL), "case %zu: %d", i, r);
        CHECK_EQ(b64_check_wrapped(in, strlen(in)), r);
        if (r == 0)
            CHECK_MSG(n == strlen(cases[i].out) && memcmp(out, cases[i].out, n) == 0, "case %zu",
                      i);
        free(out);
    }
    CHECK_EQ(b64_check("aGVs\nbG8=", 9), -EINVAL);
}

/* docs/FLEET.md "Warm pools steer placement": a create matches a published pool when each
 * shape field it gives (in the published form), or the node's default, equals the pool's. */
TEST(poolshape_match) {
    json_t *defs = json_loads("{\"image\":\"host\",\"cpu\":1.0,\"memory\":2147483648,"
                              "\"disk\":1073741824,\"pids\":256,\"network\":\"none\","
                              "\"profile\":\"default\"}",
                              0, NULL);
    json_t *pool = json_deep_copy(defs);
    json_object_set_new(pool, "cpu", json_real(0.5));
    json_object_set_new(pool, "memory", json_integer(256 << 20));
    json_object_set_new(pool, "ready", json_integer(2));
    static const struct {
        const char *body;
        int matches; /* -1: no shape at all */
    } cases[] = {
        {"{\"cpu\":0.5,\"memory\":\"256Mi\"}", 1},
        {"{\"cpu\":0.5,\"memory\":268435456,\"labels\":{\"a\":\"b\"},\"timeout\":9}", 1},
        {"{\"cpu\":0.50,\"memory\":268435456.0,\"image\":\"host\",\"profile\":null}", 1},
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"network\":\"none\",\"pids\":256}", 1},
        {"{\"cpu\":0.5}", 0},          /* memory: the default 2Gi */
        {"{\"memory\":\"256Mi\"}", 0}, /* cpu: the default 1 */
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"network\":\"open\"}", 0},
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"profile\":\"grading\"}", 0},
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"image\":\"debian\"}", 0},
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"isolation\":\"gvisor\"}", 0},
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"isolation\":\"native\"}", 1},
        {"{\"cpu\":0.5,\"isolation\":\"kata\"}", -1},
        {"{\"cpu\":0.5,\"memory\":\"256Mi\",\"network\":{\"allow\":[\"1.2.3.4\"]}}", -1},
        {"{\"cpu\":\"half\"}", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *body = json_loads(cases[i].body, 0, NULL), *shape = poolshape_from_body(body);
        CHECK_MSG((shape != NULL) == (cases[i].matches >= 0), "shape of %s", cases[i].body);
        CHECK_MSG(poolshape_match(shape, defs, pool) == (cases[i].matches == 1), "%s",
                  cases[i].body);
        json_decref(shape);
        json_decref(body);
    }
    /* NAME is NAME:latest, as the daemon names it */
    json_object_set_new(pool, "image", json_string("debian:latest"));
    json_t *b = json_loads("{\"cpu\":0.5,\"memory\":\"256Mi\",\"image\":\"debian\"}", 0, NULL);
    json_t *shape = poolshape_from_body(b);
    CHECK(poolshape_match(shape, defs, pool));
    CHECK(!poolshape_match(shape, NULL, NULL));
    /* the best of published pools: matching, most ready entries, never an empty one */
    json_t *other = json_deep_copy(pool), *empty = json_deep_copy(pool), *pools = json_array();
    json_object_set_new(other, "ready", json_integer(5));
    json_object_set_new(empty, "ready", json_integer(0));
    json_array_append_new(pools, empty);
    json_array_append(pools, pool);
    json_array_append_new(pools, other);
    json_int_t ready = -1;
    CHECK(poolshape_best(pools, defs, shape, &ready) == other && ready == 5);
    json_object_set_new(other, "cpu", json_real(2.0)); /* no longer the create's shape */
    CHECK(poolshape_best(pools, defs, shape, &ready) == pool && ready == 2);
    json_object_set_new(pool, "ready", json_integer(0));
    CHECK(poolshape_best(pools, defs, shape, &ready) == NULL && ready == 0);
    json_decref(pools);
    json_decref(shape);
    json_decref(b);
    json_decref(pool);
    json_decref(defs);
}

TEST(capture_run_output_status_deadline) {
    extern char **environ;
    char out[64];
    int st = -1;
    char *both[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    CHECK_OK(capture_run(both, environ, true, -1, out, sizeof(out), &st));
    CHECK_STREQ(out, "out\nerr\n");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    CHECK_OK(capture_run(both, environ, false, 5000, out, sizeof(out), &st));
    CHECK_STREQ(out, "out\n");
    char *small[] = {"sh", "-c", "echo 0123456789", NULL}; /* a full buffer stops the read */
    CHECK_OK(capture_run(small, environ, true, -1, out, 5, &st));
    CHECK_STREQ(out, "0123");
    /* past its deadline: killed and reaped, what it printed kept, -ETIMEDOUT */
    char *slow[] = {"sh", "-c", "echo early; exec sleep 30", NULL};
    uint64_t t0 = now_mono_ms();
    CHECK_EQ(capture_run(slow, environ, false, 300, out, sizeof(out), &st), -ETIMEDOUT);
    CHECK_STREQ(out, "early\n");
    CHECK_MSG(now_mono_ms() - t0 < 5000, "the deadline was not kept: %llu ms",
              (unsigned long long)(now_mono_ms() - t0));
    char *missing[] = {"/nonexistent/sbx-no-such-program", NULL};
    CHECK_EQ(capture_run(missing, environ, true, -1, out, sizeof(out), &st), -ENOENT);
}
