/* Commands: POST /v1/sandboxes/{id}/exec. The daemon makes the three pipes, hands the child
 * ends to the shim (SCM_RIGHTS), writes stdin and reads stdout/stderr on the loop, and answers
 * with one JSON result or an NDJSON stream. The shim's `exit` event ends the command: what is
 * still readable is drained, then the answer is finished. */
#include "sandboxd/api/http.h"
#include "sandboxd/core/images.h"

#include "common/b64.h"
#include "common/macro.h"
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "sandboxd/core/shim_client.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

typedef struct outbuf {
    char *data;
    size_t len;
    uint64_t bytes;
    bool truncated;
} outbuf;

struct sd_exec {
    sd_exec *next;
    sd_sandbox *sb;
    uint64_t xid;
    sd_request *req;
    bool stream, started, finished;
    bool paused; /* output reads stopped: the client's stream is full (backpressure) */
    uv_pipe_t *in, *out[2];
    uv_write_t wreq;
    unsigned char *stdin_data;
    size_t stdin_len;
    outbuf ob[2];
    uint64_t max_output, start_us;
    char carry[2][4]; /* a UTF-8 character split between two reads (streaming) */
    size_t carry_len[2];
    int open_handles;
};

static const char *const stream_names[2] = {"stdout", "stderr"};

unsigned sd_exec_count(const sd_sandbox *sb) {
    unsigned n = 0;
    for (sd_exec *e = sb->execs; e; e = e->next)
        n += !e->finished;
    return n;
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

/* Backpressure: while a streaming client has not taken what is buffered for it, the command's
 * pipes are not read, so the command blocks on write instead of the daemon buffering. */
static void output_pause(sd_exec *e) {
    e->paused = true;
    for (int i = 0; i < 2; i++)
        if (e->out[i])
            uv_read_stop((uv_stream_t *)e->out[i]);
}

static void output_resume(sd_exec *e) {
    if (!e->paused)
        return;
    e->paused = false;
    for (int i = 0; i < 2; i++)
        if (e->out[i])
            uv_read_start((uv_stream_t *)e->out[i], alloc_cb, read_cb);
}

static void req_drained(sd_request *req, void *ud) {
    output_resume(ud);
}

static void req_gone(sd_request *req, void *ud) {
    sd_exec *e = ud;
    e->req = NULL; /* the command goes on; its output is discarded */
    output_resume(e);
}

static void stream_json(sd_exec *e, json_t *line) {
    char *s = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(line);
    if (s && e->req) {
        sd_stream_write(e->req, s, strlen(s));
        sd_stream_write(e->req, "\n", 1);
    }
    free(s);
}

static json_t *text_or_b64(const char *data, size_t len, const char **ret_suffix) {
    json_t *t = json_stringn(data ? data : "", len);
    *ret_suffix = "";
    if (t)
        return t;
    *ret_suffix = "_b64";
    char *b = b64_encode(data, len);
    t = json_string(b ? b : "");
    free(b);
    return t;
}

/* Length of data without a trailing, incomplete UTF-8 character (0-3 bytes shorter). */
static size_t utf8_complete_len(const char *data, size_t len) {
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = (unsigned char)data[len - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? len - back : len;
    }
    return len;
}

static void stream_output(sd_exec *e, int which, const char *data, size_t len, bool flush) {
    char buf[65536 + 4];
    size_t n = e->carry_len[which];
    memcpy(buf, e->carry[which], n);
    size_t take = MIN(len, sizeof(buf) - n);
    memcpy(buf + n, data, take);
    n += take;
    size_t whole = flush ? n : utf8_complete_len(buf, n);
    e->carry_len[which] = n - whole;
    memcpy(e->carry[which], buf + whole, n - whole);
    if (whole == 0)
        return;
    const char *suffix;
    json_t *v = text_or_b64(buf, whole, &suffix);
    char key[16];
    snprintf(key, sizeof(key), "data%s", suffix);
    stream_json(e, json_pack("{s:s,s:o}", "type", stream_names[which], key, v));
}

static void got_output(sd_exec *e, int which, const char *data, size_t len) {
    outbuf *o = &e->ob[which];
    o->bytes += len;
    size_t keep = o->len < e->max_output ? MIN(len, e->max_output - o->len) : 0;
    if (keep < len)
        o->truncated = true;
    if (keep == 0)
        return;
    if (e->stream) {
        o->len += keep; /* counts what was sent, for the cap */
        stream_output(e, which, data, keep, false);
        return;
    }
    char *n = realloc(o->data, o->len + keep + 1);
    if (!n)
        return;
    memcpy(n + o->len, data, keep);
    o->data = n;
    o->len += keep;
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
    buf->base = malloc(65536);
    buf->len = buf->base ? 65536 : 0;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    sd_exec *e = s->data;
    int which = (uv_pipe_t *)s == e->out[0] ? 0 : 1;
    if (n > 0)
        got_output(e, which, buf->base, (size_t)n);
    free(buf->base);
    if (n > 0 && e->req && sd_stream_full(e->req))
        output_pause(e);
    if (n < 0)
        close_pipe(&e->out[which]);
}

/* After the exit event: take what is readable now, without waiting for EOF (a background
 * process may hold the pipe open). */
static void drain(sd_exec *e) {
    char buf[65536];
    for (int i = 0; i < 2; i++) {
        if (!e->out[i])
            continue;
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)e->out[i], &fd) == 0)
            for (int k = 0; k < 4096; k++) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                    break;
                got_output(e, i, buf, (size_t)n);
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
    sd_shim_cancel(sb->shim, e);
    e->sb = NULL;
    close_pipe(&e->in);
    close_pipe(&e->out[0]);
    close_pipe(&e->out[1]);
    if (e->req) {
        e->req->on_close = NULL;
        e->req->on_drain = NULL;
        e->req = NULL;
    }
    exec_maybe_free(e);
}

