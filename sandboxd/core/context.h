/* The core's context (sd_daemon): the loop, the configuration, the host, the sandbox table,
 * leases, uid slots, counters, and the listeners the layers above register for news (libuv
 * style: calls go down, news comes up through these callbacks). Fields are written by the
 * module named next to them; every other file only reads them. */
#pragma once

#include "sandboxd/config.h"
#include "policy/limits.h"
#include "sandboxd/core/metrics.h"

#include <limits.h>
#include <stdbool.h>
#include <uv.h>

typedef struct sd_daemon sd_daemon;
typedef struct sd_sandbox sd_sandbox;

/* News about a sandbox, told to every registered listener in registration order
 * (core/lifecycle.c emits them; sd_listener_add registers). Any callback may be NULL. */
typedef struct sd_listener {
    /* A create's start finished: err NULL when the sandbox runs, else why it does not
     * (err->code -EBUSY: it was ended while starting; other codes: it failed). May come twice
     * for a failed start (once failed, once ended); a listener forgets sb on the first. */
    void (*create_finished)(void *ud, sd_sandbox *sb, const error_rec *err);
    /* sb reached running (after create_finished): room may have been freed for more. */
    void (*started)(void *ud, sd_sandbox *sb);
    /* sb ended (its end reason and message are set), before its network and shim go. */
    void (*ended)(void *ud, sd_sandbox *sb);
    /* The shim reported that command ev.xid exited (the shim protocol's exit event). */
    void (*exec_exit)(void *ud, sd_sandbox *sb, json_t *ev);
    /* A running sb's shim answered a (re)connection's hello: a restarted daemon's, or after
     * the connection was lost. */
    void (*adopted)(void *ud, sd_sandbox *sb);
    /* The shim of sb, pausing or resuming (core/checkpoint.c), went away; a listener may make
     * sb paused (sd_sandbox_set_paused), else it ends as any sandbox whose shim died. */
    void (*shim_gone)(void *ud, sd_sandbox *sb);
    /* A pause of sb begins (core/checkpoint.c): its processes are about to be frozen and
     * saved; what reaches into it from outside (a port's proxied connection) cannot be
     * carried and is cut now. */
    void (*pausing)(void *ud, sd_sandbox *sb);
    /* A `sbx-shim cleanup` run for sb (ended without its shim's answer, or a failed resume) is
     * over: what its shim left is gone, its processes (a resume's CRIU) included. */
    void (*cleaned)(void *ud, sd_sandbox *sb);
} sd_listener;

#define SD_LISTENERS_MAX 12

struct sd_daemon {
    uv_loop_t *loop;                    /* main.c */
    sd_config cfg;                      /* config.c (pool.c fills pool_max_starting's default) */
    policy_host host;                   /* main.c */
    char seccomp_bpf[PATH_MAX];         /* main.c */
    char seccomp_grading_bpf[PATH_MAX]; /* main.c: the "grading" profile (docs/GRPO.md) */
    int cgroup_version;                 /* core/cgroup.c */
    char cgroup_parent[PATH_MAX];
    sd_sandbox *sandboxes;   /* core/registry.c */
    void *idem_index;        /* core/registry.c: Idempotency-Key -> sandbox (tsearch) */
    unsigned n_idem;         /* core/registry.c: keys in the index */
    struct sd_lease *leases; /* core/leases.c */
    unsigned char *slots;    /* core/registry.c: uid slot in use (allocated by main.c) */
    unsigned n_slots;
    /* core/quarantine.c: slots whose cleanup failed, held until their uids are free */
    struct sd_quarantine *quarantined;
    unsigned n_quarantined;     /* (each takes room: core/registry.c) */
    unsigned n_starting;        /* core/lifecycle.c */
    bool shutting_down;         /* main.c */
    sd_metrics m;               /* core/metrics.c (pool.c: pool counters) */
    struct sd_net *net;         /* core/network.c; NULL: networking off */
    struct sd_pool *pools;      /* core/pool.c */
    struct sd_fork *forks;      /* core/fork.c: forks in progress */
    unsigned fork_slots;        /* core/fork.c: the room forks hold while they copy */
    struct sd_commit *commits;  /* core/commit.c: commits in progress */
    uint64_t output_bytes;      /* core/exec.c: command output buffered for JSON answers */
    unsigned n_pools;           /* configured templates (pools[0..n_pools)) */
    unsigned n_demand_pools;    /* then demand templates (core/pool.c sd_pool_demand) */
    struct sd_images *images;   /* core/images.c: the image store */
    struct sd_gpus *gpus;       /* core/gpu.c: the GPU inventory and who holds what */
    struct sd_volumes *volumes; /* core/volumes.c: named volumes */
    struct sd_gvisor *gvisor;   /* core/gvisor.c: runsc on this node, or why it cannot run */
    struct sd_spares *spares;   /* core/spare.c: shims started ahead of need */
    uv_timer_t tick;            /* core/timers.c */
    uv_idle_t pool_later;       /* core/pool.c: the refill after a take, once its request went on */
    struct {
        const sd_listener *ops;
        void *ud;
    } listeners[SD_LISTENERS_MAX]; /* core/lifecycle.c */
    unsigned n_listeners;
    /* the upper layers' own state, opaque to the core */
    struct sd_http *http;        /* api/http.c */
    struct sd_api *api;          /* api/sandboxes.c */
    struct sd_sf *sf;            /* api/sandboxfusion.c */
    struct port_proxy *proxies;  /* api/ports.c: the port proxies in flight */
    struct sd_fleet *fleet;      /* fleet/fleet.c; NULL: not in a fleet */
    unsigned active_requests;    /* api/http.c */
    uv_signal_t sigterm, sigint; /* main.c */
};

/* Register a listener (at start-up). Returns -ENOSPC past SD_LISTENERS_MAX. */
int sd_listener_add(sd_daemon *d, const sd_listener *ops, void *ud);
