/* The daemon's configuration: built-in defaults, the JSON config file, then command-line flags
 * (config.c). Read once at start-up; the core reads it through sd_daemon.cfg. */
#pragma once

#include "common/error.h"
#include "common/log.h"
#include "policy/price.h"

#include <jansson.h>

#define SD_SPARE_SHIMS_MAX 16 /* --spare-shims (core/spare.h) */

typedef struct sd_config {
    char *config_path, *socket_path, *tcp, *token, *run_dir, *state_dir, *shim_path;
    char *seccomp_profile, *cgroup_parent;
    unsigned max_sandboxes, max_starting;
    unsigned max_idem_keys; /* Idempotency-Keys kept (0: SD_IDEM_MAX) */
    enum log_level log_level;
    policy_price price;
    json_t *defaults; /* create defaults (operator overrides), object or NULL */
    json_t *network;  /* the config file's "network" object (core/network.c), or NULL */
    json_t *pools;    /* warm pool templates: array of create bodies with "size" (core/pool.c) */
    unsigned pool_max_starting;  /* pool entries starting at once (refill budget) */
    unsigned pool_demand_idle_s; /* demand pools: emptied after this long unasked; 0: none */
    unsigned spare_shims;        /* shims started ahead of need (core/spare.h); 0: none */
    char *sf_listen;             /* SandboxFusion-compatible TCP listener, or NULL (off) */
    unsigned sf_max_running;     /* SandboxFusion requests running at once (0: default) */
    unsigned sf_queue_timeout_s; /* how long one may wait for a sandbox (0: default) */
    json_t *images;       /* images: config "images" {"NAME": "/dir"}, or NULL (core/images.c) */
    json_t *image_import; /* images: config "image_import" {max_archive, max_unpacked} or NULL */
    /* fleet (docs/FLEET.md): fleet_etcd NULL is no fleet */
    char *fleet_etcd, *fleet_prefix, *node_name, *advertise_url, *fleet_token;
    char *fleet_ca;      /* CA file for other nodes' https:// URLs (a move's calls, fleet/move.c) */
    unsigned fleet_ttl;  /* seconds (default 5) */
    char *fleet_read;    /* "watch" (default) or "poll": how the node reads the fleet */
    json_t *node_labels; /* the config file's "node_labels" {"k": "v"} (published), or NULL */
    char *tls_cert, *tls_key; /* PEM files: the --tcp listener serves HTTPS */
    /* GPUs (core/gpu.c): the config file's "gpus" inventory and "gpu_control" nodes (NULL:
     * discover /dev/nvidia* under gpu_root, default the host's /) */
    json_t *gpus, *gpu_control;
    char *gpu_root;
    char *runsc; /* gVisor's runsc (core/gvisor.c): NULL: PATH; "none": the class is off */
} sd_config;

int sd_config_load(int argc, char **argv, sd_config *cfg, error_rec *err);
void sd_config_done(sd_config *cfg);
