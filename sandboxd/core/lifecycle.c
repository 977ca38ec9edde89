/* A sandbox's life as the daemon sees it: start (write spec.json, run sbx-shim, read its
 * start-up line, connect, hello), events from the shim, re-adoption after a restart, and the
 * typed end (shutdown through the shim, or `sbx-shim cleanup` when the shim is gone). */
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/gvisor.h"
#include "sandboxd/core/images.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "common/shimproto.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/quarantine.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/shim_client.h"
#include "sandboxd/core/spare.h"
#include "sandboxd/core/spawn.h"
#include "sandboxd/core/state.h"
#include "sandboxd/core/volumes.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void on_shim_event(void *ud, json_t *ev);
static void on_shim_lost(void *ud);
static const sd_shim_ops shim_ops = {.event = on_shim_event, .lost = on_shim_lost};

int sd_listener_add(sd_daemon *d, const sd_listener *ops, void *ud) {
    if (d->n_listeners >= SD_LISTENERS_MAX)
        return -ENOSPC;
    d->listeners[d->n_listeners].ops = ops;
    d->listeners[d->n_listeners++].ud = ud;
    return 0;
}

#define TELL(d, fn, ...)                                                                           \
    do {                                                                                           \
        for (unsigned i_ = 0; i_ < (d)->n_listeners; i_++)                                         \
            if ((d)->listeners[i_].ops->fn)                                                        \
                (d)->listeners[i_].ops->fn((d)->listeners[i_].ud, __VA_ARGS__);                    \
    } while (0)

static void start_queued(sd_daemon *d);

/* A `sbx-shim cleanup` run: the uid slot it frees when it is done, and the sandbox it cleans
 * up after (kept: a failed resume, which keeps its slot and waits for it); dir: its run dir, ""
 * when there was none when it began (removed by the shim or by a cleanup before, maybe a failed
 * one: the run cleans nothing, core/quarantine.h). */
typedef struct cleanup_run {
    sd_daemon *d;
    int slot;
    bool kept;
    char id[64];
    char dir[PATH_MAX];
} cleanup_run;

/* The run is over (or never ran, status -1): what the shim left is gone, its processes (CRIU's)
 * too, unless it failed; a slot it failed to clean is quarantined (core/quarantine.h). */
static void cleanup_over(sd_daemon *d, const char *id, const char *dir, bool kept, int status) {
    sd_sandbox *sb = sd_registry_find(d, id);
    if (sb && kept)
        sb->cleaning = false;
    if (sb && kept && sb->state == SD_ENDED) /* it ended while this ran: its slot is done */
        sd_slot_cleaned(d, sd_registry_take_slot(sb), status, sb->id, dir);
    if (sb)
        TELL(d, cleaned, sb);
}

static void cleanup_exited(void *ud, int status) {
    cleanup_run *c = ud;
    sd_slot_cleaned(c->d, c->slot, status, c->id, c->dir);
    cleanup_over(c->d, c->id, c->dir, c->kept, status);
    /* a shim killed in its build before it renamed what its spare parked left that cgroup */
    sd_cgroup_remove_stale(c->d);
    free(c);
}

/* keep_slot: a failed resume (the sandbox stays paused with its uid slot). */
static void run_cleanup(sd_sandbox *sb, bool keep_slot) {
    sd_daemon *d = sb->d;
    char *args[] = {d->cfg.shim_path, "cleanup", sb->dir, NULL};
    cleanup_run *c = malloc(sizeof(*c));
    int slot = keep_slot ? -1 : sd_registry_take_slot(sb); /* freed when the cleanup is done */
    if (c) {
        *c = (cleanup_run){.d = d, .slot = slot, .kept = keep_slot};
        snprintf(c->id, sizeof(c->id), "%s", sb->id);
        if (access(sb->dir, F_OK) == 0 || errno != ENOENT) /* (cannot tell: there) */
            snprintf(c->dir, sizeof(c->dir), "%s", sb->dir);
    }
    if (keep_slot)
        sb->cleaning = true;
    if (!c || sd_spawn(d->loop, d->cfg.shim_path, args, spec_host_env, NULL, 0, cleanup_exited, c,
                       NULL) < 0) {
        log_error("cannot run sbx-shim cleanup sandbox=%s", sb->id);
        rm_rf(sb->dir);
        sd_slot_cleaned(d, slot, -1, sb->id, sb->dir);
        cleanup_over(d, sb->id, sb->dir, keep_slot, -1);
        free(c);
    }
}

