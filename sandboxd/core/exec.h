/* Exec sessions: one running command in a sandbox. The core makes its three pipes, hands the
 * child ends to the shim, writes stdin, reads stdout/stderr (capped, buffered or passed on
 * live) and finishes the session on the shim's exit event. Its owner (api/exec.c) hears
 * through sd_exec_ops. */
#pragma once

#include "policy/limits.h"
#include "sandboxd/core/sandbox.h"

#include <errno.h>
#include <stdbool.h>

typedef struct sd_exec sd_exec;

typedef struct sd_exec_result {
    json_t *exit_code, *signal; /* borrowed; JSON null when none */
    end_reason reason;          /* exited, signaled, command_timeout or oom_killed */
    double duration;            /* seconds, as the shim measured */
    uint64_t bytes[2];          /* stdout, stderr: everything the command wrote */
    const char *data[2];        /* buffered output (not live): the first max_output bytes */
    size_t len[2];
    bool truncated[2];
    bool over_budget; /* cut short by the daemon-wide output budget, not only by max_output */
} sd_exec_result;

/* Output buffered for JSON answers, all commands together: past it, a command's buffered
 * output is cut (truncated, over_budget) until other answers have gone out. */
#define SD_OUTPUT_BUDGET (64ull << 20)

/* The error code of a command that could not start because the sandbox is at its pids limit
 * (the shim's error says "limit": "pids"): the sandbox's own limit, not a platform failure. */
#define SD_EXEC_E_PIDS (-EUSERS)

/* After exited or failed the session is gone for its owner. */
typedef struct sd_exec_ops {
    void (*started)(void *ud, json_t *pid);
    /* Live sessions only: output as it comes (within the cap). Return true when the consumer
     * is full: reads stop until sd_exec_resume. */
    bool (*output)(void *ud, int which, const char *data, size_t len);
    void (*exited)(void *ud, const sd_exec_result *res);
    /* err->code: -EINVAL (the command cannot run), -EBUSY (the sandbox is not running or
     * ended), SD_EXEC_E_PIDS (the sandbox is at its pids limit: nothing started), else an
     * internal failure. started: the started callback came. */
    void (*failed)(void *ud, bool started, const error_rec *err);
} sd_exec_ops;

/* Register the sessions' listener (exit events, sandbox ends). */
int sd_exec_init(sd_daemon *d);
/* Run pe in sb. live: output goes to ops->output, else it is buffered for the result. On
 * failure (returned) no callback comes. */
int sd_exec_start(sd_sandbox *sb, policy_exec *pe, bool live, const sd_exec_ops *ops, void *ud,
                  sd_exec **ret, error_rec *err);
/* The consumer took what it had (see ops->output). */
void sd_exec_resume(sd_exec *e);
/* In ops->exited of a buffered session: take stream which's output (r->data[which], r->len
 * bytes of it) instead of letting it go with the session. It keeps its share of the daemon's
 * output budget until sd_exec_output_free (the answer holding it has gone out). */
char *sd_exec_take_output(sd_exec *e, int which, size_t *ret_len);
void sd_exec_output_free(sd_daemon *d, char *data, size_t len);
/* The owner is gone: the command goes on, its output is discarded, no more callbacks. */
void sd_exec_forget(sd_exec *e);
