/* Running a helper program and keeping its output: posix_spawnp with stdin on /dev/null, its
 * stdout (and stderr, or /dev/null) on a pipe read into a buffer, an optional deadline. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Run argv with envp; out gets at most len - 1 bytes of its output, NUL-terminated (stderr
 * too when with_stderr, else it goes to /dev/null). deadline_ms < 0: read to the end and wait.
 * Else, past deadline_ms the child is killed (SIGKILL) and reaped, what it printed is kept and
 * the return is -ETIMEDOUT. Returns 0 with *ret_status (waitpid's) once it ended, or -errno
 * when it could not be started. */
int capture_run(char *const argv[], char *const envp[], bool with_stderr, int deadline_ms,
                char *out, size_t len, int *ret_status);
