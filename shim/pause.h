/* Pause to disk with CRIU, and the restore (docs/API.md "Pause and resume"). A pausable
 * sandbox (common/spec.h "pausable": its init made its user namespace first) is saved into a
 * checkpoint directory on the daemon's disk:
 *   images/   CRIU's images of the whole process tree, and CRIU's dump.log and restore.log
 *   mounts    the mounts CRIU was told are external, one "key mountpoint root" per line
 *   files/    root, workspace, tmp: the sandbox's files (the root's own, the mounts on it as
 *             empty stubs; /workspace and /tmp); an image's sandbox has upper (its overlay's
 *             upper directory, whiteouts and user.overlay.* attributes kept) instead of root
 *   image     an image's sandbox: what its root was made of (the store layers' names, or the
 *             directory), which a restore checks against its own spec
 *   checkpoint.json  (SHIMPROTO_CHECKPOINT_DONE) written last (atomically): the checkpoint is
 *             whole. Nothing is fsynced (as the daemon's records): a checkpoint outlives the
 *             daemon and the shim, not a power loss.
 * CRIU runs as `criu` from the host's PATH (common/spec.h spec_host_env). */
#pragma once

#include "common/error.h"
#include "shim/sandbox.h"

typedef struct shim_pause_info {
    double dump_ms;         /* CRIU's dump: the processes are frozen from its start */
    double files_ms;        /* the files' copy, the processes stopped */
    unsigned sockets_ended; /* bound to the network's address: ended first (shim/sockets.h) */
} shim_pause_info;

/* Pause sb (pausable: else -EOPNOTSUPP; running no command: `running` is how many the shim
 * runs, -EBUSY when any) into ckpt (an empty directory): init listens for the
 * shim (SHIM_IPC_PAUSE), CRIU dumps the tree and leaves it stopped, its files are copied; the
 * caller then ends the sandbox (shim_sandbox_teardown). On failure nothing is lost: the
 * processes go on, the shim reaches init again (sb->ipc is the new channel, -1 when that failed
 * too: init is gone) and err says why. sb->ipc is closed by the call either way. */
int shim_pause(shim_sandbox *sb, const char *ckpt, size_t running, shim_pause_info *ret,
               error_rec *err);
/* The build step of a sandbox restored from sb->spec->restore: its files put back on a new
 * writable layer, CRIU's restore of the tree (a child of this process, in the sandbox's cgroup),
 * and the channel to its init (sb->init_pid, sb->ipc). The checkpoint is left as it was. */
int shim_restore(shim_sandbox *sb, error_rec *err);
/* A pausable sandbox of an image: the shim, not init, holds its overlay's upper directory on
 * SHIM_UPPER_FD (for a commit and a pause; CRIU could not dump it in init). fd is taken, and
 * refused (-EPERM) unless a directory of the sandbox's root (uid_base) on a tmpfs. */
int shim_keep_upper(int fd, uid_t uid_base, error_rec *err);
