/* One sandbox as the shim sees it from the host: the named, ordered build steps, the channel to
 * its init, and teardown. */
#pragma once

#include "common/error.h"
#include "shim/cgroup.h"
#include "common/spec.h"

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct shim_sandbox {
    char *dir;
    shim_spec *spec;
    shim_cgroup *cg;
    struct sock_filter *bpf;
    size_t bpf_len; /* instructions */
    pid_t init_pid; /* host pid of the sandbox's PID 1 */
    int ipc;        /* shim end of the shim <-> init channel */
    int listen_fd;  /* <dir>/shim.sock */
    int agent_fd;   /* grading sandboxes: <dir>/agent/agent.sock (shim/grading.h), else -1 */
    uint64_t started_ms;
    bool torn_down;
    /* how long each build step took, waits included: "name=ms ... init.name=ms ... ready=ms" */
    char step_ms[1024];
} shim_sandbox;

/* Run every build step; on failure err says "step <name>: ..." and everything made is undone. */
int shim_sandbox_build(const char *dir, shim_sandbox **ret, error_rec *err);
/* Kill every process (cgroup-wide), reap init, remove the cgroup and the directory. Idempotent. */
int shim_sandbox_teardown(shim_sandbox *sb, error_rec *err);
void shim_sandbox_free(shim_sandbox *sb);
static inline void shim_sandbox_freep(shim_sandbox **sb) {
    shim_sandbox_free(*sb);
}
/* Reclaim what a killed shim left behind in dir: its processes, cgroup and the directory. */
int shim_sandbox_cleanup(const char *dir, error_rec *err);
/* Bytes used in the sandbox's writable layer. */
int shim_sandbox_disk_used(shim_sandbox *sb, uint64_t *ret);
