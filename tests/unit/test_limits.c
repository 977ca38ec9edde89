/* Unit tests of policy/limits (request validation: defaults, types, ranges, field names in
 * errors) and policy/price (the $0.0179/h default, linearity, cost over time). */
#include "policy/limits.h"
#include "policy/price.h"
#include "tests/lib/test.h"

#include <math.h>

static const policy_host host = {.cpus = 4, .memory_bytes = 8ull << 30};

static json_t *J(const char *s) {
    json_t *j = json_loads(s, 0, NULL);
    CHECK_MSG(j, "bad test JSON: %s", s);
    return j;
}

static int create(const char *body, policy_create *c, error_rec *err) {
    json_t *j = J(body);
    int r = policy_limits_parse_create(j, NULL, &host, c, err);
    json_decref(j);
    return r;
}

TEST(create_defaults) {
    policy_create c;
    error_rec err = {0};
    CHECK_OK(create("{}", &c, &err));
    CHECK_STREQ(c.image, "host");
    CHECK(c.cpu == 1.0);
    CHECK_EQ(c.memory, 2ull << 30);
    CHECK_EQ(c.disk, 1ull << 30);
    CHECK_EQ(c.pids, 256);
    CHECK_EQ(c.idle_timeout_ms, 300000);
    CHECK_EQ(c.timeout_ms, 3600000);
    CHECK(c.max_cost_usd == 0);
    CHECK_EQ(c.net_mode, POLICY_NET_NONE);
    CHECK(c.lease == NULL);
    CHECK_EQ(json_object_size(c.labels), 0);
    policy_create_done(&c);
}

TEST(create_units_and_values) {
    policy_create c;
    error_rec err = {0};
    CHECK_OK(create("{\"cpu\":0.5,\"memory\":\"512Mi\",\"disk\":1048576,\"pids\":64,"
                    "\"idle_timeout\":\"30s\",\"timeout\":90.5,\"max_cost_usd\":0.25,"
                    "\"labels\":{\"task\":\"t1\"},\"env\":{\"K\":\"V\"},\"lease\":\"ls-1\"}",
                    &c, &err));
    CHECK(c.cpu == 0.5);
    CHECK_EQ(c.memory, 512ull << 20);
    CHECK_EQ(c.disk, 1048576);
    CHECK_EQ(c.pids, 64);
    CHECK_EQ(c.idle_timeout_ms, 30000);
    CHECK_EQ(c.timeout_ms, 90500);
    CHECK(c.max_cost_usd == 0.25);
    CHECK_STREQ(json_string_value(json_object_get(c.labels, "task")), "t1");
    CHECK_STREQ(c.lease, "ls-1");
    /* round trip through the persisted form */
    json_t *j = policy_create_to_json(&c);
    policy_create c2;
    CHECK_OK(policy_limits_parse_create(j, NULL, &host, &c2, &err));
    CHECK_EQ(c2.memory, c.memory);
    CHECK_EQ(c2.timeout_ms, c.timeout_ms);
    CHECK(c2.max_cost_usd == c.max_cost_usd);
    CHECK_STREQ(c2.lease, "ls-1");
    json_decref(j);
    policy_create_done(&c2);
    policy_create_done(&c);
}

