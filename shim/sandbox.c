/* Building and tearing down one sandbox from the host side (see sandbox.h). The build is a table
 * of named steps; init runs its own table inside the namespaces (init.c). */
#include "shim/gpu.h"
#include "shim/sandbox.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "policy/seccomp.h"
#include "shim/grading.h"
#include "shim/gvisor.h"
#include "shim/init.h"
#include "shim/ipc.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"

#define BUILD_TIMEOUT_S 60

static int step_spec(shim_sandbox *sb, error_rec *err) {
    char p[4200];
    snprintf(p, sizeof(p), "%s/spec.json", sb->dir);
    return shim_spec_load(p, &sb->spec, err);
}

static int step_seccomp(shim_sandbox *sb, error_rec *err) {
    void *buf = NULL;
    size_t len = 0;
    int r = policy_seccomp_read_bpf(sb->spec->seccomp_bpf, &buf, &len, err);
    if (r < 0)
        return r;
    sb->bpf = buf;
    sb->bpf_len = len / sizeof(struct sock_filter);
    return 0;
}

static int step_cgroup(shim_sandbox *sb, error_rec *err) {
    const shim_spec *s = sb->spec;
    int r =
        shim_cgroup_open(s->cgroup_version, s->cgroup_parent, s->id, s->gpus != NULL, &sb->cg, err);
    if (r < 0)
        return r;
    uint64_t pids = s->runsc ? SHIM_GVISOR_HOST_PIDS(s->pids) : s->pids; /* gvisor.h */
    r = shim_cgroup_create(sb->cg, s->cpu, s->memory, pids, err);
    return r < 0 ? r : shim_gpu_cgroup(sb->cg, s, err); /* GPUs: only their nodes (gpu.c) */
}

static int step_socket(shim_sandbox *sb, error_rec *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/shim.sock", sb->dir);
    if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
        return error_set(err, -ENAMETOOLONG, "socket path too long");
    unlink(sa.sun_path);
    sb->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sb->listen_fd < 0)
        return error_set_errno(err, negative_errno(), "socket");
    mode_t old = umask(0077);
    int r = bind(sb->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || listen(sb->listen_fd, 16) < 0)
        return error_set_errno(err, negative_errno(), "listen on %s", sa.sun_path);
    return 0;
}

static int step_agent_socket(shim_sandbox *sb, error_rec *err) {
    if (!sb->spec->grading)
        return 0;
    return shim_grading_socket(sb->dir, sb->spec, &sb->agent_fd, err);
}

static _Noreturn void run_init(shim_sandbox *sb, int ipc, const char *staging) {
    shim_init_ctx ctx = {.spec = sb->spec, .staging = staging, .ipc = ipc};
    if (sb->cg && sb->cg->version == 1)
        ctx.cg = sb->cg;
    ctx.prog.len = (unsigned short)sb->bpf_len;
    ctx.prog.filter = sb->bpf;
    shim_init_main(&ctx);
}

static int step_fork(shim_sandbox *sb, error_rec *err) {
    char staging[4200];
    snprintf(staging, sizeof(staging), "%s/rootfs", sb->dir);
    if (mkdir(staging, 0700) < 0 && errno != EEXIST)
        return error_set_errno(err, negative_errno(), "mkdir %s", staging);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return error_set_errno(err, negative_errno(), "socketpair");
    sb->ipc = sp[0];
    _cleanup_close_ int own_pid = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int own_time = open("/proc/self/ns/time", O_RDONLY | O_CLOEXEC);
    int flags = CLONE_NEWPID | (own_time >= 0 ? CLONE_NEWTIME : 0);
    if (unshare(flags) < 0) {
        close(sp[1]);
        return error_set_errno(err, negative_errno(), "unshare pid/time namespaces");
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(sp[0]);
        run_init(sb, sp[1], staging);
    }
    int fe = errno;
    close(sp[1]);
    /* Our later children (none expected) go back to our own namespaces. */
    if (own_pid >= 0)
        setns(own_pid, CLONE_NEWPID);
    if (own_time >= 0)
        setns(own_time, CLONE_NEWTIME);
    if (pid < 0)
        return error_set_errno(err, -fe, "fork");
    sb->init_pid = pid;
    struct timeval tv = {.tv_sec = BUILD_TIMEOUT_S};
    setsockopt(sb->ipc, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return 0;
}

static int send_go(shim_sandbox *sb, error_rec *err) {
    int r = shim_ipc_send(sb->ipc, SHIM_IPC_GO, 0, 0, 0, NULL, 0, NULL, 0);
    return r < 0 ? error_set_errno(err, r, "signal init") : 0;
}

/* Wait for init to reach `want`; relays init's own failure message unchanged. The message's
 * text, if any, is appended to sb->step_ms (READY: init's step times). */
static int wait_init(shim_sandbox *sb, uint32_t want, error_rec *err) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    int fds[3];
    size_t nf;
    int r = shim_ipc_recv(sb->ipc, &buf.m, fds, &nf);
    for (size_t i = 0; i < nf; i++)
        safe_close(fds[i]);
    if (r == -EAGAIN)
        return error_set(err, -ETIMEDOUT, "init did not answer within %ds", BUILD_TIMEOUT_S);
    if (r < 0)
        return error_set_errno(err, r, "init went away");
    if (buf.m.type == SHIM_IPC_ERROR) {
        int code = buf.m.a > 0 ? -buf.m.a : -EIO;
        error_set(err, code, "%.*s", (int)MIN(buf.m.len, 400u), buf.m.data);
        return -EALREADY; /* already says "step <name>: " */
    }
    if (buf.m.type != want)
        return error_set(err, -EPROTO, "unexpected message %u from init", buf.m.type);
    size_t l = strlen(sb->step_ms);
    if (buf.m.len > 0 && l < sizeof(sb->step_ms))
        snprintf(sb->step_ms + l, sizeof(sb->step_ms) - l, " %.*s", (int)MIN(buf.m.len, 600u),
                 buf.m.data);
    return 0;
}

