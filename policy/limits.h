/* Validation of API request bodies (create, exec, timeout, lease): every field with its type,
 * default and range, turning the user's JSON into typed structs. Pure: no I/O, no state. Errors
 * name the offending field ("cpu: must be ..."); error_rec.code is -EINVAL. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define POLICY_MAX_DURATION_MS (7ull * 24 * 3600 * 1000)
#define POLICY_MIN_MEMORY (16ull << 20)
#define POLICY_MAX_DISK (64ull << 30)
#define POLICY_MAX_OUTPUT (64ull << 20)
/* A sandbox's env goes with each of its commands, beside their argv, in one request of at most
 * 64 KiB of JSON (SHIMPROTO_MSG_MAX): a create's env is at most this much, as JSON. */
#define POLICY_MAX_ENV_JSON (48u << 10)
/* An image's config Env goes with each command too, beside that request, in init's message (160
 * KiB: shim/ipc.h SHIM_IPC_MAX): at most this much, as JSON, at import. */
#define POLICY_MAX_IMAGE_ENV_JSON (64u << 10)
/* cgroup v1 and v2 quotas have a floor of 1 ms per 100 ms period: 0.01 vCPU. */
#define POLICY_MIN_CPU 0.01
/* A cost cap below a micro-dollar (0.2 s of the default sandbox) or above a million dollars
 * means nothing the daemon can honour: refused. */
#define POLICY_MIN_COST_USD 1e-6
#define POLICY_MAX_COST_USD 1e6

/* What the host offers: the upper bounds of cpu and memory. */
typedef struct policy_host {
    double cpus;
    uint64_t memory_bytes;
} policy_host;

typedef enum { POLICY_NET_NONE, POLICY_NET_OPEN, POLICY_NET_ALLOW } policy_net_mode;

#define POLICY_PORTS_MAX 16

typedef struct policy_create {
    char *image; /* "host" or an image name, normalized to NAME:TAG (policy/image_name.h) */
    double cpu;
    uint64_t memory, disk;
    uint32_t pids;
    uint64_t idle_timeout_ms, timeout_ms;
    double max_cost_usd; /* 0: no cap */
    json_t *env;         /* object: string -> string */
    json_t *labels;      /* object: string -> string */
    policy_net_mode net_mode;
    json_t *net_allow;                /* array of strings, or NULL */
    char *lease;                      /* NULL when none */
    bool grading;                     /* "profile":"grading" (docs/GRPO.md "Grading sandboxes") */
    uint16_t ports[POLICY_PORTS_MAX]; /* inbound ports (policy/ports.h), n_ports of them */
    unsigned n_ports;
    unsigned gpus;      /* whole GPUs (policy/gpu.h); 0: none */
    json_t *gpu_uuids;  /* which GPUs (array of uuid strings), or NULL: any free */
    json_t *volumes;    /* [{"name","path","read_only"}] (policy/volumes.h), or NULL: none */
    bool on_idle_pause; /* "on_idle":"pause" (the default "end" is false; the API refuses it) */
    bool gvisor;        /* "isolation":"gvisor" (docs/SECURITY.md); false: "native" */
    bool pausable;      /* "pausable":true or "on_idle":"pause" (docs/API.md "Pause and resume") */
} policy_create;

typedef struct policy_exec {
    json_t *argv; /* non-empty array of strings */
    bool shell;
    json_t *env; /* object */
    char *cwd;
    unsigned char *stdin_data; /* NULL when no stdin */
    size_t stdin_len;
    uint64_t timeout_ms; /* 0: none (the sandbox's lifetime bounds it) */
    uint64_t max_output;
    bool as_grader; /* "user":"grader" (grading sandboxes only; the caller checks) */
    json_t *file;   /* {"name","data"}: shimproto's exec "file", written by the command's own
                     * process before its exec; set only by the daemon's callers (SandboxFusion),
                     * never from a request's body; NULL: none */
} policy_exec;

/* The keys a create body may carry (NULL-terminated); any other is refused (common/jsonkeys.h). */
extern const char *const policy_create_keys[];
/* Of those, the ones the operator's config "defaults" may set (policy_limits_parse_create's
 * `defaults` fills only these; the rest, e.g. labels, lease, ports, are a create's own). */
extern const char *const policy_defaults_keys[];

/* Parse a create body. `defaults` (may be NULL) is an object with the same fields that replaces
 * the built-in defaults (operator configuration); it is validated like the body. */
int policy_limits_parse_create(json_t *body, json_t *defaults, const policy_host *host,
                               policy_create *ret, error_rec *err);
void policy_create_done(policy_create *c);
/* A new sandbox's env (an object, or NULL) fits in POLICY_MAX_ENV_JSON as JSON "K=V" strings;
 * else -EINVAL naming env. Checked where a sandbox is asked for (create, fork, pools, the
 * config's defaults), not where a record is read back (state, restore, a move): one made
 * before the bound still loads. */
int policy_limits_check_env(json_t *env, error_rec *err);
/* An image's config Env (OCI image config: an array of "NAME=VALUE", later entries override
 * earlier ones), checked at import, since it goes with every command of the image's sandboxes:
 * a create env's bounds (256 entries, names of 1-256 characters, values of at most 32 KiB) and
 * POLICY_MAX_IMAGE_ENV_JSON in all. NULL passes; else -EINVAL naming "image: config Env". */
int policy_limits_check_image_env(json_t *env, error_rec *err);
/* Serialize the limits part back to JSON ({"cpu":..,"memory":..,...}) and the whole create
 * (for persistence; policy_limits_parse_create accepts it back). */
json_t *policy_create_to_json(const policy_create *c);

int policy_limits_parse_exec(json_t *body, policy_exec *ret, error_rec *err);
void policy_exec_done(policy_exec *e);

/* POST /v1/volumes: {"name": NAME (policy/volumes.h), "size": SIZE (default 1Gi, 16Mi..1Ti)};
 * name has room for POLICY_VOLUME_NAME_MAX + 1 bytes. */
int policy_limits_parse_volume(json_t *body, char *name, uint64_t *ret_size, error_rec *err);
/* {"timeout": duration} in [1s, 7d]. */
int policy_limits_parse_timeout(json_t *body, uint64_t *ret_ms, error_rec *err);
/* {"ttl": duration} in [1s, 7d], default 60s. */
int policy_limits_parse_lease(json_t *body, uint64_t *ret_ms, error_rec *err);

/* Field helpers (also used by the daemon's configuration parser). */
int policy_parse_size(json_t *v, const char *field, uint64_t *ret, error_rec *err);
int policy_parse_duration(json_t *v, const char *field, uint64_t *ret_ms, error_rec *err);
