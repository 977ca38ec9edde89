/* Test-side sbx-shim client (see shim_driver.h). */
#include "tests/lib/shim_driver.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "policy/seccomp.h"
#include "shim/cgroup.h"
#include "tests/lib/test.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char cg_parent[256];
static int cg_version;
static char bpf_path[256];
static int n_started;

static int watchdog_fd = -1;

static void remove_cgroup_parent(int version, const char *parent) {
    if (version == 2) {
        rmdir(parent);
        return;
    }
    static const char *const ctrls[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
    for (size_t i = 0; i < ARRAY_SIZE(ctrls); i++) {
        char mnt[512], p[1024];
        if (shim_cgroup_v1_mount(ctrls[i], mnt, sizeof(mnt)) == 0) {
            snprintf(p, sizeof(p), "%s/%s", mnt, parent);
            rmdir(p);
        }
    }
}

/* The watchdog outlives the test process however it ends (return, _exit, crash, timeout):
 * when the pipe closes it runs `sbx-shim cleanup` on every sandbox directory the test
 * announced, then removes the cgroup parent and the seccomp program. */
static _Noreturn void watchdog_main(int rfd, const char *shim) {
    setsid(); /* `timeout` signals its whole process group: the watchdog must outlive that */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        dup2(null, i);
    _cleanup_free_ char *all = NULL;
    fd_read_all(rfd, 1 << 24, &all, NULL);
    char parent[300] = "";
    int version = 1;
    for (char *line = all ? strtok(all, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (line[0] == 'B')
            unlink(line + 2);
        if (line[0] == 'P' && sscanf(line + 2, "%d %299s", &version, parent) != 2)
            parent[0] = '\0';
        if (line[0] != 'D' || access(line + 2, F_OK) < 0)
            continue;
        pid_t pid;
        char *argv[] = {(char *)shim, "cleanup", line + 2, NULL};
        if (posix_spawn(&pid, shim, NULL, NULL, argv, environ) == 0)
            waitpid(pid, NULL, 0);
        char *slash = strrchr(line + 2, '/');
        if (slash) {
            *slash = '\0';
            rmdir(line + 2);
        }
    }
    if (parent[0])
        remove_cgroup_parent(version, parent);
    _exit(0);
}

static void watchdog_note(const char *kind, const char *what) {
    if (watchdog_fd < 0) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return;
        const char *shim = test_bin("sbx-shim");
        pid_t pid = fork();
        if (pid == 0) {
            close(p[1]);
            watchdog_main(p[0], shim);
        }
        close(p[0]);
        watchdog_fd = pid > 0 ? p[1] : safe_close(p[1]);
    }
    char line[600];
    int n = snprintf(line, sizeof(line), "%s %s\n", kind, what);
    if (watchdog_fd >= 0 && n > 0 && (size_t)n < sizeof(line))
        fd_write_all(watchdog_fd, line, (size_t)n);
}

const char *shimdrv_runsc(void) {
    static char path[256];
    const char *dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                          "/usr/bin",        "/sbin",          "/bin"};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        snprintf(path, sizeof(path), "%s/runsc", dirs[i]);
        if (access(path, X_OK) == 0)
            return path;
    }
    SKIP("runsc (gVisor) is not installed: apt-get install runsc");
}

const char *shimdrv_cgroup_parent(int *ret_version) {
    if (!cg_parent[0]) {
        char *v2 = NULL;
        cg_version = shim_cgroup_detect(&v2);
        if (cg_version == 2)
            snprintf(cg_parent, sizeof(cg_parent), "%s/sbx-shimtest-%d", v2, (int)getpid());
        else
            snprintf(cg_parent, sizeof(cg_parent), "sbx-shimtest-%d", (int)getpid());
        free(v2);
        char line[300];
        snprintf(line, sizeof(line), "%d %s", cg_version, cg_parent);
        watchdog_note("P", line);
    }
    if (ret_version)
        *ret_version = cg_version;
    return cg_parent;
}

const char *shimdrv_seccomp_bpf(void) {
    if (!bpf_path[0]) {
        const char *src = getenv("SBX_SRC_DIR");
        char json[512];
        snprintf(json, sizeof(json), "%s/policy/seccomp.json", src ? src : ".");
        snprintf(bpf_path, sizeof(bpf_path), "/tmp/sbx-test-seccomp-%d.bpf", (int)getpid());
        error_rec err = {0};
        if (policy_seccomp_compile_file(json, bpf_path, &err) < 0) {
            fprintf(stderr, "seccomp compile: %s\n", err.message);
            bpf_path[0] = '\0';
            return NULL;
        }
        watchdog_note("B", bpf_path);
    }
    return bpf_path;
}

