/* The daemon's cgroup subtree for the shims (v2: delegated; v1: one parent per controller). */
#pragma once

#include "sandboxd/core/context.h"

int sd_cgroup_setup(sd_daemon *d, error_rec *err);
/* Remove the empty cgroups that spare shims which are gone parked under the parent
 * (`spare-<pid>`, core/spare.h). */
void sd_cgroup_remove_stale_spares(const sd_daemon *d);
/* On exit: remove the v1 parent cgroups when no sandbox lives in them any more. */
void sd_cgroup_release(const sd_daemon *d);
/* The memory cgroup directory of sandbox id (v2: its cgroup; v1: the memory controller's). */
void sd_cgroup_memcg_dir(const sd_daemon *d, const char *id, char *buf, size_t len);
/* Freeze (or thaw) sandbox id's cgroup, best effort. Returns 0 or -errno. */
int sd_cgroup_freeze(const sd_daemon *d, const char *id, bool frozen);
