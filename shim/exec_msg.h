/* An exec request of the daemon (common/shimproto.h "exec") packed into init's message
 * (shim/ipc.h SHIM_IPC_EXEC, SHIM_IPC_FILE, SHIM_IPC_TTY); shim/server.c sends it. */
#pragma once

#include "common/spec.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* cwd\0 argv..\0 env..\0 into buf (the spec's env, overridden by the request's; a grading
 * sandbox's HOME and PYTHONNOUSERSITE; the grader's PATH with grader). Returns 0, -EINVAL for
 * a malformed field or -E2BIG when cap is too small; *len, *argc and *envc on success. */
int shim_exec_msg_pack(const shim_spec *spec, json_t *msg, bool grader, char *buf, size_t cap,
                       size_t *len, int *argc, int *envc);
/* exec's "file" {"name": N, "data": S} at buf + *off: N\0 then S's bytes (SHIM_IPC_FILE).
 * Returns 0 (*off advanced), -EINVAL or -E2BIG. */
int shim_exec_msg_pack_file(json_t *file, char *buf, size_t cap, size_t *off);
/* {"rows": R, "cols": C} as the 4-byte prefix of SHIM_IPC_TTY; 0 when out of range. */
size_t shim_exec_msg_tty_prefix(json_t *tty, unsigned char out[4]);