static char *make_spec(shimdrv *d, const shimdrv_opts *o) {
    int ver;
    const char *parent = shimdrv_cgroup_parent(&ver);
    const char *bpf = shimdrv_seccomp_bpf();
    json_t *image = o && o->image_dir ? json_pack("{s:s, s:s}", "type", "dir", "path", o->image_dir)
                                      : json_pack("{s:s}", "type", "host");
    json_t *env = json_pack("[s, s, s]", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace",
                            "LANG=C.UTF-8");
    if (o && o->extra_env)
        json_array_append_new(env, json_string(o->extra_env));
    uint32_t base = 2000000u + (uint32_t)((getpid() * 16 + n_started) % 30000) * 65536u;
    json_t *spec =
        json_pack("{s:s, s:o, s:f, s:I, s:I, s:I, s:I, s:s, s:o, s:{s:s}, s:s, s:{s:i, s:s}}", "id",
                  d->id, "image", image, "cpu", o && o->cpu > 0 ? o->cpu : 1.0, "memory",
                  (json_int_t)(o && o->memory ? o->memory : 512ull << 20), "disk",
                  (json_int_t)(o && o->disk ? o->disk : 256ull << 20), "pids",
                  (json_int_t)(o && o->pids ? o->pids : 256), "uid_base", (json_int_t)base,
                  "hostname", d->id, "env", env, "network", "mode", "none", "seccomp_bpf",
                  bpf ? bpf : "/nonexistent", "cgroup", "version", ver, "parent", parent);
    if (o && o->runsc)
        json_object_set_new(spec, "isolation",
                            json_pack("{s:s, s:s}", "type", "gvisor", "runsc", o->runsc));
    char *s = json_dumps(spec, JSON_INDENT(1));
    json_decref(spec);
    return s;
}

