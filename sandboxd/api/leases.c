/* Lease endpoints: POST /v1/leases, POST /v1/leases/{id}/renew, DELETE /v1/leases/{id}
 * (the leases themselves: core/leases.c). */
#include "sandboxd/api/api.h"

#include "common/timeutil.h"
#include "sandboxd/core/leases.h"

static json_t *lease_json(const sd_lease *l) {
    char buf[40];
    time_format_rfc3339(l->expires_ms, buf, sizeof(buf));
    return json_pack("{s:s,s:f,s:s}", "id", l->id, "ttl", l->ttl_ms / 1000.0, "expires_at", buf);
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
    else
        sd_reply_json(req, 201, lease_json(l));
}

void sd_api_lease_renew(sd_daemon *d, sd_request *req, const char *id) {
    sd_lease *l;
    error_rec err = {0};
    if (sd_lease_renew(d, id, &l, &err) < 0)
        sd_reply_error_rec(req, &err);
    else
        sd_reply_json(req, 200, lease_json(l));
}

void sd_api_lease_delete(sd_daemon *d, sd_request *req, const char *id) {
    error_rec err = {0};
    if (sd_lease_delete(d, id, &err) < 0)
        sd_reply_error_rec(req, &err);
    else
        sd_reply_json(req, 204, NULL);
}