static char *dup_or_null(const char *s) {
    return s && *s ? strdup(s) : NULL;
}

/* The shim's spec for sb (common/spec.h). */
static int spec_fill(sd_sandbox *sb, shim_spec *s, error_rec *err) {
    sd_daemon *d = sb->d;
    snprintf(s->id, sizeof(s->id), "%s", sb->id);
    snprintf(s->hostname, sizeof(s->hostname), "%s", sb->id);
    int r = sd_images_spec_fill(d, sb->spec.image, s, err); /* images: host, dir or layers */
    if (r < 0)
        return r;
    s->cpu = sb->spec.cpu;
    s->memory = sb->spec.memory;
    s->disk = sb->spec.disk;
    s->pids = sb->spec.pids;
    s->uid_base = (uint32_t)sd_uid_base(sb->uid_slot);
    s->cgroup_version = d->cgroup_version;
    s->cgroup_parent = strdup(d->cgroup_parent);
    s->seccomp_bpf = dup_or_null(sb->spec.grading ? d->seccomp_grading_bpf : d->seccomp_bpf);
    if (sb->seed_dir) { /* a fork's snapshot, over a committed image's seed (images.c) */
        free(s->seed_path);
        s->seed_path = dup_or_null(sb->seed_dir);
        s->seed_uid_base = sb->seed_uid_base;
    }
    s->grading = sb->spec.grading;
    s->pausable = sb->spec.pausable;
    if (sb->resuming) { /* core/checkpoint.c */
        char dir[PATH_MAX];
        sd_state_checkpoint_dir(d, sb->id, dir, sizeof(dir));
        if (!(s->restore = strdup(dir)))
            return error_set(err, -ENOMEM, "out of memory");
    }
    if (sb->spec.gvisor && !(s->runsc = dup_or_null(sd_gvisor_runsc(d))))
        return error_set(err, -EPROTONOSUPPORT, "isolation: gvisor is unavailable on this node");
    json_t *env = sd_images_env_json(d, sb->spec.image, sb->spec.env); /* images: Env */
    sd_gpu_env(sb, env); /* GPUs: NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES */
    s->gpus = sd_gpu_spec_json(sb);
    s->volumes = sd_volumes_spec_json(sb); /* volumes: core/volumes.c */
    r = env ? shim_spec_set_env(s, env, err) : -ENOMEM;
    json_decref(env);
    if (r >= 0)
        r = sd_network_spec(sb, s, err);
    return r;
}

/* The shim's spec as JSON text; NULL with err set when it cannot be made. */
static char *spec_text(sd_sandbox *sb, error_rec *err) {
    _cleanup_(shim_spec_freep) shim_spec *s = calloc(1, sizeof(*s));
    if (!s) {
        error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    if (spec_fill(sb, s, err) < 0)
        return NULL;
    json_t *j = shim_spec_to_json(s);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text)
        error_set(err, -ENOMEM, "out of memory");
    return text;
}

static void resume_failed(sd_sandbox *sb, int code, const char *msg);

static void start_failed_code(sd_sandbox *sb, int code, const char *msg) {
    sd_daemon *d = sb->d;
    if (sb->resuming) {
        resume_failed(sb, code, msg);
        return;
    }
    log_error("sandbox start failed sandbox=%s error=\"%s\"", sb->id, msg);
    if (!sb->pool)
        sd_metrics_create(&d->m, SD_CREATE_ERROR,
                          (double)(now_mono_us() - sb->start_mono_us) / 1e6);
    error_rec err = {0};
    error_set(&err, code, "%s", msg);
    TELL(d, create_finished, sb, &err);
    sd_registry_set_idem_key(sb, NULL); /* a retry with the same key tries again */
    sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "sandbox failed to start: %s", msg);
}

