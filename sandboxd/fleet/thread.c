/* The fleet thread: every etcd call of the daemon but the watch (fleet/watch.c). It keeps the
 * node's etcd lease alive (TTL/3), puts the node record (when it changes, at most 4 times a
 * second and at most FLEET_PUTS_MAX times a second across the fleet, and every HEARTBEAT_MS)
 * and P/members/NAME, and runs the jobs the loop queues; results go back to the loop with
 * uv_async. With --fleet-read poll (the old way, kept to measure it against the watch) it also
 * reads P/nodes/, P/drain/, P/leases/ and P/members/ each second and re-puts the record on each
 * keepalive. Each call waits TTL/3 (3 s at most) for its answer, and is made again at once on a
 * new connection when the one it was kept on failed (fleet/etcd.c). etcd unreachable: it
 * retries with backoff (0.5 s doubling to TTL/3, 5 s at most) and registers again (a new lease
 * if needed) when etcd is back; then it tells the watch to reopen (to read everything again,
 * in a new store epoch, when the lease was gone: etcd may have lost its data), and the loop
 * that it registered again (fleet.c puts what the node owns there again). */
#include "sandboxd/fleet/internal.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>

#define PUT_MIN_MS 250
#define FLEET_PUTS_MAX                                                                             \
    400 /* record puts a second, all nodes together (each is an event to all)                      \
         */
#define HEARTBEAT_MS 30000
#define POLL_MS 1000
#define BACKOFF_MIN_MS 500

static uint64_t beat_ms(sd_fleet *f) {
    return f->d->cfg.fleet_ttl * 1000ull / 3;
}

/* How often the record is put when nothing changed, and at most when it does. */
static uint64_t heartbeat_ms(sd_fleet *f) {
    return f->poll ? beat_ms(f) : HEARTBEAT_MS;
}
static uint64_t put_min_ms(sd_fleet *f) {
    return MAX((uint64_t)PUT_MIN_MS, f->t_nodes * 1000ull / FLEET_PUTS_MAX);
}

static void key_of(sd_fleet *f, char *buf, size_t len, const char *kind, const char *name) {
    snprintf(buf, len, "%s/%s/%s", f->d->cfg.fleet_prefix, kind, name ? name : "");
}

