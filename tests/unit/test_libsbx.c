/* Unit tests of libsbx without a daemon: SBX_HOST parsing, the NDJSON splitter across every
 * chunk boundary, the exec event stream, result parsing, error mapping and messages,
 * request bodies, and the async engine's connection failures and cancellation. */
#include "client/lib/http_async.h"
#include "client/lib/internal.h"
#include "tests/lib/test.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <uv.h>

TEST(hosts_parse) {
    sbxi_endpoint *eps = NULL;
    size_t n = 0;
    sbx_err err = {0};
    CHECK_EQ(sbxi_hosts_parse(" unix:/run/a.sock , /tmp/b.sock,http://h:8080/, tcp://10.0.0.1:9,"
                              "unix:///c.sock,example.com:7000,,",
                              &eps, &n, &err),
             SBX_OK);
    CHECK_EQ(n, 6);
    CHECK_STREQ(eps[0].unix_path, "/run/a.sock");
    CHECK_STREQ(eps[0].base_url, "http://localhost");
    CHECK_STREQ(eps[1].unix_path, "/tmp/b.sock");
    CHECK(eps[2].unix_path == NULL);
    CHECK_STREQ(eps[2].base_url, "http://h:8080");
    CHECK_STREQ(eps[3].base_url, "http://10.0.0.1:9");
    CHECK_STREQ(eps[4].unix_path, "/c.sock");
    CHECK_STREQ(eps[5].base_url, "http://example.com:7000");
    CHECK(!eps[0].is_default);
    CHECK_EQ(eps[0].free_slots, -1);
    sbxi_endpoints_free(eps, n);

    CHECK_EQ(sbxi_hosts_parse("unix:" SBX_DEFAULT_SOCKET, &eps, &n, &err), SBX_OK);
    CHECK(eps[0].is_default);
    sbxi_endpoints_free(eps, n);

    static const char *bad[] = {"", " , ", "ftp://x", "unix:", "nonsense", "a/b"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        eps = (void *)1;
        memset(&err, 0, sizeof(err));
        CHECK_MSG(sbxi_hosts_parse(bad[i], &eps, &n, &err) == SBX_E_INVALID, "\"%s\"", bad[i]);
        CHECK(eps == (void *)1); /* ret_ untouched on failure */
        CHECK(err.message[0]);
    }
}

TEST(client_env) {
    sbx_client *c = NULL;
    setenv("SBX_HOST", "unix:/tmp/x1.sock,unix:/tmp/x2.sock", 1);
    setenv("SBX_TOKEN", "tok", 1);
    CHECK_EQ(sbx_client_new(NULL, &c, NULL), SBX_OK);
    CHECK_EQ(c->n_eps, 2);
    CHECK_STREQ(c->token, "tok");
    CHECK_EQ(sbx_client_set_token(c, "bad\r\nX-Injected: 1"), SBX_E_INVALID);
    CHECK_STREQ(c->token, "tok"); /* unchanged */
    CHECK_EQ(sbx_client_set_token(c, "other"), SBX_OK);
    CHECK_STREQ(c->token, "other");
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.idempotency_key = "k\nX: y";
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_sandbox_create(c, &co, &sb, &err), SBX_E_INVALID);
    CHECK(sb == NULL);
    sbx_client_free(c);
    unsetenv("SBX_HOST");
    CHECK_EQ(sbx_client_new(NULL, &c, NULL), SBX_OK);
    CHECK_EQ(c->n_eps, 1);
    CHECK_STREQ(c->eps[0].unix_path, SBX_DEFAULT_SOCKET);
    CHECK(c->eps[0].is_default);
    sbx_client_free(c);
    sbx_client_free(NULL);
}

TEST(placement_order) {
    sbx_client *c = NULL;
    CHECK_EQ(sbx_client_new("/a,/b,/c,/d", &c, NULL), SBX_OK);
    c->eps[0].free_slots = 3;
    c->eps[1].free_slots = -1;
    c->eps[2].free_slots = 10;
    c->eps[3].free_slots = 3;
    size_t order[4];
    sbxi_placement_order(c, NULL, order);
    CHECK_EQ(order[0], 2);
    CHECK_EQ(order[1], 0); /* stable among equals */
    CHECK_EQ(order[2], 3);
    CHECK_EQ(order[3], 1); /* unknown last */
    sbxi_info_record(c, 1, "{\"free_slots\":50}", 17, true);
    CHECK_EQ(c->eps[1].free_slots, 50);
    sbxi_info_record(c, 1, "garbage", 7, true);
    CHECK_EQ(c->eps[1].free_slots, -1);
    sbx_client_free(c);
}