static void start_failed(sd_sandbox *sb, const char *msg) {
    start_failed_code(sb, -EIO, msg);
}

/* The shim of a sandbox pausing or resuming went away: a resume this daemon started failed, else
 * the listeners decide (true: it is paused now, else it ends as usual). */
static bool shim_gone(sd_sandbox *sb) {
    if (sb->resuming && sb->state == SD_STARTING) { /* (its start is this daemon's) */
        resume_failed(sb, -EIO, "the sandbox's shim went away");
        return true;
    }
    if (sb->pausing || sb->resuming)
        TELL(sb->d, shim_gone, sb);
    return sb->state == SD_PAUSED;
}

static void hello_reply(void *ud, json_t *reply) {
    sd_sandbox *sb = ud;
    if (!reply || strcmp(shimproto_type(reply), "hello") != 0) {
        if (!reply && shim_gone(sb))
            return; /* a restarted daemon: the shim it adopted finished a pause and exited */
        if (sb->state == SD_STARTING)
            start_failed(sb, "the shim did not answer hello");
        else if (sb->state == SD_RUNNING)
            sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "the shim did not answer hello");
        return;
    }
    json_t *ip = json_object_get(reply, "init_pid");
    if (json_is_integer(ip))
        sb->init_pid = (int)json_integer_value(ip);
    json_t *oom = json_object_get(reply, "oom_kills");
    if (json_is_integer(oom))
        sb->oom_kills = (uint64_t)json_integer_value(oom);
    sb->start_unconfirmed = false;
    sb->shim_exec_file = json_is_true(json_object_get(reply, "exec_file"));
    if (sb->state == SD_RUNNING)
        TELL(sb->d, adopted, sb);
    if (sb->state != SD_STARTING)
        return;
    error_rec nerr = {0};
    if (sd_network_setup(sb, &nerr) < 0) {
        start_failed(sb, nerr.message);
        return;
    }
    sb->state = SD_RUNNING;
    sb->d->n_starting--;
    double secs = (double)(now_mono_us() - sb->start_mono_us) / 1e6;
    if (!sb->pool && !sb->resuming)
        sd_metrics_create(&sb->d->m, SD_CREATE_OK, secs);
    log_info("sandbox started sandbox=%s init_pid=%d shim_pid=%d seconds=%.3f%s%s", sb->id,
             sb->init_pid, sb->shim_pid, secs, sb->pool ? " pool=true" : "",
             sb->resuming ? " resumed=true" : "");
    sd_state_save(sb); /* (a resume: core/checkpoint.c hears create_finished) */
    TELL(sb->d, create_finished, sb, NULL);
    start_queued(sb->d);
    TELL(sb->d, started, sb);
}

static int connect_and_hello(sd_sandbox *sb, error_rec *err) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/shim.sock", sb->dir);
    int r = sd_shim_connect(sb->d->loop, path, &shim_ops, sb, &sb->shim, err);
    if (r < 0)
        return r;
    r = sd_shim_request(sb->shim, "hello", NULL, NULL, 0, hello_reply, sb);
    if (r < 0) {
        sd_shim_close(TAKE_PTR(sb->shim));
        return error_set_errno(err, r, "send hello");
    }
    return 0;
}

static void pipe_closed(uv_handle_t *h) {
    free(h);
}

