/* Sandbox endpoints: create (the admission: core/create.c; a starting sandbox's requests wait
 * here for its create_finished), list, get, delete, timeout; plus healthz, info and metrics. */
#include "sandboxd/api/api.h"

#include "common/macro.h"
#include "sandboxd/core/create.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/gvisor.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/registry.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

/* Create requests waiting for their sandbox to start. */
typedef struct waiter {
    sd_request *req;
    sd_sandbox *sb;
    json_t *entrypoint; /* started once it runs (api/entrypoint.c), or NULL */
} waiter;

struct sd_api {
    waiter *w;
    size_t n;
};

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
    unsigned q = d->n_quarantined; /* counted in active (core/quarantine.h), not starting */
    json_t *info = json_pack(
        "{s:s,s:i,s:i,s:i,s:i,s:f,s:I,s:i,s:s,s:{s:f,s:f}}", "version", SBX_VERSION,
        "max_sandboxes", (int)d->cfg.max_sandboxes, "active_sandboxes", (int)running, "starting",
        (int)(active - running - q), "quarantined_slots", (int)q, "cpus", d->host.cpus,
        "memory_bytes", (json_int_t)d->host.memory_bytes, "free_slots", (int)free_slots,
        "cgroup_mode", d->cgroup_version == 2 ? "v2" : "v1", "price", "vcpu_hour_usd",
        d->cfg.price.vcpu_hour_usd, "gib_hour_usd", d->cfg.price.gib_hour_usd);
    if (info) { /* GPUs: core/gpu.c */
        json_object_set_new(info, "gpus", sd_gpu_info_json(d));
        json_object_set_new(info, "isolation", sd_gvisor_info_json(d)); /* core/gvisor.c */
        json_object_set_new(json_object_get(info, "price"), "gpu_hour_usd",
                            json_real(d->cfg.price.gpu_hour_usd));
    }
    if (info && d->cfg.fleet_etcd) { /* fleet: docs/FLEET.md */
        json_object_set_new(info, "node", json_string(d->cfg.node_name));
        json_object_set_new(info, "fleet", json_true());
    }
    sd_reply_json(req, 200, info);
}

static void waiter_gone(sd_request *req, void *ud) {
    struct sd_api *a = ud;
    for (size_t i = 0; i < a->n; i++)
        if (a->w[i].req == req && a->w[i].entrypoint) {
            a->w[i].req = NULL; /* the client left: its entrypoint still starts */
            return;
        } else if (a->w[i].req == req) {
            a->w[i] = a->w[--a->n];
            return;
        }
}

static int add_waiter(sd_daemon *d, sd_sandbox *sb, sd_request *req, json_t *entrypoint) {
    struct sd_api *a = d->api;
    waiter *w = realloc(a->w, (a->n + 1) * sizeof(*w));
    if (!w)
        return -ENOMEM;
    a->w = w;
    w[a->n++] = (waiter){req, sb, entrypoint};
    req->on_close = waiter_gone;
    req->close_ud = a;
    return 0;
}

/* Answer the create requests waiting on sb: 201 with the object, or the error. */
static void on_create_finished(void *ud, sd_sandbox *sb, const error_rec *err) {
    struct sd_api *a = ud;
    for (size_t i = a->n; i-- > 0;) {
        if (a->w[i].sb != sb)
            continue;
        sd_request *req = a->w[i].req;
        json_t *ep = a->w[i].entrypoint;
        a->w[i] = a->w[--a->n];
        if (req)
            req->on_close = NULL;
        if (!err && ep) {
            sd_api_entrypoint_start(sb->d, req, sb, ep);
            continue;
        }
        json_decref(ep);
        if (!req)
            continue;
        if (!err)
            sd_reply_json(req, 201, sd_api_sandbox_json(sb));
        else
            sd_reply_error_rec(req, err);
    }
}

static const sd_listener listener = {.create_finished = on_create_finished};

int sd_api_init(sd_daemon *d, error_rec *err) {
    d->api = calloc(1, sizeof(*d->api));
    if (!d->api)
        return error_set(err, -ENOMEM, "out of memory");
    if (sd_listener_add(d, &listener, d->api) < 0)
        return error_set(err, -ENOSPC, "too many listeners");
    return sd_api_ports_init(d, err);
}