struct lines {
    char got[16][64];
    int n;
};

static int on_line(void *ud, const char *line, size_t len) {
    struct lines *l = ud;
    CHECK(l->n < 16 && len < 64);
    memcpy(l->got[l->n], line, len);
    l->got[l->n++][len] = 0;
    return 0;
}

TEST(ndjson_every_split) {
    static const char in[] = "{\"a\":1}\n\n{\"b\":\"x y\"}\r\n{\"c\":[1,2,3]}\nlast";
    static const char *want[] = {"{\"a\":1}", "{\"b\":\"x y\"}", "{\"c\":[1,2,3]}", "last"};
    size_t len = sizeof(in) - 1;
    for (size_t i = 0; i <= len; i++)
        for (size_t j = i; j <= len; j++) { /* three chunks: [0,i) [i,j) [j,len) */
            struct lines l = {0};
            sbxi_ndjson s;
            sbxi_ndjson_init(&s, 1024, on_line, &l);
            CHECK_EQ(sbxi_ndjson_feed(&s, in, i), 0);
            CHECK_EQ(sbxi_ndjson_feed(&s, in + i, j - i), 0);
            CHECK_EQ(sbxi_ndjson_feed(&s, in + j, len - j), 0);
            CHECK_EQ(sbxi_ndjson_finish(&s), 0);
            sbxi_ndjson_done(&s);
            CHECK_EQ(l.n, 4);
            for (int k = 0; k < 4; k++)
                CHECK_STREQ(l.got[k], want[k]);
        }
    /* byte by byte */
    struct lines l = {0};
    sbxi_ndjson s;
    sbxi_ndjson_init(&s, 1024, on_line, &l);
    for (size_t i = 0; i < len; i++)
        CHECK_EQ(sbxi_ndjson_feed(&s, in + i, 1), 0);
    CHECK_EQ(sbxi_ndjson_finish(&s), 0);
    sbxi_ndjson_done(&s);
    CHECK_EQ(l.n, 4);
}

TEST(ndjson_too_long) {
    struct lines l = {0};
    sbxi_ndjson s;
    sbxi_ndjson_init(&s, 8, on_line, &l);
    CHECK_EQ(sbxi_ndjson_feed(&s, "12345", 5), 0);
    CHECK(sbxi_ndjson_feed(&s, "67890", 5) < 0);
    CHECK(sbxi_ndjson_feed(&s, "\n{}\n", 4) < 0); /* stays failed */
    CHECK(sbxi_ndjson_finish(&s) < 0);
    sbxi_ndjson_done(&s);
    CHECK_EQ(l.n, 0);
}

struct out {
    char text[256];
    size_t len;
    int order[16];
    int n;
};

static void on_output(void *ud, enum sbx_stream stream, const char *data, size_t len) {
    struct out *o = ud;
    CHECK(o->len + len < sizeof(o->text) && o->n < 16);
    memcpy(o->text + o->len, data, len);
    o->len += len;
    o->order[o->n++] = stream;
}

TEST(exec_stream_chunks) {
    static const char in[] =
        "{\"type\":\"start\",\"pid\":12}\n"
        "{\"type\":\"stdout\",\"data\":\"hello\\n\"}\n"
        "{\"type\":\"stderr\",\"data_b64\":\"AP8K\"}\n"    /* 00 ff 0a */
        "{\"type\":\"future_event\",\"x\":1}\n"            /* ignored */
        "{\"type\":\"stdout\",\"data\":\"w\\u0000rld\"}\n" /* NUL inside */
        "{\"type\":\"exit\",\"exit_code\":null,\"signal\":9,\"reason\":\"signaled\","
        "\"duration\":0.25,\"stdout_bytes\":11,\"stderr_bytes\":3}\n";
    size_t len = sizeof(in) - 1;
    for (size_t step = 1; step <= len; step += (step < 8 ? 1 : 37)) {
        struct out o = {0};
        sbx_exec_opts eo;
        sbx_exec_opts_init(&eo);
        eo.on_output = on_output;
        eo.userdata = &o;
        sbxi_exec_stream st;
        sbxi_exec_stream_init(&st, &eo);
        for (size_t i = 0; i < len; i += step)
            sbxi_exec_stream_chunk(&st, in + i, MIN(step, len - i));
        sbx_exec_result r;
        sbx_err err = {0};
        CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_OK);
        sbxi_exec_stream_done(&st);
        CHECK_EQ(o.n, 3);
        CHECK_EQ(o.order[0], SBX_STREAM_STDOUT);
        CHECK_EQ(o.order[1], SBX_STREAM_STDERR);
        CHECK_EQ(o.len, 6 + 3 + 5);
        CHECK(memcmp(o.text, "hello\n\x00\xff\nw\0rld", 14) == 0);
        CHECK_EQ(r.exit_code, -1);
        CHECK_EQ(r.signal, 9);
        CHECK_STREQ(r.reason, "signaled");
        CHECK(r.stdout_data == NULL);
        CHECK_EQ(r.stdout_bytes, 11);
    }
}