static json_t *result_json(sd_exec *e, json_t *ev) {
    json_t *code = json_object_get(ev, "exit_code"), *sig = json_object_get(ev, "signal");
    json_t *reason = json_object_get(ev, "reason");
    double dur = json_number_value(json_object_get(ev, "duration_ms")) / 1000.0;
    if (json_is_integer(sig) && json_integer_value(sig) == 0)
        sig = NULL; /* the shim says 0 for "not signaled"; the API says null */
    json_t *r = json_pack("{s:O,s:O,s:s,s:f,s:I,s:I}", "exit_code", code ? code : json_null(),
                          "signal", sig ? sig : json_null(), "reason",
                          json_is_string(reason) ? json_string_value(reason) : "exited", "duration",
                          dur, "stdout_bytes", (json_int_t)e->ob[0].bytes, "stderr_bytes",
                          (json_int_t)e->ob[1].bytes);
    if (e->stream)
        return r;
    for (int i = 0; i < 2; i++) {
        const char *suffix;
        size_t len =
            e->ob[i].truncated ? utf8_complete_len(e->ob[i].data, e->ob[i].len) : e->ob[i].len;
        json_t *v = text_or_b64(e->ob[i].data, len, &suffix);
        char key[24];
        snprintf(key, sizeof(key), "%s%s", stream_names[i], suffix);
        json_object_set_new(r, key, v);
        snprintf(key, sizeof(key), "%s_truncated", stream_names[i]);
        json_object_set_new(r, key, json_boolean(e->ob[i].truncated));
    }
    return r;
}

void sd_exec_on_exit(sd_sandbox *sb, json_t *ev) {
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
    json_t *reason = json_object_get(ev, "reason");
    const char *rs = json_is_string(reason) ? json_string_value(reason) : "exited";
    sd_metrics_exec(sb->d, rs, (double)(now_mono_us() - e->start_us) / 1e6);
    json_t *res = result_json(e, ev);
    log_debug("command ended sandbox=%s xid=%llu reason=%s", sb->id, (unsigned long long)xid, rs);
    if (e->req && e->stream) {
        for (int i = 0; i < 2; i++)
            if (e->carry_len[i])
                stream_output(e, i, "", 0, true);
        json_object_set_new(res, "type", json_string("exit"));
        stream_json(e, res);
        sd_stream_end(e->req);
    } else if (e->req) {
        sd_reply_json(e->req, 200, res);
    } else {
        json_decref(res);
    }
    exec_detach(e);
}

static void exec_fail(sd_exec *e, unsigned status, const char *code, const char *msg) {
    e->finished = true;
    sd_metrics_exec(e->sb->d, "error", 0);
    if (e->req && e->stream && e->started) {
        stream_json(e, json_pack("{s:s,s:s,s:s}", "type", "error", "code", code, "message", msg));
        sd_stream_end(e->req);
    } else if (e->req) {
        sd_reply_error(e->req, status, code, "%s", msg);
    }
    exec_detach(e);
}

void sd_exec_abort_all(sd_sandbox *sb, const char *why) {
    while (sb->execs) {
        char msg[400];
        snprintf(msg, sizeof(msg), "sandbox %s ended while the command ran: %s: %s", sb->id,
                 sb->end_reason, why);
        exec_fail(sb->execs, 409, "conflict", msg);
    }
}

