/* The fleet layer's loop side (fleet/fleet.h): the node record built from the core's tables
 * every 250 ms (handed to the thread when it changed), the node list and drains the thread
 * read, where an id lives, placement, and the jobs' callbacks. */
#include "sandboxd/fleet/internal.h"

#include "common/macro.h"
#include "common/poolshape.h"
#include "common/timeutil.h"
#include "sandboxd/core/create.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define RECORD_MS 250

bool sd_fleet_on(const sd_daemon *d) {
    return d->fleet != NULL;
}

/* Sandboxes holding a slot: every one not ended or paused, warm pool entries aside (a create
 * takes them), and the forks admitted but still copying (core/fork.c holds their room). */
static unsigned used_slots(sd_daemon *d) {
    unsigned n = d->fork_slots;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        n += sb->state != SD_ENDED && sb->state != SD_PAUSED && !sb->pool;
    return n;
}

bool sd_fleet_full(sd_daemon *d) {
    return used_slots(d) >= d->cfg.max_sandboxes;
}

bool sd_fleet_draining(sd_daemon *d) {
    return d->fleet && d->fleet->draining;
}

/* A spec's pool shape as node records publish it (common/poolshape.h). */
static json_t *shape_of(const policy_create *c) {
    return json_pack("{s:s,s:f,s:I,s:I,s:i,s:s,s:s,s:s}", "image", c->image, "cpu", c->cpu,
                     "memory", (json_int_t)c->memory, "disk", (json_int_t)c->disk, "pids",
                     (int)c->pids, "network", c->net_mode == POLICY_NET_OPEN ? "open" : "none",
                     "profile", c->grading ? "grading" : "default", "isolation",
                     c->gvisor ? "gvisor" : "native");
}

static json_t *pools_json(sd_daemon *d) {
    json_t *a = json_array();
    for (unsigned t = 0; t < d->n_pools; t++) {
        unsigned ready = 0, starting = 0;
        char name[16];
        sd_pool_entries(d, t, &ready, &starting);
        snprintf(name, sizeof(name), "%u", t);
        json_t *size = json_object_get(json_array_get(d->cfg.pools, t), "size");
        json_t *p = shape_of(sd_pool_template(d, t));
        json_t *n = json_pack("{s:s,s:i,s:I}", "name", name, "ready", (int)ready, "size",
                              json_integer_value(size));
        if (p && n && json_object_update(p, n) == 0) /* (update does not steal n) */
            json_array_append(a, p);
        json_decref(n);
        json_decref(p);
    }
    return a;
}

static json_t *node_record(sd_daemon *d) {
    sd_fleet *f = d->fleet;
    unsigned active = 0, starting = d->fork_slots, used = used_slots(d), max = d->cfg.max_sandboxes;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        active += sb->state == SD_RUNNING && !sb->pool;
        starting += sb->state == SD_STARTING && !sb->pool;
    }
    unsigned free_slots = f->draining || used >= max ? 0 : max - used;
    json_t *labels = d->cfg.node_labels ? json_deep_copy(d->cfg.node_labels) : json_object();
    return json_pack("{s:s,s:s,s:s,s:f,s:b,s:i,s:i,s:i,s:i,s:o,s:O,s:f,s:I,s:o,s:{s:i,s:i}}",
                     "name", d->cfg.node_name, "url", d->cfg.advertise_url, "version", SBX_VERSION,
                     "started_at", f->started_at, "draining", f->draining, "max", (int)max,
                     "active", (int)active, "starting", (int)starting, "free", (int)free_slots,
                     "pools", pools_json(d), "defaults", f->defaults, "cpus", d->host.cpus,
                     "memory_bytes", (json_int_t)d->host.memory_bytes, "labels", labels, "gpus",
                     "total", (int)sd_gpu_total(d), "free", (int)sd_gpu_free(d)); /* GPUs */
}

static void lease_key(sd_daemon *d, const char *id, char *buf, size_t len) {
    snprintf(buf, len, "%s/leases/%s", d->cfg.fleet_prefix, id);
}

