/* A sandbox as the daemon's core holds it. Each group of fields is written only by the module
 * named next to it (through that module's functions); every other file only reads them.
 * Initial values come from the constructors: sd_registry_add (a new sandbox) and
 * core/state.c (a sandbox rebuilt from its record after a restart). */
#pragma once

#include "common/end_reason.h"
#include "sandboxd/core/context.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* SD_PAUSED: paused to disk (core/checkpoint.c): no processes, no shim; its checkpoint and
 * its uid slot are kept, its place on the node is not. */
typedef enum { SD_STARTING, SD_RUNNING, SD_ENDED, SD_PAUSED } sd_state;

struct sd_sandbox {
    /* core/registry.c: identity, the create, the table, visibility */
    sd_daemon *d;
    sd_sandbox *next;
    char id[64];        /* "sb-" + 16 hex (+ "." + node in a fleet) */
    char dir[PATH_MAX]; /* run-dir/sandboxes/<id> */
    policy_create spec;
    int uid_slot; /* -1: released */
    char *idem_key;
    char idem_digest[65];  /* with idem_key: sha256 of the create's body, hex; "" when unknown */
    bool hidden;           /* a warm pool entry, or ended long ago (kept for its Idempotency-Key) */
    unsigned freeze_holds; /* copies of its files that hold it frozen (core/cgroup.h) */
    char *seed_dir;        /* its starting files (a fork's snapshot layer), or NULL */
    uint32_t seed_uid_base;
    char forked_from[64]; /* the source's id for a fork, else "" */
    /* core/lifecycle.c: state, times, processes, the shim connection, the end */
    sd_state state;
    uint64_t created_ms, last_activity_ms, expires_ms; /* wall clock (survives restarts) */
    uint64_t ended_ms, start_mono_us;
    end_reason end_reason;
    char end_message[256];
    double end_cost;
    int init_pid, shim_pid;
    struct sd_shim *shim;
    bool queued;            /* waiting for a start slot */
    bool start_unconfirmed; /* restored from a "starting" record, its shim not yet heard */
    bool shim_exec_file;    /* its shim's hello says it takes exec's "file" (common/shimproto.h) */
    uv_pipe_t *start_pipe;  /* reading the shim's start-up line */
    char start_line[1024];
    size_t start_len;
    uint64_t cpu_usec, mem_bytes, mem_peak_bytes, pids, oom_kills; /* last stats from the shim */
    /* core/exec.c: running commands */
    struct sd_exec *execs;
    unsigned commands_run, commands_running;
    unsigned connections_open; /* api/ports.c: connections through the port proxy */
    uint64_t next_xid;
    /* core/process.c: background and attached commands, running and recently ended */
    struct sd_process *processes;
    /* core/network.c: network policy (NULL for none) and its plumbing once running */
    struct policy_egress *egress;
    struct sd_net_sandbox *net;
    /* core/fork.c: the fork request it belongs to while it starts */
    struct sd_fork *fork;
    /* core/pool.c */
    int pool;    /* a warm pool entry of template pool-1 (never handed out), 0: not */
    bool pooled; /* handed out from a warm pool */
    /* core/checkpoint.c: pause to disk and resume */
    bool pausing;             /* running, its shim saving the checkpoint */
    bool resuming;            /* starting from its checkpoint: a failure goes back to paused */
    uint64_t paused_ms;       /* wall clock of the pause (SD_PAUSED, and while resuming) */
    uint64_t paused_total_ms; /* time spent paused before: the cost leaves it out */
    uint64_t ckpt_bytes;      /* the checkpoint's size on disk */
    double ckpt_dump_ms, ckpt_files_ms, resume_ms;
    unsigned ckpt_sockets_ended; /* sockets on its network's address the pause ended */
    int net_slot;  /* its network's address slot before a pause (-1: none; core/network.c) */
    bool cleaning; /* a failed resume's leftovers are being removed */
    /* paused: the node of the fleet it is moving to (its checkpoint is being taken there);
     * ended "moved": the node that holds it now (requests for it are sent there) */
    char move_to[64];
    void (*ckpt_done)(void *ud, struct sd_sandbox *sb, const error_rec *err);
    void *ckpt_ud; /* the pending pause's or resume's caller (its request) */
};

static inline const char *sd_state_name(sd_state s) {
    return s == SD_STARTING  ? "starting"
           : s == SD_RUNNING ? "running"
           : s == SD_PAUSED  ? "paused"
                             : "ended";
}
