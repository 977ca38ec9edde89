/* SandboxFusion's jobs (sf_job.h). Each request is a job: a fresh sandbox (a warm pool entry
 * when one fits; no network, memory_limit_MB as its memory), its files and the code written by
 * commands, compile and run as commands with the request's timeouts (or the Jupyter driver,
 * api/sf_jupyter.c), fetch_files read back, the answer (api/sf_answer.c), then the sandbox is
 * ended. Jobs beyond --sandboxfusion-max-running wait in a FIFO (none is refused for load); one
 * that waits past the queue timeout, and every platform fault, is answered status
 * "SandboxError", never "Failed". */
#include "sandboxd/api/sf_job.h"

#include "sandboxd/api/sf_answer.h"
#include "sandboxd/api/sf_jupyter.h"
#include "sandboxd/api/sf_request.h"

#include "common/b64.h"
#include "common/end_reason.h"
#include "common/jsonstr.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "sandboxd/core/create.h"
#include "sandboxd/core/exec.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SF_DEFAULT_MAX_RUNNING 16
#define SF_DEFAULT_QUEUE_TIMEOUT_S 600
#define SF_RETRY_MS 100
/* Code up to this size once escaped as JSON goes with the first command as its exec's "file"
 * (common/shimproto.h; written by the command's own process before its exec, no shell), in the
 * shim's request of at most SHIMPROTO_MSG_MAX bytes (the rest: argv, env and the other fields);
 * longer code, code with a NUL byte, a sandbox whose shim does not take "file" (one from
 * before it, e.g. a pool entry kept across an upgrade), or code that does not fit beside a
 * large environment (the exec answers SD_EXEC_E_TOO_BIG: job_exec_code) is written by a command of
 * its own first. */
#define SF_INLINE_MAX (48u << 10)

typedef enum { SF_QUEUED, SF_CREATING, SF_FILES, SF_COMPILE, SF_RUN, SF_FETCH, SF_N_STEPS } sf_step;
/* What the time in each step is spent on (SF_RUN waits for the compile's answer, SF_FETCH for
 * the run's and the fetches'). */
static const char *const step_names[SF_N_STEPS] = {"queue", "create",  "files",
                                                   "prep",  "compile", "run"};

typedef struct sf_job {
    struct sf_job *next; /* queue, then running list */
    sd_daemon *d;
    sd_request *req; /* NULL once the client went away */
    bool jupyter;
    bool code_inline; /* the code is written by the compile or run command (SF_INLINE_MAX) */
    const sf_lang *lang;
    json_t *body; /* the request */
    double compile_timeout, run_timeout;
    uint64_t memory;
    sf_step step;
    uint64_t step_us[SF_N_STEPS]; /* time spent in each step (the log's steps_ms) */
    uint64_t step_start_us;
    size_t index; /* files written / fetched so far */
    char sb_id[64];
    uint64_t queued_ms;
    json_t *resp;  /* status, message, compile_result, run_result, files, ... */
    char *failure; /* a platform fault: answered SandboxError */
    uv_timer_t timer;
    bool timer_on;
    bool finishing;      /* being answered: the listener ignores it */
    bool last_ok;        /* the last command exited 0 */
    bool last_cut;       /* its stdout was cut at max_output (a fetched file too large) */
    bool retried;        /* queued again for room: counted (demand, metrics) at its first try */
    json_t *last_result; /* the last command's result object */
    char *last_out;      /* its stdout (fetch, jupyter driver) */
    size_t last_out_len;
} sf_job;

struct sd_sf {
    sf_job *queue, **queue_tail;
    sf_job *running;
    unsigned n_running;
    uv_timer_t retry;
};

static unsigned max_running(const sd_daemon *d) {
    return d->cfg.sf_max_running ? d->cfg.sf_max_running : SF_DEFAULT_MAX_RUNNING;
}

static uint64_t queue_timeout_ms(const sd_daemon *d) {
    return (uint64_t)(d->cfg.sf_queue_timeout_s ? d->cfg.sf_queue_timeout_s
                                                : SF_DEFAULT_QUEUE_TIMEOUT_S) *
           1000;
}

/* ---- the job's life ---- */

/* Every step change goes through here: the time of the step left is added to its total. */
static void set_step(sf_job *j, sf_step s) {
    uint64_t now = now_mono_us();
    j->step_us[j->step] += now - j->step_start_us;
    j->step_start_us = now;
    j->step = s;
}