/* v1: init joins by itself (run_init, shim_cgroup_join_self); v2: we move it. */
static int step_cgroup_join(shim_sandbox *sb, error_rec *err) {
    int r = sb->cg && sb->cg->version != 1 ? shim_cgroup_add_pid(sb->cg, sb->init_pid, err) : 0;
    return r < 0 ? r : send_go(sb, err);
}

static int write_map(pid_t pid, const char *file, uint32_t base, error_rec *err) {
    char path[64], line[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    snprintf(line, sizeof(line), "0 %u %u\n", base, SHIM_UID_RANGE);
    int r = file_write_str(path, line);
    return r < 0 ? error_set_errno(err, r, "write %s", path) : 0;
}

static int step_userns(shim_sandbox *sb, error_rec *err) {
    int r = wait_init(sb, SHIM_IPC_USERNS, err);
    if (r < 0 || (r = write_map(sb->init_pid, "uid_map", sb->spec->uid_base, err)) < 0 ||
        (r = write_map(sb->init_pid, "gid_map", sb->spec->uid_base, err)) < 0)
        return r;
    return send_go(sb, err);
}

static int step_ready(shim_sandbox *sb, error_rec *err) {
    int r = wait_init(sb, SHIM_IPC_READY, err);
    if (r < 0)
        return r;
    struct timeval tv = {0};
    setsockopt(sb->ipc, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd_set_nonblock(sb->ipc, 1);
}

static int step_pidfile(shim_sandbox *sb, error_rec *err) {
    char p[4200], buf[32];
    snprintf(p, sizeof(p), "%s/shim.pid", sb->dir);
    int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    int r = file_replace_nosync(p, buf, (size_t)n, 0600); /* run dir: no fsync */
    return r < 0 ? error_set_errno(err, r, "write %s", p) : 0;
}

typedef int (*host_step_fn)(shim_sandbox *, error_rec *);
static const struct {
    const char *name;
    host_step_fn fn;
} host_steps[] = {
    {"spec", step_spec},
    {"seccomp", step_seccomp},
    {"pidfile", step_pidfile}, /* before the cgroup and init: cleanup finds a shim killed later */
    {"cgroup", step_cgroup},
    {"agent-socket", step_agent_socket}, /* before fork: init binds its directory */
    {"fork", step_fork},
    {"cgroup-join", step_cgroup_join}, /* init's go-ahead: its namespaces and mounts... */
    {"socket", step_socket},           /* ...run meanwhile (the daemon's socket, ~0.3 ms) */
    {"userns-map", step_userns},
    {"ready", step_ready},
};

int shim_sandbox_build(const char *dir, shim_sandbox **ret, error_rec *err) {
    _cleanup_(shim_sandbox_freep) shim_sandbox *sb = calloc(1, sizeof(*sb));
    if (!sb || !(sb->dir = strdup(dir)))
        return error_set(err, -ENOMEM, "out of memory");
    sb->ipc = sb->listen_fd = sb->agent_fd = -1;
    sb->started_ms = now_real_ms();
    for (size_t i = 0; i < ARRAY_SIZE(host_steps); i++) {
        uint64_t t0 = now_mono_us();
        int r = host_steps[i].fn(sb, err);
        size_t l = strlen(sb->step_ms); /* (ready's wait appended init's list before it) */
        snprintf(sb->step_ms + l, sizeof(sb->step_ms) - l, "%s%s=%.2f", l ? " " : "",
                 host_steps[i].name, (double)(now_mono_us() - t0) / 1000.0);
        if (r == -EALREADY)
            r = err->code;
        else if (r < 0)
            error_prefix(err, "step %s", host_steps[i].name);
        if (r < 0) {
            shim_sandbox_teardown(sb, NULL);
            return r;
        }
    }
    *ret = TAKE_PTR(sb);
    return 0;
}

/* Wait (bounded) for init to exit and reap it. When a pid namespace's init exits the kernel
 * has already killed and waited for every other process in it. */
static void reap_init(shim_sandbox *sb) {
    if (sb->init_pid <= 0)
        return;
    int pfd = (int)syscall(SYS_pidfd_open, sb->init_pid, 0);
    if (pfd >= 0) {
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        poll(&p, 1, 10000);
        close(pfd);
    }
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(sb->init_pid, NULL, WNOHANG);
        if (r == sb->init_pid || (r < 0 && errno == ECHILD))
            break;
        kill(sb->init_pid, SIGKILL);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    sb->init_pid = 0;
}

int shim_sandbox_teardown(shim_sandbox *sb, error_rec *err) {
    if (!sb || sb->torn_down)
        return 0;
    sb->torn_down = true;
    int ret = 0;
    if (sb->init_pid > 0)
        kill(sb->init_pid, SIGKILL); /* PID 1 gone: the kernel kills the whole pid namespace */
    reap_init(sb);
    if (sb->cg) /* anything that still sits in the cgroup (nothing, normally) */
        ret = shim_cgroup_kill_all(sb->cg);
    sb->ipc = safe_close(sb->ipc);
    sb->listen_fd = safe_close(sb->listen_fd);
    sb->agent_fd = safe_close(sb->agent_fd);
    if (sb->cg) {
        int r = shim_cgroup_destroy(sb->cg, err);
        if (r < 0 && ret >= 0)
            ret = r;
    }
    int r = rm_rf(sb->dir);
    if (r < 0 && ret >= 0)
        ret = error_set_errno(err, r, "remove %s", sb->dir);
    return ret < 0 ? ret : 0;
}

void shim_sandbox_free(shim_sandbox *sb) {
    if (!sb)
        return;
    safe_close(sb->ipc);
    safe_close(sb->listen_fd);
    safe_close(sb->agent_fd);
    shim_cgroup_free(sb->cg);
    shim_spec_free(sb->spec);
    free(sb->bpf);
    free(sb->dir);
    free(sb);
}

int shim_sandbox_disk_used(shim_sandbox *sb, uint64_t *ret) {
    char p[64];
    struct statvfs st;
    snprintf(p, sizeof(p), "/proc/%d/root/tmp", (int)sb->init_pid);
    if (statvfs(p, &st) < 0)
        return -errno;
    *ret = (uint64_t)(st.f_blocks - st.f_bfree) * st.f_frsize;
    return 0;
}

/* Kill the shim recorded in dir/shim.pid if it is still the shim serving dir. */
static void kill_old_shim(const char *dir) {
    char p[4200];
    snprintf(p, sizeof(p), "%s/shim.pid", dir);
    _cleanup_free_ char *s = NULL;
    if (file_read_all(p, 64, &s, NULL) < 0)
        return;
    int pid = atoi(s);
    if (pid <= 1 || pid == getpid())
        return;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0)
        return;
    snprintf(p, sizeof(p), "/proc/%d/cmdline", pid);
    _cleanup_free_ char *cmd = NULL;
    size_t len = 0;
    if (file_read_all(p, 8192, &cmd, &len) == 0) {
        size_t a0 = strlen(cmd);
        bool match = a0 + 1 < len && strcmp(cmd + a0 + 1, dir) == 0 && strstr(cmd, "sbx-shim");
        if (match && syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
            struct pollfd pp = {.fd = pfd, .events = POLLIN}; /* readable once it exited */
            poll(&pp, 1, 5000);
        }
    }
    close(pfd);
}

int shim_sandbox_cleanup(const char *dir, error_rec *err) {
    char p[4200];
    snprintf(p, sizeof(p), "%s/spec.json", dir);
    _cleanup_(shim_spec_freep) shim_spec *spec = NULL;
    kill_old_shim(dir);
    int ret = 0;
    if (shim_spec_load(p, &spec, NULL) == 0) {
        _cleanup_(shim_cgroup_freep) shim_cgroup *cg = NULL;
        ret =
            shim_cgroup_open(spec->cgroup_version, spec->cgroup_parent, spec->id, false, &cg, err);
        if (ret == 0)
            ret = shim_cgroup_destroy(cg, err);
    }
    int r = rm_rf(dir);
    if (r < 0 && ret >= 0)
        ret = error_set_errno(err, r, "remove %s", dir);
    return ret;
}