static fleet_job *job_new(sd_fleet *f, job_op op, const char *key, const char *value,
                          sd_fleet_cb cb, void *ud) {
    fleet_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->key = strdup(key)) || (value && !(j->value = strdup(value)))) {
        if (j)
            free(j->key);
        free(j);
        return NULL;
    }
    j->op = op, j->cb = cb, j->ud = ud;
    j->all_next = f->all;
    f->all = j;
    return j;
}

static void job_free(fleet_job *j) {
    free(j->key);
    free(j->value);
    free(j);
}

/* Leases made here that are gone from the core (expired, deleted): revoke their etcd lease. */
static void revoke_gone(sd_fleet *f) {
    const char *id;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(f->own, tmp, id, v) {
        if (sd_lease_exists(f->d, id))
            continue;
        fleet_job *j = job_new(f, JOB_REVOKE, id, NULL, NULL, NULL);
        if (j) {
            j->lease = strtoll(json_string_value(v), NULL, 10);
            fleet_submit(f, j);
        }
        json_object_del(f->own, id);
    }
}

static void timer_cb(uv_timer_t *t) {
    sd_fleet *f = t->data;
    json_t *rec = node_record(f->d);
    char *s = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (s && (!f->last_record || strcmp(s, f->last_record) != 0)) {
        free(f->last_record);
        f->last_record = TAKE_PTR(s);
        fleet_set_record(f, TAKE_PTR(rec));
    }
    free(s);
    json_decref(rec);
    revoke_gone(f);
}

static json_int_t ival(json_t *o, const char *k) {
    return json_integer_value(json_object_get(o, k));
}

/* Whether the key of adopted lease l is gone, in a view complete up to rev of epoch f->view_epoch;
 * a (its lookup: fleet.h) is updated. Within one store, gone from a view complete up to (at
 * least) the revision its lookup read it at, or from any view once one had it (an older view
 * may not have it yet). In a view of a store the lookup may not be of (a wiped etcd: its
 * revisions begin again, its keys are gone until their owners put them again when they
 * register again), gone only after the owner had its chance: the lease's TTL and two of the
 * fleet's from the first such view (as long as its etcd lease would have lived unrenewed). */
static bool remote_gone(sd_fleet *f, json_t *a, bool present, int64_t rev, uint64_t now) {
    if (present) {
        json_object_set_new(a, "rev", json_integer(0));
        json_object_set_new(a, "epoch", json_integer(f->view_epoch));
        return false;
    }
    if (!a || ival(a, "epoch") == f->view_epoch) /* (no lookup: restored after a restart) */
        return rev >= ival(a, "rev");
    if (ival(a, "grace_epoch") != f->view_epoch || !json_object_get(a, "until")) {
        uint64_t grace = (uint64_t)ival(a, "ttl_ms") + f->d->cfg.fleet_ttl * 2000ull;
        json_object_set_new(a, "until", json_integer((json_int_t)(now + grace)));
        json_object_set_new(a, "grace_epoch", json_integer(f->view_epoch));
    }
    return now >= (uint64_t)ival(a, "until");
}

/* Leases of other nodes adopted here whose key is gone (remote_gone): their sandboxes here
 * end. Lookups of leases gone from here are forgotten. */
static void end_remote_leases(sd_fleet *f, int64_t rev) {
    char key[512], ids[64][64];
    unsigned n = 0;
    uint64_t now = now_mono_ms();
    for (sd_lease *l = f->d->leases; l && n < ARRAY_SIZE(ids); l = l->next) {
        lease_key(f->d, l->id, key, sizeof(key));
        if (l->remote && remote_gone(f, json_object_get(f->adopted, key),
                                     json_object_get(f->leases, key) != NULL, rev, now))
            snprintf(ids[n++], sizeof(ids[0]), "%s", l->id);
    }
    for (unsigned i = 0; i < n; i++)
        sd_lease_end_id(f->d, ids[i], "lease ended in the fleet");
    const char *k;
    json_t *v;
    void *tmp;
    size_t plen = strlen(f->d->cfg.fleet_prefix) + strlen("/leases/");
    json_object_foreach_safe(f->adopted, tmp, k, v) {
        if (strlen(k) <= plen || !sd_lease_exists(f->d, k + plen))
            json_object_del(f->adopted, k);
    }
}

