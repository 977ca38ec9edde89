/* Signalling a process's whole tree inside the sandbox: every live descendant of a root, found
 * through /proc's parent links (shim/exec.c's reapers are subreapers, so nothing escapes one
 * while it lives). Async-signal-safe, for init and a forked reaper. */
#pragma once

#include <sys/types.h>

/* Continue root, then signal every live descendant of it with sig. For SIGKILL, repeat until
 * nothing is left alive (bounded): a killed process cannot fork again and whatever was forked
 * meanwhile is caught in the next round. */
void shim_proctree_signal(pid_t root, int sig);