TEST(exec_stream_errors) {
    sbx_exec_opts eo;
    sbx_exec_opts_init(&eo);
    sbxi_exec_stream st;
    sbx_exec_result r;
    sbx_err err = {0};
    sbxi_exec_stream_init(&st, &eo);
    sbxi_exec_stream_chunk(&st, "{\"type\":\"stdout\",\"data\":\"x\"}\n", 29);
    CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_E_PROTOCOL); /* no exit event */
    sbxi_exec_stream_done(&st);
    /* a plain JSON result where a stream was asked for is replayed as events */
    struct out o = {0};
    eo.on_output = on_output;
    eo.userdata = &o;
    sbxi_exec_stream_init(&st, &eo);
    const char *plain = "{\"exit_code\":2,\"signal\":null,\"reason\":\"exited\",\"stdout\":\"so\","
                        "\"stderr\":\"se\"}";
    sbxi_exec_stream_chunk(&st, plain, strlen(plain));
    CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_OK);
    CHECK_EQ(r.exit_code, 2);
    CHECK(o.len == 4 && memcmp(o.text, "sose", 4) == 0);
    CHECK(o.order[0] == SBX_STREAM_STDOUT && o.order[1] == SBX_STREAM_STDERR);
    sbxi_exec_stream_done(&st);
    eo.on_output = NULL;
    sbxi_exec_stream_init(&st, &eo);
    sbxi_exec_stream_chunk(&st, "not json\n", 9);
    CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_E_PROTOCOL);
    sbxi_exec_stream_done(&st);
    sbxi_exec_stream_init(&st, &eo);
    const char *e = "{\"type\":\"error\",\"code\":\"internal\",\"message\":\"shim died\"}\n";
    sbxi_exec_stream_chunk(&st, e, strlen(e));
    CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_E_SERVER);
    CHECK_STREQ(err.message, "shim died");
    sbxi_exec_stream_done(&st);
    /* the sandbox ended under the command: a conflict, as the plain exec's 409 */
    sbxi_exec_stream_init(&st, &eo);
    e = "{\"type\":\"error\",\"code\":\"conflict\",\"message\":\"sandbox ended\"}\n";
    sbxi_exec_stream_chunk(&st, e, strlen(e));
    CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_E_CONFLICT);
    CHECK_EQ(err.code, SBX_E_CONFLICT);
    CHECK_STREQ(err.api_code, "conflict");
    CHECK_EQ(err.http_status, 200);
    sbxi_exec_stream_done(&st);
    sbxi_exec_stream_init(&st, &eo);
    e = "{\"type\":\"error\",\"code\":\"invalid_argument\",\"message\":\"bad\"}\n";
    sbxi_exec_stream_chunk(&st, e, strlen(e));
    CHECK_EQ(sbxi_exec_stream_finish(&st, &r, &err), SBX_E_INVALID);
    sbxi_exec_stream_done(&st);
}

