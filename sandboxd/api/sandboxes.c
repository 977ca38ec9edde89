/* Sandbox endpoints: create (admission, queueing, Idempotency-Key), list, get, delete, timeout;
 * plus healthz, info and metrics. */
#include "sandboxd/api/http.h"
#include "sandboxd/core/images.h"
#include "sandboxd/net/daemon.h"

#include "common/timeutil.h"

#include <string.h>
#include <sys/stat.h>

#define RETRY_AFTER_S 5

void sd_api_healthz(sd_daemon *d, sd_request *req) {
    sd_reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

void sd_api_info(sd_daemon *d, sd_request *req) {
    unsigned active = sd_registry_count_active(d);
    unsigned running = 0;
    unsigned pool = 0; /* warm pool entries (counted in max_sandboxes, not shown as sandboxes) */
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        running += sb->state == SD_RUNNING && !sb->pool;
        pool += sb->pool && sb->state != SD_ENDED;
    }
    active -= pool;
    unsigned free_slots = active < d->cfg.max_sandboxes ? d->cfg.max_sandboxes - active : 0;
    sd_reply_json(req, 200,
                  json_pack("{s:s,s:i,s:i,s:i,s:f,s:I,s:i,s:s,s:{s:f,s:f}}", "version", SBX_VERSION,
                            "max_sandboxes", (int)d->cfg.max_sandboxes, "active_sandboxes",
                            (int)running, "starting", (int)(active - running), "cpus", d->host.cpus,
                            "memory_bytes", (json_int_t)d->host.memory_bytes, "free_slots",
                            (int)free_slots, "cgroup_mode", d->cgroup_version == 2 ? "v2" : "v1",
                            "price", "vcpu_hour_usd", d->cfg.price.vcpu_hour_usd, "gib_hour_usd",
                            d->cfg.price.gib_hour_usd));
}

void sd_api_metrics(sd_daemon *d, sd_request *req) {
    char *text = sd_metrics_render(d);
    if (!text) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    sd_reply_data(req, 200, "text/plain; version=0.0.4", text, strlen(text));
}

static void waiter_gone(sd_request *req, void *ud) {
    sd_sandbox *sb = ud;
    for (size_t i = 0; i < sb->n_waiters; i++)
        if (sb->waiters[i] == req) {
            sb->waiters[i] = sb->waiters[--sb->n_waiters];
            return;
        }
}

static int add_waiter(sd_sandbox *sb, sd_request *req) {
    sd_request **w = realloc(sb->waiters, (sb->n_waiters + 1) * sizeof(*w));
    if (!w)
        return -ENOMEM;
    sb->waiters = w;
    w[sb->n_waiters++] = req;
    req->on_close = waiter_gone;
    req->close_ud = sb;
    return 0;
}

void sd_create_finish(sd_sandbox *sb, int status, const char *code, const char *msg) {
    if (sb->fork)
        sd_fork_started(sb, status, msg);
    while (sb->n_waiters) {
        sd_request *req = sb->waiters[--sb->n_waiters];
        req->on_close = NULL;
        if (status == 201)
            sd_reply_json(req, 201, sd_sandbox_to_json(sb));
        else
            sd_reply_error(req, (unsigned)status, code, "%s", msg);
    }
}