static void apply_members(sd_fleet *f, json_t *members) {
    const char *key;
    json_t *v;
    size_t plen = strlen(f->d->cfg.fleet_prefix) + strlen("/members/");
    json_object_foreach(members, key, v) {
        if (strlen(key) > plen)
            json_object_set_new(f->seen, key + plen, json_true());
    }
    json_decref(members);
}

static void apply_snapshot(sd_fleet *f, json_t *nodes, json_t *drain, json_t *leases, int64_t rev,
                           unsigned epoch) {
    json_decref(f->nodes);
    json_decref(f->leases);
    f->nodes = nodes, f->leases = leases, f->rev = rev, f->view_epoch = epoch;
    f->snap_mono_ms = now_mono_ms();
    f->nodes_real_ms = now_real_ms();
    f->have_snap = true;
    const char *name;
    json_t *v;
    json_object_foreach(nodes, name, v) json_object_set_new(f->seen, name, json_true());
    char key[512];
    snprintf(key, sizeof(key), "%s/drain/%s", f->d->cfg.fleet_prefix, f->d->cfg.node_name);
    bool drained = epoch == f->drain_epoch && rev >= f->drain_rev
                       ? json_object_get(drain, key) != NULL
                       : f->draining;
    if (drained != f->draining)
        log_info("fleet: node %s %s", f->d->cfg.node_name, drained ? "drained" : "undrained");
    f->draining = drained;
    json_decref(drain);
    end_remote_leases(f, rev);
}

/* What a finished job changes here: a published lease's etcd id; a keepalive that found the
 * etcd lease gone publishes the lease again (it expired while etcd or this node was away). */
static void job_settle(sd_fleet *f, fleet_job *j) {
    if (j->op == JOB_GET && j->r >= 0) {
        json_t *rec = json_loads(j->value ? j->value : "", 0, NULL);
        double ttl = json_number_value(json_object_get(rec, "ttl"));
        json_decref(rec);
        json_object_set_new(f->adopted, j->key,
                            json_pack("{s:I,s:I,s:I}", "rev", (json_int_t)j->rev, "epoch",
                                      (json_int_t)j->epoch, "ttl_ms",
                                      (json_int_t)(ttl > 0 ? ttl * 1000.0 : 0)));
    } else if (j->op == JOB_LEASE_PUT && j->r >= 0) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", (long long)j->lease);
        json_object_set_new(f->own, j->lease_id, json_string(id));
    } else if ((j->op == JOB_PUT || j->op == JOB_DELETE) && j->r >= 0 && j->self_drain) {
        f->draining = j->op == JOB_PUT; /* at once: no create slips in before the next read, */
        f->drain_rev = j->rev;          /* nor one read before the write */
        f->drain_epoch = j->epoch;
    } else if (j->op == JOB_KEEPALIVE && j->r == -ENOENT) {
        json_object_del(f->own, j->lease_id);
        if (sd_lease_exists(f->d, j->lease_id))
            sd_fleet_lease_publish(f->d, j->lease_id, j->ttl_s * 1000ull, NULL, NULL);
    }
}

static void callbacks(sd_fleet *f, fleet_job *done) {
    for (fleet_job *j = done, *next; j; j = next) {
        next = j->next;
        for (fleet_job **pp = &f->all; *pp; pp = &(*pp)->all_next)
            if (*pp == j) {
                *pp = j->all_next;
                break;
            }
        job_settle(f, j);
        if (j->cb)
            j->cb(f->d, j->ud, j->r, j->value);
        job_free(j);
    }
}

/* The watch's counts for GET /v1/fleet, and its breaks and recoveries logged (mu held). */
static void take_watch(sd_fleet *f) {
    json_decref(f->watch);
    f->watch =
        json_pack("{s:s,s:I,s:i,s:i,s:i,s:i}", "mode", f->poll ? "poll" : "watch", "revision",
                  (json_int_t)f->rev, "reads", (int)f->w_reads, "streams", (int)f->w_streams,
                  "compacted", (int)f->w_compacted, "stale", (int)f->w_stale);
    if (!f->watch_err_new)
        return;
    f->watch_err_new = false;
    if (f->watch_err[0])
        log_warn("fleet: etcd watch broke, reopening: %s", f->watch_err);
    else
        log_info("fleet: etcd watch open again");
}

