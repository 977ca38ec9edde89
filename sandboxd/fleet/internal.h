/* The fleet layer's shared state between the loop side (fleet/fleet.c) and the fleet thread
 * (fleet/thread.c). Fields under "mu" are touched by both with mu held; the others by the
 * side named next to them only. */
#pragma once

#include "sandboxd/fleet/etcd.h"
#include "sandboxd/fleet/fleet.h"

typedef enum { JOB_PUT, JOB_DELETE, JOB_GET, JOB_LEASE_PUT, JOB_KEEPALIVE, JOB_REVOKE } job_op;

typedef struct fleet_job {
    struct fleet_job *next;     /* mu: in the queue or the done list */
    struct fleet_job *all_next; /* loop: every job not yet called back */
    job_op op;
    char *key, *value; /* value: a put's, or a get's answer (thread) */
    unsigned ttl_s;    /* JOB_LEASE_PUT: grant a lease of this TTL for the key */
    int64_t lease;     /* JOB_LEASE_PUT's granted id (thread); KEEPALIVE/REVOKE's */
    int r;             /* thread: the result */
    char lease_id[64]; /* the sandboxd lease a LEASE_PUT or KEEPALIVE is for */
    bool self_drain;   /* a PUT/DELETE of this node's own P/drain key */
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
    unsigned n_closed; /* loop: handles closed at stop */
    /* mu */
    bool stop;
    fleet_job *queue, *done;
    json_t *record_next; /* a new node record for the thread to put */
    json_t *snap_nodes, *snap_drain, *snap_leases, *snap_members; /* the last read, for the loop */
    bool snap_new, snap_ok, ok_new;
    uint64_t snap_taken_ms; /* now_mono_ms() when the read began */
    char snap_err[256];     /* why etcd became unreachable */
    /* thread */
    json_t *record;
    int64_t node_lease;
    uint64_t t_retry, t_keepalive, t_put, t_poll, backoff_ms;
    bool record_dirty, etcd_ok_thread;
    /* loop */
    fleet_job *all;
    char *last_record;     /* the record last handed over (JSON text), to see changes */
    json_t *nodes;         /* name -> record (the last node list) */
    json_t *seen;          /* name -> true: every node seen since start or in P/members/ */
    json_t *leases;        /* P/leases/ keys present in the last read */
    json_t *own;           /* lease id -> etcd lease id (string) of leases made here */
    json_t *defaults;      /* the pool shape of a create that sets nothing (node record) */
    uint64_t snap_mono_ms; /* when the last read was taken */
    uint64_t nodes_real_ms;
    bool etcd_ok, draining, have_snap;
    double started_at;
    char url_buf[1024];
} sd_fleet;

/* thread.c */
int fleet_thread_start(sd_fleet *f, error_rec *err);
void fleet_thread_stop(sd_fleet *f); /* join */
/* Queue job (mu taken here) and wake the thread. */
void fleet_submit(sd_fleet *f, fleet_job *job);
void fleet_set_record(sd_fleet *f, json_t *record /* stolen */);