/* One debug line per request: where its time went (bench/sandboxfusion_profile.sh). */
static void log_steps(const sf_job *j, uint64_t end_us) {
    char buf[256];
    int n = 0;
    for (int i = 0; i < SF_N_STEPS && n < (int)sizeof(buf); i++)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s%s=%.2f", i ? " " : "", step_names[i],
                      (double)j->step_us[i] / 1000.0);
    log_debug("sandboxfusion request done sandbox=%s steps_ms=\"%s end=%.2f\"",
              j->sb_id[0] ? j->sb_id : "-", buf, (double)(now_mono_us() - end_us) / 1000.0);
}

static void job_step(sf_job *j);
static void sf_admit(sd_daemon *d);

static void job_free(sf_job *j) {
    json_decref(j->body);
    json_decref(j->resp);
    json_decref(j->last_result);
    free(j->failure);
    free(j->last_out);
    free(j);
}

static void timer_closed(uv_handle_t *h) {
    job_free(h->data);
}

static void list_remove(sf_job **head, sf_job *j) {
    for (sf_job **pp = head; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            return;
        }
}

static void req_gone(sd_request *req, void *ud) {
    sf_job *j = ud;
    j->req = NULL; /* the job runs on (its sandbox is ended at the end); nobody is answered */
}

/* Answer (when somebody still asks), end the sandbox, free the job, start the next. */
static void job_finish(sf_job *j) {
    sd_daemon *d = j->d;
    struct sd_sf *sf = d->sf;
    set_step(j, j->step);
    uint64_t end_us = j->step_start_us;
    if (j->failure) {
        sd_sf_answer_fault(j->resp, j->failure);
        log_warn("sandboxfusion request failed sandbox=%s: %s", j->sb_id[0] ? j->sb_id : "-",
                 j->failure);
    }
    sd_sandbox *sb = j->sb_id[0] ? sd_registry_find(d, j->sb_id) : NULL;
    j->finishing = true; /* the listener forgets it: no command of it runs now */
    if (sb && sb->state != SD_ENDED)
        sd_sandbox_end(sb, END_TERMINATED, "the SandboxFusion request is done");
    if (j->req) {
        j->req->on_close = NULL;
        sd_reply_json(j->req, 200, json_incref(j->resp));
    }
    if (j->step != SF_QUEUED) {
        list_remove(&sf->running, j);
        sf->n_running--;
    }
    log_steps(j, end_us);
    uv_timer_stop(&j->timer);
    uv_close((uv_handle_t *)&j->timer, timer_closed);
    sf_admit(d);
}

static void job_fail(sf_job *j, const char *fmt, ...) _printf_(2, 3);
static void job_fail(sf_job *j, const char *fmt, ...) {
    if (!j->failure) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&j->failure, fmt, ap) < 0)
            j->failure = NULL;
        va_end(ap);
        if (!j->failure)
            j->failure = strdup("internal error");
    }
    job_finish(j);
}

static void step_timer(uv_timer_t *t) {
    job_step(t->data);
}

/* Go on from a later loop callback (callers may be inside sd_sandbox_end or the shim's
 * event handling). */
static void job_later(sf_job *j, uint64_t ms) {
    uv_timer_start(&j->timer, step_timer, ms, 0);
}

/* The start of the job's sandbox finished: err NULL when it runs. */
static void on_started(sf_job *j, const error_rec *err) {
    if (err) {
        free(j->failure);
        if (asprintf(&j->failure, "the sandbox could not be started: %s", err->message) < 0)
            j->failure = NULL;
    }
    set_step(j, SF_FILES);
    j->index = 0;
    job_later(j, 0);
}

static void sf_create_finished(void *ud, sd_sandbox *sb, const error_rec *err) {
    struct sd_sf *sf = ((sd_daemon *)ud)->sf;
    for (sf_job *j = sf ? sf->running : NULL; j; j = j->next)
        if (j->step == SF_CREATING && !j->finishing && strcmp(j->sb_id, sb->id) == 0) {
            on_started(j, err);
            return;
        }
}

static const sd_listener sf_listener = {.create_finished = sf_create_finished};

static void cmd_reset(sf_job *j) {
    json_decref(j->last_result);
    j->last_result = NULL;
    free(j->last_out);
    j->last_out = NULL;
    j->last_out_len = 0;
}