TEST(create_errors_name_the_field) {
    static const struct {
        const char *body, *field;
    } cases[] = {
        {"{\"cpu\":0}", "cpu"},
        {"{\"cpu\":5e-324}", "cpu"}, /* below the 0.01 vCPU quota floor */
        {"{\"cpu\":1e-7}", "cpu"},
        {"{\"cpu\":0.0099}", "cpu"},
        {"{\"cpu\":1e308}", "cpu"},
        {"{\"memory\":1e308}", "memory"},
        {"{\"disk\":1e-400}", "disk"},
        {"{\"cpu\":5}", "cpu"},
        {"{\"cpu\":\"1\"}", "cpu"},
        {"{\"memory\":\"1Mi\"}", "memory"},
        {"{\"memory\":\"9Gi\"}", "memory"},
        {"{\"memory\":-5}", "memory"},
        {"{\"memory\":\"lots\"}", "memory"},
        {"{\"disk\":\"65Gi\"}", "disk"},
        {"{\"pids\":7}", "pids"},
        {"{\"pids\":1.5}", "pids"},
        {"{\"pids\":70000}", "pids"},
        {"{\"idle_timeout\":\"0.5s\"}", "idle_timeout"},
        {"{\"timeout\":\"8d\"}", "timeout"},
        {"{\"timeout\":true}", "timeout"},
        {"{\"max_cost_usd\":0}", "max_cost_usd"},
        {"{\"max_cost_usd\":5e-324}", "max_cost_usd"},
        {"{\"max_cost_usd\":1e-7}", "max_cost_usd"},
        {"{\"max_cost_usd\":1e308}", "max_cost_usd"},
        {"{\"max_cost_usd\":1000000.5}", "max_cost_usd"},
        {"{\"idle_timeout\":5e-324}", "idle_timeout"},
        {"{\"timeout\":1e308}", "timeout"},
        {"{\"max_cost_usd\":\"1\"}", "max_cost_usd"},
        {"{\"labels\":{\"a\":1}}", "labels.a"},
        {"{\"labels\":[]}", "labels"},
        {"{\"env\":{\"A=B\":\"x\"}}", "env"},
        {"{\"env\":{\"\":\"x\"}}", "env"},
        {"{\"image\":\"relative/path\"}", "image"},
        {"{\"image\":\"/a/../etc\"}", "image"},
        {"{\"image\":5}", "image"},
        {"{\"image\":\"/srv/rootfs\"}", "image: a host directory cannot be named"},
        {"{\"image\":\"/\"}", "image: a host directory cannot be named"},
        {"{\"image\":\"a..b\"}", "image"},
        {"{\"image\":\"Upper\"}", "image"},
        {"{\"image\":\"a:b:c\"}", "image"},
        {"{\"image\":\"\"}", "image"},
        {"{\"network\":\"bogus\"}", "network"},
        {"{\"network\":{\"allow\":[1]}}", "network.allow[0]"},
        {"{\"lease\":7}", "lease"},
        {"[1]", "body"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        policy_create c = {0};
        error_rec err = {0};
        CHECK_MSG(create(cases[i].body, &c, &err) == -EINVAL, "accepted %s", cases[i].body);
        CHECK_MSG(strncmp(err.message, cases[i].field, strlen(cases[i].field)) == 0,
                  "%s: message \"%s\" does not start with %s", cases[i].body, err.message,
                  cases[i].field);
    }
}

/* A new sandbox's env fits in POLICY_MAX_ENV_JSON as JSON "K=V" strings (each command carries
 * it): at the bound it is taken, a byte past it (or escapes that make it longer) is refused by
 * policy_limits_check_env; the create's parse itself takes it (a record made before the bound
 * still loads). */
TEST(create_env_total_bound) {
    size_t val = 30000;
    char *a = malloc(val + 1), *b = malloc(POLICY_MAX_ENV_JSON);
    memset(a, 'a', val);
    a[val] = 0;
    /* "A" + 4 + 30000 and "B" + 4 + rest: exactly POLICY_MAX_ENV_JSON */
    size_t rest = POLICY_MAX_ENV_JSON - (1 + 4 + val) - (1 + 4);
    memset(b, 'b', rest);
    b[rest] = 0;
    json_t *body = json_pack("{s:{s:s,s:s}}", "env", "A", a, "B", b);
    policy_create c = {0};
    error_rec err = {0};
    CHECK_OK(policy_limits_parse_create(body, NULL, &host, &c, &err));
    CHECK_OK(policy_limits_check_env(c.env, &err));
    policy_create_done(&c);
    b[rest - 1] = '"'; /* escaped as \" : one byte more */
    json_object_set_new(json_object_get(body, "env"), "B", json_string(b));
    CHECK_OK(policy_limits_parse_create(body, NULL, &host, &c, &err));
    CHECK_EQ(policy_limits_check_env(c.env, &err), -EINVAL);
    CHECK_MSG(strncmp(err.message, "env: too large (49153 bytes as JSON, at most 49152)", 51) == 0,
              "%s", err.message);
    policy_create_done(&c);
    CHECK_OK(policy_limits_check_env(NULL, &err));
    json_decref(body);
    free(a);
    free(b);
}

/* An image's config Env is held to a create env's bounds at import: at each bound it is taken
 * (256 entries, a 256-character name, a 32 KiB value; 64 KiB in all, POLICY_MAX_IMAGE_ENV_JSON),
 * one past it is refused naming "image: config Env"; a later entry overrides an earlier one; so
 * is anything not an array of NAME=VALUE strings. */
TEST(image_env_bounds) {
    error_rec err = {0};
    json_t *env = json_array();
    for (int i = 0; i < 256; i++)
        json_array_append_new(env, json_sprintf("V%d=%d", i, i));
    CHECK_OK(policy_limits_check_image_env(env, &err));
    json_array_append_new(env, json_string("V0=again"));
    CHECK_EQ(policy_limits_check_image_env(env, &err), -EINVAL);
    CHECK_MSG(strcmp(err.message, "image: config Env: has too many entries (at most 256)") == 0,
              "%s", err.message);
    json_decref(env);
    char *s = malloc(40000);
    memset(s, 'K', 257);
    strcpy(s + 256, "=v"); /* a name of 256 characters */
    env = json_pack("[s,s]", s, "K=1");
    CHECK_OK(policy_limits_check_image_env(env, &err));
    s[256] = 'K', strcpy(s + 257, "=v"); /* 257 */
    json_array_set_new(env, 0, json_string(s));
    CHECK_EQ(policy_limits_check_image_env(env, &err), -EINVAL);
    CHECK_MSG(strstr(err.message, "image: config Env: key \"KKKK") == err.message, "%s",
              err.message);
    /* "A=", "B=" with values of 32763 bytes: 2 * (1 + 4 + 32763), exactly 64 KiB as JSON */
    memset(s, 'v', 2 + 32769 + 1);
    s[1] = '=', s[2 + 32763] = 0;
    s[0] = 'A', json_array_set_new(env, 0, json_string(s));
    s[0] = 'B', json_array_set_new(env, 1, json_string(s));
    CHECK_OK(policy_limits_check_image_env(env, &err));
    s[0] = 'C', json_array_append_new(env, json_string(s));
    CHECK_EQ(policy_limits_check_image_env(env, &err), -EINVAL);
    CHECK_MSG(strncmp(err.message,
                      "image: config Env: too large (98304 bytes as JSON, at most "
                      "65536)",
                      65) == 0,
              "%s", err.message);
    json_array_set_new(env, 1, json_string("A=a")); /* overrides the large A: not counted */
    CHECK_OK(policy_limits_check_image_env(env, &err));
    s[2 + 32763] = 'v', s[2 + 32768] = 0; /* a value of 32 KiB: taken */
    json_array_set_new(env, 2, json_string(s));
    CHECK_OK(policy_limits_check_image_env(env, &err));
    s[2 + 32768] = 'v', s[2 + 32769] = 0; /* one byte more, even where a later C overrides it */
    json_array_set_new(env, 1, json_string(s));
    json_array_append_new(env, json_string("C=small"));
    CHECK_EQ(policy_limits_check_image_env(env, &err), -EINVAL);
    CHECK_MSG(strcmp(err.message, "image: config Env.C: value too long") == 0, "%s", err.message);
    free(s);
    static const char *const junk[] = {"[\"NOEQ\"]", "[\"=v\"]", "[1]", "{\"A\":\"b\"}", "\"A=b\""};
    for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
        json_t *j = json_loads(junk[i], JSON_DECODE_ANY, NULL);
        CHECK_EQ(policy_limits_check_image_env(j, &err), -EINVAL);
        CHECK_MSG(strncmp(err.message, "image: config Env: ", 19) == 0, "%s: %s", junk[i],
                  err.message);
        json_decref(j);
    }
    CHECK_OK(policy_limits_check_image_env(NULL, &err));
    json_decref(env);
}

