/* Unit tests of the sandbox spec (common/spec.h): defaults, every field, rejection of
 * malformed or unsafe values with a message naming the field, the writer (read back the same)
 * and the default environment. */
#include "common/spec.h"
#include "tests/lib/test.h"

#include <stdio.h>

#define BASE                                                                                       \
    "\"id\":\"sb-1\",\"image\":{\"type\":\"host\"},\"uid_base\":1065536,"                          \
    "\"seccomp_bpf\":\"/x.bpf\",\"cgroup\":{\"version\":1,\"parent\":\"sandboxd\"}"

#define ALL_FIELDS                                                                                 \
    "\"id\":\"sb-0123abcd\",\"image\":{\"type\":\"dir\",\"path\":\"/var/lib/img\"},"               \
    "\"cpu\":0.5,\"memory\":1048576000,\"disk\":2097152,\"pids\":64,\"uid_base\":2000000,"         \
    "\"hostname\":\"box\",\"env\":[\"A=1\",\"B=two\\nlines\"],\"network\":{\"mode\":\"veth\"},"    \
    "\"etc_hosts\":[[\"10.0.0.1\",\"a\",\"b\"]],\"dns\":[\"10.0.0.53\"],"                          \
    "\"seccomp_bpf\":\"/run/s.bpf\",\"cgroup\":{\"version\":2,\"parent\":\"/sys/fs/cgroup/sd\"}"

TEST(shim_spec_defaults) {
    shim_spec *s = NULL;
    error_rec err = {0};
    CHECK_MSG(shim_spec_parse("{" BASE "}", &s, &err) == 0, "%s", err.message);
    CHECK_STREQ(s->id, "sb-1");
    CHECK_STREQ(s->hostname, "sb-1");
    CHECK_EQ(s->image_type, SHIM_IMAGE_HOST);
    CHECK(s->cpu == 1.0);
    CHECK_EQ(s->memory, 2ull << 30);
    CHECK_EQ(s->disk, 1ull << 30);
    CHECK_EQ(s->pids, 256);
    CHECK_EQ(s->uid_base, 1065536);
    CHECK_EQ(s->n_env, 0);
    CHECK(s->env && !s->env[0]);
    CHECK_EQ(s->net_mode, SHIM_NET_NONE);
    CHECK_EQ(s->cgroup_version, 1);
    CHECK_STREQ(s->cgroup_parent, "sandboxd");
    shim_spec_free(s);
}

TEST(shim_spec_all_fields) {
    const char *text = "{" ALL_FIELDS ",\"unknown\":true}";
    shim_spec *s = NULL;
    error_rec err = {0};
    CHECK_MSG(shim_spec_parse(text, &s, &err) == 0, "%s", err.message);
    CHECK_EQ(s->image_type, SHIM_IMAGE_DIR);
    CHECK_STREQ(s->image_path, "/var/lib/img");
    CHECK(s->cpu == 0.5);
    CHECK_EQ(s->pids, 64);
    CHECK_STREQ(s->hostname, "box");
    CHECK_EQ(s->n_env, 2);
    CHECK_STREQ(s->env[1], "B=two\nlines");
    CHECK_EQ(s->net_mode, SHIM_NET_VETH);
    CHECK_EQ(s->n_hosts, 1);
    CHECK_STREQ(s->hosts[0].names, "a b");
    CHECK_STREQ(s->dns[0], "10.0.0.53");
    CHECK_EQ(s->cgroup_version, 2);
    shim_spec_free(s);
}

/* images: store layers, bottom first */
TEST(shim_spec_layers) {
    const char *text = "{\"id\":\"sb-1\",\"image\":{\"type\":\"layers\",\"layers\":[\"/s/l/a\","
                       "\"/s/l/b\"]},\"uid_base\":1065536,\"seccomp_bpf\":\"/x\","
                       "\"cgroup\":{\"version\":1,\"parent\":\"sd\"}}";
    shim_spec *s = NULL;
    error_rec err = {0};
    CHECK_MSG(shim_spec_parse(text, &s, &err) == 0, "%s", err.message);
    CHECK_EQ(s->image_type, SHIM_IMAGE_LAYERS);
    CHECK_EQ(s->n_layers, 2);
    CHECK_STREQ(s->layers[0], "/s/l/a");
    CHECK_STREQ(s->layers[1], "/s/l/b");
    shim_spec_free(s);
}

