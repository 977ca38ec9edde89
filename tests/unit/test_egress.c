/* Unit tests for the egress policy parser (policy/egress.c): accepted shapes, clear errors that
 * name the offending entry, prefix helpers, always-denied ranges. */
#include "policy/egress.h"
#include "tests/lib/test.h"

#include <sys/socket.h>

static int parse(const char *json, policy_egress **ret, error_rec *err) {
    json_error_t je;
    json_t *j = json_loads(json, JSON_DECODE_ANY, &je);
    CHECK_MSG(j, "bad test JSON %s", json);
    int r = policy_egress_parse(j, ret, err);
    json_decref(j);
    return r;
}

static void expect_error(const char *json, const char *needle) {
    policy_egress *p = NULL;
    error_rec err = {0};
    CHECK_MSG(parse(json, &p, &err) == -EINVAL, "%s was accepted", json);
    CHECK(p == NULL);
    CHECK_MSG(strstr(err.message, needle), "%s: message \"%s\" lacks \"%s\"", json, err.message,
              needle);
}

TEST(egress_modes) {
    policy_egress *p = NULL;
    error_rec err = {0};
    CHECK_OK(parse("null", &p, &err));
    CHECK_EQ(p->mode, POLICY_EGRESS_NONE);
    policy_egress_free(p);
    CHECK_OK(parse("\"open\"", &p, &err));
    CHECK_EQ(p->mode, POLICY_EGRESS_OPEN);
    policy_egress_free(p);
    CHECK_OK(parse("{\"mode\":\"none\"}", &p, &err));
    CHECK_EQ(p->mode, POLICY_EGRESS_NONE);
    policy_egress_free(p);
    CHECK_OK(policy_egress_parse(NULL, &p, &err));
    CHECK_EQ(p->mode, POLICY_EGRESS_NONE);
    policy_egress_free(p);
}

TEST(egress_allow_entries) {
    policy_egress *p = NULL;
    error_rec err = {0};
    CHECK_OK(parse("{\"allow\":[\"1.2.3.4\",\"10.1.2.9/24\",\"1.2.3.4:443\",\"10.0.0.0/8:53\","
                   "\"2001:db8::/32\",\"[2001:db8::1]:443\",\"Example.COM\",\"api.x.io:8443\"]}",
                   &p, &err));
    CHECK_EQ(p->mode, POLICY_EGRESS_ALLOW);
    CHECK_EQ(p->n_entries, 8);
    char buf[64];
    policy_cidr_format(&p->entries[1].cidr, buf, sizeof(buf));
    CHECK_STREQ(buf, "10.1.2.0/24"); /* host bits cleared */
    CHECK_EQ(p->entries[2].port, 443);
    CHECK_EQ(p->entries[3].cidr.len, 8);
    CHECK_EQ(p->entries[3].port, 53);
    CHECK_EQ(p->entries[4].cidr.family, AF_INET6);
    CHECK_EQ(p->entries[5].port, 443);
    CHECK_STREQ(p->entries[6].host, "example.com");
    CHECK_EQ(p->entries[6].port, 0);
    CHECK_STREQ(p->entries[7].host, "api.x.io");
    CHECK_EQ(p->entries[7].port, 8443);
    /* round trip through the inspect shape */
    json_t *j = policy_egress_to_json(p);
    policy_egress *q = NULL;
    CHECK_OK(policy_egress_parse(j, &q, &err));
    CHECK_EQ(q->n_entries, 8);
    CHECK_STREQ(q->entries[7].text, "api.x.io:8443");
    json_decref(j);
    policy_egress_free(q);
    policy_egress_free(p);
}

TEST(egress_errors_name_the_entry) {
    expect_error("\"closed\"", "network: must be");
    expect_error("\"allow\"", "network: must be");
    expect_error("42", "network: must be");
    expect_error("{}", "needs \"allow\"");
    expect_error("{\"allow\":\"1.2.3.4\"}", "network.allow: must be an array");
    expect_error("{\"allow\":[\"1.2.3.4\",7]}", "network.allow[1]: must be a string");
    expect_error("{\"allow\":[\"1.2.3.4\",\"bad host!\"]}", "network.allow[1]: \"bad host!\"");
    expect_error("{\"allow\":[\"1.2.3.4:0\"]}", "network.allow[0]: \"1.2.3.4:0\": port");
    expect_error("{\"allow\":[\"1.2.3.4:70000\"]}", "port must be 1..65535");
    expect_error("{\"allow\":[\"1.2.3.4/33\"]}", "network.allow[0]");
    expect_error("{\"allow\":[\"169.254.169.254\"]}", "always denied");
    expect_error("{\"allow\":[\"x\",\"[fd00:ec2::254]:80\"]}",
                 "network.allow[1]: \"[fd00:ec2::254]:80\" is always denied");
    expect_error("{\"allow\":[\"fe80::1\"]}", "always denied");
    expect_error("{\"allow\":[\"127.0.0.1:22\"]}", "always denied");
    expect_error("{\"allow\":[\"-a.com\"]}", "network.allow[0]");
    expect_error("{\"mode\":\"open\",\"allow\":[]}", "only valid with mode");
    expect_error("{\"mode\":\"allow\"}", "required with mode");
    expect_error("{\"mode\":\"x\"}", "network.mode");
}

TEST(egress_always_denied_and_resolution) {
    policy_cidr c;
    CHECK_OK(policy_cidr_parse("169.254.170.2", &c));
    CHECK(policy_egress_always_denied(&c));
    CHECK_OK(policy_cidr_parse("100.100.100.200", &c));
    CHECK(policy_egress_always_denied(&c));
    CHECK_OK(policy_cidr_parse("168.63.129.16", &c));
    CHECK(policy_egress_always_denied(&c));
    CHECK_OK(policy_cidr_parse("192.0.0.192", &c));
    CHECK(policy_egress_always_denied(&c));
    CHECK_OK(policy_cidr_parse("10.0.0.0/8", &c)); /* private: allowed when listed */
    CHECK(!policy_egress_always_denied(&c));
    CHECK_OK(policy_cidr_parse("0.0.0.0/0", &c)); /* contains metadata but is not inside it */
    CHECK(!policy_egress_always_denied(&c));
    policy_egress *p = NULL;
    error_rec err = {0};
    CHECK_OK(parse("{\"allow\":[\"a.test\"]}", &p, &err));
    policy_cidr addrs[3];
    CHECK_OK(policy_cidr_parse("203.0.113.5", &addrs[0]));
    CHECK_OK(policy_cidr_parse("169.254.169.254", &addrs[1])); /* a name cannot smuggle it in */
    CHECK_OK(policy_cidr_parse("203.0.113.5", &addrs[2]));     /* duplicates collapse */
    CHECK_OK(policy_egress_set_resolved(p, 0, addrs, 3));
    CHECK_EQ(p->entries[0].n_addrs, 1);
    policy_egress *d = policy_egress_dup(p);
    CHECK(d && d->entries[0].n_addrs == 1 && strcmp(d->entries[0].host, "a.test") == 0);
    policy_egress_free(d);
    policy_egress_free(p);
}
