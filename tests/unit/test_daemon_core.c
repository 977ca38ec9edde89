/* Unit tests of the daemon's core that need no root and no shim: the registry (ids, uid slots,
 * cost while running), the sandbox object as the API shows it, the Prometheus rendering, the
 * end reason table, the timer's decisions (cost cap, lifetime, idle timeout), a sandbox
 * record's round trip through the state directory, leases kept across a restart, the listener
 * table, and nested freezes of a sandbox that two copies hold. */
#include "common/end_reason.h"
#include "common/fdutil.h"
#include "common/timeutil.h"
#include "sandboxd/api/api.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"
#include "sandboxd/core/timers.h"
#include "sandboxd/fleet/fleet.h"
#include "tests/lib/test.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static void remove_tmp(void) {
    if (tmpdir[0])
        rm_rf(tmpdir);
}

static sd_daemon *new_daemon(void) {
    static sd_daemon d;
    static unsigned char slots[8];
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/sbx-core-test.XXXXXX");
        CHECK(mkdtemp(tmpdir));
        atexit(remove_tmp);
    }
    d = (sd_daemon){.slots = slots, .n_slots = 8};
    memset(slots, 0, sizeof(slots));
    d.cfg.price = policy_price_default();
    d.cfg.run_dir = tmpdir;
    d.cfg.state_dir = tmpdir;
    d.host = (policy_host){.cpus = 4, .memory_bytes = 8ull << 30};
    return &d;
}

static sd_sandbox *add(sd_daemon *d, const char *body) {
    policy_create c;
    error_rec err = {0};
    json_t *j = json_loads(body, 0, NULL);
    CHECK_MSG(policy_limits_parse_create(j, NULL, &d->host, &c, &err) == 0, "%s", err.message);
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
    json_t *j = sd_api_sandbox_json(sb);
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
    sd_sandbox_forget(sb);
    CHECK_EQ(sd_registry_count_active(d), 0);
}