/* images: names are normalized to NAME:TAG */
TEST(create_image_names) {
    static const char *const cases[][2] = {
        {"{\"image\":\"host\"}", "host"},
        {"{\"image\":\"ubuntu\"}", "ubuntu:latest"},
        {"{\"image\":\"swe-bench.task_1:V2-rc\"}", "swe-bench.task_1:V2-rc"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        policy_create c = {0};
        error_rec err = {0};
        CHECK_MSG(create(cases[i][0], &c, &err) == 0, "%s: %s", cases[i][0], err.message);
        CHECK_STREQ(c.image, cases[i][1]);
        policy_create_done(&c);
    }
}

TEST(create_operator_defaults) {
    json_t *defs = J("{\"cpu\":0.25,\"memory\":\"256Mi\",\"idle_timeout\":\"10m\"}");
    json_t *body = J("{\"memory\":\"1Gi\"}");
    policy_create c;
    error_rec err = {0};
    CHECK_OK(policy_limits_parse_create(body, defs, &host, &c, &err));
    CHECK(c.cpu == 0.25);
    CHECK_EQ(c.memory, 1ull << 30);
    CHECK_EQ(c.idle_timeout_ms, 600000);
    policy_create_done(&c);
    json_decref(body);
    json_decref(defs);
}

/* "max_cost_usd": null is no cap even where the defaults set one (docs/API.md); the other
 * fields' null takes the default. */
TEST(create_null_cost_is_no_cap) {
    json_t *defs = J("{\"max_cost_usd\":1,\"idle_timeout\":\"10m\"}");
    json_t *body = J("{\"max_cost_usd\":null,\"idle_timeout\":null}");
    policy_create c;
    error_rec err = {0};
    CHECK_OK(policy_limits_parse_create(body, defs, &host, &c, &err));
    CHECK(c.max_cost_usd == 0);
    CHECK_EQ(c.idle_timeout_ms, 600000);
    policy_create_done(&c);
    json_decref(body);
    body = J("{}");
    CHECK_OK(policy_limits_parse_create(body, defs, &host, &c, &err));
    CHECK(c.max_cost_usd == 1);
    policy_create_done(&c);
    json_decref(body);
    json_decref(defs);
}

/* An egress entry too long says so (it said "must be a non-empty string"). */
TEST(create_allow_entry_too_long) {
    char e[263];
    memset(e, 'a', sizeof(e) - 1);
    e[sizeof(e) - 1] = 0;
    json_t *body = json_pack("{s:{s:[s]}}", "network", "allow", e);
    policy_create c = {0};
    error_rec err = {0};
    CHECK(policy_limits_parse_create(body, NULL, &host, &c, &err) == -EINVAL);
    CHECK_MSG(strcmp(err.message, "network.allow[0]: longer than 261 bytes") == 0, "%s",
              err.message);
    json_decref(body);
}

TEST(exec_parse) {
    policy_exec e;
    error_rec err = {0};
    json_t *j = J("{\"argv\":[\"python3\",\"-c\",\"print(1)\"],\"stdin_b64\":\"aGk=\","
                  "\"timeout\":\"30s\",\"max_output\":\"2Mi\",\"env\":{\"A\":\"b\"}}");
    CHECK_OK(policy_limits_parse_exec(j, &e, &err));
    CHECK_EQ(json_array_size(e.argv), 3);
    CHECK_STREQ(e.cwd, "/workspace");
    CHECK(!e.shell);
    CHECK_EQ(e.stdin_len, 2);
    CHECK(memcmp(e.stdin_data, "hi", 2) == 0);
    CHECK_EQ(e.timeout_ms, 30000);
    CHECK_EQ(e.max_output, 2ull << 20);
    policy_exec_done(&e);
    json_decref(j);
    j = J("{\"argv\":[\"ls\"]}");
    CHECK_OK(policy_limits_parse_exec(j, &e, &err));
    CHECK_EQ(e.timeout_ms, 0);
    CHECK_EQ(e.max_output, 1ull << 20);
    CHECK(e.stdin_data == NULL);
    CHECK(!e.as_grader);
    policy_exec_done(&e);
    json_decref(j);
    j = J("{\"argv\":[\"ls\"],\"user\":\"grader\"}");
    CHECK_OK(policy_limits_parse_exec(j, &e, &err));
    CHECK(e.as_grader);
    policy_exec_done(&e);
    json_decref(j);
}

/* "profile": "grading" (docs/GRPO.md), kept across the persisted form. */
TEST(create_profile) {
    policy_create c, back;
    error_rec err = {0};
    CHECK_OK(create("{}", &c, &err));
    CHECK(!c.grading);
    policy_create_done(&c);
    CHECK_OK(create("{\"profile\":\"grading\"}", &c, &err));
    CHECK(c.grading);
    json_t *j = policy_create_to_json(&c);
    CHECK_OK(policy_limits_parse_create(j, NULL, &host, &back, &err));
    CHECK(back.grading);
    json_decref(j);
    policy_create_done(&c);
    policy_create_done(&back);
    CHECK(create("{\"profile\":\"judge\"}", &c, &err) == -EINVAL);
    CHECK_MSG(strncmp(err.message, "profile", 7) == 0, "%s", err.message);
}

TEST(exec_errors) {
    static const struct {
        const char *body, *field;
    } cases[] = {
        {"{}", "argv"},
        {"{\"argv\":[]}", "argv"},
        {"{\"argv\":\"ls\"}", "argv"},
        {"{\"argv\":[\"ls\",3]}", "argv[1]"},
        {"{\"argv\":[\"\"]}", "argv[0]"},
        {"{\"argv\":[\"ls\"],\"shell\":1}", "shell"},
        {"{\"argv\":[\"ls\"],\"cwd\":\"rel\"}", "cwd"},
        {"{\"argv\":[\"ls\"],\"cwd\":\"/a/..\"}", "cwd"},
        {"{\"argv\":[\"ls\"],\"stdin\":5}", "stdin"},
        {"{\"argv\":[\"ls\"],\"stdin_b64\":\"@@@\"}", "stdin_b64"},
        {"{\"argv\":[\"ls\"],\"stdin\":\"a\",\"stdin_b64\":\"YQ==\"}", "stdin"},
        {"{\"argv\":[\"ls\"],\"timeout\":\"forever\"}", "timeout"},
        {"{\"argv\":[\"ls\"],\"max_output\":\"65Mi\"}", "max_output"},
        {"{\"argv\":[\"ls\"],\"max_output\":1e-400}", "max_output"}, /* parses as 0 */
        {"{\"argv\":[\"ls\"],\"max_output\":0}", "max_output"},
        {"{\"argv\":[\"ls\"],\"max_output\":1e308}", "max_output"},
        {"{\"argv\":[\"ls\"],\"timeout\":5e-324}", "timeout"},
        {"{\"argv\":[\"ls\"],\"timeout\":0.0004}", "timeout"},
        {"{\"argv\":[\"ls\"],\"timeout\":1e308}", "timeout"},
        {"{\"argv\":[\"ls\"],\"env\":{\"A\":null}}", "env.A"},
        {"{\"argv\":[\"ls\"],\"user\":\"root\"}", "user"},
        {"{\"argv\":[\"ls\"],\"user\":1001}", "user"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        policy_exec e = {0};
        error_rec err = {0};
        json_t *j = J(cases[i].body);
        CHECK_MSG(policy_limits_parse_exec(j, &e, &err) == -EINVAL, "accepted %s", cases[i].body);
        CHECK_MSG(strncmp(err.message, cases[i].field, strlen(cases[i].field)) == 0,
                  "%s: message \"%s\" does not start with %s", cases[i].body, err.message,
                  cases[i].field);
        json_decref(j);
    }
}

/* A field the daemon does not implement is refused naming it, never ignored (docs/API.md). */
TEST(unknown_fields_refused) {
    static const struct {
        const char *body, *field;
    } creates[] = {
        {"{\"snapshot\":true}", "snapshot: unknown field"},
        {"{\"memory\":\"1Gi\",\"mounts\":[]}", "mounts: unknown field"},
        {"{\"runtime\":\"runsc\"}", "runtime: unknown field"},
        {"{\"network\":{\"allow\":[\"a.b:443\"],\"deny\":[]}}", "network.deny: unknown field"},
    };
    for (size_t i = 0; i < sizeof(creates) / sizeof(creates[0]); i++) {
        policy_create c = {0};
        error_rec err = {0};
        CHECK_MSG(create(creates[i].body, &c, &err) == -EINVAL, "accepted %s", creates[i].body);
        CHECK_MSG(strncmp(err.message, creates[i].field, strlen(creates[i].field)) == 0,
                  "%s: message \"%s\" does not start with %s", creates[i].body, err.message,
                  creates[i].field);
    }
    policy_exec e = {0};
    error_rec err = {0};
    json_t *j = J("{\"argv\":[\"ls\"],\"tty\":true,\"gpus\":1}");
    CHECK(policy_limits_parse_exec(j, &e, &err) == -EINVAL);
    CHECK_STREQ(err.message, "gpus: unknown field (this daemon does not implement it)");
    json_decref(j);
    uint64_t ms;
    j = J("{\"timeout\":\"5m\",\"extend\":true}");
    CHECK(policy_limits_parse_timeout(j, &ms, &err) == -EINVAL);
    CHECK(strncmp(err.message, "extend: unknown field", 21) == 0);
    json_decref(j);
    j = J("{\"ttl\":\"5m\",\"node\":\"b\"}");
    CHECK(policy_limits_parse_lease(j, &ms, &err) == -EINVAL);
    CHECK(strncmp(err.message, "node: unknown field", 19) == 0);
    json_decref(j);
    /* every key the daemon writes back (its own state records) is one it reads */
    policy_create c = {0};
    CHECK_OK(create("{\"profile\":\"grading\",\"lease\":\"ls-1\",\"max_cost_usd\":1}", &c, &err));
    json_t *back = policy_create_to_json(&c);
    policy_create c2 = {0};
    CHECK_OK(policy_limits_parse_create(back, NULL, &host, &c2, &err));
    json_decref(back);
    policy_create_done(&c);
    policy_create_done(&c2);
}

/* volumes (policy/volumes.h): the create's "volumes" normalized and written back, the volume
 * create body, "on_idle" */
TEST(create_volumes_and_on_idle) {
    policy_create c = {0}, c2 = {0};
    error_rec err = {0};
    CHECK_OK(create("{\"volumes\":[{\"name\":\"pip-cache\",\"path\":\"/cache\",\"read_only\":"
                    "true},{\"name\":\"w\",\"path\":\"/workspace/w\"}],\"on_idle\":\"end\"}",
                    &c, &err));
    CHECK(json_array_size(c.volumes) == 2 && !c.on_idle_pause);
    CHECK(json_is_false(json_object_get(json_array_get(c.volumes, 1), "read_only")));
    json_t *back = policy_create_to_json(&c);
    CHECK_OK(policy_limits_parse_create(back, NULL, &host, &c2, &err));
    CHECK(json_equal(c.volumes, c2.volumes));
    json_decref(back);
    policy_create_done(&c);
    policy_create_done(&c2);
    CHECK_OK(create("{\"volumes\":[],\"on_idle\":\"pause\"}", &c, &err));
    CHECK(c.volumes == NULL && c.on_idle_pause);
    policy_create_done(&c);
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"{\"volumes\":[{\"name\":\"v\",\"path\":\"/proc/x\"}]}", "volumes[0].path: /proc is"},
        {"{\"volumes\":[{\"name\":\"v\",\"path\":\"/a\"},{\"name\":\"u\",\"path\":\"/a/b\"}]}",
         "volumes[1].path: /a/b and volumes[0].path /a are nested"},
        {"{\"volumes\":[{\"name\":\"v\",\"path\":\"rel\"}]}", "volumes[0].path: must be an abs"},
        {"{\"volumes\":[{\"name\":\"v\"}]}", "volumes[0].path: must be an abs"},
        {"{\"volumes\":[{\"path\":\"/a\"}]}", "volumes[0].name: must be a volume name"},
        {"{\"on_idle\":1}", "on_idle: must be"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_MSG(create(bad[i].body, &c, &err) == -EINVAL, "accepted %s", bad[i].body);
        CHECK_MSG(strncmp(err.message, bad[i].msg, strlen(bad[i].msg)) == 0, "%s: \"%s\"",
                  bad[i].body, err.message);
    }
    char name[64];
    uint64_t size = 0;
    json_t *j = J("{\"name\":\"pip-cache\",\"size\":\"1Gi\"}");
    CHECK_OK(policy_limits_parse_volume(j, name, &size, &err));
    CHECK_STREQ(name, "pip-cache");
    CHECK(size == 1ull << 30);
    json_decref(j);
    j = J("{\"name\":\"x\",\"size\":\"15Mi\"}");
    CHECK(policy_limits_parse_volume(j, name, &size, &err) == -EINVAL);
    CHECK(strncmp(err.message, "size: must be between", 21) == 0);
    json_decref(j);
}

TEST(timeout_and_lease) {
    uint64_t ms;
    error_rec err = {0};
    json_t *j = J("{\"timeout\":\"30m\"}");
    CHECK_OK(policy_limits_parse_timeout(j, &ms, &err));
    CHECK_EQ(ms, 1800000);
    json_decref(j);
    j = J("{}");
    CHECK(policy_limits_parse_timeout(j, &ms, &err) == -EINVAL);
    CHECK_OK(policy_limits_parse_lease(j, &ms, &err));
    CHECK_EQ(ms, 60000);
    json_decref(j);
    j = J("{\"ttl\":0.1}");
    CHECK(policy_limits_parse_lease(j, &ms, &err) == -EINVAL);
    CHECK(strncmp(err.message, "ttl", 3) == 0);
    json_decref(j);
    static const char *const bad_timeouts[] = {"{\"timeout\":5e-324}", "{\"timeout\":1e-400}",
                                               "{\"timeout\":1e308}", "{\"timeout\":604800.001}"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_timeouts); i++) {
        j = J(bad_timeouts[i]);
        CHECK_MSG(policy_limits_parse_timeout(j, &ms, &err) == -EINVAL, "accepted %s",
                  bad_timeouts[i]);
        CHECK_MSG(strncmp(err.message, "timeout:", 8) == 0, "%s", err.message);
        json_decref(j);
        char ttl[64];
        snprintf(ttl, sizeof(ttl), "{\"ttl\"%s", strchr(bad_timeouts[i], ':'));
        j = J(ttl);
        CHECK_MSG(policy_limits_parse_lease(j, &ms, &err) == -EINVAL, "accepted %s", ttl);
        CHECK_MSG(strncmp(err.message, "ttl:", 4) == 0, "%s", err.message);
        json_decref(j);
    }
}