static void start_line(sd_sandbox *sb) {
    uv_close((uv_handle_t *)sb->start_pipe, pipe_closed);
    sb->start_pipe = NULL;
    sb->start_line[sb->start_len] = 0;
    json_t *j = json_loads(sb->start_line, 0, NULL);
    if (!j) {
        start_failed(sb, "the shim exited without reporting (see the daemon's log)");
        return;
    }
    if (!json_is_true(json_object_get(j, "ok"))) {
        char msg[600];
        json_t *m = json_object_get(j, "message");
        snprintf(msg, sizeof(msg), "%s", json_is_string(m) ? json_string_value(m) : "unknown");
        /* volumes: a path the image has a file or symlink on is the create's error (400) */
        bool bad_path = strncmp(msg, "step volumes: volume at", 23) == 0 &&
                        json_integer_value(json_object_get(j, "errno")) == ENOTDIR;
        json_decref(j);
        start_failed_code(sb, bad_path ? -EINVAL : -EIO, msg);
        return;
    }
    sb->init_pid = (int)json_integer_value(json_object_get(j, "init_pid"));
    sb->shim_pid = (int)json_integer_value(json_object_get(j, "shim_pid"));
    json_decref(j);
    error_rec err = {0};
    if (connect_and_hello(sb, &err) < 0)
        start_failed(sb, err.message);
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
    sd_sandbox *sb = h->data;
    buf->base = sb->start_line + sb->start_len;
    buf->len = sizeof(sb->start_line) - 1 - sb->start_len;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    sd_sandbox *sb = s->data;
    if (n > 0)
        sb->start_len += (size_t)n;
    if (n < 0 || memchr(sb->start_line, '\n', sb->start_len) ||
        sb->start_len >= sizeof(sb->start_line) - 1)
        start_line(sb);
}

/* Start the shim that builds dir: a spare if there is one (core/spare.h), else a new one.
 * *ret_status_fd: the read end of its start-up line. */
static int shim_start(sd_daemon *d, char *dir, int *ret_status_fd) {
    if (sd_spares_take(d, dir, ret_status_fd) == 0)
        return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return negative_errno();
    char *args[] = {d->cfg.shim_path, dir, NULL};
    int r = sd_spawn(d->loop, d->cfg.shim_path, args, spec_host_env, &p[1], 1, NULL, NULL, NULL);
    safe_close(p[1]);
    if (r < 0) {
        safe_close(p[0]);
        return r;
    }
    *ret_status_fd = p[0];
    return 0;
}

static void sandbox_start(sd_sandbox *sb) {
    sd_daemon *d = sb->d;
    sb->queued = false;
    d->n_starting++;
    sb->start_mono_us = now_mono_us();
    sb->start_len = 0; /* (a resume starts a second time) */
    rm_rf(sb->dir);
    _cleanup_free_ char *spec_path = NULL, *dump = NULL;
    error_rec err = {0};
    if (!(dump = spec_text(sb, &err))) { /* (not the request's fault: it was taken) */
        char msg[sizeof(err.message) + 64];
        snprintf(msg, sizeof(msg), "cannot prepare the sandbox: %s", err.message);
        start_failed(sb, msg);
        return;
    }
    int r = mkdir_p(sb->dir, 0711);
    if (r >= 0 && asprintf(&spec_path, "%s/spec.json", sb->dir) < 0)
        r = -ENOMEM;
    if (r >= 0)
        r = file_replace_nosync(spec_path, dump, strlen(dump), 0600);
    if (r < 0) { /* (a full run dir: 507, as a full state directory) */
        char msg[PATH_MAX + 96];
        snprintf(msg, sizeof(msg), "cannot prepare the sandbox directory %s: %s", sb->dir,
                 strerror(-r));
        start_failed_code(sb, r == -ENOSPC || r == -EDQUOT ? -EDQUOT : -EIO, msg);
        return;
    }
    int status_fd = -1;
    r = shim_start(d, sb->dir, &status_fd);
    if (r < 0) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof(msg), "cannot run %s: %s", d->cfg.shim_path, strerror(-r));
        start_failed(sb, msg);
        return;
    }
    sb->start_pipe = calloc(1, sizeof(uv_pipe_t));
    uv_pipe_init(d->loop, sb->start_pipe, 0);
    uv_pipe_open(sb->start_pipe, status_fd);
    sb->start_pipe->data = sb;
    uv_read_start((uv_stream_t *)sb->start_pipe, alloc_cb, read_cb);
}

