/* Exec sessions (core/exec.h). The shim's `exit` event ends a command: what is still readable
 * is drained, then the owner hears the result. While a live owner is full the command's
 * pipes are not read, so the command blocks on write instead of the daemon buffering. */
#include "sandboxd/core/exec.h"

#include "common/fdutil.h"
#include "common/shimproto.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/shim_client.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <string.h>
#include <unistd.h>

typedef struct outbuf {
    char *data;
    size_t len, cap;
    uint64_t bytes;
    bool truncated;
} outbuf;

struct sd_exec {
    sd_exec *next;
    sd_sandbox *sb;
    uint64_t xid;
    const sd_exec_ops *ops; /* NULL: the owner is gone */
    void *ud;
    bool live, started, finished;
    bool paused;      /* output reads stopped: the owner is full */
    bool over_budget; /* buffered output was cut at the daemon's output budget */
    uv_pipe_t *in, *out[2];
    uv_write_t wreq;
    unsigned char *stdin_data;
    size_t stdin_len;
    outbuf ob[2];
    uint64_t max_output, start_us;
    int open_handles;
    /* interactive sessions (sd_exec_opts) */
    bool keep_stdin, tty, stdin_closed;
    unsigned rows, cols;
    size_t in_pending;
    uv_shutdown_t shut;
};

/* Give the buffered output's share of the daemon's budget back. */
static void output_release(sd_exec *e, sd_daemon *d) {
    for (int i = 0; i < 2; i++) {
        d->output_bytes -= MIN(d->output_bytes, e->ob[i].len);
        free(TAKE_PTR(e->ob[i].data));
        e->ob[i].len = e->ob[i].cap = 0;
    }
}

char *sd_exec_take_output(sd_exec *e, int which, size_t *ret_len) {
    *ret_len = e->ob[which].len;
    e->ob[which].len = e->ob[which].cap = 0; /* its budget share goes with it */
    return TAKE_PTR(e->ob[which].data);
}

void sd_exec_output_free(sd_daemon *d, char *data, size_t len) {
    d->output_bytes -= MIN(d->output_bytes, len);
    free(data);
}

static void exec_maybe_free(sd_exec *e) {
    if (e->finished && e->open_handles == 0 && !e->sb) {
        free(e->stdin_data);
        free(e->ob[0].data);
        free(e->ob[1].data);
        free(e);
    }
}

static void handle_closed(uv_handle_t *h) {
    sd_exec *e = h->data;
    free(h);
    e->open_handles--;
    exec_maybe_free(e);
}

static void close_pipe(uv_pipe_t **p) {
    if (*p && !uv_is_closing((uv_handle_t *)*p))
        uv_close((uv_handle_t *)*p, handle_closed);
    *p = NULL;
}

