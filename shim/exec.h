/* Command execution inside the sandbox: init's service loop, the per-command reaper (a child
 * subreaper that owns the command's whole process tree) and the command process itself. */
#pragma once

#include "shim/ipc.h"

#include <linux/filter.h>

#include <signal.h>
#include <stdbool.h>

/* Set by init in a grading sandbox: every command's reaper takes its user's credentials
 * (shim/grading.h) before the command starts. */
extern bool shim_exec_grading;

/* Set by the gvisor class's runner (shim/gvinit/tty_relay.c): a terminal's master cannot leave
 * gVisor's kernel. The reaper then keeps it and the socket that came as the command's stdin
 * (shim/gvisor_tty.c made it), leads the terminal's session itself (tty: its slave side; the
 * command is the foreground job, in its own group), sends STARTED without the master and calls
 * this: it relays until reaped() says the command has ended (reaped() reaps; chld is the
 * blocked SIGCHLD). */
extern void (*shim_exec_tty_relay)(int master, int tty, int sock, pid_t cmd, const sigset_t *chld,
                                   bool (*reaped)(void));

/* Set by the gvisor class's runner (shim/gvinit/cmd_cgroup.h): gVisor's kernel has no subreaper,
 * so a command's whole tree is a cgroup of its own, whatever its sessions. enter puts init in
 * the command's new cgroup before its reaper is made (the reaper and everything below it are
 * born there; -errno refuses the exec), leave takes init out again; signal continues the reaper
 * and signals every process of the cgroup but the reaper (SIGKILL: until none is left) in place
 * of shim_proctree_signal (the cgroup holds the tree and its sessions: each gets the signal once),
 * -errno when it cannot read the cgroup (then the tree's walk does it); end follows the reaper's
 * end: killed (by its command), the rest of the cgroup is killed; otherwise what the command left
 * is kept, out of the cgroup. */
struct shim_exec_track {
    int (*enter)(uint64_t id);
    void (*leave)(void);
    int (*signal)(uint64_t id, pid_t reaper, int sig);
    void (*end)(uint64_t id, bool killed);
};
extern const struct shim_exec_track *shim_exec_track;

/* Serve SHIM_IPC_EXEC/KILL on ipc forever; exits when the shim goes away. */
_Noreturn void shim_exec_serve(int ipc, const struct sock_fprog *prog, shim_ipc_msg *buf);
