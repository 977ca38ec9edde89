/* Spare shims: sbx-shim processes started ahead of need (`sbx-shim spare PAD`), each already
 * exec'd and waiting on a pipe for the directory of the sandbox it is to build, so that a cold
 * create does not wait for the shim's spawn, exec and dynamic linking (about 1 ms of a 6 ms
 * create). `--spare-shims N` of them (default 1; 0: none; at most SD_SPARE_SHIMS_MAX, config.h).
 * Taken spares are replaced once no sandbox is starting (from a uv_idle on the loop's next
 * turn, checked again there), so that a new spare's exec does not compete for the CPU with the
 * shims and inits building sandboxes. A spare gets the daemon's cgroup version and parent and
 * parks a sandbox's start ahead (shim/sandbox.h, shim_parked_make): a cgroup `spare-<its pid>`
 * under the parent, and in it an init that has made its pid, time, network, IPC, UTS and cgroup
 * namespaces; a native create without GPUs adopts them (the cgroup renamed to the
 * sandbox's id, its limits set), so about 1.5 ms of a cold create is done before it is asked
 * for. Its init also builds the root of a sandbox of the host image in a mount namespace of its
 * own, on the empty directory `<run dir>/spare-root` (each spare's mount is its own and
 * invisible to the host); a create of the host image without volume, seed or GPU takes it
 * (about 1 ms more), any other builds its own. It holds no uid slot or image, and no
 * mount of the host's. It ends, removing what it parked, when the
 * daemon's end of its pipe closes; a parked cgroup left by a spare that was killed is removed
 * at the daemon's start and stop, when a create passes over the dead spare, and after a
 * `sbx-shim cleanup` (sd_cgroup_remove_stale). A spare runs the sbx-shim binary
 * of its start: after replacing sbx-shim in place, restart the daemon (or the next N sandboxes
 * are built by the old one). */
#pragma once

#include "common/error.h"
#include "sandboxd/core/context.h"

#define SD_SPARE_DIR_MAX 512 /* the longest sandbox directory a spare can take (its argv room) */

/* At start-up: spawns the spares (one that cannot start is logged as a warning, and creates
 * spawn their shims themselves). */
int sd_spares_init(sd_daemon *d, error_rec *err);

/* Replace taken spares soon (the core calls it when no sandbox is starting). */
void sd_spares_refill(sd_daemon *d);

/* Hand dir (whose spec.json is written) to a spare: *ret_status_fd is then the read end of its
 * start-up line, as fd 3 of a freshly spawned shim. -EAGAIN: no spare (none left, dir too
 * long, or the spare had died); the caller spawns a shim itself. */
int sd_spares_take(sd_daemon *d, const char *dir, int *ret_status_fd);

/* At the daemon's end: end the spares and wait (up to 3 s) until they have removed what they
 * parked. */
void sd_spares_stop(sd_daemon *d);