static void write_done(uv_write_t *w, int status) {
    sd_exec *e = w->data;
    close_pipe(&e->in);
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
        bool user = err.code == -ENOENT || err.code == -EINVAL || err.code == -ENOTDIR ||
                    err.code == -EACCES;
        exec_fail(e, user ? 400 : 500, user ? "invalid_argument" : "internal", err.message);
        return;
    }
    e->started = true;
    if (e->req && e->stream) {
        sd_stream_begin(e->req, "application/x-ndjson");
        stream_json(e, json_pack("{s:s,s:O}", "type", "start", "pid",
                                 json_object_get(reply, "pid") ?: json_null()));
    }
    for (int i = 0; i < 2; i++)
        if (e->out[i])
            uv_read_start((uv_stream_t *)e->out[i], alloc_cb, read_cb);
    if (e->in && e->stdin_len) {
        uv_buf_t b = uv_buf_init((char *)e->stdin_data, (unsigned)e->stdin_len);
        e->wreq.data = e;
        if (uv_write(&e->wreq, (uv_stream_t *)e->in, &b, 1, write_done) < 0)
            close_pipe(&e->in);
    } else {
        close_pipe(&e->in);
    }
}

static json_t *exec_env(sd_sandbox *sb, json_t *extra) {
    json_t *env =
        json_pack("[sss]", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8");
    json_t *merged = json_deep_copy(sb->spec.env);
    json_object_update(merged, extra);
    const char *k;
    json_t *v;
    json_object_foreach(merged, k, v) {
        char *kv;
        if (asprintf(&kv, "%s=%s", k, json_string_value(v)) >= 0) {
            json_array_append_new(env, json_string(kv));
            free(kv);
        }
    }
    json_decref(merged);
    return env;
}

/* Make the pipes, send the exec request. Returns 0 or -errno (message in err). */
static int exec_send(sd_exec *e, policy_exec *pe, error_rec *err) {
    int in[2], out[2], errp[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return error_set_errno(err, negative_errno(), "pipe");
    if (pipe2(out, O_CLOEXEC) < 0) {
        safe_close(in[0]), safe_close(in[1]);
        return error_set_errno(err, negative_errno(), "pipe");
    }
    if (pipe2(errp, O_CLOEXEC) < 0) {
        safe_close(in[0]), safe_close(in[1]), safe_close(out[0]), safe_close(out[1]);
        return error_set_errno(err, negative_errno(), "pipe");
    }
    json_t *msg = json_pack("{s:I,s:O,s:o,s:s,s:I,s:b}", "xid", (json_int_t)e->xid, "argv",
                            pe->argv, "env", exec_env(e->sb, pe->env), "cwd", pe->cwd, "timeout_ms",
                            (json_int_t)pe->timeout_ms, "shell", pe->shell);
    int fds[3] = {in[0], out[1], errp[1]};
    int r = sd_shim_request(e->sb->shim, "exec", msg, fds, 3, started_reply, e);
    safe_close(in[0]), safe_close(out[1]), safe_close(errp[1]);
    e->in = open_pipe(e, in[1]);
    e->out[0] = open_pipe(e, out[0]);
    e->out[1] = open_pipe(e, errp[0]);
    if (!e->in)
        safe_close(in[1]);
    if (!e->out[0])
        safe_close(out[0]);
    if (!e->out[1])
        safe_close(errp[0]);
    if (r < 0)
        return error_set_errno(err, r, "cannot send the command to the shim");
    return 0;
}

void sd_api_exec(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    policy_exec pe = {0};
    error_rec err = {0};
    int r = policy_limits_parse_exec(body, &pe, &err);
    const char *wd = json_object_get(body, "cwd") ? NULL : sd_images_workdir(d, sb->spec.image);
    json_decref(body);
    if (r < 0) {
        sd_reply_error_rec(req, &err);
        return;
    }
    if (wd && (wd = strdup(wd))) { /* images: the image's WorkingDir is the default cwd */
        free(pe.cwd);
        pe.cwd = (char *)wd;
    }
    if (sb->state != SD_RUNNING || !sb->shim) {
        sd_reply_error(req, 409, "conflict", "sandbox %s is %s", sb->id,
                       sb->state == SD_ENDED ? "ended" : "not running yet");
        policy_exec_done(&pe);
        return;
    }
    sd_exec *e = calloc(1, sizeof(*e));
    if (!e) {
        policy_exec_done(&pe);
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    const char *accept = sd_req_header(req, "Accept");
    e->stream = accept && strstr(accept, "application/x-ndjson");
    e->sb = sb;
    e->xid = sb->next_xid++;
    e->req = req;
    e->max_output = pe.max_output;
    e->start_us = now_mono_us();
    e->stdin_data = TAKE_PTR(pe.stdin_data);
    e->stdin_len = pe.stdin_len;
    e->next = sb->execs;
    sb->execs = e;
    req->on_close = req_gone;
    req->close_ud = e;
    req->on_drain = req_drained;
    req->drain_ud = e;
    r = exec_send(e, &pe, &err);
    policy_exec_done(&pe);
    if (r < 0)
        exec_fail(e, 500, "internal", err.message);
}