/* The edges of each documented range are accepted. */
TEST(range_edges_accepted) {
    policy_create c;
    error_rec err = {0};
    CHECK_OK(create("{\"cpu\":0.01,\"max_cost_usd\":1e-6}", &c, &err));
    CHECK(c.cpu == 0.01 && c.max_cost_usd == 1e-6);
    policy_create_done(&c);
    CHECK_OK(create("{\"cpu\":4,\"max_cost_usd\":1e6,\"memory\":\"16Mi\",\"disk\":\"64Gi\","
                    "\"pids\":65536,\"timeout\":\"7d\",\"idle_timeout\":1}",
                    &c, &err));
    CHECK(c.cpu == 4 && c.max_cost_usd == 1e6);
    policy_create_done(&c);
    policy_exec e;
    json_t *j = J("{\"argv\":[\"ls\"],\"max_output\":1,\"timeout\":0.001}");
    CHECK_OK(policy_limits_parse_exec(j, &e, &err));
    CHECK_EQ(e.max_output, 1);
    CHECK_EQ(e.timeout_ms, 1);
    policy_exec_done(&e);
    json_decref(j);
    j = J("{\"argv\":[\"ls\"],\"max_output\":67108864.0,\"timeout\":604800}");
    CHECK_OK(policy_limits_parse_exec(j, &e, &err));
    CHECK_EQ(e.max_output, 64ull << 20);
    CHECK_EQ(e.timeout_ms, 604800000);
    policy_exec_done(&e);
    json_decref(j);
}

