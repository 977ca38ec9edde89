/* POST /v1/checkpoints {"id","from","key"} (docs/API.md "Pause and resume"): this node takes
 * paused sandbox id from node `from` of the fleet: it pulls the checkpoint from that node's API
 * (its URL from the fleet's own list, never from the request; with the move's one-time key that
 * node gave it), makes it a paused sandbox here
 * (core/checkpoint.c) and resumes it. The answer is the running sandbox; a failure leaves
 * nothing here and the sandbox paused on `from`. The other half is api/move.c. */
#include "sandboxd/api/api.h"

#include "common/fdutil.h"
#include "common/jsonkeys.h"
#include "sandboxd/core/checkpoint.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/fleet/fleet.h"
#include "sandboxd/fleet/move.h"

#include <stdio.h>
#include <string.h>

typedef struct take {
    struct take *next;
    sd_daemon *d;
    sd_request *req;
    sd_move_job *job;
    bool resuming;
    char id[64], from[64], key[32], dir[PATH_MAX];
} take;

/* Takes in flight (pulling, unpacking, resuming): the id is this node's already, not the one
 * its suffix names (api/router.c answers 503 for it meanwhile, and a second take is 409). */
static take *takes;

bool sd_api_take_in_flight(const char *id) {
    for (take *t = takes; t; t = t->next)
        if (strcmp(t->id, id) == 0)
            return true;
    return false;
}

