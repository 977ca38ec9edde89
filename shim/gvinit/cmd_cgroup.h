/* A cgroup per command inside gVisor (shim/exec.h, struct shim_exec_track): gVisor's kernel has
 * no subreaper, so a process that left its command's session (setsid) and whose parent ended is
 * out of the reaper's tree and of every session the command had; its cgroup still holds it
 * (a child is born in its parent's cgroup, and nothing in the sandbox can move it out). The
 * hierarchy is gVisor's `job` controller (no limit of its own) at /sys/fs/cgroup/cmd, root's
 * (0755/0644): the sandbox user can neither make a cgroup nor move a process. A small keeper,
 * the runner's child, stays gVisor's root to do both: chrooted into the hierarchy, with no
 * capability, no_new_privs, not dumpable and the sandbox's seccomp program, it makes a command's
 * cgroup and moves the runner (its parent, and nobody else) into it and out again, and empties
 * a cgroup into the root one (what an ended command left is kept, as in the native class). It
 * takes requests only on a socket the runner holds (close-on-exec; commands never see it). */
#pragma once

#include "shim/exec.h"

#include <linux/filter.h>

/* As gVisor's root, before the runner drops it: mount the hierarchy and start the keeper
 * (prog: the sandbox's seccomp program, which it installs last). -errno on failure. */
int sbx_cmd_cgroup_start(const struct sock_fprog *prog);

extern const struct shim_exec_track sbx_cmd_cgroup_track;
