/* The sandbox spec: `<dir>/spec.json`, written by the daemon (shim_spec_to_json) and read by
 * sbx-shim at start-up (shim_spec_parse): one struct, one schema, both directions here.
 *
 * {"id":"sb-0123abcd",                      [a-z0-9-]{1,64}
 *  "image":{"type":"host"} | {"type":"dir","path":"/abs/rootfs"}
 *         | {"type":"layers","layers":["/abs/bottom", ..., "/abs/top"]},   (images)
 *  "cpu":1.0, "memory":2147483648, "disk":1073741824, "pids":256,
 *  "uid_base":1065536,                      sandbox uid/gid 0..65535 -> uid_base..uid_base+65535
 *  "hostname":"sb-0123abcd", "env":["PATH=...", ...],
 *  "network":{"mode":"none"} | {"mode":"veth"},
 *  "etc_hosts":[["127.0.0.1","localhost"]], "dns":["10.0.0.1"],   (optional)
 *  "seccomp_bpf":"/path/seccomp.bpf",       raw struct sock_filter array (required)
 *  "cgroup":{"version":1|2, "parent":"..."},
 *  "seed":{"path":"/abs/layer", "uid_base":N},   (optional: a fork's starting files, below)
 *  "profile":"grading",                     (optional: a grading sandbox, docs/GRPO.md)
 *  "isolation":{"type":"gvisor","runsc":"/abs/runsc"}   (optional: the sandbox runs under
 *         gVisor's runsc, shim/gvisor.h; absent or {"type":"native"}: namespaces + seccomp)
 *  "gpus":{"devices":[{"path","name","major","minor"}],
 *          "binds":[{"source":"/host/file","path":"/in/sandbox"}]},   (optional: the GPU nodes
 *         the sandbox gets under /dev/<name> and alone may open, and the host driver files
 *         bound read-only into a store or directory image; checked and applied by shim/gpu.c)
 *  "volumes":[{"src":"/abs/host/mount","dst":"/cache","ro":true}],   (optional: named
 *         volumes, id-mapped binds of the daemon's volume mounts; shim/volumes.c)
 *  "pausable":true,                         (optional: init makes its user namespace first, so
 *         that CRIU can checkpoint the sandbox: shim/init.c, shim/pause.c)
 *  "restore":"/abs/checkpoint"}             (optional, pausable: the sandbox is restored from a
 *         checkpoint directory that shim/pause.c wrote, not built)
 * v2 parent: absolute directory of a delegated subtree; v1 parent: path relative to each
 * controller's mount (/sys/fs/cgroup/<ctrl>/<parent>/<id>). Unknown fields are ignored.
 * seed: a host directory with `workspace` and `tmp` (a snapshot of another sandbox whose uid
 * range starts at seed.uid_base); they are copied into the new sandbox's /workspace and /tmp,
 * owners shifted into its own range (shim/seed.c). */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHIM_ID_MAX 64
#define SPEC_FILE_MAX (1u << 20) /* the largest spec.json read */
/* images: a store image's init keeps its overlay's upper directory open on this descriptor
 * (O_PATH), so the daemon can commit the writable layer through /proc/<init>/fd/N (core/commit.c).
 */
#define SHIM_UPPER_FD 900
#define SHIM_UID_RANGE 65536u
#define SHIM_SANDBOX_UID 1000u
#define SHIM_GRADER_UID 1001u /* grading sandboxes only: the grader user */
#define SHIM_PROC_GID 999u    /* grading sandboxes: the /proc hidepid group (init only) */
#define SHIM_MAX_LAYERS 128   /* images: layers of one store image */

enum shim_image_type { SHIM_IMAGE_HOST, SHIM_IMAGE_DIR, SHIM_IMAGE_LAYERS };
enum shim_net_mode { SHIM_NET_NONE, SHIM_NET_VETH };

typedef struct shim_host_entry {
    char *addr;
    char *names; /* space-separated host names */
} shim_host_entry;