TEST(exec_result_parse) {
    const char *j = "{\"exit_code\":3,\"signal\":null,\"reason\":\"exited\",\"duration\":0.5,"
                    "\"stdout\":\"out\",\"stderr_b64\":\"/w==\",\"stdout_bytes\":3,"
                    "\"stderr_bytes\":5000,\"stdout_truncated\":false,\"stderr_truncated\":true}";
    sbx_exec_result r;
    sbx_err err = {0};
    CHECK_EQ(sbxi_exec_result_parse(j, strlen(j), &r, &err), SBX_OK);
    CHECK_EQ(r.exit_code, 3);
    CHECK_EQ(r.signal, 0);
    CHECK_STREQ(r.reason, "exited");
    CHECK_STREQ(r.stdout_data, "out");
    CHECK_EQ(r.stderr_len, 1);
    CHECK_EQ((unsigned char)r.stderr_data[0], 0xff);
    CHECK_EQ(r.stderr_bytes, 5000);
    CHECK(r.stderr_truncated && !r.stdout_truncated);
    sbx_exec_result_free(&r);
    sbx_exec_result_free(&r); /* idempotent */
    sbx_exec_result_free(NULL);
    CHECK_EQ(sbxi_exec_result_parse("[]", 2, &r, &err), SBX_E_PROTOCOL);
    CHECK_EQ(sbxi_exec_result_parse("{\"exit_code\":0}", 15, &r, &err), SBX_E_PROTOCOL);
}