static int read_status(int fd, char *buf, size_t cap) {
    size_t len = 0;
    uint64_t deadline = now_mono_ms() + 60000;
    while (len + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(deadline - now_mono_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -ETIMEDOUT;
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (memchr(buf, '\n', len))
            break;
    }
    buf[len] = '\0';
    return len ? 0 : -EPIPE;
}

static int spawn_shim(shimdrv *d) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 3);
    /* the shim's log (and any sanitizer report) goes to a file the driver checks */
    snprintf(d->log, sizeof(d->log), "%s/%s.log", test_tmpdir(), d->id);
    posix_spawn_file_actions_addopen(&fa, 2, d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    char *argv[] = {(char *)test_bin("sbx-shim"), d->dir, NULL};
    int r = posix_spawn(&d->shim_pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (r != 0) {
        close(p[0]);
        return -r;
    }
    char line[1024];
    r = read_status(p[0], line, sizeof(line));
    close(p[0]);
    if (r < 0) {
        snprintf(d->start_error, sizeof(d->start_error), "no status line from the shim");
        return r;
    }
    json_t *st = json_loads(line, 0, NULL);
    if (!st)
        return -EPROTO;
    if (!json_is_true(json_object_get(st, "ok"))) {
        d->start_errno = (int)json_integer_value(json_object_get(st, "errno"));
        snprintf(d->start_error, sizeof(d->start_error), "%s",
                 json_string_value(json_object_get(st, "message")));
        json_decref(st);
        return -(d->start_errno > 0 ? d->start_errno : EIO);
    }
    d->init_pid = (int)json_integer_value(json_object_get(st, "init_pid"));
    json_decref(st);
    return 0;
}

static int connect_shim(shimdrv *d) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/shim.sock", d->dir);
    d->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (d->sock < 0)
        return -errno;
    if (connect(d->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    return 0;
}

int shimdrv_start_spec(shimdrv *d, const char *spec_json) {
    if (!d->id[0])
        snprintf(d->id, sizeof(d->id), "sbt-%d-%d", (int)getpid(), n_started);
    n_started++;
    d->sock = -1;
    d->events = json_array();
    snprintf(d->dir, sizeof(d->dir), "%s/%s", test_tmpdir(), d->id);
    watchdog_note("D", d->dir);
    if (mkdir(d->dir, 0700) < 0)
        return -errno;
    char p[300];
    snprintf(p, sizeof(p), "%s/spec.json", d->dir);
    int r = file_write_atomic(p, spec_json, strlen(spec_json), 0600);
    if (r < 0 || (r = spawn_shim(d)) < 0)
        return r;
    return connect_shim(d);
}

int shimdrv_start(shimdrv *d, const shimdrv_opts *o) {
    if (!d->id[0])
        snprintf(d->id, sizeof(d->id), "sbt-%d-%d", (int)getpid(), n_started);
    _cleanup_free_ char *spec = make_spec(d, o);
    if (!spec)
        return -ENOMEM;
    return shimdrv_start_spec(d, spec);
}

/* Receive one message within timeout_ms. */
static int recv_msg(shimdrv *d, int timeout_ms, json_t **ret) {
    struct pollfd p = {.fd = d->sock, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n == 0)
        return -ETIMEDOUT;
    if (n < 0)
        return -errno;
    int fds[SHIMPROTO_MAX_FDS];
    size_t nf = 0;
    int r = shimproto_recv(d->sock, ret, fds, &nf);
    for (size_t i = 0; i < nf; i++)
        close(fds[i]);
    return r;
}

static int request_fds(shimdrv *d, json_t *req, const int *fds, size_t nf, json_t **ret) {
    uint64_t seq = ++d->seq;
    json_object_set_new(req, "seq", json_integer((json_int_t)seq));
    int r = shimproto_send(d->sock, req, fds, nf);
    json_decref(req);
    if (r < 0)
        return r;
    for (;;) {
        json_t *m = NULL;
        if ((r = recv_msg(d, 30000, &m)) < 0)
            return r;
        json_t *s = json_object_get(m, "seq");
        if (json_is_integer(s) && (uint64_t)json_integer_value(s) == seq) {
            *ret = m;
            return 0;
        }
        json_array_append_new(d->events, m);
    }
}

int shimdrv_request(shimdrv *d, json_t *req, json_t **ret_reply) {
    return request_fds(d, req, NULL, 0, ret_reply);
}

int shimdrv_wait_event(shimdrv *d, const char *type, int timeout_ms, json_t **ret) {
    uint64_t deadline = now_mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        size_t i;
        json_t *e;
        json_array_foreach(d->events, i, e) {
            if (strcmp(shimproto_type(e), type) == 0) {
                *ret = json_incref(e);
                json_array_remove(d->events, i);
                return 0;
            }
        }
        int left = (int)(deadline - now_mono_ms());
        if (left <= 0)
            return -ETIMEDOUT;
        json_t *m = NULL;
        int r = recv_msg(d, left, &m);
        if (r < 0)
            return r;
        json_array_append_new(d->events, m);
    }
}

static int wait_exit(shimdrv *d, json_t *xid, int timeout_ms, json_t **ret) {
    uint64_t deadline = now_mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        size_t i;
        json_t *e;
        json_array_foreach(d->events, i, e) {
            if (strcmp(shimproto_type(e), "exit") == 0 &&
                json_equal(json_object_get(e, "xid"), xid)) {
                *ret = json_incref(e);
                json_array_remove(d->events, i);
                return 0;
            }
        }
        int left = (int)(deadline - now_mono_ms());
        if (left <= 0)
            return -ETIMEDOUT;
        json_t *m = NULL;
        int r = recv_msg(d, left, &m);
        if (r < 0)
            return r;
        json_array_append_new(d->events, m);
    }
}

struct sink {
    int fd;
    char *buf;
    size_t len, cap;
};

static int sink_read(struct sink *s) {
    if (s->fd < 0)
        return 0;
    if (s->cap - s->len < 4097) {
        size_t nc = s->cap ? s->cap * 2 : 8192;
        char *nb = realloc(s->buf, nc);
        if (!nb)
            return -ENOMEM;
        s->buf = nb;
        s->cap = nc;
    }
    ssize_t n = read(s->fd, s->buf + s->len, 4096);
    if (n > 0) {
        s->len += (size_t)n;
        return 1;
    }
    if (n < 0 && errno == EAGAIN)
        return 0;
    s->fd = safe_close(s->fd);
    return 0;
}

static char *sink_take(struct sink *s, size_t *len) {
    safe_close(s->fd);
    char *b = realloc(s->buf, s->len + 1);
    if (!b)
        b = s->buf;
    if (b)
        b[s->len] = '\0';
    *len = s->len;
    return b ? b : strdup("");
}

