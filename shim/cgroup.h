/* The sandbox's cgroup, v1 (one directory per controller) or v2 (one directory): creation,
 * limits, membership, statistics, OOM accounting, cgroup-wide kill and removal. */
#pragma once

#include "common/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SHIM_CGROUP_V1_MAX 6

typedef struct shim_cgroup {
    int version;
    size_t n;                              /* v1: controllers found; v2: 1 */
    char *dirs[SHIM_CGROUP_V1_MAX];        /* the sandbox's directories */
    const char *ctrls[SHIM_CGROUP_V1_MAX]; /* v1 controller of each dir (memory first) */
    int oom_fd; /* the OOM kill count's file, opened at its first read (-1 until then) */
} shim_cgroup;

typedef struct shim_cgroup_stats {
    uint64_t cpu_usec, mem_bytes, mem_peak_bytes, pids, oom_kills;
} shim_cgroup_stats;

/* Which hierarchy this host uses for resource control: 2 when a cgroup2 mount offers the
 * memory and pids controllers, 1 when v1 memory and pids hierarchies are mounted, else -ENOENT.
 * For v2, *ret_v2_mount (may be NULL) receives the cgroup2 mount point (malloc'd). */
int shim_cgroup_detect(char **ret_v2_mount);
/* Mount point of a v1 controller ("memory", "pids", ...) into buf. -ENOENT when absent. */
int shim_cgroup_v1_mount(const char *ctrl, char *buf, size_t len);

/* Resolve the sandbox's cgroup directories (nothing is created). v1: the devices controller
 * only with `devices` (a sandbox with device rules: GPUs) or when its directory exists. */
int shim_cgroup_open(int version, const char *parent, const char *id, bool devices,
                     shim_cgroup **ret, error_rec *err);
void shim_cgroup_free(shim_cgroup *cg);
static inline void shim_cgroup_freep(shim_cgroup **cg) {
    shim_cgroup_free(*cg);
}
/* mkdir the directories (parents too) and apply limits. cpu in vCPUs (0 = no quota),
 * memory in bytes (0 = no limit), swap is always off. */
int shim_cgroup_create(shim_cgroup *cg, double cpu, uint64_t memory, uint64_t pids, error_rec *err);
/* Apply limits to directories that exist (as create does after its mkdir). */
int shim_cgroup_limit(shim_cgroup *cg, double cpu, uint64_t memory, uint64_t pids, error_rec *err);
/* Rename every directory to a sibling named id (processes inside stay); all or nothing. */
int shim_cgroup_rename(shim_cgroup *cg, const char *id, error_rec *err);
int shim_cgroup_add_pid(shim_cgroup *cg, pid_t pid, error_rec *err);
/* v1: move the calling thread (a single-threaded process: the whole process) into every
 * directory by writing "0" to its `tasks` file. The kernel moves the writer itself without the
 * global threadgroup lock that a pid written to cgroup.procs takes, and whose write side waits
 * for an RCU grace period: 6-10 ms per sandbox on the 2-CPU VM, and the cause of the cold
 * create's spread (back to back, the lock's fast path is still switched off and the wait is
 * skipped; after a pause it is not). v2 has no such file for a process: -EOPNOTSUPP (the
 * caller writes the pid to cgroup.procs). */
int shim_cgroup_join_self(const shim_cgroup *cg, error_rec *err);
/* Send sig to every process in the cgroup (once; what forks meanwhile is not seen). */
int shim_cgroup_signal_all(shim_cgroup *cg, int sig);
/* SIGKILL every process in the cgroup and wait (bounded) until it is empty. */
int shim_cgroup_kill_all(shim_cgroup *cg);
/* Kill everything, then rmdir every directory. Missing directories are fine (idempotent). */
int shim_cgroup_destroy(shim_cgroup *cg, error_rec *err);
int shim_cgroup_stats_read(shim_cgroup *cg, shim_cgroup_stats *ret);
int shim_cgroup_oom_kills(shim_cgroup *cg, uint64_t *ret);
/* How many forks the pids limit refused (pids.events "max"). */
int shim_cgroup_pids_denials(shim_cgroup *cg, uint64_t *ret);
/* A descriptor that becomes readable when an OOM event may have happened (v1: eventfd on
 * memory.oom_control; v2: inotify on memory.events). Call shim_cgroup_oom_fd_drain after. */
int shim_cgroup_oom_fd(shim_cgroup *cg);
void shim_cgroup_oom_fd_drain(int fd);
