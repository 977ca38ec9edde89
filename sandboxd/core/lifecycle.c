/* A sandbox's life as the daemon sees it: start (write spec.json, run sbx-shim, read its
 * start-up line, connect, hello), events from the shim, re-adoption after a restart, and the
 * typed end (shutdown through the shim, or `sbx-shim cleanup` when the shim is gone). */
#include "sandboxd/daemon.h"
#include "sandboxd/core/images.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "sandboxd/net/daemon.h"
#include "sandboxd/core/shim_client.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void on_shim_event(void *ud, json_t *ev);
static void on_shim_lost(void *ud);
static const sd_shim_ops shim_ops = {.event = on_shim_event, .lost = on_shim_lost};

typedef struct spawned {
    uv_process_t proc;
    sd_daemon *d;
    int release_slot; /* for cleanup runs: the uid slot to free when it is done */
} spawned;

static void proc_closed(uv_handle_t *h) {
    free(h->data);
}

static void proc_exit(uv_process_t *p, int64_t status, int sig) {
    spawned *s = p->data;
    if (s->release_slot >= 0)
        sd_slot_release(s->d, s->release_slot);
    uv_close((uv_handle_t *)p, proc_closed);
}

/* Run the shim binary with args; extra_fd (or -1) becomes fd 3. */
static int spawn_shim(sd_daemon *d, char **args, int extra_fd, int release_slot, int *ret_pid) {
    spawned *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->d = d;
    s->release_slot = release_slot;
    s->proc.data = s;
    uv_stdio_container_t stdio[4] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
        {.flags = UV_INHERIT_FD, .data.fd = extra_fd},
    };
    static char *empty_env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                NULL};
    uv_process_options_t o = {.exit_cb = proc_exit,
                              .file = d->cfg.shim_path,
                              .args = args,
                              .env = empty_env,
                              .flags = UV_PROCESS_DETACHED,
                              .stdio_count = extra_fd >= 0 ? 4 : 3,
                              .stdio = stdio};
    int r = uv_spawn(d->loop, &s->proc, &o);
    if (r < 0) {
        uv_close((uv_handle_t *)&s->proc, proc_closed); /* initialized even on failure */
        return r;
    }
    if (ret_pid)
        *ret_pid = s->proc.pid;
    uv_unref((uv_handle_t *)&s->proc);
    return 0;
}

static void run_cleanup(sd_sandbox *sb) {
    char *args[] = {sb->d->cfg.shim_path, "cleanup", sb->dir, NULL};
    int slot = sb->uid_slot;
    sb->uid_slot = -1;
    if (spawn_shim(sb->d, args, -1, slot, NULL) < 0) {
        log_error("cannot run sbx-shim cleanup sandbox=%s", sb->id);
        rm_rf(sb->dir);
        sd_slot_release(sb->d, slot);
    }
}

static json_t *spec_json(sd_sandbox *sb) {
    sd_daemon *d = sb->d;
    /* images: the image's Env over the defaults, the create's env over both */
    json_t *env = json_array(), *base = sd_images_env(d, sb->spec.image), *v;
    const char *k;
    json_object_update(base, sb->spec.env);
    json_object_foreach(base, k, v) {
        char *kv;
        if (asprintf(&kv, "%s=%s", k, json_string_value(v)) >= 0) {
            json_array_append_new(env, json_string(kv));
            free(kv);
        }
    }
    json_decref(base);
    json_t *image = sd_images_spec(d, sb->spec.image);
    json_t *spec = json_pack("{s:s,s:o,s:f,s:I,s:I,s:i,s:I,s:s,s:o,s:{s:s},s:{s:i,s:s}}", "id",
                             sb->id, "image", image, "cpu", sb->spec.cpu, "memory",
                             (json_int_t)sb->spec.memory, "disk", (json_int_t)sb->spec.disk, "pids",
                             (int)sb->spec.pids, "uid_base", (json_int_t)sd_uid_base(sb->uid_slot),
                             "hostname", sb->id, "env", env, "network", "mode", "none", "cgroup",
                             "version", d->cgroup_version, "parent", d->cgroup_parent);
    if (spec && sb->seed_dir)
        json_object_set_new(spec, "seed",
                            json_pack("{s:s,s:I}", "path", sb->seed_dir, "uid_base",
                                      (json_int_t)sb->seed_uid_base));
    if (spec && d->seccomp_bpf[0])
        json_object_set_new(spec, "seccomp_bpf", json_string(d->seccomp_bpf));
    if (spec)
        sd_net_daemon_spec(sb, spec);
    return spec;
}