/* Read stdout/stderr until the exit event arrived and the pipes are drained. */
static int collect(shimdrv *d, json_t *xid, struct sink *out, struct sink *err, json_t **ret_exit) {
    json_t *ex = NULL;
    uint64_t deadline = now_mono_ms() + 300000, quiet_since = 0;
    while (now_mono_ms() < deadline) {
        if (!ex && wait_exit(d, xid, 0, &ex) == 0)
            quiet_since = now_mono_ms();
        if (ex && ((out->fd < 0 && err->fd < 0) || now_mono_ms() - quiet_since > 200))
            break;
        struct pollfd p[3] = {{.fd = out->fd, .events = POLLIN},
                              {.fd = err->fd, .events = POLLIN},
                              {.fd = ex ? -1 : d->sock, .events = POLLIN}};
        int n = poll(p, 3, 50);
        if (n < 0 && errno != EINTR)
            return -errno;
        int got = 0;
        if (p[0].revents)
            got += sink_read(out);
        if (p[1].revents)
            got += sink_read(err);
        if (got > 0 && ex)
            quiet_since = now_mono_ms();
        if (p[2].revents) {
            json_t *m = NULL;
            int r = recv_msg(d, 0, &m);
            if (r == 0)
                json_array_append_new(d->events, m);
            else if (r == -ECONNRESET) /* the shim is gone (its events are queued) */
                return r;
        }
    }
    if (!ex)
        return -ETIMEDOUT;
    *ret_exit = ex;
    return 0;
}

static void fill_result(shimdrv_result *res, json_t *ex) {
    res->exit_code = (int)json_integer_value(json_object_get(ex, "exit_code"));
    res->signal = (int)json_integer_value(json_object_get(ex, "signal"));
    res->duration_ms = (uint64_t)json_integer_value(json_object_get(ex, "duration_ms"));
    const char *reason = json_string_value(json_object_get(ex, "reason"));
    snprintf(res->reason, sizeof(res->reason), "%s", reason ? reason : "?");
    const char *msg = json_string_value(json_object_get(ex, "message"));
    snprintf(res->message, sizeof(res->message), "%s", msg ? msg : "");
}

int shimdrv_exec_start(shimdrv *d, const char *const *argv, const shimdrv_exec_opts *o,
                       shimdrv_pending *pe) {
    static int xid_counter;
    memset(pe, 0, sizeof(*pe));
    pe->out = pe->err = -1;
    int in[2], out[2], er[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0)
        return -errno;
    if (o && o->stdin_data)
        fd_write_all(in[1], o->stdin_data, strlen(o->stdin_data));
    close(in[1]);
    json_t *av = json_array();
    for (size_t i = 0; argv[i]; i++)
        json_array_append_new(av, json_string(argv[i]));
    char xs[32];
    snprintf(xs, sizeof(xs), "x%d", ++xid_counter);
    pe->xid = json_string(xs);
    json_t *req = json_pack("{s:s, s:O, s:o, s:b}", "type", "exec", "xid", pe->xid, "argv", av,
                            "shell", o && o->shell);
    if (o && o->timeout_ms)
        json_object_set_new(req, "timeout_ms", json_integer((json_int_t)o->timeout_ms));
    if (o && o->cwd)
        json_object_set_new(req, "cwd", json_string(o->cwd));
    if (o && o->file_name)
        json_object_set_new(req, "file",
                            json_pack("{s:s,s:s}", "name", o->file_name, "data", o->file_data));
    if (o && o->env) {
        json_t *env = json_array();
        for (size_t i = 0; o->env[i]; i++)
            json_array_append_new(env, json_string(o->env[i]));
        json_object_set_new(req, "env", env);
    }
    int fds[3] = {in[0], out[1], er[1]};
    json_t *reply = NULL;
    int r = request_fds(d, req, fds, 3, &reply);
    close(in[0]);
    close(out[1]);
    close(er[1]);
    pe->out = out[0];
    pe->err = er[0];
    fd_set_nonblock(out[0], 1);
    fd_set_nonblock(er[0], 1);
    if (r == 0 && strcmp(shimproto_type(reply), "started") != 0) {
        pe->start_errno = (int)json_integer_value(json_object_get(reply, "errno"));
        snprintf(pe->start_error, sizeof(pe->start_error), "%s",
                 json_string_value(json_object_get(reply, "message")));
        r = -(pe->start_errno > 0 ? pe->start_errno : EIO);
    }
    if (r == 0)
        pe->pid = (int)json_integer_value(json_object_get(reply, "pid"));
    json_decref(reply);
    return r;
}

