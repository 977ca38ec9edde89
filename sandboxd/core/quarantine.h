/* uid slots held back after a failed `sbx-shim cleanup` or shim teardown: the sandbox's processes,
 * under that slot's uid range, may have outlived it, and a sandbox given the same uids could
 * signal, ptrace or read them (and they it). Such a slot is handed out again only once no process
 * of the daemon's cgroup subtree has a uid of its range; meanwhile the cleanup is retried with a
 * backoff, and the slot takes room on the node (sd_registry_count_active). */
#pragma once

#include "sandboxd/core/context.h"

#include <stdbool.h>

/* slot (< 0: none) is done with: `sbx-shim cleanup` of sandbox id's run dir dir ended, ok or not
 * (status as waitpid's; -1: it could not run). dir "": there was none when it began (its shim,
 * or an earlier cleanup that may have failed, removed it): it cleaned nothing, and the sandbox's
 * cgroups left are removed if empty. Freed at once when it succeeded on a run dir or nothing runs
 * under the slot's uids; else quarantined until nothing does. */
void sd_slot_cleaned(sd_daemon *d, int slot, int status, const char *id, const char *dir);
/* slot (< 0: none) is done with: the shim of sandbox id (run dir dir) tore it down and exited.
 * Freed at once unless its teardown left a cgroup of the sandbox (sd_cgroup_sandbox_left: a
 * populated one stays) that cannot be removed now while a process runs under the slot's uids;
 * then quarantined as above, the cgroups removed once they are empty. */
void sd_slot_torn_down(sd_daemon *d, int slot, const char *id, const char *dir);
/* At start-up, once the restored sandboxes hold their slots: one pass over /proc quarantines, as
 * above, each other slot under whose uids a process of the daemon's cgroup subtree runs (left by
 * sandboxes of an earlier run whose cleanup or teardown failed, or whose slot was quarantined,
 * when the daemon was killed or stopped: it forgot them). */
void sd_slots_quarantine_left(sd_daemon *d);