TEST(price_default_and_linear) {
    policy_price p = policy_price_default();
    CHECK(fabs(policy_price_per_hour(&p, 1, 2ull << 30) - 0.0179) < 1e-12);
    /* linear in cpu and memory */
    CHECK(fabs(policy_price_per_hour(&p, 2, 4ull << 30) - 2 * 0.0179) < 1e-12);
    CHECK(fabs(policy_price_per_hour(&p, 0.5, 1ull << 30) - 0.0179 / 2) < 1e-12);
    CHECK(fabs(policy_price_per_hour(&p, 3, 2ull << 30) - policy_price_per_hour(&p, 1, 2ull << 30) -
               2 * 0.0119) < 1e-12);
    /* cost over time */
    CHECK(fabs(policy_cost_usd(&p, 1, 2ull << 30, 3600000) - 0.0179) < 1e-12);
    CHECK(fabs(policy_cost_usd(&p, 1, 2ull << 30, 1800000) - 0.00895) < 1e-12);
    CHECK(policy_cost_usd(&p, 1, 2ull << 30, 0) == 0);
    uint64_t t = policy_cost_time_to_limit_ms(&p, 1, 2ull << 30, 0.0179);
    CHECK(t >= 3599999 && t <= 3600001);
    policy_price free_ = {0, 0, 0};
    CHECK(policy_cost_time_to_limit_ms(&free_, 1, 1, 1) == UINT64_MAX);
}

