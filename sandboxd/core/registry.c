/* The registry: the daemon's table of sandboxes (running and recently ended), uid slots, ids,
 * a sandbox's identity fields and its running cost. */
#include "sandboxd/core/registry.h"

#include "common/timeutil.h"
#include "sandboxd/core/state.h"

#include <fcntl.h>
#include <search.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

void sd_random_id(const char *prefix, char *buf, size_t len) {
    unsigned char b[8] = {0};
    if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
        uint64_t t = now_mono_us() ^ ((uint64_t)getpid() << 32);
        memcpy(b, &t, sizeof(b));
    }
    snprintf(buf, len, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3], b[4],
             b[5], b[6], b[7]);
}

void sd_node_id(sd_daemon *d, const char *prefix, char *buf, size_t len) {
    sd_random_id(prefix, buf, len);
    if (d->cfg.fleet_etcd && d->cfg.node_name) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, ".%s", d->cfg.node_name);
    }
}

sd_sandbox *sd_registry_find(sd_daemon *d, const char *id) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0)
            return sb;
    return NULL;
}

/* The Idempotency-Key index (a tsearch tree): its nodes point at sandboxes' idem_key fields. */
static int idem_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static sd_sandbox *of_key(char **key) {
    return (sd_sandbox *)((char *)key - offsetof(sd_sandbox, idem_key));
}

sd_sandbox *sd_registry_find_idem(sd_daemon *d, const char *key) {
    char **node = tfind(&key, &d->idem_index, idem_cmp);
    return node ? of_key(*(char ***)node) : NULL;
}

static void idem_unindex(sd_sandbox *sb) {
    if (sb->idem_key && sd_registry_find_idem(sb->d, sb->idem_key) == sb) {
        tdelete(&sb->idem_key, &sb->d->idem_index, idem_cmp);
        sb->d->n_idem--;
    }
}

static void idem_index(sd_sandbox *sb) {
    sd_daemon *d = sb->d;
    if (!sb->idem_key || sd_registry_find_idem(d, sb->idem_key))
        return;
    if (tsearch(&sb->idem_key, &d->idem_index, idem_cmp))
        d->n_idem++;
}

/* Past --max-idempotency-keys, the oldest ended sandbox gives its key up (its record then goes
 * after the ended ones' usual 10 minutes). */
static void idem_bound(sd_daemon *d) {
    unsigned max = d->cfg.max_idem_keys ? d->cfg.max_idem_keys : SD_IDEM_MAX;
    while (d->n_idem > max) {
        sd_sandbox *oldest = NULL;
        for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
            if (sb->idem_key && sb->state == SD_ENDED &&
                (!oldest || sb->created_ms <= oldest->created_ms))
                oldest = sb;
        if (!oldest)
            return; /* every key is a live sandbox's (at most max_sandboxes) */
        idem_unindex(oldest);
        free(TAKE_PTR(oldest->idem_key));
        sd_state_save(oldest);
    }
}

unsigned sd_registry_count_active(sd_daemon *d) {
    unsigned n = d->fork_slots; /* admitted forks not made yet: their room is taken */
    n += d->n_quarantined;      /* what a failed cleanup left may still run (core/quarantine.h) */
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        n += sb->state != SD_ENDED && sb->state != SD_PAUSED; /* a paused one takes no room */
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

bool sd_slot_taken(const sd_daemon *d, int slot) {
    return slot < 0 || (unsigned)slot >= d->n_slots || d->slots[slot];
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
    sb->net_slot = -1;
    sd_node_id(d, "sb-", sb->id, sizeof(sb->id));
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
    idem_index(sb);
    idem_bound(d);
}

void sd_registry_unlink(sd_daemon *d, sd_sandbox *sb) {
    idem_unindex(sb);
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

void sd_registry_set_idem_key(sd_sandbox *sb, const sd_idem *idem) {
    const char *key = idem ? idem->key : NULL;
    idem_unindex(sb);
    free(sb->idem_key);
    sb->idem_key = key ? strdup(key) : NULL;
    snprintf(sb->idem_digest, sizeof(sb->idem_digest), "%s",
             key && idem->digest ? idem->digest : "");
    idem_index(sb);
    idem_bound(sb->d);
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
    if (sb->state == SD_PAUSED || sb->resuming) /* the paused time is not paid for */
        now = MIN(now, sb->paused_ms);
    uint64_t elapsed = now > sb->created_ms ? now - sb->created_ms : 0;
    elapsed -= MIN(elapsed, sb->paused_total_ms);
    return policy_cost_usd(&sb->d->cfg.price, sb->spec.cpu, sb->spec.memory, elapsed) +
           policy_price_gpu_per_hour(&sb->d->cfg.price, sb->spec.gpus) * (double)elapsed / 3.6e6;
}