/* This node's leases put in etcd again. At start (renew false), those read back after a
 * restart: their etcd leases were granted by the daemon before, whose ids are gone with it;
 * each gets a new one now, so that a delete or an expiry here revokes it at once (the old one
 * went on for up to its TTL, and other nodes' sandboxes of a deleted lease with it) and a renew
 * keeps it alive. When the node registers again (renew true: its etcd lease was gone, it
 * expired or etcd lost its data), each is renewed: put again with a new etcd lease where its
 * own is gone too (sd_fleet_lease_renewed), so that a wiped etcd has them back before the
 * other nodes holding sandboxes of them take them for ended (end_remote_leases). */
static void own_leases_again(sd_daemon *d, bool renew) {
    char suffix[128];
    snprintf(suffix, sizeof(suffix), ".%s", d->cfg.node_name);
    size_t n = strlen(suffix);
    for (sd_lease *l = d->leases; l; l = l->next) {
        size_t k = strlen(l->id);
        if (l->remote || k <= n || strcmp(l->id + k - n, suffix) != 0)
            continue;
        if (renew)
            sd_fleet_lease_renewed(d, l->id, l->ttl_ms);
        else if (sd_fleet_lease_publish(d, l->id, l->ttl_ms, NULL, NULL) < 0)
            log_warn("fleet: cannot publish lease %s again: out of memory", l->id);
    }
}

/* The node registered (again: not the first time since start) in store epoch epoch; lost: the
 * store had lost P/members/NAME (a wiped etcd). Its leases are put again where their keys are
 * gone; its own drain, which a view of this epoch is not yet taken for, is put again when the
 * store lost it, or else the views of this epoch decide it from now on. */
static void registered(sd_fleet *f, unsigned epoch, bool lost, bool again) {
    if (again)
        own_leases_again(f->d, true);
    if (again && lost && f->draining &&
        sd_fleet_drain(f->d, f->d->cfg.node_name, true, NULL, NULL) >= 0)
        return; /* (its settle sets drain_rev and drain_epoch) */
    if (again && lost)
        f->drain_rev = 0; /* a revision of a store that is gone */
    f->drain_epoch = epoch;
}

static void take_done(sd_fleet *f) {
    fleet_job *done = NULL;
    json_t *nodes = NULL, *drain = NULL, *leases = NULL, *members = NULL;
    bool ok_new, ok, snap_new;
    int64_t rev = 0;
    unsigned epoch = 0, regs, reg_epoch;
    bool reg_lost;
    char why[256];
    uv_mutex_lock(&f->mu);
    snprintf(why, sizeof(why), "%s", f->snap_err);
    done = TAKE_PTR(f->done);
    ok_new = f->ok_new, ok = f->snap_ok, snap_new = f->snap_new;
    f->ok_new = f->snap_new = false;
    if (snap_new) {
        nodes = TAKE_PTR(f->snap_nodes), drain = TAKE_PTR(f->snap_drain);
        leases = TAKE_PTR(f->snap_leases), rev = f->snap_rev, epoch = f->snap_epoch;
        members = TAKE_PTR(f->snap_members);
    }
    regs = f->regs, reg_epoch = f->reg_epoch, reg_lost = f->reg_lost;
    take_watch(f);
    uv_mutex_unlock(&f->mu);
    if (snap_new) { /* a read that came through: etcd was reachable when it was taken */
        apply_snapshot(f, nodes, drain, leases, rev, epoch);
        apply_members(f, members);
    }
    if (regs != f->regs_seen)
        registered(f, reg_epoch, reg_lost, f->regs_seen != 0);
    f->regs_seen = regs;
    /* A snapshot says etcd answered only until the fleet thread has spoken: the watch hands its
     * copy over each second, also after etcd went away and before its stream saw it go. */
    bool was = f->etcd_ok;
    if (ok_new)
        f->etcd_ok = ok, f->ok_heard = true;
    else if (snap_new && !f->ok_heard)
        f->etcd_ok = true;
    if (ok_new && !ok && (was || !f->have_snap))
        log_warn("fleet: etcd unreachable, serving locally and retrying: %s", why);
    else if (ok_new && ok && !was)
        log_info("fleet: etcd reachable again");
    callbacks(f, done);
}

