/* The fleet's watch thread: how a node learns what the other nodes put in etcd without asking
 * each second. One range read of every key under P/ (nodes, drain, leases, members) at
 * revision R, then one /v3/watch stream on P/ from R+1 whose events keep that copy current;
 * the copy goes to the loop (at most every PUBLISH_MS after a change, and every REFRESH_MS
 * anyway: the loop counts the creates it sends to a node against it until the next
 * hand-over) as the same snapshot the polling thread makes (fleet_publish). After a break (etcd
 * restarted, a network fault, a stream that stopped bringing back this node's own puts) the stream
 * is opened again from the last revision applied + 1, so that nothing is missed; when etcd has
 * compacted that revision away (the stream is canceled with compact_revision), or etcd's revisions
 * went back below ours (a new etcd), everything is read again and watched from the new revision. */
#include "sandboxd/fleet/internal.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define PUBLISH_MS 100
#define REFRESH_MS 1000 /* the copy is handed over again: the loop's own counts reset */
#define WAIT_MS 1000
#define ECHO_MS 5000
#define BACKOFF_MIN_MS 500

/* The node records' values parsed (a value that is not a JSON object is left out). */
static json_t *parse_nodes(json_t *kvs, size_t plen) {
    json_t *out = json_object(), *v;
    const char *k;
    json_object_foreach(kvs, k, v) {
        json_t *rec = json_loads(json_string_value(v), 0, NULL);
        if (json_is_object(rec) && strlen(k) > plen)
            json_object_set_new(out, k + plen, rec);
        else
            json_decref(rec);
    }
    return out;
}

void fleet_publish(sd_fleet *f, json_t *kvs, int64_t rev, unsigned epoch) {
    static const char *const kinds[] = {"nodes", "drain", "leases", "members"};
    json_t *part[4] = {json_object(), json_object(), json_object(), json_object()}, *v;
    char pre[4][512];
    const char *k;
    for (size_t i = 0; i < 4; i++)
        snprintf(pre[i], sizeof(pre[i]), "%s/%s/", f->d->cfg.fleet_prefix, kinds[i]);
    json_object_foreach(kvs, k, v) {
        for (size_t i = 0; i < 4; i++)
            if (!strncmp(k, pre[i], strlen(pre[i]))) {
                json_object_set(part[i], k, v);
                break;
            }
    }
    json_t *nodes = parse_nodes(part[0], strlen(pre[0]));
    json_decref(part[0]);
    uv_mutex_lock(&f->mu);
    json_decref(f->snap_nodes);
    json_decref(f->snap_drain);
    json_decref(f->snap_leases);
    json_decref(f->snap_members);
    f->snap_nodes = nodes, f->snap_drain = part[1], f->snap_leases = part[2];
    f->snap_members = part[3];
    f->snap_new = true;
    f->snap_rev = rev, f->snap_epoch = epoch;
    f->n_nodes = (unsigned)json_object_size(nodes);
    uv_mutex_unlock(&f->mu);
    uv_async_send(&f->async);
}

/* A WatchResponse: events applied to the copy; created, canceled and progress noted. */
static void on_result(void *ud, json_t *res) {
    sd_fleet *f = ud;
    int64_t hrev = etcd_int64(json_object_get(json_object_get(res, "header"), "revision"));
    if (json_is_true(json_object_get(res, "canceled"))) {
        f->wend = f->wreread = true; /* compacted, or any other reason: read it all again */
        if (etcd_int64(json_object_get(res, "compact_revision")) > 0) {
            uv_mutex_lock(&f->mu);
            f->w_compacted++;
            uv_mutex_unlock(&f->mu);
        }
        return;
    }
    if (json_is_true(json_object_get(res, "created"))) {
        f->wcreated = true;
        if (hrev > 0 && hrev + 1 < f->wstart) /* a new etcd: its revisions are below ours */
            f->wend = f->wreread = f->wnewstore = true;
        return;
    }
    json_t *events = json_object_get(res, "events"), *ev;
    size_t i;
    json_array_foreach(events, i, ev) {
        json_t *kv = json_object_get(ev, "kv");
        const char *type = json_string_value(json_object_get(ev, "type"));
        etcd_kv_apply(f->wkv, kv, type && !strcmp(type, "DELETE"));
        f->wrev = MAX(f->wrev, etcd_int64(json_object_get(kv, "mod_revision")));
        f->wdirty = true;
    }
    if (!json_array_size(events)) /* a progress notice: nothing under P/ changed up to hrev */
        f->wrev = MAX(f->wrev, hrev);
}

