/* Grading sandboxes ("profile":"grading", docs/GRPO.md "Grading sandboxes"): the grader user
 * (uid 1001) beside the agent (1000), /grader and the two empty HOMEs, /proc with hidepid, the
 * agent socket that only the grader can reach and the sbx-as-agent helper bound into the
 * sandbox. Everything here is called only for a spec with grading set. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

#include <stdbool.h>
#include <sys/types.h>

#define SHIM_GRADING_DIR "/grader"
#define SHIM_AGENT_HOME "/home/agent"
#define SHIM_GRADER_HOME "/home/grader"
#define SHIM_GRADING_BIN "/.sbx/bin"
#define SHIM_AGENT_SOCK_DIR "/.sbx/run" /* in the sandbox: <dir>/agent on the host */
#define SHIM_AGENT_SOCK "agent.sock"    /* in that directory */
#define SHIM_AS_AGENT "sbx-as-agent"    /* next to sbx-shim on the host */

/* Host side, before init is forked: <dir>/agent (0700, the grader's) with a listening
 * SOCK_SEQPACKET socket agent.sock in it; *ret_fd is the listening socket. */
int shim_grading_socket(const char *dir, const shim_spec *spec, int *ret_fd, error_rec *err);
/* In init, after the rootfs is prepared (before the seal): /grader, /home/{agent,grader},
 * /.sbx/bin/sbx-as-agent (read-only) and /.sbx/run (the agent socket's directory, dir/agent on
 * the host; dir: the sandbox's directory). */
int shim_grading_rootfs(const shim_spec *spec, const char *staging, const char *dir,
                        error_rec *err);
/* init's credentials in a grading sandbox: uid/gid 1000, supplementary group SHIM_PROC_GID,
 * and only CAP_SETUID, CAP_SETGID and CAP_KILL (to start commands as either user and to kill
 * the grader's trees); call after the bounding set is dropped. */
int shim_grading_init_credentials(error_rec *err);
/* In a reaper right after fork (async-signal-safe): become the command's user (the grader or
 * the agent) with no supplementary group and no capability. 0 or -errno. */
int shim_grading_become(bool grader);