static void async_cb(uv_async_t *a) {
    take_done(a->data);
}

/* The pool shape of a create that sets nothing here (the node record's "defaults"). */
static int defaults_shape(sd_daemon *d, json_t **ret, error_rec *err) {
    policy_create defs = {0};
    int r = sd_create_defaults(d, &defs, err);
    if (r < 0)
        return r;
    *ret = shape_of(&defs);
    policy_create_done(&defs);
    return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
}

int sd_fleet_init(sd_daemon *d, error_rec *err) {
    if (!d->cfg.fleet_etcd)
        return 0;
    json_t *defaults = NULL;
    int r = defaults_shape(d, &defaults, err);
    if (r < 0)
        return r;
    sd_fleet *f = calloc(1, sizeof(*f));
    if (!f) {
        json_decref(defaults);
        return error_set(err, -ENOMEM, "out of memory");
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if ((r = etcd_new(d->cfg.fleet_etcd, &f->etcd, err)) < 0) {
        json_decref(defaults);
        free(f);
        return r;
    }
    f->d = d;
    f->defaults = defaults;
    f->nodes = json_object(), f->seen = json_object(), f->leases = json_object();
    f->own = json_object(), f->adopted = json_object();
    f->poll = d->cfg.fleet_read && !strcmp(d->cfg.fleet_read, "poll");
    f->started_at = (double)now_real_ms() / 1000.0;
    uv_mutex_init(&f->mu);
    uv_cond_init(&f->cond);
    uv_async_init(d->loop, &f->async, async_cb);
    f->async.data = f;
    uv_timer_init(d->loop, &f->timer);
    f->timer.data = f;
    d->fleet = f;
    timer_cb(&f->timer); /* the first record before the thread starts */
    uv_timer_start(&f->timer, timer_cb, RECORD_MS, RECORD_MS);
    if ((r = fleet_thread_start(f, err)) < 0)
        return r;
    own_leases_again(d, false);
    log_info("fleet: node %s (%s) in %s at %s, ttl %us, %s", d->cfg.node_name, d->cfg.advertise_url,
             d->cfg.fleet_prefix, d->cfg.fleet_etcd, d->cfg.fleet_ttl,
             f->poll ? "polling each second" : "watching");
    return 0;
}

static void fleet_free(sd_fleet *f) {
    while (f->all) {
        fleet_job *j = f->all;
        f->all = j->all_next;
        job_free(j);
    }
    json_decref(f->record);
    json_decref(f->record_next);
    json_decref(f->snap_nodes);
    json_decref(f->snap_drain);
    json_decref(f->snap_leases);
    json_decref(f->snap_members);
    json_decref(f->nodes);
    json_decref(f->seen);
    json_decref(f->leases);
    json_decref(f->own);
    json_decref(f->adopted);
    json_decref(f->watch);
    json_decref(f->defaults);
    free(f->last_record);
    etcd_free(f->etcd);
    uv_mutex_destroy(&f->mu);
    uv_cond_destroy(&f->cond);
    free(f);
}

static void closed_cb(uv_handle_t *h) { /* the timer's and the async's: the second frees */
    sd_fleet *f = h->data;
    if (++f->n_closed == 2)
        fleet_free(f);
}

void sd_fleet_stop(sd_daemon *d) {
    sd_fleet *f = d->fleet;
    if (!f)
        return;
    fleet_thread_stop(f);
    d->fleet = NULL;
    uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, closed_cb);
    uv_close((uv_handle_t *)&f->async, closed_cb);
    curl_global_cleanup();
}

static const char *self_of(const char *id) {
    const char *dot = strchr(id, '.');
    return dot ? dot + 1 : NULL;
}

