/* The daemon's cgroup subtree for the shims (v2: delegated; v1: one parent per controller). */
#pragma once

#include "sandboxd/core/context.h"

int sd_cgroup_setup(sd_daemon *d, error_rec *err);
/* Remove the empty cgroups under the parent whose process is gone: those spare shims parked
 * (`spare-<pid>`, core/spare.h) and, on v1, killed daemons' freeze anchors. */
void sd_cgroup_remove_stale(const sd_daemon *d);
/* On exit: remove the daemon's freeze anchor (v1), and the v1 parent cgroups when no sandbox
 * lives in them any more. */
void sd_cgroup_release(const sd_daemon *d);
/* The memory cgroup directory of sandbox id (v2: its cgroup; v1: the memory controller's). */
void sd_cgroup_memcg_dir(const sd_daemon *d, const char *id, char *buf, size_t len);
/* Whether a process in the daemon's cgroup subtree (where every sandbox's processes stay) has a
 * uid, real, effective, saved or filesystem, in [lo, lo + n): a uid slot's range still in use.
 * Other daemons' sandboxes on the host, with the same ranges, are not counted. */
bool sd_cgroup_uids_in_use(const sd_daemon *d, uid_t lo, uid_t n);
/* One pass over /proc: fn(ud, uid, name) for each process of the daemon's cgroup subtree with a
 * uid in [lo, lo + n) (the first of its real, effective, saved and filesystem uids that is),
 * name the cgroup right under the parent it is in (a sandbox's id, or spare-<pid>); fn returns
 * true to stop. Returns 0, or -errno when /proc cannot be read. */
typedef bool (*sd_cgroup_uid_user_fn)(void *ud, uid_t uid, const char *name);
int sd_cgroup_each_uid_user(const sd_daemon *d, uid_t lo, uid_t n, sd_cgroup_uid_user_fn fn,
                            void *ud);
/* Whether a cgroup directory of sandbox id is still there (v2: its one; v1: its memory or pids
 * controller's, which hold each of its processes): one or two access(2). A populated cgroup
 * cannot be removed and a sandbox's processes cannot leave theirs, so after its shim's teardown
 * none is there unless something of the sandbox may still run. */
bool sd_cgroup_sandbox_left(const sd_daemon *d, const char *id);
/* rmdir sandbox id's cgroup directories (v1: each controller's); true when none is left. */
bool sd_cgroup_sandbox_remove(const sd_daemon *d, const char *id);
/* Freeze (or thaw) sandbox id's cgroup, best effort. Returns 0 or -errno. */
int sd_cgroup_freeze(const sd_daemon *d, const char *id, bool frozen);
/* A copy's hold on sandbox id's freeze (hold) or its release (!hold): holds nest, so that a
 * fork's copy and a commit's of the same sandbox each keep it frozen; it freezes at the first
 * hold and thaws at the last release. Returns sd_cgroup_freeze's result (0 when only the count
 * changed). */
int sd_cgroup_freeze_hold(sd_daemon *d, const char *id, bool hold);
