/* A paused sandbox resumed on another node of the fleet (docs/API.md "Pause and resume"):
 * POST /v1/sandboxes/{id}/resume {"node":"b"} here asks node b (POST /v1/checkpoints
 * {"id","from"}) to pull the checkpoint (GET /v1/sandboxes/{id}/checkpoint here, served only
 * while the sandbox moves) and resume it; the answer is b's. The calls between nodes are
 * fleet/move.c's; what the sandbox becomes is core/checkpoint.c's. */
#include "sandboxd/api/api.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "sandboxd/core/checkpoint.h"
#include "sandboxd/core/ckpt_archive.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"
#include "sandboxd/fleet/fleet.h"
#include "sandboxd/fleet/move.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A request waiting on another node about sandbox id (found again by id when it ends). */
typedef struct move_wait {
    struct move_wait *next;
    sd_request *req; /* NULL once the client went: the outcome is settled all the same */
    char id[64], node[64];
    char key[32]; /* the move's one-time key: only the node it was given to pulls the checkpoint */
} move_wait;

static move_wait *in_flight;

static unsigned moves_running(void) {
    unsigned n = 0;
    for (move_wait *w = in_flight; w; w = w->next)
        n++;
    return n;
}

bool sd_api_move_in_flight(const sd_sandbox *sb) {
    for (move_wait *w = in_flight; w; w = w->next)
        if (strcmp(w->id, sb->id) == 0)
            return true;
    return false;
}

static void wait_gone(sd_request *req, void *ud) {
    (void)req;
    ((move_wait *)ud)->req = NULL;
}

static move_wait *wait_new(sd_daemon *d, sd_request *req, const char *id, const char *node) {
    move_wait *w = calloc(1, sizeof(*w));
    if (!w) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    *w = (move_wait){.next = in_flight, .req = req};
    snprintf(w->id, sizeof(w->id), "%s", id);
    snprintf(w->node, sizeof(w->node), "%s", node);
    sd_random_id("", w->key, sizeof(w->key));
    in_flight = w;
    req->on_close = wait_gone;
    req->close_ud = w;
    return w;
}

/* The waiter's request (taken: the waiter no longer hears of it), or NULL. */
static sd_request *wait_end(move_wait *w) {
    for (move_wait **pp = &in_flight; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    sd_request *req = w->req;
    if (req)
        req->on_close = NULL, req->close_ud = NULL;
    return req;
}

/* The other node's refusal: what the client can act on as that node's status and code (409 its
 * state, 501 it cannot pause, 503 full, 507 its disk), anything else 502 naming it. */
static void reply_remote(sd_request *req, const char *node, const sd_move_result *res) {
    long s = res->http_status;
    if (s == 409 || s == 501 || s == 503 || s == 507) {
        if (s == 503)
            req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, (unsigned)s, res->api_code[0] ? res->api_code : "remote",
                       "resume on node %s: %s", node, res->message);
    } else {
        sd_reply_error(req, 502, s ? "node_refused" : "node_unreachable",
                       "resume on node %s: %s%s%s", node, res->message, s ? " " : "",
                       s ? res->api_code : "");
    }
}

/* ---- the node the sandbox leaves ---- */

static void pushed(sd_daemon *d, void *ud, sd_move_result *res) {
    move_wait *w = ud;
    sd_request *req = wait_end(w);
    sd_sandbox *sb = sd_registry_find(d, w->id);
    if (sb && res->known)
        sd_checkpoint_move_end(sb, res->holds);
    if (!req) {
    } else if (res->holds && res->body) { /* its answer, or what it said when asked after */
        size_t len = strlen(res->body);
        sd_reply_data(req, 200, "application/json", TAKE_PTR(res->body), len);
    } else if (!res->known) {
        sd_reply_error(req, 502, "node_unreachable",
                       "resume on node %s: %s; whether it took sandbox %s is not known: it stays "
                       "paused here until a resume asks that node again",
                       w->node, res->message, w->id);
    } else if (res->holds) {
        sd_reply_error(req, 502, "node_unreachable", "sandbox %s moved to node %s (ask it there)",
                       w->id, w->node);
    } else {
        reply_remote(req, w->node, res);
    }
    free(res->body);
    free(w);
}

