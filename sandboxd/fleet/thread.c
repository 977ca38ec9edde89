/* The fleet thread: every etcd call of the daemon. It keeps the node's etcd lease alive
 * (TTL/3), puts the node record (when it changes, at most 4 times a second, and on each
 * keepalive) and P/members/NAME, reads P/nodes/, P/drain/, P/leases/ and P/members/ (each
 * second), and runs the jobs the loop
 * queues; results go back to the loop with uv_async. etcd unreachable: it retries with backoff
 * (0.5 s doubling to 5 s) and registers again (a new lease if needed) when etcd is back. */
#include "sandboxd/fleet/internal.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>

#define PUT_MIN_MS 250
#define POLL_MS 1000
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 5000

static uint64_t beat_ms(sd_fleet *f) {
    return f->d->cfg.fleet_ttl * 1000ull / 3;
}

static void key_of(sd_fleet *f, char *buf, size_t len, const char *kind, const char *name) {
    snprintf(buf, len, "%s/%s/%s", f->d->cfg.fleet_prefix, kind, name ? name : "");
}

static void run_job(sd_fleet *f, fleet_job *j) {
    error_rec err = {0};
    switch (j->op) {
    case JOB_PUT:
        j->r = etcd_put(f->etcd, j->key, j->value, 0, &err);
        break;
    case JOB_DELETE:
        j->r = etcd_delete(f->etcd, j->key, &err);
        break;
    case JOB_GET:
        free(TAKE_PTR(j->value));
        j->r = etcd_get(f->etcd, j->key, &j->value, &err);
        break;
    case JOB_LEASE_PUT:
        j->r = etcd_lease_grant(f->etcd, j->ttl_s, &j->lease, &err);
        if (j->r >= 0 && (j->r = etcd_put(f->etcd, j->key, j->value, j->lease, &err)) < 0)
            etcd_lease_revoke(f->etcd, j->lease, &err);
        break;
    case JOB_KEEPALIVE:
        j->r = etcd_lease_keepalive(f->etcd, j->lease, &err);
        break;
    case JOB_REVOKE:
        j->r = etcd_lease_revoke(f->etcd, j->lease, &err);
        break;
    }
}

/* Register (grant a lease) when needed, keep the lease alive, put the record. */
static int beat(sd_fleet *f, uint64_t now, error_rec *err, bool again) {
    bool force = false;
    int r;
    if (!f->node_lease) {
        if ((r = etcd_lease_grant(f->etcd, f->d->cfg.fleet_ttl, &f->node_lease, err)) < 0)
            return r;
        char mkey[512]; /* a member for good: its ids answer 503 once it is gone, never 404 */
        key_of(f, mkey, sizeof(mkey), "members", f->d->cfg.node_name);
        if ((r = etcd_put(f->etcd, mkey, f->d->cfg.advertise_url, 0, err)) < 0)
            return r;
        force = true;
        f->t_keepalive = now + beat_ms(f);
    } else if (now >= f->t_keepalive) {
        r = etcd_lease_keepalive(f->etcd, f->node_lease, err);
        if (r == -ENOENT) /* expired while etcd or this node was away: register again */
            f->node_lease = 0;
        if (r < 0)
            return r == -ENOENT && !again ? beat(f, now, err, true) : r;
        force = true;
        f->t_keepalive = now + beat_ms(f);
    }
    if (!f->record || (!force && (!f->record_dirty || now < f->t_put + PUT_MIN_MS)))
        return 0;
    json_object_set_new(f->record, "heartbeat", json_real((double)now_real_ms() / 1000.0));
    _cleanup_free_ char *s = json_dumps(f->record, JSON_COMPACT | JSON_REAL_PRECISION(15));
    char key[512];
    key_of(f, key, sizeof(key), "nodes", f->d->cfg.node_name);
    if (!s)
        return -ENOMEM;
    r = etcd_put(f->etcd, key, s, f->node_lease, err);
    if (r == -ENOENT) { /* the lease expired between the keepalive and the put */
        f->node_lease = 0;
        return again ? r : beat(f, now, err, true);
    }
    if (r >= 0) {
        f->t_put = now;
        f->record_dirty = false;
    }
    return r;
}

/* The node records' values parsed (a value that is not a JSON object is left out). */
static json_t *parse_nodes(sd_fleet *f, json_t *kvs) {
    json_t *out = json_object(), *v;
    const char *k;
    size_t plen = strlen(f->d->cfg.fleet_prefix) + strlen("/nodes/");
    json_object_foreach(kvs, k, v) {
        json_t *rec = json_loads(json_string_value(v), 0, NULL);
        if (json_is_object(rec) && strlen(k) > plen)
            json_object_set_new(out, k + plen, rec);
        else
            json_decref(rec);
    }
    return out;
}

