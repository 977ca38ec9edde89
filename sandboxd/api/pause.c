/* POST /v1/sandboxes/{id}/pause and .../resume (pause to disk with CRIU). CRIU cannot
 * checkpoint a sandbox here (core/checkpoint.c): pause answers 501 `unsupported` with what
 * `criu check` said, or where it passes why CRIU cannot dump a sandbox; resume answers 409 (no
 * sandbox is ever paused); a create's "on_idle":"pause" is 501 for the same reason. */
#include "sandboxd/api/api.h"

#include "common/jsonkeys.h"

#include "sandboxd/core/checkpoint.h"

static void req_gone(sd_request *req, void *ud) {
    sd_checkpoint_probe_cancel(req);
}

static void probed(void *ud, const error_rec *err) {
    sd_request *req = ud;
    req->on_close = NULL;
    if (err->code == -EOPNOTSUPP)
        sd_reply_error(req, 501, "unsupported", "%s", err->message);
    else
        sd_reply_error_rec(req, err);
}

/* An empty body or {} only: every field is unknown (common/jsonkeys.h). */
static bool empty_body(sd_request *req) {
    static const char *const none[] = {NULL};
    json_t *body = sd_req_json(req);
    if (!body)
        return false;
    error_rec err = {0};
    bool ok = json_is_object(body);
    if (!ok)
        sd_reply_error(req, 400, "invalid_argument", "the body must be a JSON object");
    else if (jsonkeys_check(body, none, NULL, &err) < 0) {
        sd_reply_error_rec(req, &err);
        ok = false;
    }
    json_decref(body);
    return ok;
}

void sd_api_pause(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    if (!empty_body(req))
        return;
    if (sb->state != SD_RUNNING) {
        sd_reply_error(req, 409, "conflict", "sandbox %s is %s: only a running sandbox pauses",
                       sb->id, sb->state == SD_ENDED ? "ended" : "still starting");
        return;
    }
    req->on_close = req_gone;
    req->close_ud = NULL;
    sd_checkpoint_probe(d, probed, req);
}

/* A create with "on_idle":"pause": an idle sandbox would be paused, which this node cannot do;
 * refused (501) with the same reason as a pause, before anything is made. */
static void idle_probed(void *ud, const error_rec *err) {
    sd_request *req = ud;
    req->on_close = NULL;
    sd_reply_error(req, 501, "unsupported",
                   "on_idle: \"pause\" is not available on this node (use \"end\"): %s",
                   err->message);
}

void sd_api_on_idle_pause(sd_daemon *d, sd_request *req) {
    req->on_close = req_gone;
    req->close_ud = NULL;
    sd_checkpoint_probe(d, idle_probed, req);
}

void sd_api_resume(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    if (!empty_body(req))
        return;
    sd_reply_error(req, 409, "conflict", "sandbox %s is not paused", sb->id);
}