typedef struct shim_spec {
    char id[SHIM_ID_MAX + 1];
    enum shim_image_type image_type;
    char *image_path; /* SHIM_IMAGE_DIR only */
    char **layers;    /* SHIM_IMAGE_LAYERS: store layers, bottom first (images) */
    size_t n_layers;
    double cpu;      /* vCPUs; 0 = unlimited */
    uint64_t memory; /* bytes; 0 = unlimited */
    uint64_t disk;   /* bytes of the writable layer */
    uint64_t pids;
    uint32_t uid_base;
    char hostname[65];
    char **env; /* NULL-terminated */
    size_t n_env;
    enum shim_net_mode net_mode;
    shim_host_entry *hosts;
    size_t n_hosts;
    char **dns; /* NULL-terminated */
    size_t n_dns;
    char *seccomp_bpf;
    int cgroup_version; /* 1 or 2 */
    char *cgroup_parent;
    char *seed_path;        /* NULL: start empty */
    uint32_t seed_uid_base; /* the seed's owners are seed_uid_base + (0..65535) */
    bool grading;           /* "profile":"grading": two users, /grader, sbx-as-agent */
    json_t *gpus;           /* "gpus" object (shim/gpu.c), or NULL: no GPU */
    char *runsc;            /* "isolation" gvisor: runsc's absolute path; NULL: native */
    json_t *volumes;        /* "volumes" array (shim/volumes.c), or NULL: none */
    bool pausable;          /* "pausable":true: user namespace first (shim/init.c) */
    char *restore;          /* "restore": a checkpoint to restore (shim/pause.c), or NULL */
    /* not JSON, the shim's own: a pausable init's layers (a directory image: one), then its
     * seed's workspace and tmp, then its volumes, as detached id-mapped mounts
     * (SHIM_MOUNTS_SENT fds, -1 where none), made by the shim (shim/sandbox.c send_mounts,
     * shim/init.c step_userns_first), or NULL */
    int *layer_mounts;
} shim_spec;
/* Where in layer_mounts: the seed's two, the volumes; how many in all. */
#define SHIM_SEED_MOUNTS_AT(s)                                                                     \
    ((s)->image_type == SHIM_IMAGE_LAYERS ? (s)->n_layers : (s)->image_type == SHIM_IMAGE_DIR)
#define SHIM_VOLUME_MOUNTS_AT(s) (SHIM_SEED_MOUNTS_AT(s) + 2)
#define SHIM_MOUNTS_SENT(s) (SHIM_VOLUME_MOUNTS_AT(s) + json_array_size((s)->volumes))
/* Whether the shim sends them at all: a pausable sandbox with something to id-map. */
#define SHIM_SENDS_MOUNTS(s) ((s)->pausable && (SHIM_MOUNTS_SENT(s) > 2 || (s)->seed_path))

/* Parse and validate spec JSON text. */
int shim_spec_parse(const char *text, shim_spec **ret, error_rec *err);
/* Read and parse a spec file. */
int shim_spec_load(const char *path, shim_spec **ret, error_rec *err);
void shim_spec_free(shim_spec *s);
static inline void shim_spec_freep(shim_spec **s) {
    shim_spec_free(*s);
}
/* True when s matches [a-z0-9-]{1,64}. */
bool shim_spec_id_valid(const char *s);

/* The spec as JSON (what shim_spec_parse reads back), or NULL (out of memory). */
json_t *shim_spec_to_json(const shim_spec *s);
/* Set fields from their JSON form, validated as the reader does: env (["K=V", ...]),
 * etc_hosts ([[addr, name...], ...]) and dns ([addr, ...]). */
int shim_spec_set_env(shim_spec *s, json_t *env, error_rec *err);
int shim_spec_set_hosts(shim_spec *s, json_t *etc_hosts, error_rec *err);
int shim_spec_set_dns(shim_spec *s, json_t *dns, error_rec *err);

/* The environment of a sandbox's init and of every command before the create's and the
 * command's own variables: PATH, HOME=/workspace, LANG=C.UTF-8. */
extern const char *const spec_default_env[];
/* ["KEY=VALUE", ...]: spec_default_env, then the entries of env (an object of strings, or
 * NULL), in order. */
json_t *spec_env_json(json_t *env);
/* Append "KEY=value" for each member of the JSON object env to the array arr (NULL: nothing). */
void spec_env_append(json_t *arr, json_t *env);
/* The environment of helper processes the daemon runs on the host (sbx-shim, cp). */
extern char *spec_host_env[];
