/* POST /v1/sandboxes/{id}/pause and .../resume (docs/API.md "Pause and resume"): the node's
 * CRIU is probed first (core/checkpoint.c: 501 `unsupported` where it cannot pause), then the
 * sandbox is paused to disk or resumed from its checkpoint; the answer is the sandbox. A resume
 * on another node ({"node"}) is api/move.c's. A create with "on_idle":"pause" is 501 on a node
 * that cannot pause. */
#include "sandboxd/api/api.h"

#include "common/jsonkeys.h"

#include "sandboxd/core/checkpoint.h"
#include "sandboxd/core/registry.h"

/* The body: empty or {} for a pause; a resume may name the node it resumes on ({"node"},
 * written to node: its own copy, "" when none). Any other field is refused (jsonkeys.h). */
static bool read_body(sd_request *req, bool resume, char *node, size_t len) {
    static const char *const none[] = {NULL}, *const resume_keys[] = {"node", NULL};
    json_t *body = sd_req_json(req);
    if (!body)
        return false;
    error_rec err = {0};
    json_t *n = json_object_get(body, "node");
    bool ok = json_is_object(body);
    if (!ok)
        sd_reply_error(req, 400, "invalid_argument", "the body must be a JSON object");
    else if (jsonkeys_check(body, resume ? resume_keys : none, NULL, &err) < 0)
        sd_reply_error_rec(req, &err), ok = false;
    else if (n && (!json_is_string(n) || !*json_string_value(n) || json_string_length(n) >= len))
        sd_reply_error(req, 400, "invalid_argument", "node: a node's name"), ok = false;
    snprintf(node, len, "%s", ok && n ? json_string_value(n) : "");
    json_decref(body);
    return ok;
}

static void reply_err(sd_request *req, const error_rec *err) {
    if (err->code == -EOPNOTSUPP)
        sd_reply_error(req, 501, "unsupported", "%s", err->message);
    else if (err->code == -EPERM)
        sd_reply_error(req, 409, "conflict", "%s", err->message);
    else
        sd_reply_error_rec(req, err);
}

/* The request waits for the pause or resume; its sandbox is found again by id. */
typedef struct waiter {
    sd_daemon *d;
    char id[64];
    bool resume;
} waiter;

static void req_gone(sd_request *req, void *ud) {
    waiter *w = ud;
    sd_checkpoint_probe_cancel(req);
    sd_sandbox *sb = sd_registry_find(w->d, w->id);
    if (sb)
        sd_checkpoint_cancel(sb, req);
    free(w);
}

static void moved(void *ud, sd_sandbox *sb, const error_rec *err) {
    sd_request *req = ud;
    free(req->close_ud);
    req->on_close = NULL, req->close_ud = NULL;
    if (err)
        reply_err(req, err);
    else
        sd_reply_json(req, 200, sd_api_sandbox_json(sb));
}

static void probed(void *ud, const error_rec *perr) {
    sd_request *req = ud;
    waiter *w = req->close_ud;
    sd_sandbox *sb = sd_registry_find(w->d, w->id);
    error_rec err = {0};
    if (perr->code < 0)
        err = *perr;
    else if (!sb)
        error_set(&err, -ENOENT, "sandbox %s not found", w->id);
    else if ((w->resume ? sd_checkpoint_resume(sb, moved, req, &err)
                        : sd_checkpoint_pause(sb, moved, req, &err)) == 0)
        return; /* moved() answers */
    free(w);
    req->on_close = NULL, req->close_ud = NULL;
    reply_err(req, &err);
}

static void start(sd_daemon *d, sd_request *req, sd_sandbox *sb, bool resume) {
    char node[64];
    if (!read_body(req, resume, node, sizeof(node)))
        return;
    /* a resume: where an earlier move left it first, then here or on another node */
    if (resume && (sd_api_move_settle(d, req, sb, sd_api_resume) ||
                   sd_api_move_resume(d, req, sb, node[0] ? node : NULL)))
        return;
    waiter *w = calloc(1, sizeof(*w));
    if (!w) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    *w = (waiter){.d = d, .resume = resume};
    snprintf(w->id, sizeof(w->id), "%s", sb->id);
    req->on_close = req_gone;
    req->close_ud = w;
    sd_checkpoint_probe(d, probed, req);
}

void sd_api_pause(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    start(d, req, sb, false);
}

void sd_api_resume(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    start(d, req, sb, true);
}

/* A create with "on_idle":"pause": on a node that cannot pause, refused (501) with the reason
 * before anything is made. The first one waits for the node's probe, then the create runs
 * again (again: the body is read anew). */
typedef struct idle_wait {
    sd_daemon *d;
    sd_http_handler again;
} idle_wait;

static void idle_gone(sd_request *req, void *ud) {
    sd_checkpoint_probe_cancel(req);
    free(ud);
}

static void idle_probed(void *ud, const error_rec *err) {
    sd_request *req = ud;
    idle_wait w = *(idle_wait *)req->close_ud;
    free(req->close_ud);
    req->on_close = NULL, req->close_ud = NULL;
    (void)err;
    w.again(w.d, req); /* the probe is known now */
}

bool sd_api_on_idle_pause(sd_daemon *d, sd_request *req, sd_http_handler again) {
    const error_rec *known = sd_checkpoint_known();
    if (known && known->code >= 0)
        return false;
    if (known) {
        sd_reply_error(req, 501, "unsupported",
                       "on_idle: \"pause\" is not available on this node (use \"end\"): %s",
                       known->message);
        return true;
    }
    idle_wait *w = calloc(1, sizeof(*w));
    if (!w) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return true;
    }
    *w = (idle_wait){.d = d, .again = again};
    req->on_close = idle_gone;
    req->close_ud = w;
    sd_checkpoint_probe(d, idle_probed, req);
    return true;
}