sd_fleet_where sd_fleet_locate(sd_daemon *d, const char *id, const char **ret_url) {
    sd_fleet *f = d->fleet;
    const char *node = self_of(id);
    if (!f || !node || strcmp(node, d->cfg.node_name) == 0)
        return SD_FLEET_SELF;
    const char *url = json_string_value(json_object_get(json_object_get(f->nodes, node), "url"));
    if (url) {
        *ret_url = url;
        return SD_FLEET_LIVE;
    }
    return json_object_get(f->seen, node) ? SD_FLEET_GONE : SD_FLEET_UNKNOWN;
}

const char *sd_fleet_node_url(sd_daemon *d, const char *name) {
    sd_fleet *f = d->fleet;
    if (!f || strcmp(name, d->cfg.node_name) == 0)
        return NULL;
    return json_string_value(json_object_get(json_object_get(f->nodes, name), "url"));
}

const char *sd_fleet_node_of_url(sd_daemon *d, const char *url) {
    json_t *v;
    const char *name;
    if (d->fleet && url)
        json_object_foreach(d->fleet->nodes, name, v) {
            const char *u = json_string_value(json_object_get(v, "url"));
            if (u && strcmp(u, url) == 0)
                return name;
        }
    return NULL;
}

/* The ready entries of node record v's best pool for shape (common/poolshape.h). */
static json_int_t pool_ready(json_t *v, json_t *shape) {
    json_int_t ready;
    poolshape_best(json_object_get(v, "pools"), json_object_get(v, "defaults"), shape, &ready);
    return ready;
}

/* The other nodes that take creates (not draining, free > 0); with pooled, only those with a
 * ready pool entry for shape. */
static json_t *candidates(sd_fleet *f, json_t *shape, bool pooled, size_t *n) {
    json_t *c = json_array(), *v;
    const char *name;
    json_object_foreach(f->nodes, name, v) {
        if (strcmp(name, f->d->cfg.node_name) != 0 &&
            !json_is_true(json_object_get(v, "draining")) &&
            json_integer_value(json_object_get(v, "free")) > 0 &&
            json_is_string(json_object_get(v, "url")) && (!pooled || pool_ready(v, shape) > 0))
            json_array_append(c, v);
    }
    *n = json_array_size(c);
    return c;
}

/* Of a and b, the node a create should go to: more ready entries for shape, then more free. */
static json_t *better(json_t *a, json_t *b, json_t *shape) {
    json_int_t ra = pool_ready(a, shape), rb = pool_ready(b, shape);
    if (ra != rb)
        return rb > ra ? b : a;
    return json_integer_value(json_object_get(b, "free")) >
                   json_integer_value(json_object_get(a, "free"))
               ? b
               : a;
}

/* Counts a create sent to node record v against it in this node's view, until the next read
 * replaces the view: a free slot, and a ready entry of the pool that serves shape. A burst of
 * redirects made between two reads then spreads as the slots it takes, instead of following
 * the counts read before it. */
static void spend(json_t *v, json_t *shape) {
    json_int_t free_slots = json_integer_value(json_object_get(v, "free"));
    json_t *pool = shape ? poolshape_best(json_object_get(v, "pools"),
                                          json_object_get(v, "defaults"), shape, NULL)
                         : NULL;
    if (free_slots > 0)
        json_object_set_new(v, "free", json_integer(free_slots - 1));
    json_int_t ready = json_integer_value(json_object_get(pool, "ready"));
    if (ready > 0)
        json_object_set_new(pool, "ready", json_integer(ready - 1));
}

const char *sd_fleet_pick(sd_daemon *d, json_t *shape, bool pooled_only) {
    sd_fleet *f = d->fleet;
    size_t n = 0;
    if (!f)
        return NULL;
    json_t *c = shape ? candidates(f, shape, true, &n) : NULL;
    if (n == 0 && !pooled_only) {
        json_decref(c);
        c = candidates(f, NULL, false, &n);
    }
    if (n == 0) {
        json_decref(c);
        return NULL;
    }
    uint32_t rnd[2] = {0, 0};
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd[0] = (uint32_t)now_mono_us(), rnd[1] = rnd[0] >> 7;
    size_t i = rnd[0] % n, k = n > 1 ? (i + 1 + rnd[1] % (n - 1)) % n : i; /* two distinct */
    json_t *best = better(json_array_get(c, i), json_array_get(c, k), shape);
    spend(best, shape);
    snprintf(f->url_buf, sizeof(f->url_buf), "%s", json_string_value(json_object_get(best, "url")));
    json_decref(c);
    return f->url_buf;
}