static bool stopping(sd_fleet *f) {
    uv_mutex_lock(&f->mu);
    bool stop = f->stop;
    uv_mutex_unlock(&f->mu);
    return stop;
}

static void note(sd_fleet *f, const char *why) { /* why: "" once the stream runs again */
    uv_mutex_lock(&f->mu);
    if (strcmp(f->watch_err, why) != 0) {
        snprintf(f->watch_err, sizeof(f->watch_err), "%s", why);
        f->watch_err_new = true;
    }
    uv_mutex_unlock(&f->mu);
}

static void prefix_of(sd_fleet *f, char *buf, size_t len) {
    snprintf(buf, len, "%s/", f->d->cfg.fleet_prefix);
}

/* Read everything, in the store's epoch; new_store: the watch saw etcd's revisions go back
 * (another store: a new epoch). */
static int read_all(sd_fleet *f, bool new_store, error_rec *err) {
    char prefix[512];
    json_t *kvs = NULL;
    int64_t rev = 0;
    prefix_of(f, prefix, sizeof(prefix));
    int r = etcd_get_prefix(f->wetcd, prefix, &kvs, &rev, err);
    if (r < 0)
        return r;
    json_decref(f->wkv);
    f->wkv = kvs, f->wrev = rev;
    uv_mutex_lock(&f->mu);
    f->w_reads++;
    f->epoch += new_store;
    f->wepoch = f->epoch;
    if (new_store) { /* (the fleet thread's lease may live on: a store restored from a backup) */
        f->reg_due = true;
        uv_cond_signal(&f->cond);
    }
    uv_mutex_unlock(&f->mu);
    fleet_publish(f, f->wkv, f->wrev, f->wepoch);
    f->wdirty = false, f->wpublished_ms = now_mono_ms();
    return 0;
}

/* Whether the open stream should be given up: the fleet thread saw etcd come back (kick: it is
 * reopened), or this node's own record, put more than ECHO_MS ago and before the stream was
 * open for ECHO_MS, has not come back through it (everything is read again). */
static bool stale(sd_fleet *f, uint64_t now, uint64_t opened_ms) {
    uv_mutex_lock(&f->mu);
    bool kick = f->kick, echo = f->put_rev > f->wrev && now > MAX(f->put_ms, opened_ms) + ECHO_MS;
    f->kick = false;
    f->w_stale += echo;
    uv_mutex_unlock(&f->mu);
    f->wreread = f->wreread || echo;
    return kick || echo;
}

/* Whether the fleet thread asked for everything to be read again (its lease was gone); it
 * kicks the stream with it, so that the read comes next. */
static bool take_reread(sd_fleet *f) {
    uv_mutex_lock(&f->mu);
    bool reread = f->reread;
    f->reread = false;
    uv_mutex_unlock(&f->mu);
    return reread;
}

/* When the copy is handed to the loop next: PUBLISH_MS after the last hand-over when it
 * changed since, else REFRESH_MS after it. */
static uint64_t publish_due(sd_fleet *f) {
    return f->wpublished_ms + (f->wdirty ? PUBLISH_MS : REFRESH_MS);
}

