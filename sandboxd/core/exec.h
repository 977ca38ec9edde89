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
    bool over_budget;    /* cut short by the daemon-wide output budget, not only by max_output */
    const char *message; /* borrowed: how it ended, when the shim says (a killed reaper); NULL */
} sd_exec_result;

/* The end's small fields as the API shows them: exit_code, signal, reason, duration,
 * stdout_bytes and stderr_bytes (bytes: the caller's count), and message when there is one. */
json_t *sd_exec_result_json(const sd_exec_result *r, const uint64_t bytes[2]);

/* Output buffered for JSON answers, all commands together: past it, a command's buffered
 * output is cut (truncated, over_budget) until other answers have gone out. */
#define SD_OUTPUT_BUDGET (64ull << 20)

/* The error code of a command that could not start because the sandbox is at its pids limit
 * (the shim's error says "limit": "pids"): the sandbox's own limit, not a platform failure. */
#define SD_EXEC_E_PIDS (-EUSERS)
/* sd_exec_start's argv, env and file do not fit in the shim's request (SHIMPROTO_MSG_MAX): the
 * caller's to shrink, as execve's E2BIG (the API's 400; sd_api_exec_reply_error). */
#define SD_EXEC_E_TOO_BIG (-E2BIG)

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
    /* Optional, sessions with keep_stdin: the stdin bytes held (sd_exec_stdin_pending) went
     * under SD_EXEC_STDIN_LOW. */
    void (*stdin_drained)(void *ud);
} sd_exec_ops;

/* How a session starts beyond its policy_exec (core/process.c's interactive commands). */
typedef struct sd_exec_opts {
    bool keep_stdin; /* stdin stays open for sd_exec_write until sd_exec_close_stdin */
    bool unlimited;  /* live output is passed on whole, not cut at max_output */
    bool tty;        /* a terminal from the sandbox's devpts: one stream (stdout) */
    unsigned rows, cols;
    const char *term; /* TERM, with tty */
} sd_exec_opts;

#define SD_EXEC_STDIN_HIGH (256u << 10)
#define SD_EXEC_STDIN_LOW (64u << 10)

/* Register the sessions' listener (exit events, sandbox ends). */
int sd_exec_init(sd_daemon *d);
/* Run pe in sb. live: output goes to ops->output, else it is buffered for the result. On
 * failure (returned) no callback comes: -EBUSY (sb not running), SD_EXEC_E_TOO_BIG, -ENOMEM,
 * -EIO (the shim). */
int sd_exec_start(sd_sandbox *sb, policy_exec *pe, bool live, const sd_exec_ops *ops, void *ud,
                  sd_exec **ret, error_rec *err);
/* sd_exec_start with opts (NULL: as sd_exec_start). */
int sd_exec_start_opts(sd_sandbox *sb, policy_exec *pe, const sd_exec_opts *opts, bool live,
                       const sd_exec_ops *ops, void *ud, sd_exec **ret, error_rec *err);
/* keep_stdin sessions: queue bytes for the command's stdin (copied). -EPIPE once stdin is
 * closed or the command stopped reading it for good. */
int sd_exec_write(sd_exec *e, const void *data, size_t len);
/* Bytes queued for stdin and not yet taken by the command. */
size_t sd_exec_stdin_pending(const sd_exec *e);
/* End of input: the pipe is closed after what is queued (a terminal gets its EOF character). */
void sd_exec_close_stdin(sd_exec *e);
/* Signal the command's whole tree or, with a terminal and foreground, the terminal's
 * foreground process group. Returns 0 or -errno. */
int sd_exec_signal(sd_exec *e, int signo, bool foreground);
/* A terminal's new size; -ENOTTY without one, -ESRCH once it is gone. */
int sd_exec_resize(sd_exec *e, unsigned rows, unsigned cols);
bool sd_exec_has_tty(const sd_exec *e);
/* The consumer took what it had (see ops->output). */
void sd_exec_resume(sd_exec *e);
/* In ops->exited of a buffered session: take stream which's output (r->data[which], r->len
 * bytes of it) instead of letting it go with the session. It keeps its share of the daemon's
 * output budget until sd_exec_output_free (the answer holding it has gone out). */
char *sd_exec_take_output(sd_exec *e, int which, size_t *ret_len);
void sd_exec_output_free(sd_daemon *d, char *data, size_t len);
/* The owner is gone: the command goes on, its output is discarded, no more callbacks. */
void sd_exec_forget(sd_exec *e);
