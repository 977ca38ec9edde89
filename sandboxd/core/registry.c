/* The registry: the daemon's table of sandboxes (running and recently ended), uid slots, ids,
 * and the sandbox object as the API shows it. */
#include "sandboxd/daemon.h"
#include "sandboxd/net/daemon.h"

#include "common/timeutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define SLOTS_MAX 4096

void sd_random_id(const char *prefix, char *buf, size_t len) {
    unsigned char b[8] = {0};
    if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
        uint64_t t = now_mono_us() ^ ((uint64_t)getpid() << 32);
        memcpy(b, &t, sizeof(b));
    }
    snprintf(buf, len, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3], b[4],
             b[5], b[6], b[7]);
}

const char *sd_state_name(sd_state s) {
    return s == SD_STARTING ? "starting" : s == SD_RUNNING ? "running" : "ended";
}

sd_sandbox *sd_registry_find(sd_daemon *d, const char *id) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0)
            return sb;
    return NULL;
}

sd_sandbox *sd_registry_find_idem(sd_daemon *d, const char *key) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->idem_key && strcmp(sb->idem_key, key) == 0)
            return sb;
    return NULL;
}

unsigned sd_registry_count_active(sd_daemon *d) {
    unsigned n = 0;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        n += sb->state != SD_ENDED;
    return n;
}

int sd_slot_alloc(sd_daemon *d) {
    for (unsigned i = 0; i < d->n_slots; i++)
        if (!d->slots[i]) {
            d->slots[i] = 1;
            return (int)i;
        }
    return -ENOSPC;
}

void sd_slot_claim(sd_daemon *d, int slot) {
    if (slot >= 0 && (unsigned)slot < d->n_slots)
        d->slots[slot] = 1;
}

void sd_slot_release(sd_daemon *d, int slot) {
    if (slot >= 0 && (unsigned)slot < d->n_slots)
        d->slots[slot] = 0;
}

int sd_uid_base(int slot) {
    return 100000 + 65536 * slot;
}

int sd_registry_add(sd_daemon *d, policy_create *spec, sd_sandbox **ret, error_rec *err) {
    int slot = sd_slot_alloc(d);
    if (slot < 0)
        return error_set(err, slot, "no free uid slot");
    sd_sandbox *sb = calloc(1, sizeof(*sb));
    if (!sb) {
        sd_slot_release(d, slot);
        return error_set(err, -ENOMEM, "out of memory");
    }
    sb->d = d;
    sb->uid_slot = slot;
    sd_random_id("sb-", sb->id, sizeof(sb->id));
    snprintf(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", d->cfg.run_dir, sb->id);
    sb->spec = *spec;
    *spec = (policy_create){0};
    sb->state = SD_STARTING;
    sb->created_ms = sb->last_activity_ms = now_real_ms();
    sb->expires_ms = sb->created_ms + sb->spec.timeout_ms;
    sb->init_pid = sb->shim_pid = -1;
    sb->next_xid = now_real_ms() * 1000; /* unique across daemon restarts */
    sb->next = d->sandboxes;
    d->sandboxes = sb;
    *ret = sb;
    return 0;
}

void sd_registry_remove(sd_daemon *d, sd_sandbox *sb) {
    for (sd_sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
    sd_sandbox_free(sb);
}

double sd_sandbox_cost(const sd_sandbox *sb) {
    if (sb->state == SD_ENDED)
        return sb->end_cost;
    uint64_t now = now_real_ms();
    uint64_t elapsed = now > sb->created_ms ? now - sb->created_ms : 0;
    return policy_cost_usd(&sb->d->cfg.price, sb->spec.cpu, sb->spec.memory, elapsed);
}

static json_t *time_json(uint64_t ms) {
    char buf[40];
    time_format_rfc3339(ms, buf, sizeof(buf));
    return json_string(buf);
}

static json_t *sandbox_json(const sd_sandbox *sb);

json_t *sd_sandbox_to_json(const sd_sandbox *sb) {
    json_t *j = sandbox_json(sb);
    if (j && sb->forked_from[0])
        json_object_set_new(j, "forked_from", json_string(sb->forked_from));
    return j;
}

static json_t *sandbox_json(const sd_sandbox *sb) {
    const policy_create *c = &sb->spec;
    json_t *limits =
        json_pack("{s:f,s:I,s:I,s:i,s:f,s:f,s:o}", "cpu", c->cpu, "memory", (json_int_t)c->memory,
                  "disk", (json_int_t)c->disk, "pids", (int)c->pids, "idle_timeout",
                  c->idle_timeout_ms / 1000.0, "timeout", c->timeout_ms / 1000.0, "max_cost_usd",
                  c->max_cost_usd > 0 ? json_real(c->max_cost_usd) : json_null());
    json_t *usage = json_pack("{s:f,s:I,s:I,s:I,s:I,s:i,s:i}", "cpu_seconds", sb->cpu_usec / 1e6,
                              "memory_peak_bytes", (json_int_t)sb->mem_peak_bytes, "memory_bytes",
                              (json_int_t)sb->mem_bytes, "pids", (json_int_t)sb->pids, "oom_kills",
                              (json_int_t)sb->oom_kills, "commands_run", (int)sb->commands_run,
                              "commands_running", (int)sd_exec_count(sb));
    json_t *end = json_null();
    if (sb->state == SD_ENDED)
        end = json_pack("{s:s,s:s,s:o,s:f}", "reason", sb->end_reason, "message", sb->end_message,
                        "ended_at", time_json(sb->ended_ms), "cost_usd", sb->end_cost);
    return json_pack("{s:s,s:s,s:s,s:o,s:o,s:O,s:o,s:o,s:o,s:o,s:o,s:f,s:o,s:o}", "id", sb->id,
                     "state", sd_state_name(sb->state), "image", c->image, "limits", limits,
                     "network", sd_net_daemon_json(sb), "labels", c->labels, "lease",
                     c->lease ? json_string(c->lease) : json_null(), "created_at",
                     time_json(sb->created_ms), "last_activity_at", time_json(sb->last_activity_ms),
                     "expires_at", time_json(sb->expires_ms), "usage", usage, "cost_usd",
                     sd_sandbox_cost(sb), "end", end, "pooled", json_boolean(sb->pooled));
}
