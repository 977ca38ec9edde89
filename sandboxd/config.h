/* The daemon's configuration: built-in defaults, the JSON config file, then command-line flags
 * (config.c). Read once at start-up; the core reads it through sd_daemon.cfg. */
#pragma once

#include "common/error.h"
#include "common/log.h"
#include "policy/price.h"

#include <jansson.h>

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
    unsigned pool_max_starting; /* pool entries starting at once (refill budget) */
} sd_config;

int sd_config_load(int argc, char **argv, sd_config *cfg, error_rec *err);
void sd_config_done(sd_config *cfg);
