/* Persistence: each sandbox's record (limits, labels, times, cost, uid slot, lease,
 * Idempotency-Key, end) in state-dir/sandboxes/<id>.json and other records (leases) in
 * state-dir/<kind>/<id>.json, written atomically, and read back at start-up (core/restore.c
 * decides what becomes of them; volumes' records are never removed here: core/volumes.c). */
#include "sandboxd/core/state.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "common/timeutil.h"
#include "sandboxd/core/network.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const policy_host sd_any_host = {.cpus = 1e9, .memory_bytes = UINT64_MAX};

int sd_state_write(sd_daemon *d, const char *kind, const char *id, json_t *j, bool durable) {
    char path[PATH_MAX], dir[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s/%s.json", d->cfg.state_dir, kind, id);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return -ENOMEM;
    int r = -ENOENT;
    for (int tries = 0; r == -ENOENT && tries < 2; tries++) {
        if (tries) { /* the kind's directory is made on its first record */
            snprintf(dir, sizeof(dir), "%s/%s", d->cfg.state_dir, kind);
            if ((r = mkdir_p(dir, 0700)) < 0)
                break;
        }
        r = durable ? file_write_atomic(path, s, strlen(s), 0600)
                    : file_rewrite_nosync(path, s, strlen(s), 0600);
    }
    free(s);
    if (r < 0)
        log_error("cannot save state file=%s error=\"%s\"", path, strerror(-r));
    return r;
}

json_t *sd_state_record(const sd_sandbox *sb) {
    json_t *j = json_pack(
        "{s:s,s:s,s:o,s:i,s:I,s:I,s:I,s:I,s:i,s:i,s:o,s:i,s:I,s:s}", "id", sb->id, "state",
        sd_state_name(sb->state), "spec", policy_create_to_json(&sb->spec), "uid_slot",
        sb->uid_slot, "created_ms", (json_int_t)sb->created_ms, "last_activity_ms",
        (json_int_t)sb->last_activity_ms, "expires_ms", (json_int_t)sb->expires_ms, "ended_ms",
        (json_int_t)sb->ended_ms, "init_pid", sb->init_pid, "shim_pid", sb->shim_pid,
        "idempotency_key", sb->idem_key ? json_string(sb->idem_key) : json_null(), "commands_run",
        (int)sb->commands_run, "oom_kills", (json_int_t)sb->oom_kills, "dir", sb->dir);
    if (j && sb->seed_dir && sb->state == SD_STARTING && !sb->resuming) /* a fork's first start */
        json_object_set_new(j, "seed_dir", json_string(sb->seed_dir));
    if (j && (sb->pool || sb->pooled))
        json_object_set_new(j, sb->pool ? "pool" : "pooled", json_true());
    if (j && sb->idem_key && sb->idem_digest[0])
        json_object_set_new(j, "idempotency_digest", json_string(sb->idem_digest));
    if (j && (sb->paused_ms || sb->paused_total_ms || sb->pausing || sb->resuming))
        json_object_set_new(/* core/checkpoint.c */
                            j, "pause",
                            json_pack("{s:I,s:I,s:b,s:b}", "paused_ms", (json_int_t)sb->paused_ms,
                                      "paused_total_ms", (json_int_t)sb->paused_total_ms, "pausing",
                                      sb->pausing, "resuming", sb->resuming));
    json_t *resolved = j ? sd_network_resolved_json(sb) : NULL;
    if (resolved) /* core/network.c: what its names resolved to at its create */
        json_object_set_new(j, "network_resolved", resolved);
    if (j && sb->move_to[0]) /* core/checkpoint.c */
        json_object_set_new(j, "move_to", json_string(sb->move_to));
    if (j && sb->state == SD_ENDED)
        json_object_set_new(j, "end",
                            json_pack("{s:s,s:s,s:f}", "reason", end_reason_name(sb->end_reason),
                                      "message", sb->end_message, "cost_usd", sb->end_cost));
    return j;
}

int sd_state_save(sd_sandbox *sb) {
    /* A sandbox record is not fsynced: its sandbox dies with the host, and a restarted daemon
     * only needs a record that a crash of the daemon cannot tear (file_rewrite_nosync; a torn
     * or missing record after a power loss is skipped). */
    json_t *j = sd_state_record(sb);
    return j ? sd_state_write(sb->d, "sandboxes", sb->id, j, false) : -ENOMEM;
}

void sd_state_unlink(sd_daemon *d, const char *kind, const char *id) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s/%s.json", d->cfg.state_dir, kind, id);
    unlink(path);
}

void sd_state_remove(sd_daemon *d, const char *id) {
    sd_state_unlink(d, "sandboxes", id);
}

void sd_state_checkpoint_dir(const sd_daemon *d, const char *id, char *buf, size_t len) {
    snprintf(buf, len, "%s/checkpoints/%s", d->cfg.state_dir, id);
}

