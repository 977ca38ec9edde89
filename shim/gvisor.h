/* The gVisor isolation class ("isolation":"gvisor", docs/SECURITY.md): init's side. Init builds
 * the sandbox's filesystem, network namespace and cgroup as for the native class, then starts
 * gVisor's `runsc run` (ptrace platform, host network = the sandbox's own namespace, no cgroup
 * changes: it runs in the sandbox's cgroup) as root of a user namespace mapped onto the
 * sandbox's uid range, chroots itself into the sandbox's root (the host side of the files API
 * and of forks and commits stays as in the native class) and relays the shim's exec channel to
 * sbx-gvisor-init, the command runner inside gVisor (shim/gvinit/main.c), whose end of the
 * channel is runsc's standard input. */
#pragma once

#include "common/error.h"
#include "shim/init.h"
#include "shim/ipc.h"

#include <signal.h>
#include <stdbool.h>

#include <jansson.h>

#define SHIM_GVISOR_INIT "sbx-gvisor-init"     /* next to sbx-shim on the host */
#define SHIM_GVISOR_INIT_PATH "/dev/.sbx-init" /* where gVisor's sandbox finds it (then gone) */
/* LD_PRELOADed into every command: statx without AT_NO_AUTOMOUNT (shim/gvinit/statx_preload.c) */
#define SHIM_GVISOR_STATX "sbx-gvisor-statx.so"
#define SHIM_GVISOR_STATX_PATH "/dev/.sbx-statx.so"

/* The host's pids limit of a gvisor sandbox's cgroup. The sandbox's own limit (spec "pids") is
 * enforced inside by gVisor's pids cgroup (sbx-gvisor-init): a fork past it is EAGAIN. The host
 * cgroup also holds gVisor's Sentry, gofer and, on the ptrace platform, a host thread for every
 * pair of Sentry thread and address space that ran on it: a recursive fork bomb held at 256
 * processes inside kept ~10,400 host tasks (2 CPUs). Past this limit the Sentry cannot make a
 * thread and the whole sandbox ends ("dead" reason "pids"). */
#define SHIM_GVISOR_HOST_PIDS(pids) ((uint64_t)(pids)*64)

/* Init's steps in the gvisor class, in this order (init.c runs them among its own):
 * prepare: <staging>/gv (the OCI bundle, runsc's state directory and log), as host root;
 * start: fork `runsc run` once init is root of the sandbox's user namespace;
 * chroot: init's own root becomes the sandbox's root (what /proc/<init>/root shows). */
int shim_gvisor_prepare(shim_init_ctx *c, error_rec *err);
int shim_gvisor_start(shim_init_ctx *c, error_rec *err);
int shim_gvisor_chroot(shim_init_ctx *c, error_rec *err);
/* After the last step: hand the seccomp program to the runner, relay until runsc ends. The
 * runner's ready message goes to the shim with init's step times before its own; a runsc that
 * ends before it is reported as "step gvisor: ..." with the end of runsc's log. */
_Noreturn void shim_gvisor_serve(shim_init_ctx *c, const char *times, size_t times_len);
/* A command's terminal (gvisor_tty.c): the packets between the host terminal's keeper and the
 * reaper inside gVisor (shim/gvinit/tty_relay.c), one type byte then the payload. */
#define SHIM_GVISOR_TTY_DATA 'd'   /* bytes, either way */
#define SHIM_GVISOR_TTY_SIZE 'w'   /* to the reaper: rows(2) cols(2), big-endian */
#define SHIM_GVISOR_TTY_SIGNAL 's' /* to the reaper: 1 byte, a signal for the foreground */
/* As host root before the user namespace: a private devpts instance at dir. */
int shim_gvisor_tty_prepare(const char *dir, error_rec *err);
/* A SHIM_IPC_TTY exec on its way to the runner: make the host terminal and its keeper; fds[0]
 * becomes the reaper's socket. 0 or -errno (then the exec fails with it). */
int shim_gvisor_tty_exec(const shim_ipc_msg *m, int fds[3], size_t nf);
/* The host terminal's master of exec id (the caller owns it), or -1. */
int shim_gvisor_tty_take(uint64_t id);
/* The reaper's side (shim/gvinit/tty_relay.c, set as shim_exec_tty_relay by the runner). */
void shim_gvisor_tty_relay(int master, int tty, int sock, pid_t cmd, const sigset_t *chld,
                           bool (*reaped)(void));

/* The shim's side: why a gvisor sandbox's init ended: its memory or its host pids limit, when
 * its cgroup counted an OOM kill or a refused fork since the start (oom_start, pids_start;
 * gVisor's own processes hold both: one OOM kill or one refused thread ends it). The reason
 * ("oom", "pids") with its message in msg, or NULL: another cause. */
typedef struct shim_sandbox shim_sandbox;
const char *shim_gvisor_end_cause(shim_sandbox *sb, uint64_t oom_start, uint64_t pids_start,
                                  char *msg, size_t len);
/* The OCI runtime spec (config.json) of the sandbox: its root, mounts and runner (gvisor_oci.c). */
json_t *shim_gvisor_oci(const shim_spec *spec, const char *staging);
