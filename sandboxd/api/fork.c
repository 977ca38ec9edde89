/* POST /v1/sandboxes/{id}/fork {"count":N, ...create fields that override the source's}:
 * N new sandboxes whose /workspace and /tmp start as copies of the source's at fork time.
 * The source is frozen (cgroup freezer, best effort) while `cp -a` copies its /workspace and
 * /tmp (through /proc/<init>/root, never following the sandbox's symlinks) into a snapshot
 * layer: a tmpfs under <run-dir>/layers/<id>. Each fork's shim copies that layer into its own
 * writable tmpfs, shifting owners into its own uid range (shim/seed.c); the layer is removed
 * once every fork has started. All or nothing: when one fork fails, the others are ended and
 * the request gets the error; otherwise 201 with the array of sandbox objects. */
#include "sandboxd/api/http.h"
#include "sandboxd/net/daemon.h"

#include "common/fdutil.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORK_MAX 256

typedef struct sd_fork {
    sd_daemon *d;
    sd_request *req;
    char src_id[24];
    uint32_t src_uid_base;
    char layer[PATH_MAX];
    bool layer_mounted, frozen;
    policy_create spec; /* the forks' create (the source's, with the body's overrides) */
    unsigned count, pending, failed;
    sd_sandbox **sbs;
    char message[300];
    uv_process_t cp;
} sd_fork;

static void freeze(sd_daemon *d, const char *id, bool frozen) {
    char path[PATH_MAX + 64];
    const char *file = d->cgroup_version == 2 ? "cgroup.freeze" : "freezer.state";
    const char *val = d->cgroup_version == 2 ? (frozen ? "1" : "0") : frozen ? "FROZEN" : "THAWED";
    if (d->cgroup_version == 2)
        snprintf(path, sizeof(path), "%s/%s/%s", d->cgroup_parent, id, file);
    else
        snprintf(path, sizeof(path), "/sys/fs/cgroup/freezer/%s/%s/%s", d->cgroup_parent, id, file);
    if (file_write_str(path, val) < 0)
        log_debug("fork: cannot %s sandbox=%s (copying without a freeze)",
                  frozen ? "freeze" : "thaw", id);
}

static void layer_remove(sd_fork *f) {
    if (!f->layer[0])
        return;
    if (f->layer_mounted)
        umount2(f->layer, MNT_DETACH);
    rm_rf(f->layer);
    f->layer[0] = 0;
}

static void fork_free(sd_fork *f) {
    if (f->req)
        f->req->on_close = NULL;
    layer_remove(f);
    for (unsigned i = 0; i < f->count; i++)
        if (f->sbs[i])
            f->sbs[i]->fork = NULL;
    policy_create_done(&f->spec);
    free(f->sbs);
    free(f);
}

static void cp_failed_closed(uv_handle_t *h) {
    fork_free(h->data);
}

static void req_gone(sd_request *req, void *ud) {
    ((sd_fork *)ud)->req = NULL; /* the forks go on; nobody waits for the answer */
}

/* Every fork has answered: reply, and on any failure end the ones that started. */
static void fork_done(sd_fork *f) {
    if (f->failed) {
        for (unsigned i = 0; i < f->count; i++)
            if (f->sbs[i]) {
                f->sbs[i]->fork = NULL;
                sd_sandbox_end(f->sbs[i], "terminated", "another fork of the group failed");
            }
        if (f->req)
            sd_reply_error(f->req, 500, "internal", "fork: %s", f->message);
    } else if (f->req) {
        json_t *arr = json_array();
        for (unsigned i = 0; i < f->count; i++)
            json_array_append_new(arr, sd_sandbox_to_json(f->sbs[i]));
        sd_reply_json(f->req, 201, arr);
    }
    log_info("fork done source=%s count=%u failed=%u", f->src_id, f->count, f->failed);
    fork_free(f);
}

void sd_fork_started(sd_sandbox *sb, int status, const char *msg) {
    sd_fork *f = sb->fork;
    sb->fork = NULL;
    if (status != 201) {
        f->failed++;
        snprintf(f->message, sizeof(f->message), "%s", msg ? msg : "a fork failed to start");
        for (unsigned i = 0; i < f->count; i++)
            if (f->sbs[i] == sb)
                f->sbs[i] = NULL; /* it ends by itself */
    }
    if (--f->pending == 0)
        fork_done(f);
}

