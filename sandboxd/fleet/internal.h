/* The fleet layer's shared state between the loop side (fleet/fleet.c), the fleet thread
 * (fleet/thread.c) and the watch thread (fleet/watch.c). Fields under "mu" are touched by
 * several with mu held; the others by the side named next to them only. */
#pragma once

#include "sandboxd/fleet/etcd.h"
#include "sandboxd/fleet/etcd_watch.h"
#include "sandboxd/fleet/fleet.h"

typedef enum { JOB_PUT, JOB_DELETE, JOB_GET, JOB_LEASE_PUT, JOB_KEEPALIVE, JOB_REVOKE } job_op;

typedef struct fleet_job {
    struct fleet_job *next;     /* mu: in the queue or the done list */
    struct fleet_job *all_next; /* loop: every job not yet called back */
    job_op op;
    char *key, *value; /* value: a put's, or a get's answer (thread) */
    unsigned ttl_s;    /* JOB_LEASE_PUT: grant a lease of this TTL for the key */
    int64_t lease;     /* JOB_LEASE_PUT's granted id (thread); KEEPALIVE/REVOKE's */
    int64_t rev;       /* JOB_GET: the revision the answer was read at; PUT, DELETE: made at */
    int r;             /* thread: the result */
    char lease_id[64]; /* the sandboxd lease a LEASE_PUT or KEEPALIVE is for */
    bool self_drain;   /* a PUT/DELETE of this node's own P/drain key */
    unsigned epoch;    /* the store epoch (sd_fleet.epoch) the thread made it in */
    sd_fleet_cb cb;    /* loop; NULL: cancelled or none */
    void *ud;
} fleet_job;

typedef struct sd_fleet {
    sd_daemon *d;
    etcd_client *etcd; /* thread */
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cond;
    uv_async_t async;
    uv_timer_t timer;
    bool thread_started;
    bool poll;         /* --fleet-read poll: the thread reads P/ each second, no watch thread */
    unsigned n_closed; /* loop: handles closed at stop */
    /* mu */
    bool stop;
    fleet_job *queue, *done;
    json_t *record_next; /* a new node record for the thread to put */
    json_t *snap_nodes, *snap_drain, *snap_leases, *snap_members; /* the last read, for the loop */
    bool snap_new, snap_ok, ok_new;
    int64_t snap_rev;    /* the store's revision the snapshot is complete up to */
    char snap_err[256];  /* why etcd became unreachable */
    unsigned n_nodes;    /* node records in the last snapshot (the thread's put rate) */
    int64_t put_rev;     /* the revision of this node's last record put (thread), and */
    uint64_t put_ms;     /* when it was made: the watch must bring it back (the echo check) */
    bool kick;           /* the fleet thread saw etcd come back: the watch reopens its stream */
    bool reread;         /* the fleet thread's lease was gone: the watch reads everything again */
    unsigned epoch;      /* the store's epoch: bumped when etcd may be another store (the node's
                          * etcd lease was gone, or etcd's revisions went back); revisions of
                          * different epochs are not compared */
    unsigned snap_epoch; /* the snapshot's (the epoch it was read in) */
    unsigned regs;       /* registrations made (a lease granted, P/members/NAME put), */
    unsigned reg_epoch;  /* the epoch of the last, and */
    bool reg_lost;       /* whether the store had lost P/members/NAME then (a wiped etcd) */
    bool reg_due;        /* the watch began a new epoch: the thread registers again */
    char watch_err[256]; /* why the watch stream broke ("" while it runs) */
    bool watch_err_new;  /* watch_err changed since the loop last looked */
    unsigned w_reads, w_streams, w_compacted, w_stale; /* the watch's counts (GET /v1/fleet) */
    /* thread */
    json_t *record;
    int64_t node_lease;
    uint64_t t_retry, t_keepalive, t_put, t_poll, backoff_ms;
    unsigned t_nodes;  /* n_nodes as last seen */
    unsigned t_redone; /* etcd_redone as last seen */
    bool record_dirty, etcd_ok_thread;
    bool member_due, record_due; /* a lease was granted: P/members/NAME and the record go next */
    /* the watch thread (fleet/watch.c) */
    uv_thread_t wthread;
    bool wthread_started;
    etcd_client *wetcd;
    etcd_stream *stream;
    json_t *wkv;          /* every key under P/ -> its value, complete up to wrev */
    int64_t wrev, wstart; /* the last revision applied; the open stream's start revision */
    bool wdirty, wend, wreread, wcreated;
    bool wnewstore;  /* the stream's etcd is behind the resume point: another store */
    unsigned wepoch; /* the epoch wkv was read in */
    uint64_t wpublished_ms;
    /* loop */
    fleet_job *all;
    char *last_record;     /* the record last handed over (JSON text), to see changes */
    json_t *nodes;         /* name -> record (the last node list) */
    json_t *seen;          /* name -> true: every node seen since start or in P/members/ */
    json_t *leases;        /* P/leases/ keys present in the last read */
    json_t *adopted;       /* P/leases/ key -> its lookup ({rev, epoch, ttl_ms}: fleet.c) */
    int64_t rev;           /* the last read's revision */
    unsigned view_epoch;   /* the last read's epoch (snap_epoch) */
    unsigned drain_epoch;  /* the epoch drain_rev is of: a view of another epoch leaves the
                            * node's own drain state as it is, until the node registered again */
    unsigned regs_seen;    /* regs as last seen: more is a registration again */
    int64_t drain_rev;     /* this node's own drain or undrain was written at: no older view
                            * undoes it */
    json_t *watch;         /* the watch's counts, as GET /v1/fleet shows them */
    json_t *own;           /* lease id -> etcd lease id (string) of leases made here */
    json_t *defaults;      /* the pool shape of a create that sets nothing (node record) */
    uint64_t snap_mono_ms; /* when the last read was taken */
    uint64_t nodes_real_ms;
    bool etcd_ok, draining, have_snap;
    bool ok_heard; /* the fleet thread has said whether etcd answers: from then on only it does */
    double started_at;
    char url_buf[1024];
} sd_fleet;

/* The retries' spacing at most, the fleet thread's and the watch's: the keepalives' (TTL/3),
 * 5 s at most, so that a node whose etcd comes back registers again, and its watch resumes,
 * within TTL/3 of it (the spacing grew to 5 s whatever the TTL: with a TTL of a few seconds, a
 * node stayed out of the node list, its ids 503 elsewhere, or its view behind, up to 5 s more). */
static inline uint64_t fleet_backoff_max_ms(const sd_fleet *f) {
    uint64_t third = f->d->cfg.fleet_ttl * 1000ull / 3;
    return third < 5000 ? third : 5000;
}

/* thread.c */
int fleet_thread_start(sd_fleet *f, error_rec *err);
void fleet_thread_stop(sd_fleet *f); /* join */
/* Queue job (mu taken here) and wake the thread. */
void fleet_submit(sd_fleet *f, fleet_job *job);
void fleet_set_record(sd_fleet *f, json_t *record /* stolen */);

/* watch.c */
int fleet_watch_start(sd_fleet *f, error_rec *err);
void fleet_watch_stop(sd_fleet *f); /* after f->stop is set: wake and join */
/* Hand every key under P/ ({"key": "value"}, borrowed), complete up to revision rev, to the
 * loop as the fleet's view, read in store epoch epoch (mu taken here), and wake the loop. */
void fleet_publish(sd_fleet *f, json_t *kvs, int64_t rev, unsigned epoch);
