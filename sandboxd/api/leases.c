/* Leases: a client holds a lease and renews it; sandboxes created under it are terminated when
 * it expires or is deleted (so a crashed trainer does not leave sandboxes running). */
#include "sandboxd/api/http.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>

static json_t *lease_json(const sd_lease *l) {
    char buf[40];
    time_format_rfc3339(l->expires_ms, buf, sizeof(buf));
    return json_pack("{s:s,s:f,s:s}", "id", l->id, "ttl", l->ttl_ms / 1000.0, "expires_at", buf);
}

static sd_lease *lease_find(sd_daemon *d, const char *id) {
    for (sd_lease *l = d->leases; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

static void lease_end(sd_daemon *d, sd_lease *l, const char *why) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->state != SD_ENDED && sb->spec.lease && strcmp(sb->spec.lease, l->id) == 0)
            sd_sandbox_end(sb, "terminated", "%s", why);
    for (sd_lease **pp = &d->leases; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    log_info("lease ended lease=%s why=\"%s\"", l->id, why);
    sd_lease_state_remove(d, l->id);
    free(l);
}

void sd_leases_expire(sd_daemon *d) {
    uint64_t now = now_real_ms();
    for (sd_lease *l = d->leases, *next; l; l = next) {
        next = l->next;
        if (now >= l->expires_ms)
            lease_end(d, l, "lease expired");
    }
}

void sd_api_lease_create(sd_daemon *d, sd_request *req) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    uint64_t ttl;
    error_rec err = {0};
    int r = policy_limits_parse_lease(body, &ttl, &err);
    json_decref(body);
    if (r < 0) {
        sd_reply_error_rec(req, &err);
        return;
    }
    sd_lease *l = calloc(1, sizeof(*l));
    if (!l) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    sd_random_id("ls-", l->id, sizeof(l->id));
    l->ttl_ms = ttl;
    l->expires_ms = now_real_ms() + ttl;
    l->next = d->leases;
    d->leases = l;
    sd_lease_save(d, l);
    log_info("lease created lease=%s ttl_s=%.3f", l->id, ttl / 1000.0);
    sd_reply_json(req, 201, lease_json(l));
}

void sd_api_lease_renew(sd_daemon *d, sd_request *req, const char *id) {
    sd_lease *l = lease_find(d, id);
    if (!l) {
        sd_reply_error(req, 404, "not_found", "lease %s not found", id);
        return;
    }
    l->expires_ms = now_real_ms() + l->ttl_ms;
    sd_lease_save(d, l);
    sd_reply_json(req, 200, lease_json(l));
}

void sd_api_lease_delete(sd_daemon *d, sd_request *req, const char *id) {
    sd_lease *l = lease_find(d, id);
    if (!l) {
        sd_reply_error(req, 404, "not_found", "lease %s not found", id);
        return;
    }
    lease_end(d, l, "lease deleted");
    sd_reply_json(req, 204, NULL);
}

int sd_lease_restore(sd_daemon *d, json_t *j) {
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
    l->next = d->leases;
    d->leases = l;
    return 0;
}