/* Read the three prefixes; hand them to the loop (mu is not held here). */
static int poll_all(sd_fleet *f, uint64_t now, error_rec *err) {
    if (now < f->t_poll)
        return 0;
    char k1[512], k2[512], k3[512], k4[512];
    key_of(f, k1, sizeof(k1), "nodes", NULL);
    key_of(f, k2, sizeof(k2), "drain", NULL);
    key_of(f, k3, sizeof(k3), "leases", NULL);
    key_of(f, k4, sizeof(k4), "members", NULL);
    json_t *nodes = NULL, *drain = NULL, *leases = NULL, *members = NULL;
    int r = etcd_get_prefix(f->etcd, k1, &nodes, err);
    if (r >= 0)
        r = etcd_get_prefix(f->etcd, k2, &drain, err);
    if (r >= 0)
        r = etcd_get_prefix(f->etcd, k3, &leases, err);
    if (r >= 0)
        r = etcd_get_prefix(f->etcd, k4, &members, err);
    if (r < 0) {
        json_decref(nodes);
        json_decref(drain);
        json_decref(leases);
        json_decref(members);
        return r;
    }
    json_t *parsed = parse_nodes(f, nodes);
    json_decref(nodes);
    uv_mutex_lock(&f->mu);
    json_decref(f->snap_nodes);
    json_decref(f->snap_drain);
    json_decref(f->snap_leases);
    json_decref(f->snap_members);
    f->snap_nodes = parsed, f->snap_drain = drain, f->snap_leases = leases;
    f->snap_members = members;
    f->snap_new = true;
    f->snap_taken_ms = now;
    uv_mutex_unlock(&f->mu);
    f->t_poll = now + MIN((uint64_t)POLL_MS, beat_ms(f));
    return 0;
}

static void set_ok(sd_fleet *f, bool ok, uint64_t now, const error_rec *err) {
    if (ok)
        f->backoff_ms = 0;
    else {
        f->backoff_ms = f->backoff_ms ? MIN(f->backoff_ms * 2, BACKOFF_MAX_MS) : BACKOFF_MIN_MS;
        f->t_retry = now + f->backoff_ms;
    }
    if (ok != f->etcd_ok_thread) {
        f->etcd_ok_thread = ok;
        uv_mutex_lock(&f->mu);
        f->snap_ok = ok, f->ok_new = true;
        snprintf(f->snap_err, sizeof(f->snap_err), "%s", ok ? "" : err->message);
        uv_mutex_unlock(&f->mu);
    }
}

/* The next time the thread has something to do, from now. */
static uint64_t wait_ms(sd_fleet *f, uint64_t now) {
    uint64_t next = f->backoff_ms ? f->t_retry : MIN(f->t_keepalive, f->t_poll);
    if (!f->backoff_ms && f->record_dirty)
        next = MIN(next, f->t_put + PUT_MIN_MS);
    return next > now ? MIN(next - now, 5000) : 0;
}

static void take_work(sd_fleet *f, fleet_job **jobs) {
    *jobs = TAKE_PTR(f->queue);
    if (f->record_next) {
        json_decref(f->record);
        f->record = TAKE_PTR(f->record_next);
        f->record_dirty = true;
    }
}

static void cycle(sd_fleet *f, fleet_job *jobs) {
    fleet_job *done = NULL, **tail = &done;
    for (fleet_job *j = jobs, *next; j; j = next) { /* in the order they were queued */
        next = j->next;
        run_job(f, j);
        j->next = NULL;
        *tail = j, tail = &j->next;
    }
    uint64_t now = now_mono_ms();
    if (!f->backoff_ms || now >= f->t_retry) {
        error_rec err = {0};
        int r = beat(f, now, &err, false);
        if (r >= 0)
            r = poll_all(f, now, &err);
        set_ok(f, r >= 0, now, &err);
    }
    uv_mutex_lock(&f->mu);
    *tail = f->done;
    f->done = done;
    uv_mutex_unlock(&f->mu);
}

static void thread_main(void *arg) {
    sd_fleet *f = arg;
    uv_mutex_lock(&f->mu);
    while (!f->stop) {
        fleet_job *jobs;
        take_work(f, &jobs);
        uv_mutex_unlock(&f->mu);
        cycle(f, jobs);
        uv_async_send(&f->async);
        uv_mutex_lock(&f->mu);
        uint64_t ms = wait_ms(f, now_mono_ms());
        if (!f->stop && !f->queue && !f->record_next && ms > 0)
            uv_cond_timedwait(&f->cond, &f->mu, ms * 1000000ull);
    }
    uv_mutex_unlock(&f->mu);
    error_rec err = {0};
    if (f->node_lease) /* leave the fleet now rather than after the TTL */
        etcd_lease_revoke(f->etcd, f->node_lease, &err);
}

int fleet_thread_start(sd_fleet *f, error_rec *err) {
    f->etcd_ok_thread = true; /* until a call fails */
    if (uv_thread_create(&f->thread, thread_main, f) < 0)
        return error_set(err, -EAGAIN, "cannot start the fleet thread");
    f->thread_started = true;
    return 0;
}

void fleet_thread_stop(sd_fleet *f) {
    if (!f->thread_started)
        return;
    uv_mutex_lock(&f->mu);
    f->stop = true;
    uv_cond_signal(&f->cond);
    uv_mutex_unlock(&f->mu);
    uv_thread_join(&f->thread);
    f->thread_started = false;
}

void fleet_submit(sd_fleet *f, fleet_job *job) {
    uv_mutex_lock(&f->mu);
    fleet_job **pp = &f->queue;
    while (*pp)
        pp = &(*pp)->next;
    job->next = NULL;
    *pp = job;
    uv_cond_signal(&f->cond);
    uv_mutex_unlock(&f->mu);
}

void fleet_set_record(sd_fleet *f, json_t *record) {
    uv_mutex_lock(&f->mu);
    json_decref(f->record_next);
    f->record_next = record;
    uv_cond_signal(&f->cond);
    uv_mutex_unlock(&f->mu);
}
