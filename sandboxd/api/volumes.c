/* The volumes resource (docs/API.md "Volumes"): POST /v1/volumes, GET /v1/volumes, GET and
 * DELETE /v1/volumes/{name}. The volumes themselves are core/volumes.c. */
#include "sandboxd/api/api.h"

#include "policy/limits.h"
#include "policy/volumes.h"
#include "sandboxd/core/volumes.h"

#include <string.h>

static void reply_err(sd_request *req, const error_rec *err) {
    if (err->code == -EEXIST)
        sd_reply_error(req, 409, "conflict", "%s", err->message);
    else
        sd_reply_error_rec(req, err);
}

static void req_gone(sd_request *req, void *ud) {
    sd_volumes_forget(req->d, ud); /* the job goes on */
}

static void created(void *ud, const error_rec *err, sd_volume *v) {
    sd_request *req = ud;
    req->on_close = NULL;
    if (err)
        reply_err(req, err);
    else
        sd_reply_json(req, 201, sd_volume_json(req->d, v));
}

static void deleted(void *ud, const error_rec *err, sd_volume *v) {
    sd_request *req = ud;
    req->on_close = NULL;
    if (err)
        reply_err(req, err);
    else
        sd_reply_json(req, 204, NULL);
}

static void create(sd_daemon *d, sd_request *req) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    char name[POLICY_VOLUME_NAME_MAX + 1];
    uint64_t size;
    void *job = NULL;
    error_rec err = {0};
    int r = policy_limits_parse_volume(body, name, &size, &err);
    json_decref(body);
    if (r >= 0)
        r = sd_volume_create(d, name, size, created, req, &job, &err);
    if (r < 0) {
        reply_err(req, &err);
        return;
    }
    req->on_close = req_gone;
    req->close_ud = job;
}

static void one(sd_daemon *d, sd_request *req, const char *name) {
    sd_volume *v = policy_volume_name_ok(name) ? sd_volume_find(d, name) : NULL;
    error_rec err = {0};
    void *job = NULL;
    if (strcmp(req->method, "GET") == 0) {
        if (v)
            sd_reply_json(req, 200, sd_volume_json(d, v));
        else
            sd_reply_error(req, 404, "not_found", "volume %.100s not found", name);
    } else if (strcmp(req->method, "DELETE") == 0) {
        if (sd_volume_delete(d, name, deleted, req, &job, &err) < 0) {
            reply_err(req, &err);
            return;
        }
        req->on_close = req_gone;
        req->close_ud = job;
    } else {
        sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                       req->method, req->path);
    }
}

void sd_api_volumes(sd_daemon *d, sd_request *req, const char *rest) {
    if (!*rest || strcmp(rest, "/") == 0) {
        if (strcmp(req->method, "POST") == 0)
            create(d, req);
        else if (strcmp(req->method, "GET") == 0)
            sd_reply_json(req, 200, sd_volumes_list_json(d));
        else
            sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                           req->method, req->path);
        return;
    }
    one(d, req, rest + 1);
}
