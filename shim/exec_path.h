/* A command's last steps before its execve (shim/exec.c's command_main): its descriptors above
 * the three it keeps marked close-on-exec, and the search of its own PATH. Async-signal-safe:
 * they run in a process that shares its reaper's memory. */
#pragma once

/* Mark every descriptor from low up close-on-exec: close_range(CLOSE_RANGE_CLOEXEC), or, where
 * the kernel has none (before Linux 5.11), shim_exec_cloexec_walk. 0 or -errno. */
int shim_exec_cloexec_from(int low);
/* The same by walking /proc/self/fd (getdents64): 0 or -errno (no /proc, or a mark failed). */
int shim_exec_cloexec_walk(int low);

/* execvpe() that searches the command's own PATH (envp's, or a default), not ours. Returns
 * -errno when nothing could be executed (the most telling error of the search). */
int shim_exec_search(char *const argv[], char *const envp[]);