/* One stream from wrev + 1, until it breaks (< 0), or must be read again or reopened (0). */
static int stream(sd_fleet *f, unsigned endpoint, bool *ret_up, error_rec *err) {
    char prefix[512];
    prefix_of(f, prefix, sizeof(prefix));
    f->wstart = f->wrev + 1;
    f->wend = f->wreread = f->wcreated = f->wnewstore = false;
    int r = etcd_stream_open(f->stream, f->wetcd, endpoint, prefix, f->wstart, on_result, f, err);
    uint64_t opened_ms = now_mono_ms();
    uv_mutex_lock(&f->mu);
    f->w_streams++;
    uv_mutex_unlock(&f->mu);
    while (r >= 0 && !stopping(f)) {
        uint64_t now = now_mono_ms(), due = publish_due(f);
        r = etcd_stream_run(f->stream, due > now ? (int)MIN(due - now, (uint64_t)WAIT_MS) : 0, err);
        now = now_mono_ms();
        if (f->wcreated && !*ret_up) {
            *ret_up = true;
            note(f, "");
        }
        if ((f->wdirty && (r < 0 || f->wend)) || now >= publish_due(f)) {
            fleet_publish(f, f->wkv, f->wrev, f->wepoch);
            f->wdirty = false, f->wpublished_ms = now;
        }
        if (r >= 0 && (f->wend || stale(f, now, opened_ms)))
            break;
    }
    etcd_stream_close(f->stream);
    return r < 0 ? r : 0;
}

/* A wait that etcd_stream_wakeup (stop) or a kick ends early. */
static void sleep_ms(sd_fleet *f, uint64_t ms) {
    uint64_t until = now_mono_ms() + ms;
    error_rec err = {0};
    for (uint64_t now; !stopping(f) && (now = now_mono_ms()) < until;) {
        uv_mutex_lock(&f->mu);
        bool kick = f->kick;
        f->kick = false;
        uv_mutex_unlock(&f->mu);
        if (kick)
            return;
        etcd_stream_run(f->stream, (int)MIN(until - now, (uint64_t)WAIT_MS), &err);
    }
}

static void watch_main(void *arg) {
    sd_fleet *f = arg;
    uint64_t backoff = 0;
    unsigned endpoint = 0;
    bool need_read = true, new_store = false; /* (a read that failed is owed as it was) */
    while (!stopping(f)) {
        error_rec err = {0};
        bool up = false;
        need_read = take_reread(f) || need_read; /* (the fleet thread moved the epoch on) */
        int r = need_read ? read_all(f, new_store, &err) : 0;
        need_read = r < 0;
        new_store = new_store && r < 0;
        if (r >= 0 && (r = stream(f, endpoint, &up, &err)) >= 0)
            need_read = f->wreread, new_store = f->wnewstore;
        if (up)
            backoff = 0;
        if (r >= 0 || stopping(f))
            continue;
        char why[300];
        snprintf(why, sizeof(why), "%s (resuming from revision %" PRId64 ")", err.message,
                 f->wrev + 1);
        note(f, why);
        endpoint = (endpoint + 1) % etcd_endpoints(f->wetcd); /* the next one, next time */
        backoff = backoff ? MIN(backoff * 2, fleet_backoff_max_ms(f)) : BACKOFF_MIN_MS;
        sleep_ms(f, backoff);
    }
}

int fleet_watch_start(sd_fleet *f, error_rec *err) {
    int r = etcd_new(f->d->cfg.fleet_etcd, &f->wetcd, err);
    if (r < 0 || (r = etcd_stream_new(&f->stream, err)) < 0)
        return r;
    if (uv_thread_create(&f->wthread, watch_main, f) < 0)
        return error_set(err, -EAGAIN, "cannot start the fleet's watch thread");
    f->wthread_started = true;
    return 0;
}

void fleet_watch_stop(sd_fleet *f) {
    if (f->wthread_started) {
        uv_mutex_lock(&f->mu);
        f->stop = true;
        uv_mutex_unlock(&f->mu);
        etcd_stream_wakeup(f->stream);
        uv_thread_join(&f->wthread);
        f->wthread_started = false;
    }
    etcd_stream_free(TAKE_PTR(f->stream));
    etcd_free(TAKE_PTR(f->wetcd));
    json_decref(TAKE_PTR(f->wkv));
}
