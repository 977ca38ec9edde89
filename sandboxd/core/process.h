/* The process table: commands started in the background or over the WebSocket (api/attach.c),
 * running or recently ended, per sandbox. Each owns an interactive exec session (core/exec.c),
 * keeps the last max_output bytes of each stream, and passes output on to its watches (at most
 * SD_PROCESS_WATCHES attachments; one of them may own stdin). See docs/API.md "Processes and
 * attach". Fields are written only here. */
#pragma once

#include "policy/process.h"
#include "sandboxd/core/exec.h"

#define SD_PROCESS_WATCHES 8
#define SD_PROCESS_ENDED_KEPT 64

typedef struct sd_process sd_process;
typedef struct sd_watch sd_watch;

/* News for one attachment. After ended the watch is gone. */
typedef struct sd_watch_ops {
    void (*started)(void *ud, sd_process *p); /* the starter's watch only */
    /* Return true when full: the command's output is not read until sd_watch_resume. */
    bool (*output)(void *ud, int which, const char *data, size_t len);
    /* exit: the exit record (borrowed); NULL with err when the command failed to start or its
     * sandbox ended. */
    void (*ended)(void *ud, json_t *exit, const error_rec *err);
    void (*stdin_drained)(void *ud); /* the stdin owner's watch only */
} sd_watch_ops;

typedef struct ring {
    char *data;
    size_t cap, alloc, start, len;
} ring;

struct sd_process {
    sd_process *next;
    sd_sandbox *sb;
    sd_exec *e; /* NULL once ended */
    int pid;    /* in the sandbox; 0 until started */
    json_t *argv;
    bool tty, background, running;
    uint64_t started_ms, ended_ms; /* wall clock */
    json_t *exit;                  /* once ended: the NDJSON exit line's fields */
    ring out[2];
    uint64_t bytes[2];
    sd_watch *watches, *writer;
    unsigned n_watches;
};

/* Register the table's listener (after sd_exec_init). */
int sd_process_init(sd_daemon *d);
/* Start pe in sb with pp's terminal options; the starter's watch (ops, ud) owns stdin. Returns
 * 0 (news comes through ops) or -errno with err (nothing started, no callback). */
int sd_process_start(sd_sandbox *sb, policy_exec *pe, const policy_process *pp,
                     const sd_watch_ops *ops, void *ud, sd_watch **ret, error_rec *err);
/* The running process with this pid, else the newest ended one; NULL when none. */
sd_process *sd_process_find(sd_sandbox *sb, int pid);
/* Attach: -ESRCH ended, -EBUSY stdin owned by another, -EMLINK too many watches. */
int sd_process_attach(sd_process *p, bool want_stdin, const sd_watch_ops *ops, void *ud,
                      sd_watch **ret, error_rec *err);
/* The watch goes (its owner is gone); the command goes on. */
void sd_watch_leave(sd_watch *w);
void sd_watch_resume(sd_watch *w);
sd_process *sd_watch_process(const sd_watch *w);
bool sd_watch_has_stdin(const sd_watch *w);
/* The stdin owner: -EPERM for another watch, -EPIPE after eof or the end. */
int sd_watch_write(sd_watch *w, const void *data, size_t len);
int sd_watch_close_stdin(sd_watch *w);
size_t sd_watch_stdin_pending(const sd_watch *w);
int sd_process_signal(sd_process *p, int signo);
int sd_process_resize(sd_process *p, unsigned rows, unsigned cols);
/* The last at most max bytes kept of stream which (malloc'ed into *ret, may be empty). */
int sd_process_tail(const sd_process *p, int which, size_t max, char **ret, size_t *ret_len);
