/* The daemon's shared types: the daemon context, a sandbox, a running command (exec), a lease,
 * and the configuration. Every sandboxd/ file includes this; behaviour lives in the .c files
 * named after each concern (registry, lifecycle, shim_client, http, api_*, timers, state...). */
#pragma once

#include "common/error.h"
#include "common/log.h"
#include "policy/limits.h"
#include "policy/price.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct sd_daemon sd_daemon;
typedef struct sd_sandbox sd_sandbox;
typedef struct sd_exec sd_exec;
typedef struct sd_request sd_request;
typedef struct sd_shim sd_shim;
typedef struct sd_http sd_http;

typedef struct sd_config {
    char *config_path, *socket_path, *tcp, *token, *run_dir, *state_dir, *shim_path;
    char *seccomp_profile, *cgroup_parent;
    unsigned max_sandboxes, max_starting;
    enum log_level log_level;
    policy_price price;
    json_t *defaults; /* create defaults (operator overrides), object or NULL */
    json_t *network;  /* the config file's "network" object (sandboxd/net/daemon.c), or NULL */
    json_t *pools;    /* warm pool templates: array of create bodies with "size" (pool.c) */
    unsigned pool_max_starting; /* pool entries starting at once (refill budget) */
    json_t *images;       /* images: config "images" {"NAME": "/dir"}, or NULL (core/images.c) */
    json_t *image_import; /* images: config "image_import" {max_archive, max_unpacked} or NULL */
} sd_config;

typedef enum { SD_STARTING, SD_RUNNING, SD_ENDED } sd_state;

struct sd_sandbox {
    sd_daemon *d;
    sd_sandbox *next;
    char id[24]; /* "sb-" + 16 hex */
    sd_state state;
    policy_create spec;
    int uid_slot;
    char dir[PATH_MAX];                                /* run-dir/sandboxes/<id> */
    uint64_t created_ms, last_activity_ms, expires_ms; /* wall clock (survives restarts) */
    uint64_t ended_ms, start_mono_us;
    char end_reason[32];
    char end_message[256];
    double end_cost;
    int init_pid, shim_pid;
    sd_shim *shim;
    bool queued;           /* waiting for a start slot */
    bool hidden;           /* ended over 10 minutes ago; kept only for its Idempotency-Key */
    uv_pipe_t *start_pipe; /* reading the shim's start-up line */
    char start_line[1024];
    size_t start_len;
    sd_request **waiters; /* create requests waiting for the start */
    size_t n_waiters;
    char *idem_key;
    sd_exec *execs;
    unsigned commands_run;
    uint64_t next_xid;
    /* last stats from the shim */
    uint64_t cpu_usec, mem_bytes, mem_peak_bytes, pids, oom_kills;
    struct policy_egress *egress; /* network policy, NULL for none (sandboxd/net/daemon.c) */
    struct sd_net_sandbox *net;   /* its plumbing once running */
    struct sd_fork *fork;         /* the fork request it belongs to while it starts (api_fork.c) */
    char *seed_dir;               /* its starting files (a fork's snapshot layer), or NULL */
    uint32_t seed_uid_base;
    char forked_from[24]; /* the source's id for a fork, else "" */
    int pool;             /* a warm pool entry of template pool-1 (never handed out), 0: not */
    bool pooled;          /* handed out from a warm pool */
};

typedef struct sd_lease {
    struct sd_lease *next;
    char id[24];
    uint64_t ttl_ms, expires_ms;
} sd_lease;

typedef struct sd_metrics {
    uint64_t creates_ok, creates_error, creates_full;
    uint64_t ends[9];
    uint64_t execs[5]; /* exited signaled command_timeout oom_killed error */
    uint64_t create_buckets[12], create_count;
    double create_sum;
    uint64_t exec_buckets[12], exec_count;
    double exec_sum;
    double cost_total;
    uint64_t oom_kills;
    uint64_t pool_hits, pool_misses, pool_evictions;
} sd_metrics;

struct sd_daemon {
    uv_loop_t *loop;
    sd_config cfg;
    policy_host host;
    char seccomp_bpf[PATH_MAX];
    int cgroup_version;
    char cgroup_parent[PATH_MAX];
    sd_sandbox *sandboxes;
    sd_lease *leases;
    unsigned char *slots; /* uid slot in use */
    unsigned n_slots;
    unsigned n_starting;
    sd_http *http;
    uv_timer_t tick;
    uv_signal_t sigterm, sigint;
    bool shutting_down;
    unsigned active_requests;
    sd_metrics m;
    struct sd_net *net;    /* NULL: networking off */
    struct sd_pool *pools; /* warm pool templates (pool.c) */
    unsigned n_pools;
    struct sd_images *images; /* images: the image store (core/images.h) */
};

/* config.c */
int sd_config_load(int argc, char **argv, sd_config *cfg, error_rec *err);
void sd_config_done(sd_config *cfg);

/* registry.c */
sd_sandbox *sd_registry_find(sd_daemon *d, const char *id);
sd_sandbox *sd_registry_find_idem(sd_daemon *d, const char *key);
int sd_registry_add(sd_daemon *d, policy_create *spec, sd_sandbox **ret, error_rec *err);
void sd_registry_remove(sd_daemon *d, sd_sandbox *sb);
unsigned sd_registry_count_active(sd_daemon *d);
int sd_slot_alloc(sd_daemon *d);
void sd_slot_claim(sd_daemon *d, int slot);
void sd_slot_release(sd_daemon *d, int slot);
double sd_sandbox_cost(const sd_sandbox *sb);
json_t *sd_sandbox_to_json(const sd_sandbox *sb);
void sd_random_id(const char *prefix, char *buf, size_t len);
const char *sd_state_name(sd_state s);

