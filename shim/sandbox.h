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

/* A spare's sandbox made before its directory is known (`sbx-shim spare`, sandboxd/core/spare.h):
 * a cgroup SHIMPROTO_SPARE_CGROUP<shim pid> limited to SHIM_SPARE_PIDS processes, and an init in
 * new pid and time namespaces inside it that has made its network, IPC, UTS and cgroup namespaces
 * (their kernel memory charged to that cgroup) and, given park_root (an empty host directory),
 * built a host image's root there in a mount namespace of its own, and waits (shim/init.c,
 * init_park). A build that can use it renames the cgroup to the sandbox's id and sets its
 * limits, and skips those steps (the root: when it fits, shim/init.c root_fits); anything else
 * (gvisor, GPUs) frees it and builds as usual. */
#define SHIM_SPARE_PIDS 8
/* A spare parks at this nice value (its init inherits it), so that on a busy host parking takes
 * the CPU the sandboxes being built and used leave (a spare is refilled right after a create,
 * beside that sandbox's first commands). Once handed a directory, the daemon puts the spare's
 * process group back at its own priority (the create waits on a spare still parking), and the
 * spare sets itself and its init to the priority it started with (shim_parked_nice). */
#define SHIM_SPARE_NICE 10
typedef struct shim_parked shim_parked;
int shim_parked_make(int cgroup_version, const char *cgroup_parent, const char *park_root,
                     shim_parked **ret, error_rec *err);
/* Set the calling process and p's init (p may be NULL) to nice. */
int shim_parked_nice(shim_parked *p, int nice);
/* Kills its init and removes its cgroup. */
void shim_parked_free(shim_parked *p);
static inline void shim_parked_freep(shim_parked **p) {
    shim_parked_free(*p);
}

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
    bool forked;         /* init forked by this build (not a parked one) */
    bool handed;         /* the parked init has the directory (step_handoff) */
    shim_parked *parked; /* until step_cgroup adopts or frees it */
    /* how long each build step took, waits included: "name=ms ... init.name=ms ... ready=ms" */
    char step_ms[1024];
} shim_sandbox;

/* Run every build step; on failure err says "step <name>: ..." and everything made is undone.
 * parked (may be NULL) is taken; when its init dies after the hand-off, the build goes again
 * with an init of its own (dir and its spec.json made again). */
int shim_sandbox_build(const char *dir, shim_parked *parked, shim_sandbox **ret, error_rec *err);
/* Kill every process (cgroup-wide), reap init, remove the cgroup and the directory. Idempotent. */
int shim_sandbox_teardown(shim_sandbox *sb, error_rec *err);
void shim_sandbox_free(shim_sandbox *sb);
static inline void shim_sandbox_freep(shim_sandbox **sb) {
    shim_sandbox_free(*sb);
}
/* The mark `sbx-shim cleanup` leaves in dir (under the dir's flock) before it looks for
 * shim.pid: a shim that comes to write shim.pid after it fails its build instead. */
#define SHIM_CLEANED_MARK "cleaned"
/* Reclaim what a killed shim left behind in dir: its processes, cgroup and the directory; a
 * shim still building in dir either is killed (its shim.pid written) or stops at shim.pid. */
int shim_sandbox_cleanup(const char *dir, error_rec *err);
/* Bytes used in the sandbox's writable layer. */
int shim_sandbox_disk_used(shim_sandbox *sb, uint64_t *ret);
