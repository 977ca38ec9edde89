/* Unit tests of sandboxd's pure parts: the registry (ids, uid slots, the sandbox object as the
 * API shows it, cost while running) and the Prometheus rendering. No root, no shim. */
#include "sandboxd/daemon.h"
#include "tests/lib/test.h"

#include <math.h>
#include <regex.h>

static sd_daemon *new_daemon(void) {
    static sd_daemon d;
    static unsigned char slots[8];
    d = (sd_daemon){.slots = slots, .n_slots = 8};
    memset(slots, 0, sizeof(slots));
    d.cfg.price = policy_price_default();
    d.cfg.run_dir = "/run/test";
    d.host = (policy_host){.cpus = 4, .memory_bytes = 8ull << 30};
    return &d;
}

static sd_sandbox *add(sd_daemon *d, const char *body) {
    policy_create c;
    error_rec err = {0};
    json_t *j = json_loads(body, 0, NULL);
    CHECK_OK(policy_limits_parse_create(j, NULL, &d->host, &c, &err));
    json_decref(j);
    sd_sandbox *sb;
    CHECK_OK(sd_registry_add(d, &c, &sb, &err));
    return sb;
}

TEST(ids_and_slots) {
    sd_daemon *d = new_daemon();
    char id[24];
    sd_random_id("sb-", id, sizeof(id));
    regex_t re;
    CHECK_OK(-regcomp(&re, "^sb-[0-9a-f]{16}$", REG_EXTENDED | REG_NOSUB));
    CHECK(regexec(&re, id, 0, NULL, 0) == 0);
    regfree(&re);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(sd_slot_alloc(d), i);
    CHECK_EQ(sd_slot_alloc(d), -ENOSPC);
    sd_slot_release(d, 3);
    CHECK_EQ(sd_slot_alloc(d), 3); /* reused after release */
    CHECK_EQ(sd_uid_base(0), 100000);
    CHECK_EQ(sd_uid_base(2), 100000 + 2 * 65536);
}

TEST(sandbox_object) {
    sd_daemon *d = new_daemon();
    sd_sandbox *sb = add(d, "{\"cpu\":2,\"memory\":\"4Gi\",\"labels\":{\"t\":\"x\"}}");
    CHECK(sd_registry_find(d, sb->id) == sb);
    CHECK(sd_registry_find(d, "sb-nope") == NULL);
    CHECK_EQ(sd_registry_count_active(d), 1);
    sb->created_ms -= 3600 * 1000; /* an hour ago */
    json_t *j = sd_sandbox_to_json(sb);
    CHECK(j);
    CHECK_STREQ(json_string_value(json_object_get(j, "state")), "starting");
    CHECK_STREQ(json_string_value(json_object_get(j, "image")), "host");
    json_t *limits = json_object_get(j, "limits");
    CHECK(json_number_value(json_object_get(limits, "cpu")) == 2);
    CHECK_EQ(json_integer_value(json_object_get(limits, "memory")), 4ll << 30);
    CHECK(json_is_null(json_object_get(limits, "max_cost_usd")));
    CHECK(json_is_null(json_object_get(j, "end")));
    CHECK(json_is_null(json_object_get(j, "lease")));
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "network"), "mode")), "none");
    for (const char *k = "created_at"; k; k = strcmp(k, "created_at") == 0 ? "expires_at" : NULL)
        CHECK(strlen(json_string_value(json_object_get(j, k))) == 24);
    /* 2 vCPU + 4 GiB for an hour = 2 x $0.0179 */
    double cost = json_number_value(json_object_get(j, "cost_usd"));
    CHECK_MSG(fabs(cost - 0.0358) < 0.0001, "cost %f", cost);
    CHECK(json_object_get(json_object_get(j, "usage"), "commands_running"));
    json_decref(j);
    sd_registry_remove(d, sb);
    CHECK_EQ(sd_registry_count_active(d), 0);
}

TEST(metrics_text) {
    sd_daemon *d = new_daemon();
    sd_metrics_create(d, "ok", 0.2);
    sd_metrics_create(d, "full", 0);
    sd_metrics_exec(d, "exited", 0.003);
    sd_metrics_exec(d, "bogus", 0);
    sd_metrics_end(d, "cost_limit", 0.5);
    char *t = sd_metrics_render(d);
    CHECK(t);
    CHECK(strstr(t, "sandboxd_sandbox_creates_total{outcome=\"ok\"} 1\n"));
    CHECK(strstr(t, "sandboxd_sandbox_creates_total{outcome=\"full\"} 1\n"));
    CHECK(strstr(t, "sandboxd_execs_total{outcome=\"exited\"} 1\n"));
    CHECK(strstr(t, "sandboxd_execs_total{outcome=\"error\"} 1\n"));
    CHECK(strstr(t, "sandboxd_sandbox_ends_total{reason=\"cost_limit\"} 1\n"));
    CHECK(strstr(t, "sandboxd_create_seconds_bucket{le=\"0.1\"} 0\n"));
    CHECK(strstr(t, "sandboxd_create_seconds_bucket{le=\"0.25\"} 1\n"));
    CHECK(strstr(t, "sandboxd_create_seconds_bucket{le=\"+Inf\"} 1\n"));
    CHECK(strstr(t, "sandboxd_exec_seconds_count 1\n"));
    CHECK(strstr(t, "sandboxd_cost_usd_total 0.5"));
    CHECK(strstr(t, "sandboxd_sandboxes{state=\"running\"} 0\n"));
    free(t);
}