static void take_free(take *t) {
    for (take **pp = &takes; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    free(t);
}

static void take_gone(sd_request *req, void *ud) {
    take *t = ud;
    (void)req;
    if (t->resuming) { /* the resume goes on: a failure leaves it paused here, as `from` hears */
        sd_sandbox *sb = sd_registry_find(t->d, t->id);
        if (sb)
            sd_checkpoint_cancel(sb, t);
    } else {
        sd_checkpoint_probe_cancel(t);
        sd_move_cancel(t->job); /* the staged checkpoint is removed when the pull ends */
    }
    take_free(t);
}

static sd_request *take_end(take *t) {
    sd_request *req = t->req;
    req->on_close = NULL, req->close_ud = NULL;
    take_free(t);
    return req;
}

static void resumed(void *ud, sd_sandbox *sb, const error_rec *err) {
    take *t = ud;
    char from[64];
    snprintf(from, sizeof(from), "%s", t->from);
    sd_request *req = take_end(t);
    if (!err) {
        sd_reply_json(req, 200, sd_api_sandbox_json(sb));
        return;
    }
    sd_checkpoint_give_back(sb, from);
    sd_reply_error_rec(req, err);
}

/* The pull failed: the other node's refusal (409: it does not move that sandbox), no answer
 * (502), a refused archive (400) or this node's disk. */
static void pull_failed(take *t, const sd_move_result *res) {
    char id[64], from[64];
    snprintf(id, sizeof(id), "%s", t->id);
    snprintf(from, sizeof(from), "%s", t->from);
    sd_request *req = take_end(t);
    error_rec err = {0};
    if (res->http_status)
        sd_reply_error(req, res->http_status >= 500 ? 502 : 409, "checkpoint_unavailable",
                       "node %s did not send the checkpoint of %s: %s", from, id, res->message);
    else if (res->code == -EHOSTUNREACH)
        sd_reply_error(req, 502, "node_unreachable",
                       "node %s did not send the checkpoint of %s: %s", from, id, res->message);
    else if (res->code == -ENOSPC || res->code == -EDQUOT)
        sd_reply_error(req, 507, "insufficient_storage",
                       "no room here for the checkpoint of %s: %s", id, res->message);
    else {
        error_set(&err, res->code, "checkpoint of %s: %s", id, res->message);
        sd_reply_error_rec(req, &err);
    }
}

static void pulled(sd_daemon *d, void *ud, sd_move_result *res) {
    take *t = ud;
    sd_sandbox *sb = NULL;
    error_rec err = {0};
    if (res->code < 0) {
        pull_failed(t, res);
        return;
    }
    int r = sd_checkpoint_import(d, t->id, t->dir, res->record, &sb, &err);
    json_decref(res->record);
    if (r < 0) {
        rm_rf(t->dir);
        sd_reply_error_rec(take_end(t), &err);
        return;
    }
    t->resuming = true; /* (resumed() may run, and free t, before sd_checkpoint_resume returns) */
    if (sd_checkpoint_resume(sb, resumed, t, &err) < 0) {
        sd_checkpoint_give_back(sb, t->from);
        sd_reply_error_rec(take_end(t), &err);
    }
}

static void probed(void *ud, const error_rec *perr) {
    take *t = ud;
    sd_daemon *d = t->d;
    char parent[PATH_MAX], real[PATH_MAX];
    error_rec err = {0};
    const char *url = sd_fleet_node_url(d, t->from);
    snprintf(parent, sizeof(parent), "%s/checkpoints", d->cfg.state_dir);
    if (perr->code < 0)
        err = *perr;
    else if (!url)
        error_set(&err, -ENOENT, "from: no live node %s in the fleet", t->from);
    else if (!sd_pool_make_room(d, 1, "a sandbox moving here"))
        error_set(&err, -EAGAIN, "node %s is full (%u sandboxes)", d->cfg.node_name,
                  d->cfg.max_sandboxes);
    else if (mkdir_p(parent, 0700) < 0 || !realpath(parent, real))
        error_set_errno(&err, negative_errno(), "mkdir %s", parent);
    if (!err.code) { /* (no symlink in the path: libarchive's secure-symlink check walks it all) */
        snprintf(t->dir, sizeof(t->dir), "%s/.in-%s", real, t->id);
        rm_rf(t->dir);
        if (sd_move_pull(d, url, t->id, t->key, t->dir, pulled, t, &t->job) == 0)
            return;
        error_set(&err, -ENOMEM, "cannot start the pull");
    }
    sd_reply_error_rec(take_end(t), &err);
}

/* The body: {"id": a sandbox id, "from": another node, "key": the move's key from that node}. */
static int parse(sd_daemon *d, json_t *body, take *t, error_rec *err) {
    static const char *const keys[] = {"id", "from", "key", NULL};
    const char *id = json_string_value(json_object_get(body, "id"));
    const char *from = json_string_value(json_object_get(body, "from"));
    const char *key = json_string_value(json_object_get(body, "key"));
    if (!json_is_object(body))
        return error_set(err, -EINVAL, "the body must be a JSON object");
    if (jsonkeys_check(body, keys, NULL, err) < 0)
        return err->code;
    if (!id || strncmp(id, "sb-", 3) != 0 || strlen(id) >= sizeof(t->id) ||
        strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-._") != strlen(id) || strstr(id, ".."))
        return error_set(err, -EINVAL, "id: a sandbox id (\"sb-...\") is required");
    if (!from || !*from || strlen(from) >= sizeof(t->from))
        return error_set(err, -EINVAL,
                         "from: the name of the node that holds the sandbox is "
                         "required");
    if (!key || !*key || strlen(key) >= sizeof(t->key) ||
        strspn(key, "0123456789abcdef") != strlen(key))
        return error_set(err, -EINVAL,
                         "key: the move's key (hex) from the node that holds the "
                         "sandbox is required");
    if (!sd_fleet_on(d))
        return error_set(err, -EINVAL, "this node is not in a fleet (--fleet-etcd)");
    if (d->cfg.node_name && strcmp(from, d->cfg.node_name) == 0)
        return error_set(err, -EINVAL, "from: %s is this node", from);
    sd_sandbox *sb = sd_registry_find(d, id);
    if (sb && sb->state != SD_ENDED)
        return error_set(err, -EBUSY, "sandbox %s is %s on this node already", id,
                         sd_state_name(sb->state));
    if (sd_api_take_in_flight(id))
        return error_set(err, -EBUSY, "sandbox %s is being taken by this node already", id);
    unsigned n = 0;
    for (take *o = takes; o; o = o->next)
        n++;
    if (n >= SD_MOVES_MAX)
        return error_set(err, -EAGAIN, "this node takes %d sandboxes already: try again",
                         SD_MOVES_MAX);
    snprintf(t->id, sizeof(t->id), "%s", id);
    snprintf(t->from, sizeof(t->from), "%s", from);
    snprintf(t->key, sizeof(t->key), "%s", key);
    return 0;
}

void sd_api_checkpoints_take(sd_daemon *d, sd_request *req) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    take *t = calloc(1, sizeof(*t));
    error_rec err = {0};
    if (!t)
        error_set(&err, -ENOMEM, "out of memory");
    else
        parse(d, body, t, &err);
    json_decref(body);
    if (err.code) {
        free(t);
        sd_reply_error_rec(req, &err);
        return;
    }
    t->d = d, t->req = req;
    t->next = takes, takes = t;
    req->on_close = take_gone;
    req->close_ud = t;
    sd_checkpoint_probe(d, probed, t);
}