/* The core's callbacks for a job's command; both only record and schedule the next step. */
static void cmd_exited(void *ud, const sd_exec_result *r) {
    sf_job *j = ud;
    cmd_reset(j);
    if (r->over_budget && !j->failure) /* not all its output: SandboxError, never a result */
        j->failure = strdup("a command's output was cut by the daemon's output budget (64 MiB "
                            "buffered for all commands at once, held by others): try again");
    j->last_cut = r->truncated[0];
    j->last_result = sd_sf_command_result(r, &j->last_ok);
    j->last_out = malloc(r->len[0] + 1);
    if (j->last_out) {
        memcpy(j->last_out, r->data[0] ? r->data[0] : "", r->len[0]);
        j->last_out[r->len[0]] = 0;
        j->last_out_len = r->len[0];
    }
    job_later(j, 0);
}

static void cmd_failed(void *ud, bool started, const error_rec *err) {
    sf_job *j = ud;
    cmd_reset(j);
    if (!started && err->code == -EINVAL && (j->last_result = sd_sf_start_failure_result(err))) {
        j->last_ok = false;
        job_later(j, 0);
        return;
    }
    free(j->failure);
    if (asprintf(&j->failure, "a command could not run: %s", err->message) < 0)
        j->failure = NULL;
    job_later(j, 0);
}

static const sd_exec_ops sf_exec_ops = {.exited = cmd_exited, .failed = cmd_failed};

/* Run argv (a reference taken) in the job's sandbox, with file (a reference taken; NULL: none)
 * as the exec's "file", written by the command's own process before its exec; its callbacks
 * continue the job. program: the request's compile or run, whose stdout and stderr each keep
 * their first MiB, the rest read and dropped, as SandboxFusion's run_command_bare keeps them
 * (other commands: 64 MiB, a fetched file or the Jupyter driver's answer). Returns 0, or
 * SD_EXEC_E_TOO_BIG with a file whose request was too large (the job goes on: the caller writes
 * the file first), or -1 when the job failed. */
static int job_exec_argv(sf_job *j, json_t *argv, json_t *file, const void *in, size_t in_len,
                         double timeout_s, bool program) {
    bool with_file = file;
    _cleanup_(json_decrefp) json_t *own_file = file;
    sd_sandbox *sb = sd_registry_find(j->d, j->sb_id);
    if (!sb || sb->state != SD_RUNNING) {
        json_decref(argv);
        job_fail(j, "the sandbox %s ended before the request was done%s%s", j->sb_id,
                 sb ? ": " : "", sb ? sb->end_message : "");
        return -1;
    }
    /* PWD: as the shell that used to start each command set it */
    json_t *body =
        argv ? json_pack("{s:o,s:s,s:{s:s},s:s}", "argv", argv, "cwd", "/workspace", "env", "PWD",
                         "/workspace", "max_output", program ? "1Mi" : "64Mi")
             : NULL;
    if (body) /* 0 as SandboxFusion's asyncio.wait_for takes it: out of time at once */
        json_object_set_new(body, "timeout", json_real(timeout_s < 0.001 ? 0.001 : timeout_s));
    policy_exec pe = {0};
    error_rec err = {0};
    int r = body ? policy_limits_parse_exec(body, &pe, &err)
                 : error_set(&err, -ENOMEM, "out of memory");
    json_decref(body);
    pe.file = TAKE_PTR(own_file);
    if (r >= 0 && in_len) {
        pe.stdin_data = malloc(in_len);
        if (pe.stdin_data) {
            memcpy(pe.stdin_data, in, in_len);
            pe.stdin_len = in_len;
        } else {
            r = error_set(&err, -ENOMEM, "out of memory");
        }
    }
    sd_exec *e;
    if (r >= 0)
        r = sd_exec_start(sb, &pe, false, &sf_exec_ops, j, &e, &err);
    policy_exec_done(&pe);
    if (r == SD_EXEC_E_TOO_BIG && with_file)
        return SD_EXEC_E_TOO_BIG;
    if (r < 0) {
        job_fail(j, "cannot run a command: %s", err.message);
        return -1;
    }
    return 0;
}

/* Run `sh -c script sh arg` (arg: NULL for none). */
static int job_exec(sf_job *j, const char *script, const char *arg, const void *in, size_t in_len,
                    double timeout_s) {
    json_t *argv = json_pack("[sssss]", "sh", "-c", script, "sh", arg ? arg : "");
    return job_exec_argv(j, argv, NULL, in, in_len, timeout_s, false);
}

/* Run argv (a reference taken: the language's compile or run command); with code_inline the
 * code goes with it as the language's file, written by the command's own process before its
 * exec (once: the run after a compile does not). Where the sandbox's environment leaves too
 * little room for it in the shim's request, the code is written by a command of its own first
 * (back to the files step, past the request's files), then the command runs again. */