static void move_to(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *node,
                    const char *url) {
    error_rec err = {0};
    if (sd_checkpoint_move_begin(sb, node, &err) < 0) {
        sd_reply_error_rec(req, &err);
        return;
    }
    move_wait *w = wait_new(d, req, sb->id, node);
    sd_move_job *job;
    if (w && sd_move_push(d, url, sb->id, node, w->key, pushed, w, &job) == 0)
        return;
    if (w) {
        wait_end(w);
        free(w);
    }
    sd_checkpoint_move_end(sb, false);
    sd_reply_error(req, 500, "internal", "cannot start the move");
}

/* An earlier move whose outcome is not known (the daemon restarted, or the node did not
 * answer): that node is asked first; then the request is sent there, or runs again here. */
typedef struct settle {
    sd_daemon *d;
    sd_request *req;
    sd_api_sandbox_fn again;
    bool resume; /* a resume (else a DELETE) */
    char id[64];
} settle;

static void settle_gone(sd_request *req, void *ud) {
    (void)req;
    ((settle *)ud)->req = NULL;
}

static void settled(sd_daemon *d, void *ud, sd_move_result *res) {
    settle *s = ud;
    sd_request *req = s->req;
    sd_sandbox *sb = sd_registry_find(d, s->id);
    if (sb && res->known)
        sd_checkpoint_move_end(sb, res->holds);
    if (req) {
        req->on_close = NULL, req->close_ud = NULL;
        json_t *there = res->body ? json_loads(res->body, 0, NULL) : NULL;
        const char *state = json_string_value(json_object_get(there, "state"));
        bool moved = sb && sb->state == SD_ENDED && sb->end_reason == END_MOVED;
        if (!sb)
            sd_reply_error(req, 404, "not_found", "sandbox %s not found", s->id);
        else if (moved && s->resume && state && strcmp(state, "paused") != 0)
            sd_reply_json(req, 200, json_incref(there)); /* it resumed (or resumes) there */
        else if (moved)
            sd_api_fleet_forward(d, req, s->id, sb->move_to); /* the node that holds it */
        else if (res->known)
            s->again(d, req, sb); /* here */
        else
            sd_reply_error(req, 502, "node_unreachable",
                           "sandbox %s was moving to node %s, which cannot be asked where it is "
                           "(%s): it stays paused here",
                           s->id, sb ? sb->move_to : "?", res->message);
        json_decref(there);
    }
    free(res->body);
    free(s);
}

bool sd_api_move_settle(sd_daemon *d, sd_request *req, sd_sandbox *sb, sd_api_sandbox_fn again) {
    if (sb->state != SD_PAUSED || !sb->move_to[0] || sd_api_move_in_flight(sb))
        return false;
    const char *url = sd_fleet_node_url(d, sb->move_to);
    if (!url) { /* it may hold the sandbox all the same: both copies must never run */
        req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, 503, "node_unavailable",
                       "sandbox %s was moving to node %s, which is not in the fleet now: it "
                       "stays paused here until that node can say whether it took it",
                       sb->id, sb->move_to);
        return true;
    }
    settle *s = calloc(1, sizeof(*s));
    sd_move_job *job;
    if (!s) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return true;
    }
    *s = (settle){.d = d, .req = req, .again = again, .resume = strcmp(req->method, "POST") == 0};
    snprintf(s->id, sizeof(s->id), "%s", sb->id);
    if (sd_move_ask(d, url, sb->id, sb->move_to, settled, s, &job) < 0) {
        free(s);
        sd_reply_error(req, 500, "internal", "cannot ask node %s", sb->move_to);
        return true;
    }
    req->on_close = settle_gone;
    req->close_ud = s;
    return true;
}

/* POST .../resume with {"node"} (api/pause.c read the body): here, or there. With no node, a
 * full node picks another (the fleet's placement) for a sandbox that can move. Returns false
 * when it is a resume here. */