static void start_failed(sd_sandbox *sb, const char *msg) {
    sd_daemon *d = sb->d;
    log_error("sandbox start failed sandbox=%s error=\"%s\"", sb->id, msg);
    if (!sb->pool)
        sd_metrics_create(d, "error", (double)(now_mono_us() - sb->start_mono_us) / 1e6);
    sd_create_finish(sb, 500, "internal", msg);
    free(sb->idem_key); /* a retry with the same key tries again */
    sb->idem_key = NULL;
    sd_sandbox_end(sb, "infrastructure_failure", "sandbox failed to start: %s", msg);
}

static void hello_reply(void *ud, json_t *reply) {
    sd_sandbox *sb = ud;
    if (!reply || strcmp(shimproto_type(reply), "hello") != 0) {
        if (sb->state == SD_STARTING)
            start_failed(sb, "the shim did not answer hello");
        else if (sb->state == SD_RUNNING)
            sd_sandbox_end(sb, "infrastructure_failure", "the shim did not answer hello");
        return;
    }
    json_t *ip = json_object_get(reply, "init_pid");
    if (json_is_integer(ip))
        sb->init_pid = (int)json_integer_value(ip);
    json_t *oom = json_object_get(reply, "oom_kills");
    if (json_is_integer(oom))
        sb->oom_kills = (uint64_t)json_integer_value(oom);
    if (sb->state != SD_STARTING)
        return;
    error_rec nerr = {0};
    if (sd_net_daemon_setup(sb, &nerr) < 0) {
        start_failed(sb, nerr.message);
        return;
    }
    sb->state = SD_RUNNING;
    sb->d->n_starting--;
    double secs = (double)(now_mono_us() - sb->start_mono_us) / 1e6;
    if (!sb->pool)
        sd_metrics_create(sb->d, "ok", secs);
    log_info("sandbox started sandbox=%s init_pid=%d shim_pid=%d seconds=%.3f%s", sb->id,
             sb->init_pid, sb->shim_pid, secs, sb->pool ? " pool=true" : "");
    sd_state_save(sb);
    sd_create_finish(sb, 201, NULL, NULL);
    sd_start_queued(sb->d);
    sd_pool_refill(sb->d);
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
        json_decref(j);
        start_failed(sb, msg);
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

void sd_sandbox_start(sd_sandbox *sb) {
    sd_daemon *d = sb->d;
    sb->queued = false;
    d->n_starting++;
    sb->start_mono_us = now_mono_us();
    rm_rf(sb->dir);
    _cleanup_free_ char *spec_path = NULL, *dump = NULL;
    json_t *spec = spec_json(sb);
    dump = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
    json_decref(spec);
    int p[2] = {-1, -1};
    if (!dump || mkdir_p(sb->dir, 0711) < 0 || asprintf(&spec_path, "%s/spec.json", sb->dir) < 0 ||
        file_replace_nosync(spec_path, dump, strlen(dump), 0600) < 0 || pipe2(p, O_CLOEXEC) < 0) {
        start_failed(sb, "cannot prepare the sandbox directory");
        return;
    }
    char *args[] = {d->cfg.shim_path, sb->dir, NULL};
    int r = spawn_shim(d, args, p[1], -1, NULL);
    safe_close(p[1]);
    if (r < 0) {
        safe_close(p[0]);
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof(msg), "cannot run %s: %s", d->cfg.shim_path, uv_strerror(r));
        start_failed(sb, msg);
        return;
    }
    sb->start_pipe = calloc(1, sizeof(uv_pipe_t));
    uv_pipe_init(d->loop, sb->start_pipe, 0);
    uv_pipe_open(sb->start_pipe, p[0]);
    sb->start_pipe->data = sb;
    uv_read_start((uv_stream_t *)sb->start_pipe, alloc_cb, read_cb);
}

void sd_start_queued(sd_daemon *d) {
    while (d->n_starting < d->cfg.max_starting && !d->shutting_down) {
        sd_sandbox *oldest = NULL;
        for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
            if (sb->queued && (!oldest || sb->created_ms <= oldest->created_ms))
                oldest = sb;
        if (!oldest)
            return;
        sd_sandbox_start(oldest);
    }
}