TEST(error_mapping) {
    static const struct {
        long status;
        const char *code;
        sbx_code want;
    } cases[] = {
        {200, "", SBX_OK},
        {204, "", SBX_OK},
        {400, "invalid_argument", SBX_E_INVALID},
        {401, "unauthorized", SBX_E_AUTH},
        {403, "", SBX_E_AUTH},
        {404, "not_found", SBX_E_NOT_FOUND},
        {409, "conflict", SBX_E_CONFLICT},
        {413, "too_large", SBX_E_TOO_LARGE},
        {415, "unsupported_media_type", SBX_E_INVALID},
        {429, "too_many_requests", SBX_E_UNAVAILABLE},
        {500, "internal", SBX_E_SERVER},
        {503, "node_full", SBX_E_UNAVAILABLE},
        {503, "shutting_down", SBX_E_UNAVAILABLE},
        {502, "", SBX_E_SERVER},
        {302, "", SBX_E_PROTOCOL},
        /* the caller's mistake, whatever 4xx it came with */
        {422, "idempotency_key_reused", SBX_E_INVALID},
        {422, "invalid_argument", SBX_E_INVALID},
        {400, "invalid_json", SBX_E_INVALID},
        {426, "upgrade_required", SBX_E_PROTOCOL},
        /* no status (a mid-stream error line): the code name's class */
        {0, "conflict", SBX_E_CONFLICT},
        {0, "invalid_argument", SBX_E_INVALID},
        {0, "not_found", SBX_E_NOT_FOUND},
        {0, "node_full", SBX_E_UNAVAILABLE},
        {0, "node_unavailable", SBX_E_NODE_UNAVAILABLE},
        {0, "internal", SBX_E_SERVER},
        {0, "something_new", SBX_E_SERVER},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        CHECK_MSG(sbxi_code_from_status(cases[i].status, cases[i].code) == cases[i].want,
                  "status %ld code %s", cases[i].status, cases[i].code);
    CHECK_STREQ(sbx_code_name(SBX_E_CONNECT), "connect_failed");
    CHECK_STREQ(sbx_code_name(SBX_E_INTERRUPTED), "interrupted");
    CHECK_STREQ(sbx_code_name((sbx_code)999), "unknown");
}

TEST(error_from_response) {
    sbxi_endpoint ep = {.display = "/tmp/s.sock", .unix_path = "/tmp/s.sock"};
    sbxi_response r = {0};
    char body[] = "{\"message\":\"node is full: 120 sandboxes\",\"code\":\"node_full\"}";
    r.status = 503;
    r.body = body;
    r.len = strlen(body);
    r.retry_after = 2;
    sbx_err err = {0};
    CHECK_EQ(sbxi_err_from_response(&ep, &r, &err), SBX_E_UNAVAILABLE);
    CHECK_EQ(err.http_status, 503);
    CHECK_STREQ(err.api_code, "node_full");
    CHECK(strstr(err.message, "node is full") && strstr(err.message, "retry after 2s"));
    char html[] = "<html>bad gateway</html>\nmore";
    r = (sbxi_response){.status = 502, .body = html, .len = strlen(html)};
    CHECK_EQ(sbxi_err_from_response(&ep, &r, &err), SBX_E_SERVER);
    CHECK_STREQ(err.message, "HTTP 502: <html>bad gateway</html>");
    CHECK_STREQ(err.api_code, "");
}

TEST(error_connect_messages) {
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    CHECK_EQ(sbx_client_new("unix:/nonexistent-sbx-test/sock", &c, &err), SBX_OK);
    CHECK_EQ(sbx_client_info(c, &js, &err), SBX_E_CONNECT);
    CHECK(js == NULL);
    CHECK_EQ(err.http_status, 0);
    CHECK_MSG(strstr(err.message, "/nonexistent-sbx-test/sock") &&
                  strstr(err.message, "No such file or directory") &&
                  strstr(err.message, "is it running?"),
              "message: %s", err.message);
    sbx_client_free(c);
    /* the default socket's message says how to start the daemon */
    sbxi_endpoint ep = {
        .display = SBX_DEFAULT_SOCKET, .unix_path = SBX_DEFAULT_SOCKET, .is_default = true};
    sbxi_response r = {.curl_code = CURLE_COULDNT_CONNECT, .os_errno = ENOENT};
    CHECK_EQ(sbxi_err_from_response(&ep, &r, &err), SBX_E_CONNECT);
    CHECK_MSG(strstr(err.message, "cannot reach sandboxd at /run/sandboxd/sandboxd.sock: No such "
                                  "file or directory") &&
                  strstr(err.message, "sudo systemctl start sandboxd") &&
                  strstr(err.message, "sudo sandboxd"),
              "message: %s", err.message);
    r.os_errno = ECONNREFUSED;
    CHECK_EQ(sbxi_err_from_response(&ep, &r, &err), SBX_E_CONNECT);
    CHECK(strstr(err.message, "Connection refused"));
}

TEST(request_bodies) {
    sbx_err err = {0};
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    const char *env[] = {"A=1", "B=x=y", NULL}, *labels[] = {"task=t1", NULL};
    co.cpu = 0.5;
    co.memory = 512ull << 20;
    co.env = env;
    co.labels = labels;
    co.timeout_ms = 90000;
    co.network = "{\"allow\":[\"10.0.0.0/8\"]}";
    char *b = sbxi_create_body(&co, &err);
    json_t *j = json_loads(b, 0, NULL);
    CHECK(j);
    CHECK(json_real_value(json_object_get(j, "cpu")) == 0.5);
    CHECK_EQ(json_integer_value(json_object_get(j, "memory")), 512ll << 20);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "env"), "B")), "x=y");
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "labels"), "task")), "t1");
    CHECK(json_real_value(json_object_get(j, "timeout")) == 90.0);
    CHECK(json_is_array(json_object_get(json_object_get(j, "network"), "allow")));
    CHECK(!json_object_get(j, "disk"));
    json_decref(j);
    free(b);
    const char *badenv[] = {"NOEQUALS", NULL};
    co.env = badenv;
    CHECK(sbxi_create_body(&co, &err) == NULL);
    CHECK_EQ(err.code, SBX_E_INVALID);
    co.env = NULL;
    co.network = "{broken";
    CHECK(sbxi_create_body(&co, &err) == NULL);

    sbx_exec_opts eo;
    sbx_exec_opts_init(&eo);
    CHECK(sbxi_exec_body(&eo, &err) == NULL); /* no argv */
    const char *argv[] = {"echo", "hi", NULL};
    eo.argv = argv;
    eo.stdin_data = "bin\0ary";
    eo.stdin_len = 7;
    eo.timeout_ms = 1500;
    b = sbxi_exec_body(&eo, &err);
    j = json_loads(b, 0, NULL);
    CHECK_EQ(json_array_size(json_object_get(j, "argv")), 2);
    CHECK_STREQ(json_string_value(json_object_get(j, "stdin_b64")), "YmluAGFyeQ==");
    CHECK(!json_object_get(j, "stdin"));
    CHECK(json_real_value(json_object_get(j, "timeout")) == 1.5);
    json_decref(j);
    free(b);
    eo.stdin_data = "text";
    eo.stdin_len = 4;
    b = sbxi_exec_body(&eo, &err);
    j = json_loads(b, 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(j, "stdin")), "text");
    json_decref(j);
    free(b);
}

