/* The process table (see process.h). A process's exec session is live, unlimited and keeps its
 * stdin open; its output goes to a ring of the last max_output bytes and to every watch. While
 * any watch is full, the session's output is not read (the command blocks on write); with no
 * watch it is read into the ring and never blocks. */
#include "sandboxd/core/process.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <stdlib.h>
#include <string.h>

struct sd_watch {
    sd_watch *next;
    sd_process *p;
    const sd_watch_ops *ops;
    void *ud;
    bool full, eof;
};

/* ---- the output ring ---- */

static void ring_push(ring *r, const char *data, size_t n) {
    if (r->cap == 0 || n == 0)
        return;
    if (n >= r->cap) {
        data += n - r->cap;
        n = r->cap;
    }
    size_t want = MIN(r->cap, r->len + n);
    if (r->alloc < want) { /* grows linearly (start is 0) until it is cap bytes */
        size_t na = r->len + n > r->cap ? r->cap : MAX(want, MIN(r->cap, r->alloc * 2));
        char *nd = realloc(r->data, na);
        if (!nd)
            return;
        r->data = nd;
        r->alloc = na;
    }
    for (size_t i = 0; i < n;) {
        size_t at = (r->start + r->len) % r->alloc;
        size_t k = MIN(n - i, r->alloc - at);
        memcpy(r->data + at, data + i, k);
        i += k;
        r->len += k;
        if (r->len > r->alloc) {
            r->start = (r->start + r->len - r->alloc) % r->alloc;
            r->len = r->alloc;
        }
    }
}

int sd_process_tail(const sd_process *p, int which, size_t max, char **ret, size_t *ret_len) {
    const ring *r = &p->out[which];
    size_t n = MIN(max, r->len);
    char *out = malloc(n + 1);
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        out[i] = r->data[(r->start + r->len - n + i) % r->alloc];
    out[n] = 0;
    *ret = out;
    *ret_len = n;
    return 0;
}

/* ---- the table ---- */

static void process_free(sd_process *p) {
    while (p->watches) {
        sd_watch *w = p->watches;
        p->watches = w->next;
        free(w);
    }
    json_decref(p->argv);
    json_decref(p->exit);
    free(p->out[0].data);
    free(p->out[1].data);
    free(p);
}