bool sd_api_move_resume(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *node) {
    const char *self = d->cfg.node_name ?: "";
    if (!node && sd_fleet_on(d) && sb->state == SD_PAUSED && !sd_checkpoint_node_bound(sb) &&
        sd_registry_count_active(d) >= d->cfg.max_sandboxes) {
        const char *url = sd_fleet_pick(d, NULL, false);
        node = url ? sd_fleet_node_of_url(d, url) : NULL;
    }
    if (!node || strcmp(node, self) == 0)
        return false;
    if (!sd_fleet_on(d)) {
        sd_reply_error(req, 400, "invalid_argument",
                       "node: this node is not in a fleet (--fleet-etcd): it resumes here only");
        return true;
    }
    const char *url = sd_fleet_node_url(d, node);
    if (!url) {
        sd_reply_error(req, 404, "not_found", "node: no live node %s in the fleet", node);
        return true;
    }
    if (moves_running() >= SD_MOVES_MAX) {
        req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, 503, "busy", "this node runs %d moves already: try again",
                       SD_MOVES_MAX);
        return true;
    }
    move_to(d, req, sb, node, url);
    return true;
}

/* GET /v1/sandboxes/{id}/checkpoint: the archive (core/ckpt_archive.h) of a sandbox that
 * moves, packed into an unnamed file (O_TMPFILE) of the checkpoints directory, then sent. */
typedef struct pack_job {
    uv_work_t w;
    sd_request *req;
    json_t *record;
    char dir[PATH_MAX], tar[PATH_MAX]; /* tar: the directory of its unnamed file */
    int fd;
    error_rec err;
} pack_job;

static void pack_gone(sd_request *req, void *ud) {
    (void)req;
    ((pack_job *)ud)->req = NULL;
}

static void pack_work(uv_work_t *w) {
    pack_job *j = w->data;
    j->fd = open(j->tar, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600); /* a file of this request's */
    if (j->fd < 0)
        error_set_errno(&j->err, negative_errno(), "open a file in %s", j->tar);
    if (j->fd >= 0 && sd_ckpt_pack(j->dir, j->record, j->fd, &j->err) < 0)
        j->fd = safe_close(j->fd);
}

static void pack_after(uv_work_t *w, int status) {
    pack_job *j = w->data;
    struct stat st;
    (void)status;
    json_decref(j->record);
    if (j->req) {
        j->req->on_close = NULL, j->req->close_ud = NULL;
        if (j->fd >= 0 && fstat(j->fd, &st) == 0)
            sd_reply_fd(j->req, "application/x-tar", TAKE_FD(j->fd), (uint64_t)st.st_size);
        else
            sd_reply_error(j->req, 500, "internal", "checkpoint: %s", j->err.message);
    }
    safe_close(j->fd);
    free(j);
}

/* The in-flight move of sb whose key is key, or NULL. */
static move_wait *move_of(const sd_sandbox *sb, const char *key) {
    for (move_wait *w = in_flight; w && key; w = w->next)
        if (strcmp(w->id, sb->id) == 0 && strcmp(w->key, key) == 0)
            return w;
    return NULL;
}

void sd_api_checkpoint_get(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    if (sb->state != SD_PAUSED || !sb->move_to[0] || !move_of(sb, sd_req_query(req, "key"))) {
        sd_reply_error(req, 409, "conflict",
                       "sandbox %s is not moving with that key: its checkpoint is sent only to "
                       "the node it moves to",
                       sb->id);
        return;
    }
    pack_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->record = sd_state_record(sb))) {
        free(j);
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    j->req = req, j->fd = -1, j->w.data = j;
    sd_checkpoint_dir(sb, j->dir, sizeof(j->dir));
    snprintf(j->tar, sizeof(j->tar), "%s/checkpoints", d->cfg.state_dir);
    if (uv_queue_work(d->loop, &j->w, pack_work, pack_after) < 0) {
        json_decref(j->record);
        free(j);
        sd_reply_error(req, 500, "internal", "cannot start the packing");
        return;
    }
    req->on_close = pack_gone;
    req->close_ud = j;
}