TEST(fork_status_lease_answers) {
    sbx_err err = {0};
    sbx_fork_opts fo;
    sbx_fork_opts_init(&fo);
    char *b = sbxi_fork_body(&fo, &err); /* nothing overridden: the count only */
    CHECK_STREQ(b, "{\"count\":1}");
    free(b);
    const char *labels[] = {"role=agent", NULL};
    fo.count = 8;
    fo.overrides.labels = labels;
    fo.overrides.memory = 1ull << 30;
    b = sbxi_fork_body(&fo, &err);
    json_t *j = json_loads(b, 0, NULL);
    CHECK_EQ(json_integer_value(json_object_get(j, "count")), 8);
    CHECK_EQ(json_integer_value(json_object_get(j, "memory")), 1ll << 30);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "labels"), "role")), "agent");
    CHECK(!json_object_get(j, "cpu"));
    json_decref(j);
    free(b);
    fo.count = 257;
    CHECK(sbxi_fork_body(&fo, &err) == NULL);
    CHECK_EQ(err.code, SBX_E_INVALID);
    /* the fields sbx_create_opts has no member for, as sbx_sandbox_create_with adds them */
    fo.count = 2;
    b = sbxi_fork_body_with(&fo, "{\"on_idle\":\"end\",\"ports\":[8000],\"volumes\":[]}", &err);
    j = json_loads(b, 0, NULL);
    CHECK_EQ(json_integer_value(json_object_get(j, "count")), 2);
    CHECK_STREQ(json_string_value(json_object_get(j, "on_idle")), "end");
    CHECK_EQ(json_integer_value(json_array_get(json_object_get(j, "ports"), 0)), 8000);
    CHECK_EQ(json_array_size(json_object_get(j, "volumes")), 0);
    CHECK_EQ(json_integer_value(json_object_get(j, "memory")), 1ll << 30);
    json_decref(j);
    free(b);
    static const char *const twice[][2] = {{"{\"count\":3}", "count is set twice"},
                                           {"{\"memory\":1}", "memory is set twice"},
                                           {"[1]", "not a JSON object"}};
    for (size_t i = 0; i < ARRAY_SIZE(twice); i++) {
        err = (sbx_err){0};
        CHECK(sbxi_fork_body_with(&fo, twice[i][0], &err) == NULL);
        CHECK_EQ(err.code, SBX_E_INVALID);
        CHECK(strstr(err.message, twice[i][1]));
    }

    sbx_client *c = NULL;
    CHECK_EQ(sbx_client_new("/tmp/a.sock,/tmp/b.sock", &c, &err), SBX_OK);
    sbx_sandbox **sbs = NULL;
    size_t n = 0;
    const char *ok = "[{\"id\":\"sb-1\"},{\"id\":\"sb-2\"}]";
    CHECK_EQ(sbxi_sandboxes_from_body(c, 1, ok, strlen(ok), &sbs, &n, &err), SBX_OK);
    CHECK_EQ(n, 2);
    CHECK_STREQ(sbx_sandbox_id(sbs[1]), "sb-2");
    CHECK_EQ(sbs[1]->ep, 1); /* forks live where their source does */
    sbx_sandbox_array_free(sbs, n);
    const char *bad[] = {"[]", "{\"id\":\"sb-1\"}", "[{\"id\":\"sb-1\"},{\"id\":\"../x\"}]", "x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        n = 7;
        CHECK_EQ(sbxi_sandboxes_from_body(c, 0, bad[i], strlen(bad[i]), &sbs, &n, &err),
                 SBX_E_PROTOCOL);
        CHECK_EQ(n, 7); /* ret_ written only on success */
    }
    sbx_client_free(c);

    sbx_sandbox_status st;
    const char *running = "{\"state\":\"running\",\"cost_usd\":0.25,\"end\":null}";
    CHECK_EQ(sbxi_status_parse(running, strlen(running), &st, &err), SBX_OK);
    CHECK(st.cost_usd == 0.25 && strcmp(st.state, "running") == 0 && st.end_reason[0] == 0);
    const char *ended = "{\"state\":\"ended\",\"cost_usd\":0.1,"
                        "\"end\":{\"reason\":\"idle_timeout\",\"cost_usd\":0.5}}";
    CHECK_EQ(sbxi_status_parse(ended, strlen(ended), &st, &err), SBX_OK);
    CHECK(st.cost_usd == 0.5 && strcmp(st.end_reason, "idle_timeout") == 0);
    CHECK_EQ(sbxi_status_parse("{}", 2, &st, &err), SBX_E_PROTOCOL);

    char *id = NULL;
    CHECK_EQ(sbxi_lease_id_parse("{\"id\":\"ls-1\"}", 13, &id, &err), SBX_OK);
    CHECK_STREQ(id, "ls-1");
    free(id);
    CHECK_EQ(sbxi_lease_id_parse("{}", 2, &id, &err), SBX_E_PROTOCOL);
    char *lp = sbxi_lease_path("ls-1", "/renew");
    CHECK_STREQ(lp, "/v1/leases/ls-1/renew");
    free(lp);
    CHECK(sbxi_lease_path("a/b", "") == NULL && sbxi_lease_path("", "") == NULL);
    char *p = sbxi_files_path("sb-1", "/workspace/a b.sh", 0755);
    CHECK_STREQ(p, "/v1/sandboxes/sb-1/files?path=%2Fworkspace%2Fa%20b.sh&mode=0755");
    free(p);
}