json_t *sd_fleet_view(sd_daemon *d) {
    sd_fleet *f = d->fleet;
    json_t *arr = json_array(), *v;
    const char *name;
    double now = (double)now_real_ms() / 1000.0;
    json_object_foreach(f->nodes, name, v) {
        json_t *n = json_deep_copy(v);
        double hb = json_number_value(json_object_get(v, "heartbeat"));
        json_object_set_new(n, "heartbeat_age_s", json_real(hb > 0 ? MAX(0.0, now - hb) : -1));
        json_object_set_new(
            n, "state",
            json_string(json_is_true(json_object_get(v, "draining")) ? "draining" : "ready"));
        json_array_append_new(arr, n);
    }
    return json_pack("{s:s,s:s,s:s,s:o,s:O*}", "prefix", d->cfg.fleet_prefix, "self",
                     d->cfg.node_name, "etcd", f->etcd_ok ? "ok" : "unreachable", "nodes", arr,
                     "watch", f->watch);
}

int sd_fleet_drain(sd_daemon *d, const char *name, bool on, sd_fleet_cb cb, void *ud) {
    char key[512];
    snprintf(key, sizeof(key), "%s/drain/%s", d->cfg.fleet_prefix, name);
    fleet_job *j = job_new(d->fleet, on ? JOB_PUT : JOB_DELETE, key, on ? "1" : NULL, cb, ud);
    if (!j)
        return -ENOMEM;
    j->self_drain = strcmp(name, d->cfg.node_name) == 0;
    fleet_submit(d->fleet, j);
    return 0;
}

int sd_fleet_lease_publish(sd_daemon *d, const char *id, uint64_t ttl_ms, sd_fleet_cb cb,
                           void *ud) {
    char key[512];
    lease_key(d, id, key, sizeof(key));
    json_t *rec = json_pack("{s:s,s:s,s:f}", "id", id, "node", d->cfg.node_name, "ttl",
                            (double)ttl_ms / 1000.0);
    _cleanup_free_ char *s = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
    json_decref(rec);
    fleet_job *j = s ? job_new(d->fleet, JOB_LEASE_PUT, key, s, cb, ud) : NULL;
    if (!j)
        return -ENOMEM;
    j->ttl_s = (unsigned)MAX(2, (ttl_ms + 999) / 1000);
    snprintf(j->lease_id, sizeof(j->lease_id), "%s", id);
    fleet_submit(d->fleet, j);
    return 0;
}

void sd_fleet_lease_renewed(sd_daemon *d, const char *id, uint64_t ttl_ms) {
    sd_fleet *f = d->fleet;
    const char *eid = f ? json_string_value(json_object_get(f->own, id)) : NULL;
    if (!f)
        return;
    if (!eid) { /* published before this daemon started, or never: publish it now */
        sd_fleet_lease_publish(d, id, ttl_ms, NULL, NULL);
        return;
    }
    fleet_job *j = job_new(f, JOB_KEEPALIVE, id, NULL, NULL, NULL);
    if (!j)
        return;
    j->lease = strtoll(eid, NULL, 10);
    j->ttl_s = (unsigned)MAX(2, (ttl_ms + 999) / 1000);
    snprintf(j->lease_id, sizeof(j->lease_id), "%s", id);
    fleet_submit(f, j);
}

int sd_fleet_lease_lookup(sd_daemon *d, const char *id, sd_fleet_cb cb, void *ud) {
    char key[512];
    lease_key(d, id, key, sizeof(key));
    fleet_job *j = job_new(d->fleet, JOB_GET, key, NULL, cb, ud);
    if (!j)
        return -ENOMEM;
    fleet_submit(d->fleet, j);
    return 0;
}

void sd_fleet_cancel(sd_daemon *d, void *ud) {
    for (fleet_job *j = d->fleet ? d->fleet->all : NULL; j; j = j->all_next)
        if (j->ud == ud)
            j->cb = NULL;
}
