/* Command execution inside the sandbox: init's service loop, the per-command reaper (a child
 * subreaper that owns the command's whole process tree) and the command process itself. */
#pragma once

#include "shim/ipc.h"

#include <linux/filter.h>

#include <stdbool.h>

/* Set by init in a grading sandbox: every command's reaper takes its user's credentials
 * (shim/grading.h) before the command starts. */
extern bool shim_exec_grading;

/* Serve SHIM_IPC_EXEC/KILL on ipc forever; exits when the shim goes away. */
_Noreturn void shim_exec_serve(int ipc, const struct sock_fprog *prog, shim_ipc_msg *buf);