TEST(units) {
    uint64_t v = 0;
    CHECK_EQ(sbx_parse_size("512Mi", &v), SBX_OK);
    CHECK_EQ(v, 512ull << 20);
    CHECK_EQ(sbx_parse_duration("5m", &v), SBX_OK);
    CHECK_EQ(v, 300000);
    CHECK_EQ(sbx_parse_size("lots", &v), SBX_E_INVALID);
    CHECK_EQ(sbx_parse_duration(NULL, &v), SBX_E_INVALID);
}

/* ---- async engine, no daemon: a connect failure, and cancellation of a request that a
 * listening socket never answers ---- */
struct acb {
    int calls;
    sbx_err err;
    bool got_sb;
};

static void on_create(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    struct acb *a = ud;
    a->calls++;
    a->got_sb = sb != NULL;
    if (err)
        a->err = *err;
    sbx_sandbox_free(sb);
}

TEST(async_connect_failure) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_client *c = NULL;
    CHECK_EQ(sbx_client_new("unix:/nonexistent-sbx-test/a.sock", &c, NULL), SBX_OK);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, NULL), SBX_OK);
    struct acb a = {0};
    CHECK_EQ(sbx_async_create(as, NULL, on_create, &a), SBX_OK);
    CHECK_EQ(a.calls, 0); /* never from inside the call */
    CHECK_EQ(sbx_async_pending(as), 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(a.calls, 1);
    CHECK(!a.got_sb);
    CHECK_EQ(a.err.code, SBX_E_CONNECT);
    CHECK(strstr(a.err.message, "No such file or directory"));
    CHECK_EQ(sbx_async_pending(as), 0);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    sbx_client_free(c);
    CHECK_EQ(uv_loop_close(&loop), 0); /* every handle closed */
}

static void on_fork(void *ud, sbx_sandbox **sbs, size_t n, const sbx_err *err) {
    struct acb *a = ud;
    a->calls++;
    if (err)
        a->err = *err;
    for (size_t i = 0; i < n; i++)
        sbx_sandbox_free(sbs[i]);
}

static void on_done(void *ud, const sbx_err *err) {
    struct acb *a = ud;
    a->calls++;
    if (err)
        a->err = *err;
}

/* A call refused before its request is sent returns its code and no callback runs;
 * sbx_async_submit_error gives the message the synchronous call would have put in its err, until
 * the next call (an accepted one clears it). */
