/* Starting the daemon's helper processes (sbx-shim and its `cleanup`) without forking the
 * daemon: posix_spawn, which glibc does with clone(CLONE_VM|CLONE_VFORK), so the daemon's page
 * tables are neither copied nor write-protected; the child's end is seen through a pidfd on
 * the loop and reaped there (no SIGCHLD handler, no waitpid of children it did not start). */
#pragma once

#include "common/macro.h" /* before uv.h: its sys/param.h keeps our MIN and MAX */

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

/* status: as waitpid's. */
typedef void (*sd_spawn_exit_fn)(void *ud, int status);

#define SD_SPAWN_FDS_MAX 4

/* Run path with argv and envp in a new session: stdin /dev/null, stdout and stderr the
 * daemon's stderr, fds[0..n_fds) as fd 3, 4, ... (at most SD_SPAWN_FDS_MAX), every other
 * descriptor closed, signals unblocked and at their defaults. exit_cb
 * (or NULL) runs on the loop once the child has ended and been reaped; the watch does not keep the
 * loop alive. *ret_pid (may be NULL): the child's pid, reaped only from the loop. Returns 0, or
 * -errno (the exec's own error included). */
int sd_spawn(uv_loop_t *loop, const char *path, char *const argv[], char *const envp[],
             const int *fds, size_t n_fds, sd_spawn_exit_fn exit_cb, void *ud, pid_t *ret_pid);
