/* Lease endpoints: POST /v1/leases, POST /v1/leases/{id}/renew, DELETE /v1/leases/{id}
 * (the leases themselves: core/leases.c). */
#include "sandboxd/api/api.h"

#include "common/timeutil.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/fleet/fleet.h"

#include <stdio.h>
#include <string.h>

static json_t *lease_json(const sd_lease *l) {
    char buf[40];
    time_format_rfc3339(l->expires_ms, buf, sizeof(buf));
    return json_pack("{s:s,s:f,s:s}", "id", l->id, "ttl", l->ttl_ms / 1000.0, "expires_at", buf);
}

/* fleet: the answer waits for P/leases/ID (docs/FLEET.md). */
typedef struct lease_pub {
    sd_request *req;
    char id[64];
} lease_pub;

static void published_gone(sd_request *req, void *ud) {
    sd_fleet_cancel(req->d, ud);
    free(ud);
}

static void published(sd_daemon *d, void *ud, int r, const char *value) {
    lease_pub *p = ud;
    sd_request *req = p->req;
    req->on_close = NULL;
    sd_lease *l;
    error_rec err = {0};
    if (sd_lease_renew(d, p->id, &l, &err) < 0) { /* deleted meanwhile, or not saved */
        if (err.code != -ENOENT) /* refused: no lease the client was not told of stays */
            sd_lease_end_id(d, p->id, "its state could not be saved");
        sd_reply_error_rec(req, &err);
    } else {
        json_t *j = lease_json(l);
        json_object_set_new(j, "fleet", json_boolean(r >= 0));
        sd_reply_json(req, 201, j);
    }
    free(p);
}

static bool publish(sd_daemon *d, sd_request *req, const sd_lease *l) {
    lease_pub *p = sd_fleet_on(d) ? calloc(1, sizeof(*p)) : NULL;
    if (!p)
        return false;
    p->req = req;
    snprintf(p->id, sizeof(p->id), "%s", l->id);
    if (sd_fleet_lease_publish(d, l->id, l->ttl_ms, published, p) < 0) {
        free(p);
        return false;
    }
    req->on_close = published_gone;
    req->close_ud = p;
    return true;
}

void sd_api_lease_create(sd_daemon *d, sd_request *req) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    uint64_t ttl;
    error_rec err = {0};
    sd_lease *l;
    int r = policy_limits_parse_lease(body, &ttl, &err);
    json_decref(body);
    if (r >= 0)
        r = sd_lease_create(d, ttl, &l, &err);
    if (r < 0)
        sd_reply_error_rec(req, &err);
    else if (!publish(d, req, l))
        sd_reply_json(req, 201, lease_json(l));
}

/* The body is empty or {}: a renew keeps the lease's ttl (any field is refused, never ignored). */
void sd_api_lease_renew(sd_daemon *d, sd_request *req, const char *id) {
    sd_lease *l;
    error_rec err = {0};
    if (!sd_req_no_fields(req))
        return;
    if (sd_lease_renew(d, id, &l, &err) < 0) {
        sd_reply_error_rec(req, &err);
        return;
    }
    if (!l->remote)
        sd_fleet_lease_renewed(d, id, l->ttl_ms);
    sd_reply_json(req, 200, lease_json(l));
}

void sd_api_lease_delete(sd_daemon *d, sd_request *req, const char *id) {
    error_rec err = {0};
    if (sd_lease_delete(d, id, &err) < 0)
        sd_reply_error_rec(req, &err);
    else
        sd_reply_json(req, 204, NULL);
}