static bool lease_exists(sd_daemon *d, const char *id) {
    for (sd_lease *l = d->leases; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return true;
    return false;
}

/* Returns true when the key answered the request. */
static bool idempotent_replay(sd_daemon *d, sd_request *req, const char *key) {
    sd_sandbox *sb = sd_registry_find_idem(d, key);
    if (!sb)
        return false;
    if (sb->state == SD_STARTING) {
        if (add_waiter(sb, req) < 0)
            sd_reply_error(req, 500, "internal", "out of memory");
    } else {
        sd_reply_json(req, 201, sd_sandbox_to_json(sb));
    }
    return true;
}

/* Save a new sandbox before anything is started: one the state directory does not know would
 * be lost by a restart. On failure (a full or read-only state directory) it is forgotten. */
static int persist_new(sd_sandbox *sb, const char *key) {
    sb->idem_key = key ? strdup(key) : NULL;
    int r = sd_state_save(sb);
    if (r < 0) {
        sd_daemon *d = sb->d;
        sd_state_remove(d, sb->id);
        sd_slot_release(d, sb->uid_slot);
        sd_registry_remove(d, sb);
        sd_metrics_create(d, "error", 0);
    }
    return r;
}

void sd_api_create(sd_daemon *d, sd_request *req) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    policy_create c = {0};
    policy_egress *egress = NULL;
    error_rec err = {0};
    sd_sandbox *sb;
    int r = policy_limits_parse_create(body, d->cfg.defaults, &d->host, &c, &err);
    json_decref(body);
    if (r < 0) {
        sd_metrics_create(d, "error", 0);
        sd_reply_error_rec(req, &err);
        return;
    }
    const char *key = sd_req_header(req, "Idempotency-Key");
    if (key && (strlen(key) == 0 || strlen(key) > 255)) {
        sd_reply_error(req, 400, "invalid_argument", "Idempotency-Key: must be 1-255 characters");
    } else if (key && idempotent_replay(d, req, key)) {
    } else if (sd_net_daemon_check(d, &c, &egress, &err) < 0) {
        sd_metrics_create(d, "error", 0);
        sd_reply_error_rec(req, &err);
    } else if (sd_images_check(d, c.image, &err) < 0) { /* images: a store or config image */
        sd_reply_error_rec(req, &err);
    } else if (c.lease && !lease_exists(d, c.lease)) {
        sd_reply_error(req, 404, "not_found", "lease: %s not found", c.lease);
    } else if ((sb = sd_pool_take(d, &c))) {
        if ((r = sd_pool_hand_out(sb, &c, key)) < 0) {
            free(sb->idem_key); /* a retry with the same key tries again */
            sb->idem_key = NULL;
            sd_sandbox_end(sb, "infrastructure_failure", "its state could not be saved");
            sd_reply_error(req, 507, "insufficient_storage", "cannot save the sandbox's state: %s",
                           strerror(-r));
        } else {
            sd_reply_json(req, 201, sd_sandbox_to_json(sb));
        }
        sd_pool_refill(d);
    } else if (sd_registry_count_active(d) >= d->cfg.max_sandboxes && !sd_pool_evict(d)) {
        sd_metrics_create(d, "full", 0);
        req->retry_after = RETRY_AFTER_S;
        sd_reply_error(req, 503, "node_full", "the node is full (%u sandboxes)",
                       d->cfg.max_sandboxes);
    } else {
        if (sd_registry_add(d, &c, &sb, &err) < 0) {
            req->retry_after = RETRY_AFTER_S;
            sd_reply_error(req, 503, "node_full", "%s", err.message);
        } else if ((r = persist_new(sb, key)) < 0) {
            sd_reply_error(req, 507, "insufficient_storage", "cannot save the sandbox's state: %s",
                           strerror(-r));
        } else {
            sb->egress = TAKE_PTR(egress);
            add_waiter(sb, req);
            log_info("sandbox created sandbox=%s cpu=%g memory=%llu", sb->id, sb->spec.cpu,
                     (unsigned long long)sb->spec.memory);
            if (d->n_starting < d->cfg.max_starting)
                sd_sandbox_start(sb);
            else
                sb->queued = true;
        }
    }
    policy_egress_free(egress);
    policy_create_done(&c);
}

static bool labels_match(sd_sandbox *sb, const char **filters, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(filters[i], '=');
        size_t klen = eq ? (size_t)(eq - filters[i]) : strlen(filters[i]);
        char key[257];
        if (klen >= sizeof(key))
            return false;
        memcpy(key, filters[i], klen);
        key[klen] = 0;
        json_t *v = json_object_get(sb->spec.labels, key);
        if (!v || (eq && strcmp(json_string_value(v), eq + 1) != 0))
            return false;
    }
    return true;
}

void sd_api_list(sd_daemon *d, sd_request *req) {
    const char *filters[32];
    size_t n = sd_req_query_all(req, "label", filters, 32);
    json_t *arr = json_array();
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (!sb->hidden && labels_match(sb, filters, n))
            json_array_append_new(arr, sd_sandbox_to_json(sb));
    sd_reply_json(req, 200, arr);
}

void sd_api_get(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    sd_reply_json(req, 200, sd_sandbox_to_json(sb));
}

void sd_api_delete(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    sd_sandbox_end(sb, "terminated", "terminated by a DELETE request");
    sd_reply_json(req, 204, NULL);
}

void sd_api_timeout(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    uint64_t ms;
    error_rec err = {0};
    int r = policy_limits_parse_timeout(body, &ms, &err);
    json_decref(body);
    if (r < 0) {
        sd_reply_error_rec(req, &err);
        return;
    }
    if (sb->state == SD_ENDED) {
        sd_reply_error(req, 409, "conflict", "sandbox %s has ended (%s)", sb->id, sb->end_reason);
        return;
    }
    sb->expires_ms = now_real_ms() + ms;
    sd_state_save(sb);
    sd_reply_json(req, 200, sd_sandbox_to_json(sb));
}