int shimdrv_exec_finish(shimdrv *d, shimdrv_pending *pe, shimdrv_result *res) {
    memset(res, 0, sizeof(*res));
    res->start_errno = pe->start_errno;
    memcpy(res->start_error, pe->start_error, sizeof(res->start_error));
    struct sink so = {.fd = pe->out}, se = {.fd = pe->err};
    json_t *ex = NULL;
    int r = pe->start_errno ? -pe->start_errno : collect(d, pe->xid, &so, &se, &ex);
    if (ex)
        fill_result(res, ex);
    json_decref(ex);
    json_decref(pe->xid);
    pe->xid = NULL;
    res->out = sink_take(&so, &res->out_len);
    res->err = sink_take(&se, &res->err_len);
    return r;
}

int shimdrv_exec(shimdrv *d, const char *const *argv, const shimdrv_exec_opts *o,
                 shimdrv_result *res) {
    shimdrv_pending pe;
    int r = shimdrv_exec_start(d, argv, o, &pe);
    int r2 = shimdrv_exec_finish(d, &pe, res);
    return r < 0 ? r : r2;
}

int shimdrv_sh(shimdrv *d, const char *cmd, shimdrv_result *res) {
    const char *argv[] = {cmd, NULL};
    shimdrv_exec_opts o = {.shell = true};
    int r = shimdrv_exec(d, argv, &o, res);
    return r < 0 ? r : res->exit_code;
}

void shimdrv_result_free(shimdrv_result *res) {
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}

static int wait_shim(shimdrv *d, int timeout_ms) {
    uint64_t deadline = now_mono_ms() + (uint64_t)timeout_ms;
    int st;
    while (now_mono_ms() < deadline) {
        pid_t p = waitpid(d->shim_pid, &st, WNOHANG);
        if (p == d->shim_pid) {
            d->shim_pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (p < 0)
            return -errno;
        usleep(2000);
    }
    return -ETIMEDOUT;
}

/* Did the shim's log record a sanitizer error? Prints the log when it did. */
static bool log_has_sanitizer_error(shimdrv *d) {
    _cleanup_free_ char *log = NULL;
    if (!d->log[0] || file_read_all(d->log, 1 << 22, &log, NULL) < 0)
        return false;
    if (!strstr(log, "runtime error:") && !strstr(log, "AddressSanitizer") &&
        !strstr(log, "LeakSanitizer"))
        return false;
    fprintf(stderr, "sbx-shim reported a sanitizer error:\n%s\n", log);
    return true;
}

int shimdrv_shutdown(shimdrv *d) {
    json_t *reply = NULL;
    int r = shimdrv_request(d, json_pack("{s:s}", "type", "shutdown"), &reply);
    json_decref(reply);
    if (r < 0)
        return r;
    d->sock = safe_close(d->sock);
    r = wait_shim(d, 30000);
    if (r >= 0 && log_has_sanitizer_error(d))
        return -ENOTRECOVERABLE;
    return r;
}

void shimdrv_destroy(shimdrv *d) {
    if (d->shim_pid > 0 && d->sock >= 0)
        shimdrv_shutdown(d);
    if (d->shim_pid > 0) {
        kill(d->shim_pid, SIGKILL);
        wait_shim(d, 5000);
    }
    if (d->dir[0] && access(d->dir, F_OK) == 0) {
        pid_t pid;
        char *argv[] = {(char *)test_bin("sbx-shim"), "cleanup", d->dir, NULL};
        if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0)
            waitpid(pid, NULL, 0);
    }
    d->sock = safe_close(d->sock);
    json_decref(d->events);
    d->events = NULL;
    d->shim_pid = 0;
    log_has_sanitizer_error(d);
    if (d->log[0])
        unlink(d->log);
    d->log[0] = '\0';
}

int shimdrv_count_mounts(const char *needle) {
    _cleanup_free_ char *s = NULL;
    if (file_read_all("/proc/self/mountinfo", 1 << 24, &s, NULL) < 0)
        return -1;
    int n = 0;
    for (char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

char *shimdrv_sh_out(shimdrv *d, const char *cmd, int *ret_code) {
    shimdrv_result res;
    int r = shimdrv_sh(d, cmd, &res);
    if (r < 0 && res.start_error[0])
        fprintf(stderr, "exec %s: %s\n", cmd, res.start_error);
    if (res.err && res.err[0])
        fprintf(stderr, "[%s] stderr: %s", cmd, res.err);
    free(res.err);
    if (ret_code)
        *ret_code = r < 0 ? -1 : res.exit_code;
    return res.out ? res.out : strdup("");
}
