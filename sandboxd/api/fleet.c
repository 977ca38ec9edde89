/* Fleet endpoints and routing (docs/FLEET.md): GET /v1/fleet, drain and undrain; the 307 to
 * the node that owns an id; the 307 of a create this node cannot place (full, drained, or no
 * ready warm pool entry here while another node has one for it); a create naming
 * another node's lease (looked up in etcd once). The fleet itself: sandboxd/fleet/. */
#include "sandboxd/api/api.h"

#include "common/macro.h"
#include "common/poolshape.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/fleet/fleet.h"

#include <stdio.h>
#include <string.h>

static void redirect(sd_request *req, const char *base, const char *path, const char *skip,
                     const char *add) {
    _cleanup_free_ char *q = sd_req_query_string(req, skip, add);
    _cleanup_free_ char *p = sd_url_path_escape(path); /* path: decoded by libmicrohttpd */
    size_t blen = strlen(base);
    while (blen && base[blen - 1] == '/')
        blen--;
    char *loc = NULL;
    if (!q || !p || asprintf(&loc, "%.*s%s%s", (int)blen, base, p, q) < 0) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    sd_reply_redirect(req, loc);
    free(loc);
}

bool sd_api_fleet_route(sd_daemon *d, sd_request *req, const char *id) {
    const char *url = NULL;
    switch (sd_fleet_locate(d, id, &url)) {
    case SD_FLEET_SELF:
        return false;
    case SD_FLEET_LIVE:
        redirect(req, url, req->path, NULL, NULL);
        return true;
    case SD_FLEET_GONE:
        req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, 503, "node_unavailable", "node %s of %s is not in the fleet now",
                       strchr(id, '.') + 1, id);
        return true;
    case SD_FLEET_UNKNOWN:
        sd_reply_error(req, 404, "not_found", "%s: no node %s in the fleet", id,
                       strchr(id, '.') + 1);
        return true;
    }
    return false;
}

void sd_api_fleet_forward(sd_daemon *d, sd_request *req, const char *id, const char *node) {
    const char *url = sd_fleet_node_url(d, node);
    if (url) {
        redirect(req, url, req->path, NULL, NULL);
        return;
    }
    req->retry_after = SD_RETRY_AFTER_S;
    sd_reply_error(req, 503, "node_unavailable",
                   "%s moved to node %s, which is not in the fleet now", id, node);
}

bool sd_api_fleet_place(sd_daemon *d, sd_request *req, json_t *body, const policy_create *c) {
    const char *placed = sd_req_query(req, "placed"), *key = sd_req_header(req, "Idempotency-Key");
    if (!sd_fleet_on(d) || (key && sd_registry_find_idem(d, key))) /* a replay: answered here */
        return false;
    /* a create that was placed here already is never sent on again, nor one with volumes or
     * named GPUs (they are this node's: it runs here or not at all, and not on a drained node);
     * one with room here goes on only to a ready warm pool entry (none here, one elsewhere),
     * else it is cold-started */
    bool bound = c->volumes || c->gpu_uuids, draining = sd_fleet_draining(d);
    bool stay = bound || (placed && strcmp(placed, "1") == 0);
    bool room = !draining && !sd_fleet_full(d);
    const char *url = NULL;
    bool gpus = !stay && c->gpus; /* GPUs: enough free here, or fleet/gpu.c */
    if (gpus && room && sd_gpu_free(d) >= c->gpus)
        return false;
    if (gpus)
        url = sd_fleet_pick_gpus(d, c->gpus); /* none: gpu_unavailable here (or node_draining) */
    else if (!stay && !(room && sd_pool_has_ready(d, c))) {
        json_t *shape = c->net_mode == POLICY_NET_ALLOW ? NULL : poolshape_from_body(body);
        url = shape || !room ? sd_fleet_pick(d, shape, room) : NULL;
        json_decref(shape);
    }
    if (url) {
        redirect(req, url, "/v1/sandboxes", "placed", "placed=1");
        return true;
    }
    if (!draining)
        return false; /* room here, or full everywhere: the core answers 503 node_full */
    req->retry_after = SD_RETRY_AFTER_S;
    sd_reply_error(req, 503, "node_draining", "node %s is drained and %s", d->cfg.node_name,
                   bound ? "the create's volumes or GPUs are this node's"
                         : "no other node has room");
    return true;
}