TEST(async_submit_errors) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_async *as = NULL;
    CHECK_EQ(sbx_client_new("unix:/nonexistent-sbx-test/a.sock", &c, NULL), SBX_OK);
    CHECK_EQ(sbx_sandbox_open_lazy(c, "sb-1", &sb, NULL), SBX_OK);
    CHECK_EQ(sbx_async_new(c, &loop, &as, NULL), SBX_OK);
    sbx_err e;
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_OK);
    CHECK_EQ(sbx_async_submit_error(NULL, NULL), SBX_OK);
    struct acb a = {0};
    sbx_fork_opts fo;
    sbx_fork_opts_init(&fo);
    fo.count = 300;
    CHECK_EQ(sbx_async_fork(as, sb, &fo, on_fork, &a), SBX_E_INVALID);
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_E_INVALID);
    CHECK_EQ(e.code, SBX_E_INVALID);
    CHECK_EQ(e.http_status, 0);
    CHECK_STREQ(e.message, "fork count must be in [1, 256], not 300");
    fo.count = 2;
    CHECK_EQ(sbx_async_fork_with(as, sb, &fo, "{\"count\":3}", on_fork, &a), SBX_E_INVALID);
    CHECK_EQ(sbx_async_submit_error(as, NULL), SBX_E_INVALID);
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_E_INVALID);
    CHECK(strstr(e.message, "count is set twice"));
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.idempotency_key = "a\nb";
    CHECK_EQ(sbx_async_create(as, &co, on_create, &a), SBX_E_INVALID);
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_E_INVALID);
    CHECK(strstr(e.message, "idempotency key"));
    sbx_exec_opts eo;
    sbx_exec_opts_init(&eo);
    CHECK_EQ(sbx_async_exec(as, sb, &eo, NULL, &a), SBX_E_INVALID); /* no callback */
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_E_INVALID);
    CHECK(strstr(e.message, "callback"));
    CHECK_EQ(sbx_async_lease_renew(as, "a/b", on_done, &a), SBX_E_INVALID);
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_E_INVALID);
    CHECK(strstr(e.message, "lease id"));
    CHECK_EQ(sbx_async_port_request(as, sb, 0, "GET", "/", NULL, NULL, 0, NULL, &a), SBX_E_INVALID);
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_E_INVALID);
    CHECK_EQ(a.calls, 0);
    CHECK_EQ(sbx_async_pending(as), 0);
    /* an accepted call clears it; its failure comes through the callback */
    CHECK_EQ(sbx_async_fork_with(as, sb, &fo, "{\"on_idle\":\"end\"}", on_fork, &a), SBX_OK);
    CHECK_EQ(sbx_async_submit_error(as, &e), SBX_OK);
    CHECK_EQ(e.code, SBX_OK);
    CHECK_EQ(e.message[0], 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(a.calls, 1);
    CHECK_EQ(a.err.code, SBX_E_CONNECT);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

static void stop_loop(uv_timer_t *t) {
    uv_stop(t->loop);
}

TEST(async_cancel_on_free) {
    char path[108];
    snprintf(path, sizeof(path), "%s/hang.sock", test_tmpdir());
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    CHECK_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(fd, 16)); /* never accepted: requests hang */
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_client *c = NULL;
    CHECK_EQ(sbx_client_new(path, &c, NULL), SBX_OK);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, NULL), SBX_OK);
    struct acb a[3] = {0};
    for (int i = 0; i < 3; i++)
        CHECK_EQ(sbx_async_create(as, NULL, on_create, &a[i]), SBX_OK);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, stop_loop, 200, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(sbx_async_pending(as), 3);
    sbx_async_free(as);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(a[i].calls, 1);
        CHECK_EQ(a[i].err.code, SBX_E_IO);
    }
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_client_free(c);
    close(fd);
}

static int open_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The standalone handle freed inside one of its callbacks (inside sbx_async_run): its loop is
 * closed once that round ends. It ran the loop again from inside itself and, the engine's
 * handles still open then, gave up on closing it: the loop and its descriptors leaked. */
static sbx_async *free_me;
static void free_in_cb(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    struct acb *a = ud;
    a->calls++;
    if (err)
        a->err = *err;
    sbx_sandbox_free(sb);
    sbx_async_free(free_me);
    free_me = NULL;
}

TEST(async_standalone_free_inside_a_callback) {
    sbx_client *c = NULL;
    CHECK_EQ(sbx_client_new("unix:/nonexistent-sbx-test/a.sock", &c, NULL), SBX_OK);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new_standalone(c, &as, NULL), SBX_OK); /* (libuv's first loop opens */
    sbx_async_free(as);                                       /* descriptors it keeps) */
    int before = open_fds();
    CHECK_EQ(sbx_async_new_standalone(c, &as, NULL), SBX_OK);
    free_me = as;
    struct acb a[2] = {0};
    CHECK_EQ(sbx_async_create(as, NULL, free_in_cb, &a[0]), SBX_OK);
    CHECK_EQ(sbx_async_create(as, NULL, on_create, &a[1]), SBX_OK);
    for (int i = 0; i < 5000 && free_me; i++) {
        struct pollfd pfd = {.fd = sbx_async_fd(as), .events = POLLIN};
        poll(&pfd, 1, 10);
        sbx_async_run(as);
    }
    CHECK_MSG(free_me == NULL, "the first create was never called back");
    CHECK_EQ(a[0].calls, 1);
    CHECK_EQ(a[0].err.code, SBX_E_CONNECT);
    CHECK_EQ(a[1].calls, 1); /* failed as well, or cancelled by the free */
    CHECK_MSG(open_fds() == before, "%d descriptors more than before the handle",
              open_fds() - before);
    sbx_client_free(c);
}
