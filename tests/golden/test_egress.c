/* Golden tests for the egress rule generator: each nft JSON document policy/egress_nft.c makes
 * for a fixed set of inputs is compared byte for byte with tests/golden/egress_*.json.
 * SBX_UPDATE_GOLDEN=1 rewrites the files (refused when CI=true). */
#include "policy/egress.h"
#include "tests/lib/test.h"

#include "common/fdutil.h"

#include <errno.h>
#include <sys/socket.h>

static policy_egress_host host_facts(void) {
    policy_egress_host h = {.table = "sandboxd",
                            .ifprefix = "sbx",
                            .last_denied_size = 32,
                            .last_denied_timeout = 3600};
    CHECK_OK(policy_cidr_parse("10.200.0.0/16", &h.pool4));
    CHECK_OK(policy_cidr_parse("fd5b:d0c0:5b00::/48", &h.pool6));
    CHECK_OK(policy_cidr_parse("203.0.113.53", &h.dns[0]));
    h.n_dns = 1;
    return h;
}

static policy_egress_sandbox sandbox_facts(void) {
    policy_egress_sandbox s = {.ifname = "sbx0123456789ab"};
    CHECK_OK(policy_cidr_parse("10.200.0.6", &s.addr4));
    CHECK_OK(policy_cidr_parse("fd5b:d0c0:5b00:1::2", &s.addr6));
    return s;
}

static policy_egress *parse(const char *json) {
    json_error_t je;
    json_t *j = json_loads(json, JSON_DECODE_ANY, &je);
    CHECK(j);
    policy_egress *p = NULL;
    error_rec err = {0};
    CHECK_MSG(policy_egress_parse(j, &p, &err) == 0, "parse %s: %s", json, err.message);
    json_decref(j);
    return p;
}

static void golden(const char *name, json_t *doc) {
    char *got = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
    CHECK(got);
    json_decref(doc);
    size_t len = strlen(got);
    char path[512], *want = NULL;
    const char *src = getenv("SBX_SRC_DIR");
    snprintf(path, sizeof(path), "%s/tests/golden/%s", src ? src : ".", name);
    const char *upd = getenv("SBX_UPDATE_GOLDEN"), *ci = getenv("CI");
    if (upd && strcmp(upd, "1") == 0) {
        CHECK_MSG(!(ci && strcmp(ci, "true") == 0), "SBX_UPDATE_GOLDEN refused when CI=true");
        CHECK_OK(file_write_atomic(path, got, len, 0644));
    }
    size_t wlen = 0;
    int r = file_read_all(path, 1 << 22, &want, &wlen);
    CHECK_MSG(r == 0, "%s: %s (run with SBX_UPDATE_GOLDEN=1 to create it)", path, strerror(-r));
    CHECK_MSG(wlen == len && memcmp(want, got, len) == 0,
              "%s differs from the generator's output:\n%s\n(SBX_UPDATE_GOLDEN=1 to accept)", path,
              got);
    free(want);
    free(got);
}

TEST(egress_base) {
    policy_egress_host h = host_facts();
    golden("egress_base.json", policy_egress_nft_base(&h));
}

TEST(egress_base_uplink_no_ipv6) {
    policy_egress_host h = host_facts();
    h.pool6 = (policy_cidr){0};
    h.uplink = "eth0";
    golden("egress_base_uplink.json", policy_egress_nft_base(&h));
}

TEST(egress_open) {
    policy_egress_host h = host_facts();
    policy_egress_sandbox s = sandbox_facts();
    policy_egress *p = parse("\"open\"");
    golden("egress_open.json", policy_egress_nft_sandbox_add(&h, &s, p));
    policy_egress_free(p);
}

TEST(egress_allow) {
    policy_egress_host h = host_facts();
    policy_egress_sandbox s = sandbox_facts();
    policy_egress *p = parse("{\"allow\":[\"203.0.113.10:80\",\"10.1.2.0/24\","
                             "\"[2001:db8::1]:443\",\"example.test\"]}");
    policy_cidr a[2];
    CHECK_OK(policy_cidr_parse("198.51.100.7", &a[0]));
    CHECK_OK(policy_cidr_parse("2001:db8:5::7", &a[1]));
    CHECK_OK(policy_egress_set_resolved(p, 3, a, 2));
    golden("egress_allow.json", policy_egress_nft_sandbox_add(&h, &s, p));
    golden("egress_guard_allow.json", policy_egress_nft_guard(&h, &s, p));
    policy_egress_free(p);
}

TEST(egress_del) {
    policy_egress_host h = host_facts();
    policy_egress_sandbox s = sandbox_facts();
    golden("egress_del.json", policy_egress_nft_sandbox_del(&h, &s));
}