static uint64_t get_u64(json_t *j, const char *k) {
    json_t *v = json_object_get(j, k);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static void load_end(sd_sandbox *sb, json_t *end) {
    int reason = end_reason_from_name(json_string_value(json_object_get(end, "reason")));
    sb->state = SD_ENDED;
    sb->uid_slot = -1;
    sb->end_reason = reason >= 0 ? (end_reason)reason : END_TERMINATED;
    snprintf(sb->end_message, sizeof(sb->end_message), "%s",
             json_string_value(json_object_get(end, "message")) ?: "");
    sb->end_cost = json_number_value(json_object_get(end, "cost_usd"));
}

static void load_fields(sd_sandbox *sb, json_t *j) {
    sb->uid_slot = (int)json_integer_value(json_object_get(j, "uid_slot"));
    snprintf(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", sb->d->cfg.run_dir, sb->id);
    sb->created_ms = get_u64(j, "created_ms");
    sb->last_activity_ms = get_u64(j, "last_activity_ms");
    sb->expires_ms = get_u64(j, "expires_ms");
    sb->ended_ms = get_u64(j, "ended_ms");
    sb->init_pid = (int)json_integer_value(json_object_get(j, "init_pid"));
    sb->shim_pid = (int)json_integer_value(json_object_get(j, "shim_pid"));
    sb->commands_run = (unsigned)get_u64(j, "commands_run");
    sb->oom_kills = get_u64(j, "oom_kills");
    sb->next_xid = now_real_ms() * 1000;
    const char *key = json_string_value(json_object_get(j, "idempotency_key"));
    const char *digest = json_string_value(json_object_get(j, "idempotency_digest"));
    sb->idem_key = key ? strdup(key) : NULL;
    snprintf(sb->idem_digest, sizeof(sb->idem_digest), "%s", key && digest ? digest : "");
    const char *seed = json_string_value(json_object_get(j, "seed_dir"));
    sb->seed_dir = seed ? strdup(seed) : NULL;
    json_t *p = json_object_get(j, "pause");
    sb->paused_ms = get_u64(p, "paused_ms");
    sb->paused_total_ms = get_u64(p, "paused_total_ms");
    sb->pausing = json_is_true(json_object_get(p, "pausing"));
    sb->resuming = json_is_true(json_object_get(p, "resuming"));
    snprintf(sb->move_to, sizeof(sb->move_to), "%s",
             json_string_value(json_object_get(j, "move_to")) ?: "");
}

int sd_state_load(sd_daemon *d, json_t *j, sd_sandbox **ret, bool *ret_pool) {
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *state = json_string_value(json_object_get(j, "state"));
    error_rec err = {0};
    policy_create spec = {0};
    if (!id || strlen(id) >= sizeof(((sd_sandbox *)0)->id) || !state ||
        policy_limits_parse_create(json_object_get(j, "spec"), NULL, &sd_any_host, &spec, &err) < 0)
        return -EINVAL;
    sd_sandbox *sb = calloc(1, sizeof(*sb));
    if (!sb) {
        policy_create_done(&spec);
        return -ENOMEM;
    }
    sb->d = d;
    sb->net_slot = -1;
    snprintf(sb->id, sizeof(sb->id), "%s", id);
    sb->spec = spec;
    load_fields(sb, j);
    sd_network_load(sb, json_object_get(j, "network_resolved"));
    bool pool = json_is_true(json_object_get(j, "pool"));
    json_t *end = json_object_get(j, "end");
    if (strcmp(state, "ended") == 0 && json_is_object(end))
        load_end(sb, end);
    else if (strcmp(state, "paused") == 0)
        sb->state = SD_PAUSED;
    else /* "running", or "starting" when the daemon stopped mid-start */
        sb->state = SD_RUNNING, sb->pooled = json_is_true(json_object_get(j, "pooled")),
        sb->start_unconfirmed = strcmp(state, "starting") == 0;
    sb->hidden = pool;
    *ret = sb;
    *ret_pool = pool;
    return 0;
}

/* fn's records (an unreadable one, or one fn refuses, is removed), or keep's (none removed). */
static void each(sd_daemon *d, const char *kind, int (*fn)(sd_daemon *d, json_t *j),
                 sd_state_keep_fn keep) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", d->cfg.state_dir, kind);
    DIR *dir = opendir(path);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        size_t n = strlen(de->d_name);
        char file[PATH_MAX + 256], id[256];
        snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
        if (strstr(de->d_name, ".json.tmp.")) {
            unlink(file); /* a write that a crash interrupted; the record before it stands */
            continue;
        }
        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        json_error_t je;
        json_t *j = json_load_file(file, 0, &je);
        if (keep) {
            snprintf(id, sizeof(id), "%.*s", (int)(n - 5), de->d_name);
            keep(d, id, j, j ? NULL : je.text);
        } else if ((j ? fn(d, j) : -EINVAL) < 0) {
            log_warn("ignoring unreadable state file=%s", file);
            unlink(file);
        }
        json_decref(j);
    }
    closedir(dir);
}

void sd_state_foreach(sd_daemon *d, const char *kind, int (*fn)(sd_daemon *d, json_t *j)) {
    each(d, kind, fn, NULL);
}

void sd_state_foreach_keep(sd_daemon *d, const char *kind, sd_state_keep_fn keep) {
    each(d, kind, NULL, keep);
}
