/* Leases (core/leases.h): the table, expiry, and their records in state-dir/leases/. */
#include "sandboxd/core/leases.h"

#include "common/timeutil.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"

#include <stdio.h>
#include <string.h>

/* Leases outlive sandboxes and are rare: their records are durable (fsynced). A lease (or a
 * renewal) the state directory cannot keep is refused, as a sandbox is (core/create.c): a
 * restart would not know it (its sandboxes would never expire) or would end it early. */
static int lease_save(sd_daemon *d, const sd_lease *l, error_rec *err) {
    json_t *j = json_pack("{s:s,s:I,s:I,s:b}", "id", l->id, "ttl_ms", (json_int_t)l->ttl_ms,
                          "expires_ms", (json_int_t)l->expires_ms, "remote", l->remote);
    int r = j ? sd_state_write(d, "leases", l->id, j, true) : -ENOMEM;
    if (r < 0)
        return error_set(err, -EDQUOT, "cannot save the lease's state: %s", strerror(-r));
    return 0;
}

/* Link a new lease in, saved; on failure it is freed. */
static int lease_add(sd_daemon *d, sd_lease *l, error_rec *err) {
    int r = lease_save(d, l, err);
    if (r < 0) {
        free(l);
        return r;
    }
    l->next = d->leases;
    d->leases = l;
    return 0;
}

static sd_lease *lease_find(sd_daemon *d, const char *id) {
    for (sd_lease *l = d->leases; id && l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

bool sd_lease_exists(sd_daemon *d, const char *id) {
    return lease_find(d, id) != NULL;
}

static void lease_end(sd_daemon *d, sd_lease *l, const char *why) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->state != SD_ENDED && sb->spec.lease && strcmp(sb->spec.lease, l->id) == 0)
            sd_sandbox_end(sb, END_TERMINATED, "%s", why);
    for (sd_lease **pp = &d->leases; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    log_info("lease ended lease=%s why=\"%s\"", l->id, why);
    sd_state_unlink(d, "leases", l->id);
    free(l);
}

void sd_leases_expire(sd_daemon *d) {
    uint64_t now = now_real_ms();
    for (sd_lease *l = d->leases, *next; l; l = next) {
        next = l->next;
        if (!l->remote && now >= l->expires_ms)
            lease_end(d, l, "lease expired");
    }
}

int sd_lease_create(sd_daemon *d, uint64_t ttl_ms, sd_lease **ret, error_rec *err) {
    sd_lease *l = calloc(1, sizeof(*l));
    if (!l)
        return error_set(err, -ENOMEM, "out of memory");
    sd_node_id(d, "ls-", l->id, sizeof(l->id));
    l->ttl_ms = ttl_ms;
    l->expires_ms = now_real_ms() + ttl_ms;
    int r = lease_add(d, l, err);
    if (r < 0)
        return r;
    log_info("lease created lease=%s ttl_s=%.3f", l->id, ttl_ms / 1000.0);
    *ret = l;
    return 0;
}

int sd_lease_renew(sd_daemon *d, const char *id, sd_lease **ret, error_rec *err) {
    sd_lease *l = lease_find(d, id);
    if (!l)
        return error_set(err, -ENOENT, "lease %s not found", id);
    uint64_t was = l->expires_ms;
    l->expires_ms = now_real_ms() + l->ttl_ms;
    int r = lease_save(d, l, err);
    if (r < 0) {
        l->expires_ms = was; /* as its record still says */
        return r;
    }
    *ret = l;
    return 0;
}

int sd_lease_delete(sd_daemon *d, const char *id, error_rec *err) {
    sd_lease *l = lease_find(d, id);
    if (!l)
        return error_set(err, -ENOENT, "lease %s not found", id);
    lease_end(d, l, "lease deleted");
    return 0;
}

int sd_lease_adopt(sd_daemon *d, const char *id, error_rec *err) {
    if (lease_find(d, id))
        return 0;
    sd_lease *l = calloc(1, sizeof(*l));
    if (!l)
        return error_set(err, -ENOMEM, "out of memory");
    snprintf(l->id, sizeof(l->id), "%s", id);
    l->remote = true;
    l->adopted_ms = now_mono_ms();
    int r = lease_add(d, l, err);
    if (r < 0)
        return r;
    log_info("lease adopted lease=%s (another node's)", l->id);
    return 0;
}

void sd_lease_end_id(sd_daemon *d, const char *id, const char *why) {
    sd_lease *l = lease_find(d, id);
    if (l)
        lease_end(d, l, why);
}

static int lease_restore(sd_daemon *d, json_t *j) {
    const char *id = json_string_value(json_object_get(j, "id"));
    json_t *ttl = json_object_get(j, "ttl_ms"), *exp = json_object_get(j, "expires_ms");
    if (!id || strlen(id) >= sizeof(((sd_lease *)0)->id) || !json_is_integer(ttl) ||
        !json_is_integer(exp))
        return -EINVAL;
    sd_lease *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    snprintf(l->id, sizeof(l->id), "%s", id);
    l->ttl_ms = (uint64_t)json_integer_value(ttl);
    l->expires_ms = (uint64_t)json_integer_value(exp);
    l->remote = json_is_true(json_object_get(j, "remote"));
    l->next = d->leases;
    d->leases = l;
    return 0;
}

void sd_leases_restore(sd_daemon *d) {
    sd_state_foreach(d, "leases", lease_restore);
}