/* ---- a create naming another node's lease ---- */

typedef struct lease_wait {
    sd_request *req;
    sd_http_handler again; /* the create, run again once the lease is known here */
    char id[64];
} lease_wait;

static void lease_wait_gone(sd_request *req, void *ud) {
    sd_fleet_cancel(req->d, ud);
    free(ud);
}

static void lease_looked_up(sd_daemon *d, void *ud, int r, const char *value) {
    lease_wait *w = ud;
    sd_request *req = w->req;
    error_rec err = {0};
    req->on_close = NULL;
    if (r == -ENOENT) {
        sd_reply_error(req, 404, "not_found", "lease: %s not found in the fleet", w->id);
    } else if (r < 0) {
        req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, 503, "etcd_unreachable", "lease %s: etcd is unreachable", w->id);
    } else if (sd_lease_adopt(d, w->id, &err) < 0) {
        sd_reply_error_rec(req, &err);
    } else {
        w->again(d, req);
    }
    free(w);
}

bool sd_api_fleet_lease_wait(sd_daemon *d, sd_request *req, const char *lease,
                             sd_http_handler again) {
    const char *url;
    if (!lease || sd_lease_exists(d, lease) || sd_fleet_locate(d, lease, &url) == SD_FLEET_SELF ||
        strlen(lease) >= sizeof(((lease_wait *)0)->id))
        return false;
    lease_wait *w = calloc(1, sizeof(*w));
    if (!w) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return true;
    }
    w->req = req;
    w->again = again;
    snprintf(w->id, sizeof(w->id), "%s", lease);
    if (sd_fleet_lease_lookup(d, lease, lease_looked_up, w) < 0) {
        free(w);
        sd_reply_error(req, 500, "internal", "out of memory");
        return true;
    }
    req->on_close = lease_wait_gone;
    req->close_ud = w;
    return true; /* answered by lease_looked_up */
}

/* ---- GET /v1/fleet, POST /v1/fleet/nodes/{name}/drain|undrain ---- */

static void drained(sd_daemon *d, void *ud, int r, const char *value) {
    sd_request *req = ud;
    req->on_close = NULL;
    if (r < 0) {
        req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, 503, "etcd_unreachable", "etcd is unreachable: not written");
    } else {
        sd_reply_json(req, 204, NULL);
    }
}

static void drain_gone(sd_request *req, void *ud) {
    sd_fleet_cancel(req->d, req);
}

static void drain(sd_daemon *d, sd_request *req, const char *rest) {
    char name[64];
    size_t n = strcspn(rest, "/");
    const char *sub = rest + n;
    bool on = strcmp(sub, "/drain") == 0;
    if (n == 0 || n >= sizeof(name) || (!on && strcmp(sub, "/undrain") != 0)) {
        sd_reply_error(req, 404, "not_found", "no such endpoint: %s", req->path);
        return;
    }
    memcpy(name, rest, n);
    name[n] = 0;
    if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != n || n > 40) {
        sd_reply_error(req, 400, "invalid_argument", "node name: expected [a-z0-9-]{1,40}");
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                       req->method, req->path);
        return;
    }
    if (!sd_req_no_fields(req))
        return;
    if (sd_fleet_drain(d, name, on, drained, req) < 0) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    req->on_close = drain_gone;
}

void sd_api_fleet(sd_daemon *d, sd_request *req, const char *rest) {
    if (!sd_fleet_on(d)) {
        sd_reply_error(req, 404, "not_found", "this daemon is not in a fleet (--fleet-etcd)");
    } else if (!*rest || strcmp(rest, "/") == 0) {
        strcmp(req->method, "GET") == 0
            ? sd_reply_json(req, 200, sd_fleet_view(d))
            : sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                             req->method, req->path);
    } else if (strncmp(rest, "/nodes/", 7) == 0) {
        drain(d, req, rest + 7);
    } else {
        sd_reply_error(req, 404, "not_found", "no such endpoint: %s", req->path);
    }
}