void sd_sandbox_start_or_queue(sd_sandbox *sb) {
    if (sb->d->n_starting < sb->d->cfg.max_starting)
        sandbox_start(sb);
    else
        sb->queued = true;
}

static void start_queued(sd_daemon *d) {
    while (d->n_starting < d->cfg.max_starting && !d->shutting_down) {
        sd_sandbox *oldest = NULL;
        for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
            if (sb->queued && (!oldest || sb->created_ms <= oldest->created_ms))
                oldest = sb;
        if (!oldest)
            break;
        sandbox_start(oldest);
    }
    if (d->n_starting == 0)
        sd_spares_refill(d); /* not while shims build: core/spare.h */
}

void sd_sandbox_touch(sd_sandbox *sb) {
    sb->last_activity_ms = now_real_ms();
}

void sd_sandbox_connection(sd_sandbox *sb, bool open) {
    if (open)
        sb->connections_open++;
    else if (sb->connections_open > 0)
        sb->connections_open--;
    sd_sandbox_touch(sb);
}

void sd_sandbox_set_timeout(sd_sandbox *sb, uint64_t ms) {
    /* paused: from the pause, which the resume moves on by the time away (core/checkpoint.c) */
    bool away = sb->state == SD_PAUSED || sb->resuming;
    sb->expires_ms = (away ? sb->paused_ms : now_real_ms()) + ms;
    sd_state_save(sb);
}

void sd_sandbox_restart_clock(sd_sandbox *sb) {
    sb->created_ms = sb->last_activity_ms = now_real_ms();
    sb->expires_ms = sb->created_ms + sb->spec.timeout_ms;
    sb->start_mono_us = now_mono_us();
    sb->cpu_usec = sb->mem_bytes = sb->mem_peak_bytes = sb->pids = 0;
}

static void set_oom_kills(sd_sandbox *sb, uint64_t n) {
    sd_metrics_oom(&sb->d->m, sb->oom_kills, n);
    sb->oom_kills = MAX(sb->oom_kills, n);
}

static void stats_reply(void *ud, json_t *r) {
    sd_sandbox *sb = ud;
    if (!r || strcmp(shimproto_type(r), "stats") != 0)
        return;
    sb->cpu_usec = (uint64_t)json_integer_value(json_object_get(r, "cpu_usec"));
    sb->mem_bytes = (uint64_t)json_integer_value(json_object_get(r, "mem_bytes"));
    sb->mem_peak_bytes = (uint64_t)json_integer_value(json_object_get(r, "mem_peak_bytes"));
    sb->pids = (uint64_t)json_integer_value(json_object_get(r, "pids"));
    set_oom_kills(sb, (uint64_t)json_integer_value(json_object_get(r, "oom_kills")));
}

void sd_sandbox_refresh_stats(sd_sandbox *sb) {
    if (sb->shim)
        sd_shim_request(sb->shim, "stats", NULL, NULL, 0, stats_reply, sb);
}

static void shutdown_reply(void *ud, json_t *reply) {
    sd_sandbox *sb = ud;
    if (!reply || strcmp(shimproto_type(reply), "ok") != 0) {
        sd_shim_close(TAKE_PTR(sb->shim));
        run_cleanup(sb, false);
    }
    /* else: the shim tears down and exits; on_shim_lost frees the slot (or quarantines it) */
}

static void on_shim_lost(void *ud) {
    sd_sandbox *sb = ud;
    sd_shim_close(TAKE_PTR(sb->shim)); /* a pending pause hears it first (core/checkpoint.c) */
    if (sb->state == SD_ENDED) {       /* its teardown is done (core/quarantine.h) */
        sd_slot_torn_down(sb->d, sd_registry_take_slot(sb), sb->id, sb->dir);
        return;
    }
    if (sb->state == SD_PAUSED || shim_gone(sb))
        return; /* paused: no shim until it resumes */
    error_rec err = {0};
    if (!sb->d->shutting_down && connect_and_hello(sb, &err) == 0) {
        log_warn("shim connection lost, reconnected sandbox=%s", sb->id);
        return;
    }
    sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "the sandbox's shim died (connection lost)");
}