static void job_exec_code(sf_job *j, json_t *argv, const void *in, size_t in_len,
                          double timeout_s) {
    json_t *file = NULL;
    if (j->code_inline) {
        j->code_inline = false;
        file =
            json_pack("{s:s,s:O}", "name", j->lang->file, "data", json_object_get(j->body, "code"));
        if (!file) {
            json_decref(argv);
            job_fail(j, "out of memory");
            return;
        }
    }
    if (job_exec_argv(j, argv, file, in, in_len, timeout_s, true) == SD_EXEC_E_TOO_BIG) {
        log_debug("sandboxfusion: the code of %s goes first (too large with the environment)",
                  j->sb_id);
        set_step(j, SF_FILES);
        j->index = json_object_size(json_object_get(j->body, "files"));
        job_later(j, 0);
    }
}

/* ---- creating the sandbox ---- */

static int create_spec(sf_job *j, policy_create *c, error_rec *err) {
    double total = j->jupyter ? json_number_value(json_object_get(j->body, "total_timeout"))
                              : j->compile_timeout + j->run_timeout;
    json_t *b = json_pack("{s:s,s:f,s:{s:s}}", "network", "none", "timeout", total + 120.0,
                          "labels", "sandboxfusion", j->jupyter ? "run_jupyter" : "run_code");
    if (j->memory)
        json_object_set_new(b, "memory", json_integer((json_int_t)j->memory));
    int r = policy_limits_parse_create(b, j->d->cfg.defaults, &j->d->host, c, err);
    json_decref(b);
    return r;
}

/* Returns 1 when the sandbox runs now (pool), 0 when it is starting (the listener's
 * create_finished follows), -EAGAIN when the node is full (try again later), other -errno. */
static int job_create(sf_job *j, error_rec *err) {
    policy_create c = {0};
    sd_sandbox *sb;
    bool starting = false, is_new = false;
    int r = create_spec(j, &c, err);
    if (r >= 0 && j->retried && !sd_pool_make_room(j->d, 1, "a SandboxFusion request"))
        r = -EAGAIN; /* still full: not a new miss, nor more demand (once per request) */
    else if (r >= 0) {
        if (!j->retried)
            sd_pool_demand(j->d, &c); /* this shape's warm pool grows with its requests */
        r = sd_create(j->d, &c, NULL, &sb, &starting, &is_new, err);
    }
    policy_create_done(&c);
    if (r < 0)
        return r;
    snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb->id);
    log_info("sandbox created sandbox=%s for a SandboxFusion request", sb->id);
    if (!starting)
        return 1;
    if (is_new)
        sd_sandbox_start_or_queue(sb); /* a start that fails at once tells the listener now */
    return 0;
}

/* ---- the steps ---- */

/* The files to write: the request's, then the code. Returns false when all are written. */
static bool next_file(sf_job *j, const char **ret_path, unsigned char **ret_data, size_t *ret_len,
                      bool *ret_bad) {
    json_t *files = json_object_get(j->body, "files");
    size_t n = json_object_size(files), i = 0;
    const char *k;
    json_t *v;
    *ret_bad = false;
    json_object_foreach(files, k, v) {
        if (i++ < j->index || json_is_null(v) || sd_sf_file_ignored(k))
            continue;
        j->index = i;
        *ret_path = k;
        if (b64_decode_wrapped(json_string_value(v), json_string_length(v), ret_data, ret_len) < 0)
            *ret_bad = true;
        return true;
    }
    if (j->jupyter || j->code_inline || j->index > n)
        return false;
    j->index = n + 1;
    const char *code = json_string_value(json_object_get(j->body, "code"));
    *ret_path = j->lang->file;
    *ret_data = (unsigned char *)strdup(code);
    *ret_len = strlen(code);
    return true;
}