static void run_job(sd_fleet *f, fleet_job *j) {
    error_rec err = {0};
    switch (j->op) {
    case JOB_PUT:
        j->r = etcd_put(f->etcd, j->key, j->value, 0, &j->rev, &err);
        break;
    case JOB_DELETE:
        j->r = etcd_delete(f->etcd, j->key, &j->rev, &err);
        break;
    case JOB_GET:
        free(TAKE_PTR(j->value));
        j->r = etcd_get(f->etcd, j->key, &j->value, &j->rev, &err);
        break;
    case JOB_LEASE_PUT:
        j->r = etcd_lease_grant(f->etcd, j->ttl_s, &j->lease, &err);
        if (j->r >= 0 && (j->r = etcd_put(f->etcd, j->key, j->value, j->lease, NULL, &err)) < 0)
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

/* Tell the watch (mu taken here) to reopen its stream (kick), and with reread to read
 * everything again first. */
static void watch_renew(sd_fleet *f, bool reread) {
    uv_mutex_lock(&f->mu);
    f->kick = true;
    f->reread = f->reread || reread;
    uv_mutex_unlock(&f->mu);
    if (f->stream)
        etcd_stream_wakeup(f->stream);
}

/* The node's etcd lease is gone (expired while etcd or this node was away, or etcd lost its
 * data): it registers again, and the watch reads everything again, since what it resumes from
 * may be another store's revision (a wiped etcd's revisions begin at 1 again: once they are
 * past the node's, a stream from its revision misses every put made before). */
static void lease_lost(sd_fleet *f) {
    f->node_lease = 0;
    uv_mutex_lock(&f->mu); /* etcd may be another store now */
    f->epoch++;
    uv_mutex_unlock(&f->mu);
    watch_renew(f, true);
}

/* P/members/NAME put (a member for good: its ids answer 503 once it is gone, never 404); the
 * loop hears of it (fleet.c: it puts the node's leases again, and its drain when the store had
 * lost the key: a wiped etcd). */
static int register_member(sd_fleet *f, error_rec *err) {
    char mkey[512];
    _cleanup_free_ char *was = NULL;
    key_of(f, mkey, sizeof(mkey), "members", f->d->cfg.node_name);
    int lost = etcd_get(f->etcd, mkey, &was, NULL, err);
    if (lost < 0 && lost != -ENOENT)
        return lost;
    int r = etcd_put(f->etcd, mkey, f->d->cfg.advertise_url, 0, NULL, err);
    if (r < 0)
        return r;
    f->member_due = false;
    uv_mutex_lock(&f->mu);
    f->regs++, f->reg_epoch = f->epoch, f->reg_lost = lost == -ENOENT;
    uv_mutex_unlock(&f->mu);
    return 0;
}

/* Register (grant a lease) when needed, keep the lease alive, put the record. */
static int beat(sd_fleet *f, uint64_t now, error_rec *err, bool again) {
    int r;
    if (!f->node_lease) { /* (the puts below are owed until they are made, even after a failure) */
        if ((r = etcd_lease_grant(f->etcd, f->d->cfg.fleet_ttl, &f->node_lease, err)) < 0)
            return r;
        f->member_due = f->record_due = true;
        f->t_keepalive = now + beat_ms(f);
    } else if (now >= f->t_keepalive) {
        r = etcd_lease_keepalive(f->etcd, f->node_lease, err);
        if (r == -ENOENT) /* expired while etcd or this node was away: register again */
            lease_lost(f);
        if (r < 0)
            return r == -ENOENT && !again ? beat(f, now, err, true) : r;
        f->t_keepalive = now + beat_ms(f);
    }
    if (f->member_due && (r = register_member(f, err)) < 0)
        return r;
    bool force = f->record_due || now >= f->t_put + heartbeat_ms(f);
    if (!f->record || (!force && (!f->record_dirty || now < f->t_put + put_min_ms(f))))
        return 0;
    json_object_set_new(f->record, "heartbeat", json_real((double)now_real_ms() / 1000.0));
    _cleanup_free_ char *s = json_dumps(f->record, JSON_COMPACT | JSON_REAL_PRECISION(15));
    char key[512];
    key_of(f, key, sizeof(key), "nodes", f->d->cfg.node_name);
    if (!s)
        return -ENOMEM;
    int64_t rev = 0;
    r = etcd_put(f->etcd, key, s, f->node_lease, &rev, err);
    if (r == -ENOENT) { /* the lease expired between the keepalive and the put */
        lease_lost(f);
        return again ? r : beat(f, now, err, true);
    }
    if (r >= 0) {
        f->t_put = now;
        f->record_dirty = f->record_due = false;
        uv_mutex_lock(&f->mu); /* the watch must bring this put back (watch.c) */
        f->put_rev = rev, f->put_ms = now;
        uv_mutex_unlock(&f->mu);
    }
    return r;
}

/* --fleet-read poll: read the four prefixes (the way every node did before the watch) and
 * hand them to the loop. */
static int poll_all(sd_fleet *f, uint64_t now, error_rec *err) {
    static const char *const kinds[] = {"nodes", "drain", "leases", "members"};
    if (now < f->t_poll)
        return 0;
    json_t *all = json_object();
    int64_t rev = 0;
    int r = all ? 0 : -ENOMEM;
    for (size_t i = 0; i < ARRAY_SIZE(kinds) && r >= 0; i++) {
        char k[512];
        json_t *part = NULL;
        key_of(f, k, sizeof(k), kinds[i], NULL);
        r = etcd_get_prefix(f->etcd, k, &part, i ? NULL : &rev,
                            err); /* complete up to the first's */
        if (r >= 0)
            json_object_update(all, part);
        json_decref(part);
    }
    uv_mutex_lock(&f->mu);
    unsigned epoch = f->epoch; /* (only this thread moves it in poll mode) */
    uv_mutex_unlock(&f->mu);
    if (r >= 0)
        fleet_publish(f, all, rev, epoch);
    json_decref(all);
    if (r >= 0)
        f->t_poll = now + MIN((uint64_t)POLL_MS, beat_ms(f));
    return r;
}

static void set_ok(sd_fleet *f, bool ok, uint64_t now, const error_rec *err) {
    if (ok)
        f->backoff_ms = 0;
    else {
        f->backoff_ms =
            f->backoff_ms ? MIN(f->backoff_ms * 2, fleet_backoff_max_ms(f)) : BACKOFF_MIN_MS;
        f->t_retry = now + f->backoff_ms;
    }
    if (ok != f->etcd_ok_thread) {
        f->etcd_ok_thread = ok;
        uv_mutex_lock(&f->mu);
        f->snap_ok = ok, f->ok_new = true;
        snprintf(f->snap_err, sizeof(f->snap_err), "%s", ok ? "" : err->message);
        uv_mutex_unlock(&f->mu);
        if (ok) /* the watch's stream may be a dead one: reopen it */
            watch_renew(f, false);
    }
    unsigned redone = etcd_redone(f->etcd);
    if (redone != f->t_redone) { /* a call found its connection dead: the stream's may be too */
        f->t_redone = redone;
        watch_renew(f, false);
    }
}

/* The next time the thread has something to do, from now. */
static uint64_t wait_ms(sd_fleet *f, uint64_t now) {
    uint64_t next = f->backoff_ms ? f->t_retry : MIN(f->t_keepalive, f->t_put + heartbeat_ms(f));
    if (!f->backoff_ms && f->poll)
        next = MIN(next, f->t_poll);
    if (!f->backoff_ms && f->record_dirty)
        next = MIN(next, f->t_put + put_min_ms(f));
    return next > now ? MIN(next - now, 5000) : 0;
}

static void take_work(sd_fleet *f, fleet_job **jobs) {
    *jobs = TAKE_PTR(f->queue);
    if (f->reg_due) /* a new epoch the watch saw: the loop hears of a registration in it */
        f->member_due = f->record_due = true, f->reg_due = false;
    f->t_nodes = f->n_nodes;
    if (f->record_next) {
        json_decref(f->record);
        f->record = TAKE_PTR(f->record_next);
        f->record_dirty = true;
    }
}

static void cycle(sd_fleet *f, fleet_job *jobs) {
    fleet_job *done = NULL, **tail = &done;
    uv_mutex_lock(&f->mu);
    unsigned epoch = f->epoch;
    uv_mutex_unlock(&f->mu);
    for (fleet_job *j = jobs, *next; j; j = next) { /* in the order they were queued */
        next = j->next;
        j->epoch = epoch;
        run_job(f, j);
        j->next = NULL;
        *tail = j, tail = &j->next;
    }
    uint64_t now = now_mono_ms();
    if (!f->backoff_ms || now >= f->t_retry) {
        error_rec err = {0};
        int r = beat(f, now, &err, false);
        if (r >= 0 && f->poll)
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
        if (!f->stop && !f->queue && !f->record_next && !f->reg_due && ms > 0)
            uv_cond_timedwait(&f->cond, &f->mu, ms * 1000000ull);
    }
    uv_mutex_unlock(&f->mu);
    error_rec err = {0};
    if (f->node_lease) /* leave the fleet now rather than after the TTL */
        etcd_lease_revoke(f->etcd, f->node_lease, &err);
}

int fleet_thread_start(sd_fleet *f, error_rec *err) {
    f->etcd_ok_thread = true; /* until a call fails */
    /* a call stuck on a dead connection must not outlive the lease: a keepalive due TTL/3
     * after the last gives up on it at 2 TTL/3 and is answered on a new one before the TTL */
    etcd_set_timeout(f->etcd, (unsigned)MIN((uint64_t)ETCD_TIMEOUT_MS, beat_ms(f)));
    int r = f->poll ? 0 : fleet_watch_start(f, err);
    if (r < 0)
        return r;
    if (uv_thread_create(&f->thread, thread_main, f) < 0)
        return error_set(err, -EAGAIN, "cannot start the fleet thread");
    f->thread_started = true;
    return 0;
}

void fleet_thread_stop(sd_fleet *f) {
    if (f->thread_started) {
        uv_mutex_lock(&f->mu);
        f->stop = true;
        uv_cond_signal(&f->cond);
        uv_mutex_unlock(&f->mu);
        if (f->stream)
            etcd_stream_wakeup(f->stream);
        uv_thread_join(&f->thread);
        f->thread_started = false;
    }
    fleet_watch_stop(f); /* after the fleet thread: it wakes the stream (set_ok) */
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