TEST(metrics_text) {
    sd_daemon *d = new_daemon();
    sd_metrics_create(&d->m, SD_CREATE_OK, 0.2);
    sd_metrics_create(&d->m, SD_CREATE_FULL, 0);
    sd_metrics_exec(&d->m, END_EXITED, 0.003);
    sd_metrics_exec(&d->m, -EINVAL, 0); /* an unknown reason */
    sd_metrics_end(&d->m, END_COST_LIMIT, 0.5);
    char *t = sd_api_metrics_text(d);
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

TEST(end_reason_table) {
    for (int i = 0; i < END_REASON_MAX; i++) {
        const char *n = end_reason_name(i);
        CHECK_MSG(n && *n, "reason %d has no name", i);
        CHECK_EQ(end_reason_from_name(n), i);
        for (int k = 0; k < i; k++)
            CHECK(strcmp(end_reason_name(k), n) != 0);
    }
    CHECK_STREQ(end_reason_name(END_INFRASTRUCTURE_FAILURE), "infrastructure_failure");
    CHECK_STREQ(end_reason_name(END_OOM_KILLED), "oom_killed");
    CHECK_STREQ(end_reason_name(END_PIDS_LIMIT), "pids_limit");
    CHECK(end_reason_name(END_REASON_MAX) == NULL);
    CHECK_EQ(end_reason_from_name("bogus"), -EINVAL);
    CHECK_EQ(end_reason_from_name(NULL), -EINVAL);
}

TEST(timer_decisions) {
    sd_daemon *d = new_daemon();
    sd_sandbox *sb = add(d, "{\"cpu\":1,\"memory\":\"1Gi\",\"idle_timeout\":10,\"timeout\":60,"
                            "\"max_cost_usd\":0.01}");
    char msg[200];
    uint64_t now = sb->created_ms;
    CHECK_EQ(sd_timers_check(sb, now + 1000, msg, sizeof(msg)), -1);
    /* idle: 10 s without activity, but not while a command runs */
    CHECK_EQ(sd_timers_check(sb, now + 10000, msg, sizeof(msg)), END_IDLE_TIMEOUT);
    CHECK(strstr(msg, "no command, connection or API call for 10s"));
    sb->commands_running = 1;
    CHECK_EQ(sd_timers_check(sb, now + 10000, msg, sizeof(msg)), -1);
    /* nor while a connection through the port proxy is open; its close starts the clock again */
    sb->commands_running = 0;
    sd_sandbox_connection(sb, true);
    sd_sandbox_connection(sb, true);
    CHECK_EQ(sd_timers_check(sb, now + 10000, msg, sizeof(msg)), -1);
    sd_sandbox_connection(sb, false);
    CHECK_EQ(sd_timers_check(sb, now + 10000, msg, sizeof(msg)), -1);
    sd_sandbox_connection(sb, false);
    CHECK_EQ(sb->connections_open, 0u);
    CHECK_EQ(sd_timers_check(sb, sb->last_activity_ms + 9000, msg, sizeof(msg)), -1);
    CHECK_EQ(sd_timers_check(sb, sb->last_activity_ms + 10000, msg, sizeof(msg)), END_IDLE_TIMEOUT);
    sb->commands_running = 1;
    /* lifetime comes before idle */
    CHECK_EQ(sd_timers_check(sb, now + 60000, msg, sizeof(msg)), END_LIFETIME_EXCEEDED);
    /* the cost cap comes first: 1 vCPU + 1 GiB costs about $0.0107 an hour */
    sb->created_ms -= 3600 * 1000;
    CHECK_EQ(sd_timers_check(sb, now, msg, sizeof(msg)), END_COST_LIMIT);
    CHECK(strstr(msg, "cost cap of $0.01"));
    sb->commands_running = 0;
    sd_sandbox_forget(sb);
}

/* A fork's copy and a commit's of the same sandbox each hold it frozen: it thaws when the last
 * copy is done, not when the first is (cgroup v2's cgroup.freeze, here a plain file). */
static bool frozen_file(const char *file) {
    _cleanup_free_ char *text = NULL;
    size_t len;
    CHECK_OK(file_read_all(file, 16, &text, &len));
    return len > 0 && text[0] == '1';
}

TEST(freeze_holds_nest) {
    sd_daemon *d = new_daemon();
    sd_sandbox *sb = add(d, "{}");
    char dir[PATH_MAX], file[PATH_MAX + 32];
    d->cgroup_version = 2;
    snprintf(d->cgroup_parent, sizeof(d->cgroup_parent), "%s/cg", tmpdir);
    snprintf(dir, sizeof(dir), "%s/%s", d->cgroup_parent, sb->id);
    snprintf(file, sizeof(file), "%s/cgroup.freeze", dir);
    CHECK_OK(mkdir_p(dir, 0755));
    FILE *f = fopen(file, "w"); /* (the kernel's file exists with the cgroup) */
    CHECK(f && fputs("0", f) >= 0 && fclose(f) == 0);
    CHECK_OK(sd_cgroup_freeze_hold(d, sb->id, true)); /* the fork's copy */
    CHECK(frozen_file(file));
    CHECK_OK(sd_cgroup_freeze_hold(d, sb->id, true));  /* the commit's, meanwhile */
    CHECK_OK(sd_cgroup_freeze_hold(d, sb->id, false)); /* the commit's copy is done */
    CHECK(frozen_file(file));
    CHECK_OK(sd_cgroup_freeze_hold(d, sb->id, false)); /* the fork's */
    CHECK(!frozen_file(file));
    CHECK_EQ(sb->freeze_holds, 0);
    sd_sandbox_forget(sb);
}

/* The room a fork holds through its copy (core/fork.c) counts wherever the node's room does:
 * admission (sd_registry_count_active) and the fleet's (sd_fleet_full, the node record's free). */
TEST(fork_slots_take_room) {
    sd_daemon *d = new_daemon();
    d->cfg.max_sandboxes = 3;
    sd_sandbox *sb = add(d, "{}");
    sb->state = SD_RUNNING;
    CHECK_EQ(sd_registry_count_active(d), 1);
    CHECK(!sd_fleet_full(d));
    d->fork_slots = 2; /* a fork of 2, copying */
    CHECK_EQ(sd_registry_count_active(d), 3);
    CHECK(sd_fleet_full(d));
    d->fork_slots = 0;
    sd_sandbox_forget(sb);
}

TEST(state_record_round_trip) {
    sd_daemon *d = new_daemon();
    sd_sandbox *sb =
        add(d, "{\"cpu\":2,\"memory\":\"2Gi\",\"labels\":{\"run\":\"7\"},\"env\":{\"A\":\"1\"}}");
    sd_registry_set_idem_key(sb, &(sd_idem){"key-1", "ab12"});
    sb->state = SD_ENDED;
    sb->end_reason = END_COST_LIMIT;
    snprintf(sb->end_message, sizeof(sb->end_message), "spent it");
    sb->end_cost = 0.25;
    sb->ended_ms = sb->created_ms + 5000;
    sb->commands_run = 3;
    CHECK_OK(sd_state_save(sb));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/sandboxes/%s.json", tmpdir, sb->id);
    json_t *j = json_load_file(path, 0, NULL);
    CHECK(j);
    sd_sandbox *back;
    bool pool = true;
    CHECK_OK(sd_state_load(d, j, &back, &pool));
    json_decref(j);
    CHECK(!pool);
    CHECK_STREQ(back->id, sb->id);
    CHECK_EQ(back->state, SD_ENDED);
    CHECK_EQ(back->end_reason, END_COST_LIMIT);
    CHECK_STREQ(back->end_message, "spent it");
    CHECK(back->end_cost == 0.25);
    CHECK_EQ(back->created_ms, sb->created_ms);
    CHECK_EQ(back->ended_ms, sb->ended_ms);
    CHECK_EQ(back->commands_run, 3);
    CHECK_STREQ(back->idem_key, "key-1");
    CHECK_STREQ(back->idem_digest, "ab12"); /* the create's body digest comes back with its key */
    CHECK(back->spec.cpu == 2);
    CHECK_EQ(back->spec.memory, 2ull << 30);
    CHECK_STREQ(json_string_value(json_object_get(back->spec.labels, "run")), "7");
    CHECK_STREQ(json_string_value(json_object_get(back->spec.env, "A")), "1");
    CHECK_EQ(back->uid_slot, -1); /* an ended sandbox holds no uid slot */
    sd_sandbox_free(back);
    /* a record that cannot be read is refused */
    json_t *bad = json_pack("{s:s}", "id", "sb-x");
    CHECK_EQ(sd_state_load(d, bad, &back, &pool), -EINVAL);
    json_decref(bad);
    sd_state_remove(d, sb->id);
    CHECK(access(path, F_OK) < 0);
    sd_sandbox_forget(sb);
}

TEST(leases_survive_a_restart) {
    sd_daemon *d = new_daemon();
    sd_lease *l;
    error_rec err = {0};
    CHECK_OK(sd_lease_create(d, 60000, &l, &err));
    char id[24];
    snprintf(id, sizeof(id), "%s", l->id);
    uint64_t exp = l->expires_ms;
    CHECK(sd_lease_exists(d, id));
    d->leases = NULL; /* a restart: the table is gone, the record stays */
    free(l);
    CHECK(!sd_lease_exists(d, id));
    sd_leases_restore(d);
    CHECK(sd_lease_exists(d, id));
    CHECK_EQ(d->leases->expires_ms, exp);
    CHECK_EQ(d->leases->ttl_ms, 60000);
    CHECK_EQ(sd_lease_renew(d, "ls-none", &l, &err), -ENOENT);
    CHECK(strstr(err.message, "ls-none"));
    /* expiry ends the lease and removes its record */
    d->leases->expires_ms = now_real_ms() - 1;
    sd_leases_expire(d);
    CHECK(!sd_lease_exists(d, id));
    sd_leases_restore(d);
    CHECK(!sd_lease_exists(d, id));
}

static void nop(void *ud, sd_sandbox *sb) {}

TEST(listener_table_is_bounded) {
    sd_daemon *d = new_daemon();
    static const sd_listener l = {.started = nop};
    for (int i = 0; i < SD_LISTENERS_MAX; i++)
        CHECK_OK(sd_listener_add(d, &l, NULL));
    CHECK_EQ(sd_listener_add(d, &l, NULL), -ENOSPC);
}