static void step_files(sf_job *j) {
    const char *path;
    unsigned char *data = NULL;
    size_t len = 0;
    bool bad;
    if (j->index == 0 && j->code_inline) { /* a shim from before exec's "file" cannot take it */
        sd_sandbox *sb = sd_registry_find(j->d, j->sb_id);
        j->code_inline = !sb || sb->shim_exec_file;
    }
    if (!next_file(j, &path, &data, &len, &bad)) {
        set_step(j, SF_COMPILE);
        job_step(j);
        return;
    }
    if (bad || !data) {
        free(data);
        job_fail(j, "files: %s is not valid base64", path);
        return;
    }
    job_exec(j, "mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"", path, data, len, 60);
    free(data);
}

static void step_fetch(sf_job *j) {
    json_t *fetch = json_object_get(j->body, "fetch_files");
    const char *prev = json_string_value(json_array_get(fetch, j->index - 1));
    if (j->index > 0 && j->last_result && j->last_ok && j->last_cut) {
        job_fail(j, "fetch_files: %s is larger than 64 MiB, more than this daemon returns", prev);
        return;
    }
    if (j->index > 0 && j->last_result && j->last_ok) { /* the previous fetch's answer */
        sd_sf_answer_file(j->resp, prev, j->last_out, j->last_out_len);
    }
    if (j->index >= json_array_size(fetch)) {
        job_finish(j);
        return;
    }
    const char *path = json_string_value(json_array_get(fetch, j->index++));
    /* A regular file only, as SandboxFusion's os.path.isfile: a FIFO or /dev/zero is left out */
    job_exec(j, "test -f \"$1\" && exec cat < \"$1\"", path, NULL, 0, 60);
}

/* The fetches begin (the last command's result was taken). */
static void fetch_start(sf_job *j) {
    set_step(j, SF_FETCH);
    j->index = 0;
    json_decref(j->last_result);
    j->last_result = NULL;
    step_fetch(j);
}

static void finish_jupyter(sf_job *j) {
    if (!sd_sf_jupyter_answer(j->resp, j->last_result, j->last_out)) {
        job_fail(j, "the Jupyter driver failed: %s",
                 json_string_value(json_object_get(j->last_result, "stderr")));
        return;
    }
    fetch_start(j);
}

/* The compile (or the Jupyter driver) starts, or the run at once without a compile. */
static void step_compile(sf_job *j) {
    set_step(j, SF_RUN);
    json_decref(j->last_result); /* the last file write's */
    j->last_result = NULL;
    if (j->jupyter) {
        char *in = json_dumps(j->body, JSON_COMPACT);
        double t = json_number_value(json_object_get(j->body, "total_timeout"));
        job_exec_argv(j, sd_sf_jupyter_argv(), NULL, in, in ? strlen(in) : 0, t + 60, false);
        free(in);
    } else if (j->lang->compile) {
        job_exec_code(j, sd_sf_compile_argv(j->lang, j->body), NULL, 0, j->compile_timeout);
    } else {
        job_step(j);
    }
}

/* The compile's result (a failed one: no run, the fetches), then the run starts. */
static void step_run(sf_job *j) {
    if (j->jupyter) {
        finish_jupyter(j);
        return;
    }
    if (j->last_result) { /* compiled */
        json_object_set(j->resp, "compile_result", j->last_result);
        if (!j->last_ok) {
            json_object_set_new(j->resp, "status", json_string("Failed"));
            fetch_start(j);
            return;
        }
        json_decref(j->last_result);
        j->last_result = NULL;
    }
    set_step(j, SF_FETCH);
    j->index = 0;
    json_t *in = json_object_get(j->body, "stdin");
    job_exec_code(j, sd_sf_run_argv(j->lang, j->body), json_string_value(in),
                  json_is_string(in) ? json_string_length(in) : 0, j->run_timeout);
}

static void job_step(sf_job *j) {
    if (j->failure) {
        job_finish(j);
        return;
    }
    switch (j->step) {
    case SF_QUEUED:
    case SF_CREATING:
    case SF_N_STEPS:
        return;
    case SF_FILES:
        if (j->index > 0 && !j->last_ok && j->last_result) {
            job_fail(j, "cannot write a file: %s",
                     json_string_value(json_object_get(j->last_result, "stderr")));
            return;
        }
        step_files(j);
        return;
    case SF_COMPILE:
        step_compile(j);
        return;
    case SF_RUN:
        step_run(j);
        return;
    case SF_FETCH:
        if (j->index == 0 && j->last_result && !j->jupyter &&
            json_is_null(json_object_get(j->resp, "run_result"))) {
            json_object_set(j->resp, "run_result", j->last_result);
            if (!j->last_ok)
                json_object_set_new(j->resp, "status", json_string("Failed"));
            json_decref(j->last_result);
            j->last_result = NULL;
        }
        step_fetch(j);
        return;
    }
}

static void retry_cb(uv_timer_t *t) {
    sf_admit(t->data);
}

/* Start queued jobs while there is room; a node that is full makes them wait (retry timer,
 * which also ends jobs that waited past the queue timeout). */
static void sf_admit(sd_daemon *d) {
    struct sd_sf *sf = d->sf;
    uint64_t now = now_mono_us() / 1000;
    while (sf->queue) {
        sf_job *j = sf->queue;
        if (now - j->queued_ms > queue_timeout_ms(d)) {
            sf->queue = j->next;
            if (!sf->queue)
                sf->queue_tail = &sf->queue;
            job_fail(j, "no sandbox became free within %u s (the node is full)",
                     (unsigned)(queue_timeout_ms(d) / 1000));
            continue;
        }
        if (sf->n_running >= max_running(d) || d->shutting_down)
            break;
        /* running before its create: a start that fails at once tells it already */
        sf->queue = j->next;
        if (!sf->queue)
            sf->queue_tail = &sf->queue;
        j->next = sf->running;
        sf->running = j;
        sf->n_running++;
        set_step(j, SF_CREATING);
        error_rec err = {0};
        int r = job_create(j, &err);
        if (r == -EAGAIN) { /* back to the head of the queue */
            j->retried = true;
            list_remove(&sf->running, j);
            sf->n_running--;
            set_step(j, SF_QUEUED);
            j->next = sf->queue;
            sf->queue = j;
            if (!j->next)
                sf->queue_tail = &j->next;
            break;
        }
        if (j->sb_id[0])
            json_object_set_new(j->resp, "executor_pod_name", json_string(j->sb_id));
        if (r < 0)
            job_fail(j, "the sandbox could not be created: %s", err.message);
        else if (r == 1)
            on_started(j, NULL);
    }
    if (sf->queue)
        uv_timer_start(&sf->retry, retry_cb, SF_RETRY_MS, 0);
}

/* ---- a new job, start-up, shutdown ---- */

int sd_sf_job_submit(sd_daemon *d, sd_request *req, json_t *body, bool jupyter,
                     const sf_lang *lang) {
    sf_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    json_t *mem = json_object_get(body, "memory_limit_MB");
    j->d = d;
    j->req = req;
    j->jupyter = jupyter;
    j->lang = jupyter ? sd_sf_lang_python() : lang;
    j->body = json_incref(body);
    if (!jupyter) {
        json_t *code = json_object_get(body, "code");
        j->code_inline =
            json_string_length(code) <= SF_INLINE_MAX &&
            strlen(json_string_value(code)) == json_string_length(code) &&
            jsonstr_escaped_len(json_string_value(code), json_string_length(code)) <= SF_INLINE_MAX;
    }
    j->compile_timeout = sd_sf_num_or(body, "compile_timeout", 10);
    j->run_timeout = sd_sf_num_or(body, "run_timeout", 10);
    if (jupyter && !json_object_get(body, "total_timeout"))
        json_object_set_new(j->body, "total_timeout", json_real(45));
    j->memory = json_integer_value(mem) > 0 ? (uint64_t)json_integer_value(mem) << 20 : 0;
    j->step_start_us = now_mono_us();
    j->queued_ms = j->step_start_us / 1000;
    j->resp = sd_sf_answer_new(jupyter);
    uv_timer_init(d->loop, &j->timer);
    j->timer.data = j;
    req->on_close = req_gone;
    req->close_ud = j;
    *d->sf->queue_tail = j;
    d->sf->queue_tail = &j->next;
    sf_admit(d);
    return 0;
}

int sd_sf_job_init(sd_daemon *d, error_rec *err) {
    d->sf = calloc(1, sizeof(*d->sf));
    if (!d->sf)
        return error_set(err, -ENOMEM, "out of memory");
    d->sf->queue_tail = &d->sf->queue;
    uv_timer_init(d->loop, &d->sf->retry);
    d->sf->retry.data = d;
    if (sd_listener_add(d, &sf_listener, d) < 0)
        return error_set(err, -ENOSPC, "too many listeners");
    return 0;
}

static void retry_closed(uv_handle_t *h) {
    sd_daemon *d = h->data;
    free(d->sf);
    d->sf = NULL;
}

void sd_sf_job_done(sd_daemon *d) {
    if (!d->sf)
        return;
    while (d->sf->queue) {
        sf_job *j = d->sf->queue;
        d->sf->queue = j->next;
        job_fail(j, "the daemon is shutting down");
    }
    d->sf->queue_tail = &d->sf->queue;
    while (d->sf->running)
        job_fail(d->sf->running, "the daemon is shutting down");
    uv_close((uv_handle_t *)&d->sf->retry, retry_closed);
}