static void create_answer(sd_daemon *d, sd_request *req, sd_sandbox *sb, bool starting, bool is_new,
                          json_t *entrypoint) {
    if (!starting && entrypoint) {
        sd_api_entrypoint_start(d, req, sb, entrypoint); /* from a warm pool */
        return;
    }
    if (!starting) {
        sd_reply_json(req, 201, sd_api_sandbox_json(sb));
        return;
    }
    if (add_waiter(d, sb, req, entrypoint) < 0) {
        json_decref(entrypoint);
        if (!is_new)
            sd_reply_error(req, 500, "internal", "out of memory");
    }
    if (is_new)
        sd_sandbox_start_or_queue(sb);
}

/* A body's digest for its Idempotency-Key: sha256 of its JSON with sorted keys, in hex. */
static const char *body_digest(json_t *body, char ret[65]) {
    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (!text || EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return NULL; /* unknown: not compared */
    for (unsigned i = 0; i < n; i++)
        snprintf(ret + 2 * i, 3, "%02x", md[i]);
    return ret;
}

void sd_api_create(sd_daemon *d, sd_request *req) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    policy_create c = {0};
    error_rec err = {0};
    sd_sandbox *sb;
    bool starting, is_new;
    json_t *ep = NULL; /* the "entrypoint" to start (api/entrypoint.c) */
    int r = policy_limits_parse_create(body, d->cfg.defaults, &d->host, &c, &err);
    const char *key = sd_req_header(req, "Idempotency-Key");
    char digest[65];
    sd_idem idem = {key, key ? body_digest(body, digest) : NULL};
    if (r >= 0)
        r = policy_limits_check_env(c.env, &err);
    if (r >= 0)
        r = sd_api_entrypoint_parse(d, body, c.image, &ep, &err);
    if (r >= 0 && key && sd_registry_find_idem(d, key)) /* a replay starts nothing again */
        json_decref(TAKE_PTR(ep));
    if (r < 0) {
        sd_metrics_create(&d->m, SD_CREATE_ERROR, 0);
        sd_reply_error_rec(req, &err);
    } else if (key && (strlen(key) == 0 || strlen(key) > 255)) {
        sd_reply_error(req, 400, "invalid_argument", "Idempotency-Key: must be 1-255 characters");
    } else if (c.on_idle_pause && sd_api_on_idle_pause(d, req, sd_api_create)) {
        /* api/pause.c: 501 where this node cannot pause (or the create runs again once known) */
    } else if (sd_api_fleet_place(d, req, body, &c)) {
        /* fleet: 307 to another node (full or drained here, or its warm pool) */
    } else if (sd_api_fleet_lease_wait(d, req, c.lease, sd_api_create)) {
        /* fleet: another node's lease, looked up first */
    } else if (sd_create(d, &c, &idem, &sb, &starting, &is_new, &err) < 0) {
        if (err.code == -EEXIST) /* as the IETF draft on Idempotency-Key answers a reuse */
            sd_reply_error(req, 422, "idempotency_key_reused", "%s", err.message);
        else
            sd_reply_error_rec(req, &err);
    } else {
        create_answer(d, req, sb, starting, is_new, TAKE_PTR(ep));
    }
    json_decref(ep);
    json_decref(body);
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
    const char *filters[33];
    size_t n = sd_req_query_all(req, "label", filters, ARRAY_SIZE(filters));
    if (n > 32) { /* (more would have been dropped: a broader list than asked for) */
        sd_reply_error(req, 400, "invalid_argument", "label: at most 32 filters");
        return;
    }
    json_t *arr = json_array();
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (!sb->hidden && labels_match(sb, filters, n))
            json_array_append_new(arr, sd_api_sandbox_json(sb));
    sd_reply_json(req, 200, arr);
}

void sd_api_get(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    sd_reply_json(req, 200, sd_api_sandbox_json(sb));
}

void sd_api_delete(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    if (sd_api_move_in_flight(sb)) {
        sd_reply_error(req, 409, "conflict",
                       "sandbox %s is moving to node %s: delete it once it "
                       "has moved (or the move failed)",
                       sb->id, sb->move_to);
        return;
    }
    if (sd_api_move_settle(d, req, sb, sd_api_delete))
        return; /* an earlier move's outcome is asked first: the other node may hold it */
    sd_sandbox_end(sb, END_TERMINATED, "terminated by a DELETE request");
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
        sd_reply_error(req, 409, "conflict", "sandbox %s has ended (%s)", sb->id,
                       end_reason_name(sb->end_reason));
        return;
    }
    sd_sandbox_set_timeout(sb, ms);
    sd_reply_json(req, 200, sd_api_sandbox_json(sb));
}