static void unlink_process(sd_process *p) {
    for (sd_process **pp = &p->sb->processes; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

/* At most SD_PROCESS_ENDED_KEPT ended ones (the list is newest first). */
static void prune(sd_sandbox *sb) {
    unsigned ended = 0;
    for (sd_process **pp = &sb->processes; *pp;) {
        sd_process *p = *pp;
        if (!p->running && p->e == NULL && ++ended > SD_PROCESS_ENDED_KEPT) {
            *pp = p->next;
            process_free(p);
        } else {
            pp = &p->next;
        }
    }
}

sd_process *sd_process_find(sd_sandbox *sb, int pid) {
    sd_process *ended = NULL;
    for (sd_process *p = sb->processes; p; p = p->next) {
        if (p->pid != pid)
            continue;
        if (p->running)
            return p;
        if (!ended && p->e == NULL)
            ended = p;
    }
    return ended;
}

/* ---- the session's news ---- */

static void on_started(void *ud, json_t *pid) {
    sd_process *p = ud;
    p->pid = (int)json_integer_value(pid);
    p->running = true;
    for (sd_watch *w = p->watches, *next; w; w = next) {
        next = w->next; /* a watch may leave from its callback */
        if (w->ops->started)
            w->ops->started(w->ud, p);
    }
}

static bool on_output(void *ud, int which, const char *data, size_t len) {
    sd_process *p = ud;
    p->bytes[which] += len;
    ring_push(&p->out[which], data, len);
    for (sd_watch *w = p->watches, *next; w; w = next) {
        next = w->next; /* a watch may leave from its callback (then it says not full) */
        if (w->ops->output(w->ud, which, data, len))
            w->full = true;
    }
    bool full = false;
    for (sd_watch *w = p->watches; w; w = w->next)
        full = full || w->full;
    return full;
}

/* Tell every watch and drop them; the process stays listed (ended) unless it never started. */
static void finish(sd_process *p, json_t *exit, const error_rec *err) {
    p->running = false;
    p->e = NULL;
    p->ended_ms = now_real_ms();
    p->exit = exit;
    while (p->watches) {
        sd_watch *w = p->watches;
        p->watches = w->next;
        w->ops->ended(w->ud, exit, err);
        free(w);
    }
    p->writer = NULL;
    p->n_watches = 0;
    if (!p->pid) {
        unlink_process(p);
        process_free(p);
        return;
    }
    prune(p->sb);
}

static void on_exited(void *ud, const sd_exec_result *r) {
    sd_process *p = ud;
    finish(p, sd_exec_result_json(r, p->bytes), NULL);
}

static void on_failed(void *ud, bool started, const error_rec *err) {
    sd_process *p = ud;
    json_t *exit = started
                       ? json_pack("{s:n,s:n,s:s,s:n,s:I,s:I,s:s}", "exit_code", "signal", "reason",
                                   "error", "duration", "stdout_bytes", (json_int_t)p->bytes[0],
                                   "stderr_bytes", (json_int_t)p->bytes[1], "message", err->message)
                       : NULL;
    finish(p, exit, err);
}

static void on_stdin_drained(void *ud) {
    sd_process *p = ud;
    if (p->writer && p->writer->ops->stdin_drained)
        p->writer->ops->stdin_drained(p->writer->ud);
}

static const sd_exec_ops exec_ops = {.started = on_started,
                                     .output = on_output,
                                     .exited = on_exited,
                                     .failed = on_failed,
                                     .stdin_drained = on_stdin_drained};

/* ---- starting and attaching ---- */

static sd_watch *watch_add(sd_process *p, const sd_watch_ops *ops, void *ud) {
    sd_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    *w = (sd_watch){.next = p->watches, .p = p, .ops = ops, .ud = ud};
    p->watches = w;
    p->n_watches++;
    return w;
}

int sd_process_start(sd_sandbox *sb, policy_exec *pe, const policy_process *pp,
                     const sd_watch_ops *ops, void *ud, sd_watch **ret, error_rec *err) {
    sd_process *p = calloc(1, sizeof(*p));
    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    *p = (sd_process){.sb = sb,
                      .argv = json_incref(pe->argv),
                      .tty = pp->tty,
                      .background = pp->background,
                      .started_ms = now_real_ms()};
    p->out[0].cap = p->out[1].cap = pe->max_output;
    sd_watch *w = ops ? watch_add(p, ops, ud) : NULL;
    if (ops && !w) {
        process_free(p);
        return error_set(err, -ENOMEM, "out of memory");
    }
    p->writer = w;
    sd_exec_opts o = {.keep_stdin = true,
                      .unlimited = true,
                      .tty = pp->tty,
                      .rows = pp->rows,
                      .cols = pp->cols,
                      .term = pp->term};
    int r = sd_exec_start_opts(sb, pe, &o, true, &exec_ops, p, &p->e, err);
    if (r < 0) {
        process_free(p);
        return r;
    }
    p->next = sb->processes;
    sb->processes = p;
    if (ret)
        *ret = w;
    return 0;
}

int sd_process_attach(sd_process *p, bool want_stdin, const sd_watch_ops *ops, void *ud,
                      sd_watch **ret, error_rec *err) {
    if (!p->running)
        return error_set(err, -ESRCH, "process %d has ended", p->pid);
    if (want_stdin && p->writer)
        return error_set(err, -EBUSY, "another attachment owns the stdin of process %d", p->pid);
    if (p->n_watches >= SD_PROCESS_WATCHES)
        return error_set(err, -EMLINK, "process %d has %d attachments already", p->pid,
                         SD_PROCESS_WATCHES);
    sd_watch *w = watch_add(p, ops, ud);
    if (!w)
        return error_set(err, -ENOMEM, "out of memory");
    if (want_stdin)
        p->writer = w;
    *ret = w;
    return 0;
}

static void maybe_resume(sd_process *p) {
    for (sd_watch *w = p->watches; w; w = w->next)
        if (w->full)
            return;
    if (p->e)
        sd_exec_resume(p->e);
}

void sd_watch_leave(sd_watch *w) {
    sd_process *p = w->p;
    for (sd_watch **pp = &p->watches; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    if (p->writer == w)
        p->writer = NULL;
    p->n_watches--;
    free(w);
    maybe_resume(p);
}

void sd_watch_resume(sd_watch *w) {
    if (!w->full)
        return;
    w->full = false;
    maybe_resume(w->p);
}

sd_process *sd_watch_process(const sd_watch *w) {
    return w->p;
}

bool sd_watch_has_stdin(const sd_watch *w) {
    return w->p->writer == w;
}

int sd_watch_write(sd_watch *w, const void *data, size_t len) {
    if (w->p->writer != w)
        return -EPERM;
    if (w->eof || !w->p->e)
        return -EPIPE;
    return sd_exec_write(w->p->e, data, len);
}

int sd_watch_close_stdin(sd_watch *w) {
    if (w->p->writer != w)
        return -EPERM;
    if (w->eof || !w->p->e)
        return -EPIPE;
    w->eof = true;
    sd_exec_close_stdin(w->p->e);
    return 0;
}

size_t sd_watch_stdin_pending(const sd_watch *w) {
    return w->p->e ? sd_exec_stdin_pending(w->p->e) : 0;
}

int sd_process_signal(sd_process *p, int signo) {
    if (!p->running || !p->e)
        return -ESRCH;
    return sd_exec_signal(p->e, signo, p->tty && signo != 9);
}

int sd_process_resize(sd_process *p, unsigned rows, unsigned cols) {
    if (!p->running || !p->e)
        return -ESRCH;
    return sd_exec_resize(p->e, rows, cols);
}

/* The sandbox ended (its sessions have failed by now): the table goes with it. */
static void on_ended(void *ud, sd_sandbox *sb) {
    while (sb->processes) {
        sd_process *p = sb->processes;
        sb->processes = p->next;
        if (p->e) { /* not yet told (listener order): forget the session */
            sd_exec_forget(p->e);
            p->e = NULL;
        }
        process_free(p);
    }
}

static const sd_listener listener = {.ended = on_ended};

int sd_process_init(sd_daemon *d) {
    return sd_listener_add(d, &listener, NULL);
}