TEST(shim_spec_rejects) {
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"nope", "not a JSON object"},
        {"[]", "not a JSON object"},
        {"{\"id\":\"UPPER\"}", "id"},
        {"{\"id\":\"\"}", "id"},
        {"{" BASE ",\"id\":\"x\"}", "not a JSON object"}, /* duplicate key */
        {"{\"id\":\"a\",\"image\":{\"type\":\"docker\"}}", "image"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"dir\",\"path\":\"rel\"}}", "image.path"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"dir\",\"path\":\"/a,upperdir=/x\"}}", "image.path"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"dir\",\"path\":\"/a/../b\"}}", "image.path"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"layers\",\"layers\":[]}}", "image.layers"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"layers\",\"layers\":[\"rel\"]}}", "image.layers[0]"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"layers\",\"layers\":[\"/a:/b\"]}}",
         "image.layers[0]"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"layers\",\"layers\":[\"/a,upperdir=/x\"]}}",
         "image.layers[0]"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"cpu\":-1}", "cpu"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"memory\":\"2Gi\"}", "memory"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"disk\":1}", "disk"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"pids\":1}", "pids"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"}}", "uid_base"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"uid_base\":0}", "uid_base"},
        {"{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"uid_base\":4294967295}", "uid_base"},
        {"{" BASE ",\"hostname\":\"a b\"}", "hostname"},
        {"{" BASE ",\"env\":[\"NOEQUALS\"]}", "env[0]"},
        {"{" BASE ",\"env\":[1]}", "env[0]"},
        {"{" BASE ",\"dns\":[\"1.1.1.1\\nnameserver 2.2.2.2\"]}", "dns[0]"},
        {"{" BASE ",\"etc_hosts\":[[\"1.2.3.4\",\"a b\"]]}", "etc_hosts[0]"},
        {"{" BASE ",\"network\":{\"mode\":\"open\"}}", "network"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        shim_spec *s = NULL;
        error_rec err = {0};
        CHECK_MSG(shim_spec_parse(bad[i].text, &s, &err) == -EINVAL, "accepted: %s", bad[i].text);
        CHECK(s == NULL);
        CHECK_MSG(strstr(err.message, bad[i].needle), "%s: message \"%s\" lacks \"%s\"",
                  bad[i].text, err.message, bad[i].needle);
    }
    const char *no_bpf = "{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"uid_base\":5,"
                         "\"cgroup\":{\"version\":1,\"parent\":\"p\"}}";
    shim_spec *s = NULL;
    error_rec err = {0};
    CHECK_EQ(shim_spec_parse(no_bpf, &s, &err), -EINVAL);
    CHECK(strstr(err.message, "seccomp_bpf"));
    const char *bad_cg = "{\"id\":\"a\",\"image\":{\"type\":\"host\"},\"uid_base\":5,"
                         "\"seccomp_bpf\":\"/x\",\"cgroup\":{\"version\":2,\"parent\":\"../x\"}}";
    CHECK_EQ(shim_spec_parse(bad_cg, &s, &err), -EINVAL);
    CHECK(strstr(err.message, "cgroup"));
    CHECK(shim_spec_id_valid("sb-0123abcd"));
    CHECK(!shim_spec_id_valid("sb_01"));
}

TEST(shim_spec_writer_round_trip) {
    const char *text =
        "{" ALL_FIELDS ",\"seed\":{\"path\":\"/run/layers/ly-1\",\"uid_base\":300000},"
        "\"profile\":\"grading\"}";
    shim_spec *a = NULL, *b = NULL;
    error_rec err = {0};
    CHECK_MSG(shim_spec_parse(text, &a, &err) == 0, "%s", err.message);
    json_t *j = shim_spec_to_json(a);
    CHECK(j);
    char *dump = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    CHECK_MSG(shim_spec_parse(dump, &b, &err) == 0, "%s: %s", dump, err.message);
    free(dump);
    CHECK_STREQ(b->id, a->id);
    CHECK_STREQ(b->hostname, "box");
    CHECK_EQ(b->image_type, SHIM_IMAGE_DIR);
    CHECK_STREQ(b->image_path, "/var/lib/img");
    CHECK(b->cpu == 0.5);
    CHECK_EQ(b->memory, a->memory);
    CHECK_EQ(b->disk, a->disk);
    CHECK_EQ(b->pids, 64);
    CHECK_EQ(b->uid_base, 2000000);
    CHECK_EQ(b->n_env, 2);
    CHECK_STREQ(b->env[1], "B=two\nlines");
    CHECK_EQ(b->net_mode, SHIM_NET_VETH);
    CHECK_EQ(b->n_hosts, 1);
    CHECK_STREQ(b->hosts[0].addr, "10.0.0.1");
    CHECK_STREQ(b->hosts[0].names, "a b");
    CHECK_EQ(b->n_dns, 1);
    CHECK_STREQ(b->dns[0], "10.0.0.53");
    CHECK_STREQ(b->seccomp_bpf, "/run/s.bpf");
    CHECK_EQ(b->cgroup_version, 2);
    CHECK_STREQ(b->cgroup_parent, "/sys/fs/cgroup/sd");
    CHECK_STREQ(b->seed_path, "/run/layers/ly-1");
    CHECK_EQ(b->seed_uid_base, 300000);
    CHECK(a->grading && b->grading);
    shim_spec_free(a);
    shim_spec_free(b);
}

TEST(default_env_then_own) {
    json_t *own = json_pack("{s:s,s:s}", "A", "1", "HOME", "/root");
    json_t *env = spec_env_json(own);
    json_decref(own);
    CHECK(env);
    size_t n_def = 0;
    while (spec_default_env[n_def])
        n_def++;
    CHECK_EQ(json_array_size(env), n_def + 2);
    CHECK_STREQ(json_string_value(json_array_get(env, 0)), "PATH=/usr/local/bin:/usr/bin:/bin");
    CHECK_STREQ(json_string_value(json_array_get(env, 1)), "HOME=/workspace");
    /* the sandbox's own variables come after the defaults, in order */
    CHECK_STREQ(json_string_value(json_array_get(env, n_def)), "A=1");
    CHECK_STREQ(json_string_value(json_array_get(env, n_def + 1)), "HOME=/root");
    shim_spec s = {0};
    error_rec err = {0};
    CHECK_OK(shim_spec_set_env(&s, env, &err));
    CHECK_EQ(s.n_env, n_def + 2);
    for (size_t i = 0; i < s.n_env; i++)
        free(s.env[i]);
    free(s.env);
    s.env = NULL;
    json_decref(env);
    json_t *bad = json_pack("[s]", "=nokey");
    CHECK_EQ(shim_spec_set_env(&s, bad, &err), -EINVAL);
    CHECK(strstr(err.message, "env[0]"));
    for (size_t i = 0; i < s.n_env; i++)
        free(s.env[i]);
    free(s.env);
    json_decref(bad);
}