static int fork_one(sd_fork *f, unsigned i, error_rec *err) {
    sd_daemon *d = f->d;
    static const policy_host any_host = {.cpus = 1e9, .memory_bytes = UINT64_MAX};
    policy_create c = {0};
    policy_egress *eg = NULL;
    json_t *j = policy_create_to_json(&f->spec);
    int r = j ? policy_limits_parse_create(j, NULL, &any_host, &c, err) : -ENOMEM;
    json_decref(j);
    if (r >= 0)
        r = sd_net_daemon_check(d, &c, &eg, err);
    sd_sandbox *sb = NULL;
    if (r >= 0)
        r = sd_registry_add(d, &c, &sb, err);
    policy_create_done(&c);
    if (r < 0) {
        policy_egress_free(eg);
        return r;
    }
    sb->egress = eg;
    sb->seed_dir = strdup(f->layer);
    sb->seed_uid_base = f->src_uid_base;
    snprintf(sb->forked_from, sizeof(sb->forked_from), "%s", f->src_id);
    if ((r = sd_state_save(sb)) < 0) { /* never run a sandbox a restart would not know */
        sd_sandbox_end(sb, "infrastructure_failure", "its state could not be saved");
        return error_set_errno(err, r, "cannot save a fork's state");
    }
    sb->fork = f;
    f->sbs[i] = sb;
    f->pending++;
    log_info("sandbox created sandbox=%s forked_from=%s", sb->id, f->src_id);
    if (d->n_starting < d->cfg.max_starting)
        sd_sandbox_start(sb);
    else
        sb->queued = true;
    return 0;
}

static void cp_closed(uv_handle_t *h) {
    sd_fork *f = h->data;
    if (--f->pending == 0) /* the copy held the group */
        fork_done(f);
}

static void cp_exit(uv_process_t *p, int64_t status, int sig) {
    sd_fork *f = p->data;
    if (f->frozen)
        freeze(f->d, f->src_id, false);
    f->frozen = false;
    error_rec err = {0};
    if (status != 0 || sig != 0) {
        snprintf(f->message, sizeof(f->message),
                 "copying the source's files failed (cp exit %d signal %d)", (int)status, sig);
        f->failed = 1;
    }
    for (unsigned i = 0; i < f->count && !f->failed; i++)
        if (fork_one(f, i, &err) < 0) {
            f->failed = 1;
            snprintf(f->message, sizeof(f->message), "%s", err.message);
        }
    /* the forks answer through sd_fork_started; the group ends when they all have */
    uv_close((uv_handle_t *)p, cp_closed);
}

static int make_layer(sd_fork *f, uint64_t disk, error_rec *err) {
    char id[24];
    sd_random_id("ly-", id, sizeof(id));
    snprintf(f->layer, sizeof(f->layer), "%s/layers/%s", f->d->cfg.run_dir, id);
    int r = mkdir_p(f->layer, 0700);
    if (r < 0) {
        f->layer[0] = 0;
        return error_set_errno(err, r, "mkdir the snapshot layer");
    }
    char opts[96];
    snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)disk);
    f->layer_mounted = mount("sbx-layer", f->layer, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0;
    if (!f->layer_mounted)
        log_warn("fork: no tmpfs for the snapshot layer (%s); using the run dir", strerror(errno));
    return 0;
}

static int start_copy(sd_fork *f, int init_pid, error_rec *err) {
    char ws[64], tmp[64];
    snprintf(ws, sizeof(ws), "/proc/%d/root/workspace", init_pid);
    snprintf(tmp, sizeof(tmp), "/proc/%d/root/tmp", init_pid);
    char *args[] = {"cp", "-a", "--sparse=always", "--", ws, tmp, f->layer, NULL};
    static char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
                                     {.flags = UV_INHERIT_FD, .data.fd = 2},
                                     {.flags = UV_INHERIT_FD, .data.fd = 2}};
    uv_process_options_t o = {.exit_cb = cp_exit,
                              .file = "cp",
                              .args = args,
                              .env = env,
                              .stdio_count = 3,
                              .stdio = stdio};
    f->cp.data = f;
    freeze(f->d, f->src_id, true);
    f->frozen = true;
    int r = uv_spawn(f->d->loop, &f->cp, &o);
    if (r < 0) {
        freeze(f->d, f->src_id, false);
        f->frozen = false;
        uv_close((uv_handle_t *)&f->cp, cp_failed_closed); /* initialized even on failure */
        return error_set(err, r, "cannot run cp: %s", uv_strerror(r));
    }
    f->pending = 1; /* the copy */
    return 0;
}

