/* Signalling a process's whole tree inside the sandbox: every live descendant of a root, found
 * through /proc's parent links (shim/exec.c's reapers are subreapers, so nothing escapes one
 * while it lives), and every process of the sessions in that tree (gVisor's kernel has no
 * subreaper: there an orphan goes to init at once, in its command's session). Async-signal-safe,
 * for init and a forked reaper. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Continue root, then signal every live descendant of it, and the other members of their
 * sessions (but the caller's), with sig. For SIGKILL, repeat until nothing is left alive
 * (bounded): a killed process cannot fork again and whatever was forked meanwhile is caught in
 * the next round. */
void shim_proctree_signal(pid_t root, int sig);

/* Init's children that are no reaper. A reaper's children go to init when it ends: after an
 * ordinary end, the processes its command deliberately left behind (SECURITY.md, "Commands and
 * their process trees"), which init keeps: shim_proctree_keep_orphans records every child of
 * init now that is_reaper does not name, with its session; shim_proctree_forget drops one init
 * has reaped (true when it was kept: its children are init's now, to keep in turn). After a
 * reaper was killed (by its own command: same user), its command's tree:
 * shim_proctree_kill_orphans kills every tree below init whose top is neither a reaper, nor
 * kept, nor in a kept one's session (a kept process's descendant that came to init later), nor
 * in a running command's session, round after round until none is left (a killed process's
 * children come to init too). Without a subreaper a running command's orphans are init's
 * children from the start: both leave what is in a running command's session (a live reaper's
 * child's, or a live reaper's own) to that command, neither kept nor killed until it ends. Both
 * also leave alone what is in a session is_cmd_session names: one init knows to be a command's
 * still (a reaper's not reaped yet, alive or not; for keep_orphans, one killed in the same batch
 * too: a reaper's death and another's ordinary end reaped together, when the dead reaper's
 * command is init's child already and the kernel tells it from a leftover by nothing).
 * Init's only, not async-signal-safe (keep_orphans allocates). */
void shim_proctree_keep_orphans(bool (*is_reaper)(pid_t), bool (*is_cmd_session)(pid_t));
bool shim_proctree_forget(pid_t pid);
void shim_proctree_kill_orphans(bool (*is_reaper)(pid_t), bool (*is_cmd_session)(pid_t));