static void on_shim_event(void *ud, json_t *ev) {
    sd_sandbox *sb = ud;
    const char *type = shimproto_type(ev);
    if (strcmp(type, "exit") == 0) {
        TELL(sb->d, exec_exit, sb, ev);
    } else if (strcmp(type, "oom") == 0) {
        uint64_t n = (uint64_t)json_integer_value(json_object_get(ev, "oom_kills"));
        sd_metrics_oom(&sb->d->m, sb->oom_kills, n);
        sb->oom_kills = n;
    } else if (strcmp(type, "dead") == 0) {
        const char *m = json_string_value(json_object_get(ev, "message")) ?: "no detail";
        const char *why = json_string_value(json_object_get(ev, "reason")) ?: "";
        if (strcmp(why, "oom") == 0) /* gvisor: the memory limit holds gVisor's own processes */
            sd_sandbox_end(sb, END_OOM_KILLED, "%s: the whole sandbox ends (gvisor isolation)", m);
        else if (strcmp(why, "pids") == 0)
            sd_sandbox_end(sb, END_PIDS_LIMIT, "%s: the whole sandbox ends (gvisor isolation)", m);
        else
            sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "the sandbox's init died: %s", m);
    }
}

/* A start that will not finish: its start slot back, no more reading of its start-up line;
 * end_starting also tells the create. */
static void stop_start(sd_sandbox *sb) {
    if (!sb->queued)
        sb->d->n_starting--;
    sb->queued = false;
    if (sb->start_pipe) {
        uv_close((uv_handle_t *)sb->start_pipe, pipe_closed);
        sb->start_pipe = NULL;
    }
}

static void end_starting(sd_sandbox *sb) {
    stop_start(sb);
    error_rec err = {0};
    bool infra = sb->end_reason == END_INFRASTRUCTURE_FAILURE;
    error_set(&err, infra ? -EIO : -EBUSY, "%s", sb->end_message);
    TELL(sb->d, create_finished, sb, &err);
}

/* Tell the shim to tear down, or run `sbx-shim cleanup` when there is no shim. Also while the
 * daemon stops (a SandboxFusion request it ends, api/sandboxfusion.c): the request is sent at
 * once, and the shim tears down on its own; the answer is not waited for. */
static void stop_shim(sd_sandbox *sb) {
    if (sb->shim) {
        if (sd_shim_request(sb->shim, "shutdown", NULL, NULL, 0, shutdown_reply, sb) < 0) {
            sd_shim_close(TAKE_PTR(sb->shim));
            run_cleanup(sb, false);
        }
    } else if (!sb->shim && !sb->cleaning) {
        run_cleanup(sb, false);
    } /* (cleaning: a failed resume's cleanup runs; its end gives the slot back) */
}

/* A resume that failed (its start, or the start's timeout): the start is abandoned, what its
 * shim left is cleaned up (the uid slot kept), and the sandbox is paused again with its
 * checkpoint (core/checkpoint.c). */
static void resume_failed(sd_sandbox *sb, int code, const char *msg) {
    sd_daemon *d = sb->d;
    stop_start(sb);
    sd_sandbox_resume_lost(sb);
    error_rec err = {0};
    error_set(&err, code, "resume: %s", msg);
    TELL(d, create_finished, sb, &err); /* core/checkpoint.c: paused again */
    start_queued(d);
}

void sd_sandbox_set_paused(sd_sandbox *sb) {
    sd_shim_close(TAKE_PTR(sb->shim));
    sb->state = SD_PAUSED;
}