void sd_sandbox_touch(sd_sandbox *sb) {
    sb->last_activity_ms = now_real_ms();
}

static void shutdown_reply(void *ud, json_t *reply) {
    sd_sandbox *sb = ud;
    if (!reply || strcmp(shimproto_type(reply), "ok") != 0) {
        sd_shim_close(TAKE_PTR(sb->shim));
        run_cleanup(sb);
    }
    /* else: the shim tears down and exits; on_shim_lost frees the slot */
}

static void on_shim_lost(void *ud) {
    sd_sandbox *sb = ud;
    sd_shim_close(TAKE_PTR(sb->shim));
    if (sb->state == SD_ENDED) {
        sd_slot_release(sb->d, sb->uid_slot);
        sb->uid_slot = -1;
        return;
    }
    error_rec err = {0};
    if (!sb->d->shutting_down && connect_and_hello(sb, &err) == 0) {
        log_warn("shim connection lost, reconnected sandbox=%s", sb->id);
        return;
    }
    sd_sandbox_end(sb, "infrastructure_failure", "the sandbox's shim died (connection lost)");
}

static void on_shim_event(void *ud, json_t *ev) {
    sd_sandbox *sb = ud;
    const char *type = shimproto_type(ev);
    if (strcmp(type, "exit") == 0) {
        sd_exec_on_exit(sb, ev);
    } else if (strcmp(type, "oom") == 0) {
        uint64_t n = (uint64_t)json_integer_value(json_object_get(ev, "oom_kills"));
        if (n > sb->oom_kills)
            sb->d->m.oom_kills += n - sb->oom_kills;
        sb->oom_kills = n;
    } else if (strcmp(type, "dead") == 0) {
        json_t *m = json_object_get(ev, "message");
        sd_sandbox_end(sb, "infrastructure_failure", "the sandbox's init died: %s",
                       json_is_string(m) ? json_string_value(m) : "no detail");
    }
}

void sd_sandbox_end(sd_sandbox *sb, const char *reason, const char *fmt, ...) {
    if (sb->state == SD_ENDED)
        return;
    sd_daemon *d = sb->d;
    sb->end_cost = sd_sandbox_cost(sb);
    bool was_starting = sb->state == SD_STARTING;
    sb->state = SD_ENDED;
    sb->ended_ms = now_real_ms();
    snprintf(sb->end_reason, sizeof(sb->end_reason), "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sb->end_message, sizeof(sb->end_message), fmt, ap);
    va_end(ap);
    if (was_starting) {
        if (!sb->queued)
            d->n_starting--;
        sb->queued = false;
        if (sb->start_pipe) {
            uv_close((uv_handle_t *)sb->start_pipe, pipe_closed);
            sb->start_pipe = NULL;
        }
        sd_create_finish(sb, strcmp(reason, "infrastructure_failure") ? 409 : 500,
                         strcmp(reason, "infrastructure_failure") ? "conflict" : "internal",
                         sb->end_message);
    }
    sd_exec_abort_all(sb, sb->end_message);
    sd_net_daemon_teardown(sb);
    if (sb->pool) {
        sb->end_cost = 0; /* never handed out: nobody pays for it */
        sd_pool_entry_ended(sb, strcmp(reason, "infrastructure_failure") == 0);
    } else {
        sd_metrics_end(d, reason, sb->end_cost);
    }
    log_info("sandbox ended sandbox=%s reason=%s cost_usd=%.7f message=\"%s\"%s", sb->id, reason,
             sb->end_cost, sb->end_message, sb->pool ? " pool=true" : "");
    if (sb->shim && !d->shutting_down) {
        if (sd_shim_request(sb->shim, "shutdown", NULL, NULL, 0, shutdown_reply, sb) < 0) {
            sd_shim_close(TAKE_PTR(sb->shim));
            run_cleanup(sb);
        }
    } else if (!sb->shim) {
        run_cleanup(sb);
    }
    sd_state_save(sb);
    sd_start_queued(d);
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
    sd_net_daemon_free(sb);
    policy_create_done(&sb->spec);
    free(sb->waiters);
    free(sb->idem_key);
    free(sb->seed_dir);
    free(sb);
}
