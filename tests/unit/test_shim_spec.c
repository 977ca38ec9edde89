/* Unit tests of the shim's spec parser (shim/spec.h): defaults, every field, and rejection of
 * malformed or unsafe values with a message naming the field. */
#include "shim/spec.h"
#include "tests/lib/test.h"

#include <stdio.h>

#define BASE                                                                                       \
    "\"id\":\"sb-1\",\"image\":{\"type\":\"host\"},\"uid_base\":1065536,"                          \
    "\"seccomp_bpf\":\"/x.bpf\",\"cgroup\":{\"version\":1,\"parent\":\"sandboxd\"}"

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
    const char *text =
        "{\"id\":\"sb-0123abcd\",\"image\":{\"type\":\"dir\",\"path\":\"/var/lib/img\"},"
        "\"cpu\":0.5,\"memory\":1048576000,\"disk\":2097152,\"pids\":64,\"uid_base\":2000000,"
        "\"hostname\":\"box\",\"env\":[\"A=1\",\"B=two\\nlines\"],\"network\":{\"mode\":\"veth\"},"
        "\"etc_hosts\":[[\"10.0.0.1\",\"a\",\"b\"]],\"dns\":[\"10.0.0.53\"],"
        "\"seccomp_bpf\":\"/run/s.bpf\",\"cgroup\":{\"version\":2,\"parent\":\"/sys/fs/cgroup/"
        "sd\"},"
        "\"unknown\":true}";
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