/* The source's create with the body's fields (except count) laid over it. */
static int fork_spec(sd_daemon *d, sd_sandbox *src, json_t *body, policy_create *ret,
                     error_rec *err) {
    json_t *merged = policy_create_to_json(&src->spec);
    if (!merged)
        return error_set(err, -ENOMEM, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        if (strcmp(k, "count") != 0)
            json_object_set(merged, k, v);
    }
    int r = policy_limits_parse_create(merged, NULL, &d->host, ret, err);
    json_decref(merged);
    return r;
}

static bool lease_ok(sd_daemon *d, const char *id) {
    for (sd_lease *l = d->leases; id && l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return true;
    return !id;
}

static int net_ok(sd_daemon *d, const policy_create *c, error_rec *err) {
    policy_egress *eg = NULL;
    int r = sd_net_daemon_check(d, c, &eg, err);
    policy_egress_free(eg);
    return r;
}

static bool room_for(sd_daemon *d, unsigned n) {
    while (sd_registry_count_active(d) + n > d->cfg.max_sandboxes)
        if (!sd_pool_evict(d))
            return false;
    return true;
}

void sd_api_fork(sd_daemon *d, sd_request *req, sd_sandbox *src) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    json_t *cnt = json_object_get(body, "count");
    policy_create c = {0};
    error_rec err = {0};
    if (!json_is_object(body)) {
        sd_reply_error(req, 400, "invalid_argument", "the body must be a JSON object");
    } else if (!json_is_integer(cnt) || json_integer_value(cnt) < 1 ||
               json_integer_value(cnt) > FORK_MAX) {
        sd_reply_error(req, 400, "invalid_argument", "count: must be an integer in [1, %d]",
                       FORK_MAX);
    } else if (src->state != SD_RUNNING) {
        sd_reply_error(req, 409, "conflict", "sandbox %s is %s: only a running sandbox forks",
                       src->id, src->state == SD_ENDED ? "ended" : "still starting");
    } else if (fork_spec(d, src, body, &c, &err) < 0 || net_ok(d, &c, &err) < 0) {
        sd_reply_error_rec(req, &err);
    } else if (!lease_ok(d, c.lease)) {
        sd_reply_error(req, 404, "not_found", "lease: %s not found", c.lease);
    } else if (!room_for(d, (unsigned)json_integer_value(cnt))) {
        req->retry_after = 5;
        sd_reply_error(req, 503, "node_full", "no room for %d more sandboxes (at most %u)",
                       (int)json_integer_value(cnt), d->cfg.max_sandboxes);
    } else {
        sd_fork *f = calloc(1, sizeof(*f));
        unsigned n = (unsigned)json_integer_value(cnt);
        if (f)
            f->sbs = calloc(n, sizeof(*f->sbs));
        if (!f || !f->sbs) {
            free(f);
            sd_reply_error(req, 500, "internal", "out of memory");
        } else {
            *f = (sd_fork){.d = d, .req = req, .count = n, .spec = c, .sbs = f->sbs};
            c = (policy_create){0};
            snprintf(f->src_id, sizeof(f->src_id), "%s", src->id);
            f->src_uid_base = (uint32_t)sd_uid_base(src->uid_slot);
            req->on_close = req_gone;
            req->close_ud = f;
            if (make_layer(f, src->spec.disk, &err) < 0) {
                fork_free(f);
                sd_reply_error(req, 500, "internal", "fork: %s", err.message);
            } else if (start_copy(f, src->init_pid, &err) < 0) {
                f->req = NULL; /* freed when the handle closes */
                req->on_close = NULL;
                sd_reply_error(req, 500, "internal", "fork: %s", err.message);
            }
        }
    }
    policy_create_done(&c);
    json_decref(body);
}