/* "isolation" (docs/API.md): native by default, gvisor on request or by the operator's default;
 * gvisor with grading or GPUs is refused when asked for, native when it is only the default. */
TEST(isolation_class) {
    static const struct {
        const char *body, *defaults;
        int gvisor; /* -1: refused */
        const char *message;
    } cases[] = {
        {"{}", NULL, 0, NULL},
        {"{\"isolation\":\"native\"}", NULL, 0, NULL},
        {"{\"isolation\":\"gvisor\"}", NULL, 1, NULL},
        {"{}", "{\"isolation\":\"gvisor\"}", 1, NULL},
        {"{\"isolation\":\"native\"}", "{\"isolation\":\"gvisor\"}", 0, NULL},
        {"{\"isolation\":\"kata\"}", NULL, -1, "isolation: must be"},
        {"{\"isolation\":true}", NULL, -1, "isolation: must be"},
        {"{\"isolation\":\"gvisor\",\"profile\":\"grading\"}", NULL, -1,
         "isolation: \"gvisor\" is"},
        {"{\"isolation\":\"gvisor\",\"gpus\":1}", NULL, -1, "isolation: \"gvisor\" is"},
        {"{\"profile\":\"grading\"}", "{\"isolation\":\"gvisor\"}", 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *b = json_loads(cases[i].body, 0, NULL);
        json_t *d = cases[i].defaults ? json_loads(cases[i].defaults, 0, NULL) : NULL;
        policy_create c = {0};
        error_rec err = {0};
        int r = policy_limits_parse_create(b, d, &host, &c, &err);
        CHECK_MSG((r < 0) == (cases[i].gvisor < 0), "%s: r=%d %s", cases[i].body, r, err.message);
        if (r >= 0) {
            CHECK_MSG(c.gvisor == (cases[i].gvisor == 1), "%s: gvisor=%d", cases[i].body, c.gvisor);
            json_t *j = policy_create_to_json(&c); /* what a restart, a fork and a pool read back */
            policy_create back = {0};
            CHECK_OK(policy_limits_parse_create(j, NULL, &host, &back, &err));
            CHECK_EQ(back.gvisor, c.gvisor);
            policy_create_done(&back);
            json_decref(j);
        } else {
            CHECK_MSG(strncmp(err.message, cases[i].message, strlen(cases[i].message)) == 0,
                      "%s: %s", cases[i].body, err.message);
        }
        policy_create_done(&c);
        json_decref(b);
        json_decref(d);
    }
}
