/* POST /v1/sandboxes/{id}/commit {"name":"NAME[:TAG]", "setuid":"refuse"|"strip"}: 201 with the
 * new image's object and "freeze_ms" once it is in the store, or the error (the engine:
 * core/commit.c). */
#include "sandboxd/api/api.h"

#include "common/jsonkeys.h"

#include "sandboxd/core/commit.h"
#include "sandboxd/core/images.h"

#include <string.h>

static void req_gone(sd_request *req, void *ud) {
    sd_commit_forget(ud); /* the commit goes on; nobody waits for the answer */
}

static void reply_err(sd_request *req, const error_rec *err) {
    if (err->code == -EEXIST)
        sd_reply_error(req, 409, "conflict", "%s", err->message);
    else
        sd_reply_error_rec(req, err);
}

static void commit_done(void *ud, const error_rec *err, sd_image *img, uint64_t freeze_ms) {
    sd_request *req = ud;
    req->on_close = NULL;
    if (err || !img) {
        error_rec e = {0};
        reply_err(req, err ? err : (error_set(&e, -EIO, "commit: the image is gone"), &e));
        return;
    }
    json_t *o = sd_images_to_json(img);
    json_object_set_new(o, "freeze_ms", json_integer((json_int_t)freeze_ms));
    sd_reply_json(req, 201, o);
}

void sd_api_commit(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    static const char *const keys[] = {"name", "setuid", NULL};
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *setuid = json_object_get(body, "setuid");
    error_rec err = {0};
    sd_commit *c;
    if (!json_is_object(body)) {
        sd_reply_error(req, 400, "invalid_argument", "the body must be a JSON object");
        goto out;
    }
    if (jsonkeys_check(body, keys, NULL, &err) < 0) {
        sd_reply_error_rec(req, &err);
        goto out;
    }
    if (!name) {
        sd_reply_error(req, 400, "invalid_argument", "name: %s",
                       json_object_get(body, "name") ? "must be a string NAME[:TAG]"
                                                     : "required (a string NAME[:TAG])");
    } else if (setuid &&
               (!json_is_string(setuid) || (strcmp(json_string_value(setuid), "strip") != 0 &&
                                            strcmp(json_string_value(setuid), "refuse") != 0))) {
        sd_reply_error(req, 400, "invalid_argument", "setuid: must be \"strip\" or \"refuse\"");
    } else if (sd_commit_start(sb, name, setuid && strcmp(json_string_value(setuid), "strip") == 0,
                               commit_done, req, &c, &err) < 0) {
        reply_err(req, &err);
    } else {
        req->on_close = req_gone;
        req->close_ud = c;
    }
out:
    json_decref(body);
}
