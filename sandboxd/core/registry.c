/* The registry: the daemon's table of sandboxes (running and recently ended), uid slots, ids,
 * a sandbox's identity fields and its running cost. */
#include "sandboxd/core/registry.h"

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
    sd_registry_insert(d, sb);
    *ret = sb;
    return 0;
}

void sd_registry_insert(sd_daemon *d, sd_sandbox *sb) {
    sb->next = d->sandboxes;
    d->sandboxes = sb;
}

void sd_registry_unlink(sd_daemon *d, sd_sandbox *sb) {
    for (sd_sandbox **pp = &d->sandboxes; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
}

void sd_registry_release_slot(sd_sandbox *sb) {
    sd_slot_release(sb->d, sb->uid_slot);
    sb->uid_slot = -1;
}

int sd_registry_take_slot(sd_sandbox *sb) {
    int slot = sb->uid_slot;
    sb->uid_slot = -1;
    return slot;
}

void sd_registry_set_idem_key(sd_sandbox *sb, const char *key) {
    free(sb->idem_key);
    sb->idem_key = key ? strdup(key) : NULL;
}

void sd_registry_set_hidden(sd_sandbox *sb, bool hidden) {
    sb->hidden = hidden;
}

int sd_registry_set_seed(sd_sandbox *sb, const char *dir, uint32_t uid_base, const char *from) {
    free(sb->seed_dir);
    sb->seed_dir = strdup(dir);
    sb->seed_uid_base = uid_base;
    snprintf(sb->forked_from, sizeof(sb->forked_from), "%s", from);
    return sb->seed_dir ? 0 : -ENOMEM;
}

void sd_registry_replace_spec(sd_sandbox *sb, policy_create *c) {
    policy_create old = sb->spec;
    sb->spec = *c;
    *c = (policy_create){0};
    policy_create_done(&old);
}

const policy_host sd_any_host = {.cpus = 1e9, .memory_bytes = UINT64_MAX};

int sd_spec_copy(const policy_create *src, policy_create *ret, error_rec *err) {
    json_t *j = policy_create_to_json(src);
    if (!j)
        return error_set(err, -ENOMEM, "out of memory");
    int r = policy_limits_parse_create(j, NULL, &sd_any_host, ret, err);
    json_decref(j);
    return r;
}

double sd_sandbox_cost(const sd_sandbox *sb) {
    if (sb->state == SD_ENDED)
        return sb->end_cost;
    uint64_t now = now_real_ms();
    uint64_t elapsed = now > sb->created_ms ? now - sb->created_ms : 0;
    return policy_cost_usd(&sb->d->cfg.price, sb->spec.cpu, sb->spec.memory, elapsed);
}