static uv_pipe_t *open_pipe(sd_exec *e, int fd) {
    uv_pipe_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    uv_pipe_init(e->sb->d->loop, p, 0);
    p->data = e;
    e->open_handles++;
    if (uv_pipe_open(p, fd) < 0) {
        close_pipe(&p); /* the caller still owns fd */
        return NULL;
    }
    return p;
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void output_pause(sd_exec *e) {
    e->paused = true;
    for (int i = 0; i < 2; i++)
        if (e->out[i])
            uv_read_stop((uv_stream_t *)e->out[i]);
}

void sd_exec_resume(sd_exec *e) {
    if (!e->paused)
        return;
    e->paused = false;
    for (int i = 0; i < 2; i++)
        if (e->out[i])
            uv_read_start((uv_stream_t *)e->out[i], alloc_cb, read_cb);
}

void sd_exec_forget(sd_exec *e) {
    e->ops = NULL;
    e->ud = NULL;
    output_pause(e); /* nobody reads: the pipes fill and the command blocks on write */
}

/* Keep (or pass on) what fits under the cap and, buffered, under the daemon's output budget.
 * Returns true when a live owner is full. */
static bool got_output(sd_exec *e, int which, const char *data, size_t len) {
    outbuf *o = &e->ob[which];
    sd_daemon *d = e->sb->d;
    o->bytes += len;
    size_t keep = o->len < e->max_output ? MIN(len, e->max_output - o->len) : 0;
    if (!e->live && d->output_bytes + keep > SD_OUTPUT_BUDGET) {
        keep = d->output_bytes < SD_OUTPUT_BUDGET ? SD_OUTPUT_BUDGET - d->output_bytes : 0;
        e->over_budget = true;
    }
    if (keep < len)
        o->truncated = true;
    if (keep == 0)
        return false;
    if (e->live) {
        o->len += keep; /* counts what was passed on, for the cap */
        return e->ops && e->ops->output(e->ud, which, data, keep);
    }
    if (o->len + keep + 1 > o->cap) { /* doubling, up to the cap: no copy per read */
        size_t c = MAX(MAX(o->cap * 2, (size_t)65536), o->len + keep + 1);
        c = MIN(c, MAX(e->max_output + 1, o->len + keep + 1));
        char *n = realloc(o->data, c);
        if (!n)
            return false;
        o->data = n;
        o->cap = c;
    }
    memcpy(o->data + o->len, data, keep);
    o->len += keep;
    d->output_bytes += keep;
    return false;
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
    buf->base = malloc(65536);
    buf->len = buf->base ? 65536 : 0;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    sd_exec *e = s->data;
    int which = (uv_pipe_t *)s == e->out[0] ? 0 : 1;
    bool full = n > 0 && got_output(e, which, buf->base, (size_t)n);
    free(buf->base);
    if (full)
        output_pause(e);
    if (n < 0)
        close_pipe(&e->out[which]);
}

/* After the exit event: take what the pipe held at the exit, at most its capacity, without
 * waiting for EOF (a background process may hold the pipe open and keep writing) and never
 * more than a live owner takes (backpressure holds after the exit too); nothing for an owner
 * that is gone. */
static void drain(sd_exec *e) {
    char buf[65536];
    for (int i = 0; i < 2; i++) {
        if (!e->out[i])
            continue;
        uv_os_fd_t fd;
        if (e->ops && uv_fileno((uv_handle_t *)e->out[i], &fd) == 0) {
            int cap = fcntl(fd, F_GETPIPE_SZ);
            size_t left = cap > 0 ? (size_t)cap : sizeof(buf);
            bool full = false;
            while (left > 0 && !full) {
                ssize_t n = read(fd, buf, MIN(left, sizeof(buf)));
                if (n <= 0)
                    break;
                left -= (size_t)n;
                full = got_output(e, i, buf, (size_t)n);
            }
        }
        close_pipe(&e->out[i]);
    }
}

static void exec_detach(sd_exec *e) {
    sd_sandbox *sb = e->sb;
    if (!sb)
        return;
    for (sd_exec **pp = &sb->execs; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    sb->commands_running--;
    sd_shim_cancel(sb->shim, e);
    output_release(e, sb->d);
    e->sb = NULL;
    e->ops = NULL;
    close_pipe(&e->in);
    close_pipe(&e->out[0]);
    close_pipe(&e->out[1]);
    exec_maybe_free(e);
}

json_t *sd_exec_result_json(const sd_exec_result *r, const uint64_t bytes[2]) {
    json_t *j =
        json_pack("{s:O,s:O,s:s,s:f,s:I,s:I}", "exit_code", r->exit_code, "signal", r->signal,
                  "reason", end_reason_name(r->reason), "duration", r->duration, "stdout_bytes",
                  (json_int_t)bytes[0], "stderr_bytes", (json_int_t)bytes[1]);
    if (j && r->message) /* e.g. "the command's reaper was killed" */
        json_object_set_new(j, "message", json_string(r->message));
    return j;
}

static void result_of(sd_exec *e, json_t *ev, sd_exec_result *r) {
    json_t *code = json_object_get(ev, "exit_code"), *sig = json_object_get(ev, "signal");
    int reason = end_reason_from_name(json_string_value(json_object_get(ev, "reason")));
    if (json_is_integer(sig) && json_integer_value(sig) == 0)
        sig = NULL; /* the shim says 0 for "not signaled"; the API says null */
    *r = (sd_exec_result){
        .exit_code = code ? code : json_null(),
        .signal = sig ? sig : json_null(),
        .reason =
            reason >= END_EXITED && reason <= END_OOM_KILLED ? (end_reason)reason : END_EXITED,
        .duration = json_number_value(json_object_get(ev, "duration_ms")) / 1000.0,
        .message = json_string_value(json_object_get(ev, "message")),
    };
    for (int i = 0; i < 2; i++) {
        r->bytes[i] = e->ob[i].bytes;
        r->data[i] = e->live ? NULL : e->ob[i].data;
        r->len[i] = e->live ? 0 : e->ob[i].len;
        r->truncated[i] = e->ob[i].truncated;
    }
    r->over_budget = e->over_budget;
}

static void exec_exited(sd_sandbox *sb, json_t *ev) {
    uint64_t xid = (uint64_t)json_integer_value(json_object_get(ev, "xid"));
    sd_exec *e = sb->execs;
    while (e && e->xid != xid)
        e = e->next;
    if (!e || e->finished)
        return;
    drain(e);
    e->finished = true;
    sb->commands_run++;
    sd_sandbox_touch(sb);
    sd_exec_result res;
    result_of(e, ev, &res);
    /* metrics by the shim's word (an unknown reason counts as an error) */
    const char *rs = json_string_value(json_object_get(ev, "reason")) ?: "exited";
    int outcome = end_reason_from_name(rs);
    sd_metrics_exec(&sb->d->m, outcome, (double)(now_mono_us() - e->start_us) / 1e6);
    log_debug("command ended sandbox=%s xid=%llu reason=%s", sb->id, (unsigned long long)xid,
              end_reason_name(res.reason));
    if (e->ops)
        e->ops->exited(e->ud, &res);
    exec_detach(e);
}

static void exec_fail(sd_exec *e, int code, const char *msg) {
    e->finished = true;
    sd_metrics_exec(&e->sb->d->m, SD_EXEC_ERROR, 0);
    error_rec err = {0};
    error_set(&err, code, "%s", msg);
    if (e->ops)
        e->ops->failed(e->ud, e->started, &err);
    exec_detach(e);
}

/* A sandbox that ran out of memory as a whole (gvisor: docs/API.md "Isolation classes"): its
 * running commands were OOM-killed with it, a result like the native class's oom_killed. */
static void oom_all(sd_sandbox *sb) {
    for (sd_exec *e = sb->execs, *next; e; e = next) {
        next = e->next;
        if (!e->started)
            continue;
        json_t *ev = json_pack("{s:I,s:s,s:i,s:n,s:f}", "xid", (json_int_t)e->xid, "reason",
                               "oom_killed", "signal", SIGKILL, "exit_code", "duration_ms",
                               (double)(now_mono_us() - e->start_us) / 1000.0);
        if (ev)
            exec_exited(sb, ev);
        json_decref(ev);
    }
}

static void abort_all(sd_sandbox *sb) {
    if (sb->end_reason == END_OOM_KILLED)
        oom_all(sb);
    while (sb->execs) {
        char msg[400];
        snprintf(msg, sizeof(msg), "sandbox %s ended while the command ran: %s: %s", sb->id,
                 end_reason_name(sb->end_reason), sb->end_message);
        exec_fail(sb->execs, -EBUSY, msg);
    }
}

static void write_done(uv_write_t *w, int status) {
    sd_exec *e = w->data;
    if (!e->keep_stdin)
        sd_exec_close_stdin(e);
}

static void start_io(sd_exec *e) {
    for (int i = 0; i < 2; i++)
        if (e->out[i])
            uv_read_start((uv_stream_t *)e->out[i], alloc_cb, read_cb);
    uv_stream_t *in = e->tty ? (uv_stream_t *)e->out[0] : (uv_stream_t *)e->in;
    if (in && e->stdin_len) {
        uv_buf_t b = uv_buf_init((char *)e->stdin_data, (unsigned)e->stdin_len);
        e->wreq.data = e;
        if (uv_write(&e->wreq, in, &b, 1, write_done) < 0)
            close_pipe(&e->in);
    } else if (!e->keep_stdin) {
        sd_exec_close_stdin(e);
    }
}

/* The terminal's master side comes with the shim's started reply. */
static uv_pipe_t *tty_take(sd_exec *e) {
    int fd = sd_shim_take_fd(e->sb->shim);
    if (fd < 0)
        return NULL;
    fd_set_nonblock(fd, 1);
    uv_pipe_t *p = open_pipe(e, fd);
    if (!p)
        safe_close(fd);
    return p;
}

static void started_reply(void *ud, json_t *reply) {
    sd_exec *e = ud;
    if (e->finished || !e->sb)
        return;
    if (!reply || strcmp(shimproto_type(reply), "started") != 0) {
        error_rec err = {0};
        if (reply)
            shimproto_error_parse(reply, &err);
        else
            error_set(&err, -ECONNRESET, "the shim went away");
        /* the command's own (its program, cwd or file): not the platform's */
        static const int own[] = {ENOENT,  EINVAL, ENOTDIR, EACCES, ENOEXEC,      EISDIR, ELOOP,
                                  ETXTBSY, ENOSPC, EDQUOT,  EFBIG,  ENAMETOOLONG, EROFS,  E2BIG};
        bool user = false;
        for (size_t i = 0; i < ARRAY_SIZE(own); i++)
            user = user || err.code == -own[i];
        const char *limit = json_string_value(json_object_get(reply, "limit"));
        bool pids = limit && strcmp(limit, "pids") == 0; /* nothing started */
        exec_fail(e, pids ? SD_EXEC_E_PIDS : user ? -EINVAL : -EIO, err.message);
        return;
    }
    e->started = true;
    if (e->tty && !(e->out[0] = tty_take(e))) {
        exec_fail(e, -EIO, "the shim sent no terminal");
        return;
    }
    /* the body's stdin is queued before the owner hears of the start: what it writes from
     * then on (an attachment's early frames, api/attach.c) comes after it */
    start_io(e);
    if (e->ops && e->ops->started)
        e->ops->started(e->ud, json_object_get(reply, "pid") ?: json_null());
}

/* The command's environment: the sandbox's, with the command's laid over it. */
static json_t *exec_env(sd_sandbox *sb, json_t *extra) {
    json_t *merged = json_deep_copy(sb->spec.env);
    json_object_update(merged, extra);
    json_t *env = spec_env_json(merged);
    json_decref(merged);
    return env;
}

static json_t *exec_msg(sd_exec *e, policy_exec *pe) {
    json_t *msg = json_pack("{s:I,s:O,s:o,s:s,s:I,s:b}", "xid", (json_int_t)e->xid, "argv",
                            pe->argv, "env", exec_env(e->sb, pe->env), "cwd", pe->cwd, "timeout_ms",
                            (json_int_t)pe->timeout_ms, "shell", pe->shell);
    if (msg && pe->as_grader)
        json_object_set_new(msg, "user", json_string("grader"));
    if (msg && pe->file)
        json_object_set(msg, "file", pe->file);
    return msg;
}

/* A request the shim protocol cannot carry is the caller's to shrink (SD_EXEC_E_TOO_BIG); other
 * send failures are the daemon's. */
static int send_failed(int r, error_rec *err) {
    if (r == -EMSGSIZE)
        return error_set(err, SD_EXEC_E_TOO_BIG,
                         "argv and env: too large (the command's request to the sandbox is over "
                         "%d bytes as JSON): pass large data as stdin or as a file",
                         SHIMPROTO_MSG_MAX);
    return error_set_errno(err, r, "cannot send the command to the shim");
}

/* A terminal: the shim makes it in the sandbox and sends the master side with its started
 * reply; the three descriptors the request needs are /dev/null. */
static int exec_send_tty(sd_exec *e, policy_exec *pe, error_rec *err) {
    _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        return error_set_errno(err, negative_errno(), "open /dev/null");
    json_t *msg = exec_msg(e, pe);
    json_object_set_new(msg, "tty", json_pack("{s:i,s:i}", "rows", e->rows, "cols", e->cols));
    int fds[3] = {null, null, null};
    int r = sd_shim_request(e->sb->shim, "exec", msg, fds, 3, started_reply, e);
    if (r < 0)
        return send_failed(r, err);
    return 0;
}

/* A command with nothing to read gets /dev/null as its stdin (as `docker exec` without -i):
 * end of file at once, without a pipe to make, watch, shut and close on the exec's path.
 * Else a pipe; in[0] is the command's end. */
static int stdin_make(sd_exec *e, int in[2], error_rec *err) {
    if (e->stdin_len > 0 || e->keep_stdin)
        return pipe2(in, O_CLOEXEC) < 0 ? error_set_errno(err, negative_errno(), "pipe") : 0;
    in[1] = -1;
    in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in[0] < 0)
        return error_set_errno(err, negative_errno(), "open /dev/null");
    e->stdin_closed = true; /* nothing to close at the start */
    return 0;
}

/* Make the pipes, send the exec request. Returns 0 or -errno (message in err). */
static int exec_send(sd_exec *e, policy_exec *pe, error_rec *err) {
    int in[2], out[2], errp[2];
    int r = stdin_make(e, in, err);
    if (r < 0)
        return r;
    if (pipe2(out, O_CLOEXEC) < 0) {
        safe_close(in[0]), safe_close(in[1]);
        return error_set_errno(err, negative_errno(), "pipe");
    }
    if (pipe2(errp, O_CLOEXEC) < 0) {
        safe_close(in[0]), safe_close(in[1]), safe_close(out[0]), safe_close(out[1]);
        return error_set_errno(err, negative_errno(), "pipe");
    }
    json_t *msg = exec_msg(e, pe);
    int fds[3] = {in[0], out[1], errp[1]};
    r = sd_shim_request(e->sb->shim, "exec", msg, fds, 3, started_reply, e);
    safe_close(in[0]), safe_close(out[1]), safe_close(errp[1]);
    e->in = in[1] < 0 ? NULL : open_pipe(e, in[1]);
    e->out[0] = open_pipe(e, out[0]);
    e->out[1] = open_pipe(e, errp[0]);
    if (!e->in)
        safe_close(in[1]);
    if (!e->out[0])
        safe_close(out[0]);
    if (!e->out[1])
        safe_close(errp[0]);
    if (r < 0)
        return send_failed(r, err);
    return 0;
}

int sd_exec_start(sd_sandbox *sb, policy_exec *pe, bool live, const sd_exec_ops *ops, void *ud,
                  sd_exec **ret, error_rec *err) {
    return sd_exec_start_opts(sb, pe, NULL, live, ops, ud, ret, err);
}

int sd_exec_start_opts(sd_sandbox *sb, policy_exec *pe, const sd_exec_opts *opts, bool live,
                       const sd_exec_ops *ops, void *ud, sd_exec **ret, error_rec *err) {
    if (sb->state != SD_RUNNING || !sb->shim || sb->pausing) /* (a pause would not carry it) */
        return error_set(err, -EBUSY, "sandbox %s is %s", sb->id,
                         sb->state == SD_ENDED    ? "ended"
                         : sb->state == SD_PAUSED ? "paused (resume it first)"
                         : sb->pausing            ? "pausing"
                                                  : "not running yet");
    sd_exec *e = calloc(1, sizeof(*e));
    if (!e)
        return error_set(err, -ENOMEM, "out of memory");
    *e = (sd_exec){.sb = sb,
                   .xid = sb->next_xid++,
                   .ops = ops,
                   .ud = ud,
                   .live = live,
                   .max_output = pe->max_output,
                   .start_us = now_mono_us(),
                   .stdin_data = TAKE_PTR(pe->stdin_data),
                   .stdin_len = pe->stdin_len,
                   .next = sb->execs};
    if (opts) {
        e->keep_stdin = opts->keep_stdin;
        e->tty = opts->tty;
        e->rows = opts->rows;
        e->cols = opts->cols;
        if (opts->unlimited)
            e->max_output = UINT64_MAX;
        if (opts->tty && opts->term)
            json_object_set_new(pe->env, "TERM", json_string(opts->term));
    }
    sb->execs = e;
    sb->commands_running++;
    int r = e->tty ? exec_send_tty(e, pe, err) : exec_send(e, pe, err);
    if (r < 0) {
        /* the caller hears through the return value; a request too big is its own, no command
         * failed (not counted) */
        e->ops = NULL;
        if (err->code == SD_EXEC_E_TOO_BIG) {
            e->finished = true;
            exec_detach(e);
            return err->code;
        }
        exec_fail(e, -EIO, err->message);
        return err->code = -EIO;
    }
    *ret = e;
    return 0;
}

static void on_exec_exit(void *ud, sd_sandbox *sb, json_t *ev) {
    exec_exited(sb, ev);
}

static void on_ended(void *ud, sd_sandbox *sb) {
    abort_all(sb);
}

static const sd_listener listener = {.exec_exit = on_exec_exit, .ended = on_ended};

int sd_exec_init(sd_daemon *d) {
    return sd_listener_add(d, &listener, NULL);
}

/* ---- interactive sessions ---- */

typedef struct wchunk {
    uv_write_t w;
    size_t len;
    char data[];
} wchunk;

static uv_stream_t *stdin_stream(sd_exec *e) {
    if (e->stdin_closed || e->finished)
        return NULL;
    return e->tty ? (uv_stream_t *)e->out[0] : (uv_stream_t *)e->in;
}

static void chunk_done(uv_write_t *w, int status) {
    wchunk *c = (wchunk *)w;
    sd_exec *e = w->data;
    bool was_high = e->in_pending >= SD_EXEC_STDIN_LOW;
    e->in_pending -= c->len;
    free(c);
    if (status < 0 && status != UV_ECANCELED && !e->tty)
        close_pipe(&e->in); /* the command closed its stdin: nothing more goes in */
    if (was_high && e->in_pending < SD_EXEC_STDIN_LOW && e->ops && e->ops->stdin_drained)
        e->ops->stdin_drained(e->ud);
}

int sd_exec_write(sd_exec *e, const void *data, size_t len) {
    uv_stream_t *in = stdin_stream(e);
    if (!in)
        return -EPIPE;
    if (len == 0)
        return 0;
    wchunk *c = malloc(sizeof(*c) + len);
    if (!c)
        return -ENOMEM;
    memcpy(c->data, data, len);
    c->len = len;
    c->w.data = e;
    uv_buf_t b = uv_buf_init(c->data, (unsigned)len);
    int r = uv_write(&c->w, in, &b, 1, chunk_done);
    if (r < 0) {
        free(c);
        return -EPIPE;
    }
    e->in_pending += len;
    return 0;
}

size_t sd_exec_stdin_pending(const sd_exec *e) {
    return e->in_pending;
}

static void shutdown_done(uv_shutdown_t *req, int status) {
    sd_exec *e = req->data;
    close_pipe(&e->in);
}

void sd_exec_close_stdin(sd_exec *e) {
    if (e->stdin_closed)
        return;
    if (e->tty) { /* the terminal's end-of-file character (VEOF, Ctrl-D) */
        sd_exec_write(e, "\x04", 1);
        e->stdin_closed = true;
        return;
    }
    e->stdin_closed = true;
    e->shut.data = e;
    if (!e->in || uv_shutdown(&e->shut, (uv_stream_t *)e->in, shutdown_done) < 0)
        close_pipe(&e->in);
}

static int tty_fd(sd_exec *e) {
    uv_os_fd_t fd;
    if (!e->tty)
        return -ENOTTY;
    if (!e->out[0] || uv_fileno((uv_handle_t *)e->out[0], &fd) < 0)
        return -ESRCH;
    return fd;
}

int sd_exec_signal(sd_exec *e, int signo, bool foreground) {
    if (e->finished || !e->sb)
        return -ESRCH;
    int fd = foreground ? tty_fd(e) : -ENOTTY;
    if (fd >= 0 && (signo == SIGINT || signo == SIGQUIT || signo == SIGTSTP) &&
        ioctl(fd, TIOCSIG, signo) == 0)
        return 0;
    pid_t pgrp = 0;
    if (fd >= 0 && ioctl(fd, TIOCGPGRP, &pgrp) == 0 && pgrp > 0 && kill(-pgrp, signo) == 0)
        return 0; /* the group's id as the daemon's namespace sees it */
    json_t *msg = json_pack("{s:I,s:i}", "xid", (json_int_t)e->xid, "signal", signo);
    return sd_shim_request(e->sb->shim, "kill", msg, NULL, 0, NULL, NULL);
}

int sd_exec_resize(sd_exec *e, unsigned rows, unsigned cols) {
    int fd = tty_fd(e);
    if (fd < 0)
        return fd;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    return ioctl(fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

bool sd_exec_has_tty(const sd_exec *e) {
    return e->tty;
}