/* lifecycle.c */
void sd_sandbox_start(sd_sandbox *sb);
void sd_start_queued(sd_daemon *d);
void sd_sandbox_end(sd_sandbox *sb, const char *reason, const char *fmt, ...) _printf_(3, 4);
void sd_sandbox_touch(sd_sandbox *sb);
int sd_sandbox_adopt(sd_sandbox *sb, error_rec *err);
void sd_sandbox_free(sd_sandbox *sb);
int sd_uid_base(int slot);

/* state.c */
int sd_state_save(sd_sandbox *sb);
void sd_state_remove(sd_daemon *d, const char *id);
int sd_state_restore(sd_daemon *d);
int sd_lease_save(sd_daemon *d, sd_lease *l);
void sd_lease_state_remove(sd_daemon *d, const char *id);

/* pool.c: warm pools of ready sandboxes per template (image, limits, network mode) */
int sd_pool_init(sd_daemon *d, error_rec *err);
void sd_pool_done(sd_daemon *d);
/* A running, never handed-out entry whose template matches c, or NULL (a miss when a template
 * of c's shape exists). */
sd_sandbox *sd_pool_take(sd_daemon *d, const policy_create *c);
/* Give entry sb to a create: its spec becomes c (moved), timers and cost start now. Returns
 * the state file's save result; on failure the caller ends sb (nobody has used it). */
int sd_pool_hand_out(sd_sandbox *sb, policy_create *c, const char *idem_key);
/* Start entries until every pool is full, within the budget and --max-sandboxes. */
void sd_pool_refill(sd_daemon *d);
/* End one pool entry to make room for a cold create. Returns true when one was ended. */
bool sd_pool_evict(sd_daemon *d);
/* images: true when a pool template names image `name` (core/images.c's delete check). */
bool sd_pool_uses_image(sd_daemon *d, const char *name);
/* After restore: the template index + 1 that a restored entry still fits, or 0. */
int sd_pool_match_restored(sd_daemon *d, const sd_sandbox *sb);
void sd_pool_metrics(sd_daemon *d, FILE *f);
/* A pool entry ended (failed: it did not start; refills pause a few seconds). */
void sd_pool_entry_ended(sd_sandbox *sb, bool failed);

/* timers.c */
void sd_timers_start(sd_daemon *d);
void sd_timers_tick(sd_daemon *d);

/* metrics.c */
void sd_metrics_end(sd_daemon *d, const char *reason, double cost);
void sd_metrics_exec(sd_daemon *d, const char *outcome, double seconds);
void sd_metrics_create(sd_daemon *d, const char *outcome, double seconds);
char *sd_metrics_render(sd_daemon *d);

/* cgroup.c */
int sd_cgroup_setup(sd_daemon *d, error_rec *err);
/* On exit: remove the v1 parent cgroups when no sandbox lives in them any more. */
void sd_cgroup_release(const sd_daemon *d);

/* seccomp (main.c) and listening sockets (listen.c) */
int sd_listen_unix(const char *path, int *ret_fd, error_rec *err);
int sd_listen_tcp(const char *hostport, int *ret_fd, error_rec *err);
int sd_listen_activated(void);
void sd_notify_ready(void);

/* api_*.c: request handlers, dispatched by api_router.c */
void sd_api_dispatch(sd_daemon *d, sd_request *req);
void sd_api_healthz(sd_daemon *d, sd_request *req);
void sd_api_info(sd_daemon *d, sd_request *req);
void sd_api_metrics(sd_daemon *d, sd_request *req);
void sd_api_create(sd_daemon *d, sd_request *req);
void sd_api_list(sd_daemon *d, sd_request *req);
void sd_api_get(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_delete(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_timeout(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_exec(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_files_get(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_files_put(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_fork(sd_daemon *d, sd_request *req, sd_sandbox *src);
/* A fork finished starting (status 201) or failed (message): called from sd_create_finish. */
void sd_fork_started(sd_sandbox *sb, int status, const char *msg);
void sd_api_lease_create(sd_daemon *d, sd_request *req);
void sd_api_lease_renew(sd_daemon *d, sd_request *req, const char *id);
void sd_api_lease_delete(sd_daemon *d, sd_request *req, const char *id);
void sd_leases_expire(sd_daemon *d);
int sd_lease_restore(sd_daemon *d, json_t *j);
/* images: api/images.c */
void sd_api_images_import(sd_daemon *d, sd_request *req);
void sd_api_images_list(sd_daemon *d, sd_request *req);
void sd_api_images_route(sd_daemon *d, sd_request *req, const char *rest);
/* Answer create requests waiting on sb (201 with the object, or the error). */
void sd_create_finish(sd_sandbox *sb, int status, const char *code, const char *msg);

/* api_exec.c: events for running commands */
void sd_exec_on_exit(sd_sandbox *sb, json_t *ev);
void sd_exec_abort_all(sd_sandbox *sb, const char *why);
unsigned sd_exec_count(const sd_sandbox *sb);