void sd_sandbox_resume_lost(sd_sandbox *sb) {
    sd_shim_cancel(sb->shim, sb); /* (its hello unanswered: not failed again by hello_reply) */
    sd_shim_close(TAKE_PTR(sb->shim));
    run_cleanup(sb, true);
    sb->state = SD_PAUSED;
}

void sd_sandbox_tell_pausing(sd_sandbox *sb) {
    TELL(sb->d, pausing, sb);
}

void sd_sandbox_resume(sd_sandbox *sb) {
    sb->state = SD_STARTING;
    sd_state_save(sb); /* before its shim: a restarted daemon looks for it (core/checkpoint.c) */
    sd_sandbox_start_or_queue(sb);
}

void sd_sandbox_end(sd_sandbox *sb, end_reason reason, const char *fmt, ...) {
    if (sb->state == SD_ENDED)
        return;
    sd_daemon *d = sb->d;
    if (sb->state == SD_STARTING && sb->resuming && reason == END_INFRASTRUCTURE_FAILURE) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        resume_failed(sb, -EIO, msg);
        return;
    }
    /* a pool entry: nobody pays for it; a moved one goes on costing on its new node, which
     * counts its whole cost when it ends there */
    sb->end_cost = sb->pool || reason == END_MOVED ? 0 : sd_sandbox_cost(sb);
    /* the cap is what it costs: not the start's and the 250 ms check's time past it */
    if (reason == END_COST_LIMIT && sb->spec.max_cost_usd > 0)
        sb->end_cost = MIN(sb->end_cost, sb->spec.max_cost_usd);
    bool was_starting = sb->state == SD_STARTING, was_paused = sb->state == SD_PAUSED;
    sb->state = SD_ENDED;
    sb->ended_ms = now_real_ms();
    sb->end_reason = reason;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sb->end_message, sizeof(sb->end_message), fmt, ap);
    va_end(ap);
    if (was_starting)
        end_starting(sb);
    if ((was_starting && !sb->resuming) || sb->start_unconfirmed) /* a create that never ran: */
        sd_registry_set_idem_key(sb, NULL);                       /* a retry tries again */
    /* paused: the record says ended before ended's listeners remove the checkpoint (a daemon
     * killed in between found a paused sandbox without its checkpoint: an infrastructure
     * failure, and no forward to the node a move gave it to). It holds nothing else to undo. */
    if (was_paused)
        sd_state_save(sb);
    TELL(d, ended, sb);
    sd_gpu_release(sb); /* GPUs: free again on every end path */
    sd_network_teardown(sb);
    if (!sb->pool)
        sd_metrics_end(&d->m, reason, sb->end_cost);
    log_info("sandbox ended sandbox=%s reason=%s cost_usd=%.7f message=\"%s\"%s", sb->id,
             end_reason_name(reason), sb->end_cost, sb->end_message, sb->pool ? " pool=true" : "");
    stop_shim(sb);
    sd_state_save(sb);
    start_queued(d);
}

int sd_sandbox_adopt(sd_sandbox *sb, error_rec *err) {
    return connect_and_hello(sb, err);
}

void sd_sandbox_free(sd_sandbox *sb) {
    if (!sb)
        return;
    sd_shim_cancel(sb->shim, sb);
    sd_shim_close(TAKE_PTR(sb->shim));
    if (sb->start_pipe)
        uv_close((uv_handle_t *)sb->start_pipe, pipe_closed);
    sd_network_free(sb);
    policy_create_done(&sb->spec);
    free(sb->idem_key);
    free(sb->seed_dir);
    free(sb);
}

void sd_sandbox_forget(sd_sandbox *sb) {
    sd_registry_unlink(sb->d, sb);
    sd_sandbox_free(sb);
}

void sd_sandbox_discard(sd_sandbox *sb) {
    sd_state_remove(sb->d, sb->id);
    sd_registry_release_slot(sb);
    sd_sandbox_forget(sb);
}

void sd_lifecycle_stop(sd_daemon *d) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        if (sb->state == SD_RUNNING)
            sd_state_save(sb);
        sd_shim_cancel(sb->shim, sb);
    }
}
