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
#include "shim/layers.h"
#include "shim/pause.h"
#include "shim/rootfs.h"
#include "shim/volumes.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <linux/sched.h> /* struct clone_args */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shimproto.h"
#include "common/timeutil.h"

#define BUILD_TIMEOUT_S 60

static int step_spec(shim_sandbox *sb, error_rec *err) {
    char p[4200];
    snprintf(p, sizeof(p), "%s/spec.json", sb->dir);
    return shim_spec_load(p, &sb->spec, err);
}

static int step_seccomp(shim_sandbox *sb, error_rec *err) {
    if (sb->spec->restore)
        return 0; /* the restored processes' own filter comes back with them */
    void *buf = NULL;
    size_t len = 0;
    int r = policy_seccomp_read_bpf(sb->spec->seccomp_bpf, &buf, &len, err);
    if (r < 0)
        return r;
    sb->bpf = buf;
    sb->bpf_len = len / sizeof(struct sock_filter);
    return 0;
}

struct shim_parked {
    shim_cgroup *cg; /* spare-<shim pid>, no limits but pids */
    pid_t init_pid;
    int ipc;
    int cgroup_version;
    char *cgroup_parent;
    char *park_root; /* where init builds a root ahead (NULL: it does not) */
};

/* Whether the parked init still runs; one that ended is reaped here (and not killed later). */
static bool parked_alive(shim_parked *p) {
    if (waitpid(p->init_pid, NULL, WNOHANG) == 0)
        return true;
    p->init_pid = 0;
    return false;
}

/* Whether pid, a child, is exiting (killed, say): PF_EXITING in its kernel flags, set before it
 * closes its files; or a zombie already, or reaped. */
static bool exiting(pid_t pid) {
    char path[64], stat[512], state = 0;
    unsigned long flags = 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, stat, sizeof(stat) - 1);
    if (n <= 0)
        return true;
    stat[n] = 0;
    const char *s = strrchr(stat, ')'); /* after the command's name: state, 5 ids, flags */
    if (!s || sscanf(s + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
        return false;
    return state == 'Z' || state == 'X' || (flags & 0x4 /* PF_EXITING */);
}

/* A parked init serves a native sandbox without GPUs in the same cgroup tree, while it lives
 * (a grading sandbox's agent socket is made before the hand-off, and init binds it by path);
 * any other build (gvisor, GPUs, pausable) starts its own. */
static bool parked_fits(shim_parked *p, const shim_spec *s) {
    return p && !s->runsc && !s->gpus && !s->pausable && s->cgroup_version == p->cgroup_version &&
           strcmp(s->cgroup_parent ? s->cgroup_parent : "", p->cgroup_parent) == 0 &&
           parked_alive(p) && !exiting(p->init_pid);
}

/* The parked cgroup becomes the sandbox's: renamed to its id, its limits set. */
static int adopt_parked(shim_sandbox *sb, error_rec *err) {
    shim_parked *p = sb->parked;
    int r = shim_cgroup_rename(p->cg, sb->spec->id, err);
    if (r < 0)
        return r;
    sb->cg = TAKE_PTR(p->cg);
    sb->init_pid = p->init_pid;
    sb->ipc = p->ipc;
    p->init_pid = 0;
    p->ipc = -1;
    shim_parked_free(TAKE_PTR(sb->parked));
    return 0;
}

static int make_staging(shim_sandbox *sb, char *buf, size_t len, error_rec *err) {
    snprintf(buf, len, "%s/rootfs", sb->dir);
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
        return error_set_errno(err, negative_errno(), "mkdir %s", buf);
    return 0;
}

/* A parked init that fits gets the directory first: it reads the spec and builds the root
 * while this process writes the pid file and renames and limits the cgroup (~0.35 ms), before
 * anything of the sandbox runs (init waits for its id maps). */
static int step_handoff(shim_sandbox *sb, error_rec *err) {
    char staging[4200];
    if (!parked_fits(sb->parked, sb->spec))
        return 0;
    int r = make_staging(sb, staging, sizeof(staging), err);
    if (r < 0)
        return r;
    r = shim_ipc_send(sb->parked->ipc, SHIM_IPC_BUILD, 0, 0, 0, sb->dir, strlen(sb->dir), NULL, 0);
    if (r < 0) /* it died since (EPIPE): step_cgroup frees it, this build forks its own */
        log_warn("the spare's parked init cannot take the sandbox: %s", strerror(-r));
    else
        sb->handed = true;
    return 0;
}

static int step_cgroup(shim_sandbox *sb, error_rec *err) {
    const shim_spec *s = sb->spec;
    uint64_t pids = s->runsc ? SHIM_GVISOR_HOST_PIDS(s->pids) : s->pids; /* gvisor.h */
    if (sb->handed) {
        error_rec perr = {0};
        if (adopt_parked(sb, &perr) == 0)
            return shim_cgroup_limit(sb->cg, s->cpu, s->memory, pids, err);
        log_warn("the spare's parked sandbox cannot be used: %s", perr.message);
        sb->handed = false;
    }
    shim_parked_free(TAKE_PTR(sb->parked)); /* this build starts its own init */
    int r =
        shim_cgroup_open(s->cgroup_version, s->cgroup_parent, s->id, s->gpus != NULL, &sb->cg, err);
    if (r < 0)
        return r;
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

/* A pausable sandbox's init: a child in a new user namespace that owns its new pid and time
 * namespaces (and every namespace init makes later), as CRIU needs (shim/init.c). Like fork:
 * the child runs on a copy of this process. */
static pid_t fork_userns_first(bool time_ns) {
    struct clone_args a = {.flags = CLONE_NEWUSER | CLONE_NEWPID | (time_ns ? CLONE_NEWTIME : 0),
                           .exit_signal = SIGCHLD};
    return (pid_t)syscall(SYS_clone3, &a, sizeof(a));
}

/* Fork init (ctx: everything but its ipc) in new pid and time namespaces (and, pausable, a
 * new user namespace that owns them). */
static int fork_init(shim_init_ctx *ctx, pid_t *ret_pid, int *ret_ipc, error_rec *err) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return error_set_errno(err, negative_errno(), "socketpair");
    _cleanup_close_ int own_pid = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int own_time = open("/proc/self/ns/time", O_RDONLY | O_CLOEXEC);
    int flags = CLONE_NEWPID | (own_time >= 0 ? CLONE_NEWTIME : 0);
    bool userns_first = ctx->spec && ctx->spec->pausable; /* (a spare's has no spec yet) */
    if (!userns_first && unshare(flags) < 0) {
        int r = negative_errno();
        close(sp[0]);
        close(sp[1]);
        return error_set_errno(err, r, "unshare pid/time namespaces");
    }
    pid_t pid = userns_first ? fork_userns_first(own_time >= 0) : fork();
    if (pid == 0) {
        close(sp[0]);
        ctx->ipc = sp[1];
        shim_init_main(ctx);
    }
    int fe = errno;
    close(sp[1]);
    /* Our later children (none expected) go back to our own namespaces. */
    if (own_pid >= 0)
        setns(own_pid, CLONE_NEWPID);
    if (own_time >= 0)
        setns(own_time, CLONE_NEWTIME);
    if (pid < 0) {
        close(sp[0]);
        return error_set_errno(err, -fe, "fork");
    }
    struct timeval tv = {.tv_sec = BUILD_TIMEOUT_S};
    setsockopt(sp[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    *ret_pid = pid;
    *ret_ipc = sp[0];
    return 0;
}

/* A pausable sandbox of an image: a detached bind of sbx-shim's libraries' directory, and its
 * loader's name there (shim/rootfs.h SHIM_INIT_LIBS); -1 and NULL for a static sbx-shim. */
static int open_libs(int *ret_fd, const char **ret_loader, error_rec *err) {
    static char dir[PATH_MAX], loader[NAME_MAX + 1];
    int r = shim_rootfs_libdir(dir, sizeof(dir), loader, sizeof(loader), err);
    if (r < 0)
        return r;
    if (!loader[0]) {
        *ret_fd = -1, *ret_loader = NULL;
        return 0;
    }
    int fd = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open_tree %s", dir);
    *ret_fd = fd, *ret_loader = loader;
    return 0;
}

/* Init is forked now, unless a parked one has the directory (step_handoff, adopted by
 * step_cgroup). */
static int step_fork(shim_sandbox *sb, error_rec *err) {
    char staging[4200];
    if (sb->spec->restore)
        return 0; /* step_restore brought init back */
    int r = make_staging(sb, staging, sizeof(staging), err);
    if (r < 0 || sb->init_pid > 0)
        return r;
    shim_init_ctx ctx = {
        .spec = sb->spec, .staging = staging, .dir = sb->dir, .exe_tree = -1, .lib_tree = -1};
    _cleanup_close_ int exe = -1, libs = -1;
    if (sb->spec->pausable &&
        (exe = open_tree(AT_FDCWD, "/proc/self/exe", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0)
        return error_set_errno(err, negative_errno(), "open_tree sbx-shim");
    if (sb->spec->pausable && sb->spec->image_type != SHIM_IMAGE_HOST &&
        (r = open_libs(&libs, &ctx.loader, err)) < 0)
        return r;
    ctx.exe_tree = exe, ctx.lib_tree = libs;
    if (sb->cg && sb->cg->version == 1 && !sb->spec->pausable)
        ctx.cg = sb->cg; /* a pausable init is host root no more: moved, as on v2 */
    ctx.prog.len = (unsigned short)sb->bpf_len;
    ctx.prog.filter = sb->bpf;
    sb->forked = true;
    return fork_init(&ctx, &sb->init_pid, &sb->ipc, err);
}

static int send_go(int ipc, error_rec *err) {
    int r = shim_ipc_send(ipc, SHIM_IPC_GO, 0, 0, 0, NULL, 0, NULL, 0);
    return r < 0 ? error_set_errno(err, r, "signal init") : 0;
}

/* Wait for init to reach `want`; relays init's own failure message unchanged. The message's
 * text, if any, is appended to step_ms (READY: init's step times). */
static int wait_init_fd(int ipc, uint32_t want, char *step_ms, size_t size, int *ret_fd,
                        error_rec *err) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    int fds[3];
    size_t nf;
    int r = shim_ipc_recv(ipc, &buf.m, fds, &nf);
    if (r == 0 && ret_fd && nf == 1 && buf.m.type == want)
        *ret_fd = fds[0], nf = 0; /* (a reply of want carries at most this one) */
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
    size_t l = step_ms ? strlen(step_ms) : size;
    if (buf.m.len > 0 && l < size)
        snprintf(step_ms + l, size - l, " %.*s", (int)MIN(buf.m.len, 600u), buf.m.data);
    return 0;
}

static int wait_init(int ipc, uint32_t want, char *step_ms, size_t size, error_rec *err) {
    return wait_init_fd(ipc, want, step_ms, size, NULL, err);
}

/* v1: init joins by itself (fork_init, shim_cgroup_join_self); v2: we move it. A parked init
 * is in its cgroup and past its go-ahead already. */
static int join_go(shim_cgroup *cg, pid_t pid, bool move, int ipc, error_rec *err) {
    int r = cg && (move || cg->version != 1) ? shim_cgroup_add_pid(cg, pid, err) : 0;
    return r < 0 ? r : send_go(ipc, err);
}
static int step_cgroup_join(shim_sandbox *sb, error_rec *err) {
    return sb->forked ? join_go(sb->cg, sb->init_pid, sb->spec->pausable, sb->ipc, err) : 0;
}

static int write_map(pid_t pid, const char *file, uint32_t base, error_rec *err) {
    char path[64], line[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    snprintf(line, sizeof(line), "0 %u %u\n", base, SHIM_UID_RANGE);
    int r = file_write_str(path, line);
    return r < 0 ? error_set_errno(err, r, "write %s", path) : 0;
}

/* A restored sandbox (shim/pause.c) is not built: its init comes back from the checkpoint, in
 * the cgroup, and answers on a new channel. */
static int step_restore(shim_sandbox *sb, error_rec *err) {
    return sb->spec->restore ? shim_restore(sb, err) : 0;
}

/* One detached id-mapped mount to init: SHIM_IPC_LAYER's index i. */
static int send_mount(shim_sandbox *sb, const char *src, int userns, size_t i, error_rec *err) {
    int fd = -1;
    int r = shim_layer_tree_idmapped(src, userns, &fd, err);
    if (r < 0)
        return r;
    r = shim_ipc_send(sb->ipc, SHIM_IPC_LAYER, 0, (int32_t)i, 0, NULL, 0, &fd, 1);
    close(fd);
    return r < 0 ? error_set_errno(err, r, "send %s to init", src) : 0;
}

/* A pausable init (in its user namespace from birth) cannot id-map: its store layers and
 * volumes (0 -> uid_base, through init's own namespace) and its seed's workspace and tmp
 * (seed_uid_base -> uid_base) come from the shim as detached mounts (common/spec.h
 * layer_mounts). */
static int send_mounts(shim_sandbox *sb, error_rec *err) {
    const shim_spec *s = sb->spec;
    size_t n = SHIM_SEED_MOUNTS_AT(s);
    if (!SHIM_SENDS_MOUNTS(s))
        return 0;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)sb->init_pid);
    _cleanup_close_ int userns = open(p, O_RDONLY | O_CLOEXEC), seeds = -1;
    if (userns < 0)
        return error_set_errno(err, negative_errno(), "open %s", p);
    int r = 0;
    for (size_t i = 0; i < n && r >= 0; i++) /* (a directory image: one layer) */
        r = send_mount(sb, s->image_type == SHIM_IMAGE_DIR ? s->image_path : s->layers[i], userns,
                       i, err);
    size_t i;
    json_t *v;
    json_array_foreach(s->volumes, i, v) {
        int fd = -1;
        if (r < 0 || (r = shim_volume_tree(v, userns, &fd, err)) < 0)
            return r;
        r = shim_ipc_send(sb->ipc, SHIM_IPC_LAYER, 0, (int32_t)(SHIM_VOLUME_MOUNTS_AT(s) + i), 0,
                          NULL, 0, &fd, 1);
        close(fd);
        if (r < 0)
            return error_set_errno(err, r, "send volume %zu to init", i);
    }
    if (r < 0 || !s->seed_path)
        return r;
    if ((r = shim_idmap_userns(s->seed_uid_base, s->uid_base, &seeds)) < 0)
        return error_set_errno(err, r, "a user namespace to id-map the seed");
    static const char *const names[] = {"workspace", "tmp"};
    for (size_t k = 0; k < ARRAY_SIZE(names) && r >= 0; k++) {
        snprintf(p, sizeof(p), "%s/%s", s->seed_path, names[k]);
        if (access(p, F_OK) == 0)
            r = send_mount(sb, p, seeds, n + k, err);
    }
    return r;
}

static int step_userns(shim_sandbox *sb, error_rec *err) {
    if (sb->spec->restore)
        return 0;
    int r = wait_init(sb->ipc, SHIM_IPC_USERNS, sb->step_ms, sizeof(sb->step_ms), err);
    if (r < 0 || (r = write_map(sb->init_pid, "uid_map", sb->spec->uid_base, err)) < 0 ||
        (r = write_map(sb->init_pid, "gid_map", sb->spec->uid_base, err)) < 0 ||
        (r = send_mounts(sb, err)) < 0)
        return r;
    return send_go(sb->ipc, err);
}

static int step_ready(shim_sandbox *sb, error_rec *err) {
    int upper = -1, r = sb->spec->restore ? 0 /* (READY came in step_restore) */
                                          : wait_init_fd(sb->ipc, SHIM_IPC_READY, sb->step_ms,
                                                         sizeof(sb->step_ms), &upper, err);
    if (r < 0)
        return r;
    bool image = sb->spec->image_type != SHIM_IMAGE_HOST && !sb->spec->runsc;
    if (!sb->spec->restore && sb->spec->pausable && image && upper < 0)
        return error_set(err, -EPROTO, "init sent no upper directory");
    if (upper >= 0 && (r = shim_keep_upper(upper, sb->spec->uid_base, err)) < 0)
        return r;
    struct timeval tv = {0};
    setsockopt(sb->ipc, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd_set_nonblock(sb->ipc, 1);
}

/* dir opened and locked (flock) against `sbx-shim cleanup`, which holds the lock from before it
 * reads shim.pid until it has removed dir (shim_sandbox_cleanup). */
static int lock_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    int r;
    while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR) {
    }
    if (r < 0) {
        r = negative_errno();
        close(fd);
        return r;
    }
    return fd;
}

/* Whether a cleanup ran for the dir locked as dfd: its mark is there, or the dir is gone. */
static bool cleanup_ran(int dfd) {
    struct stat st;
    return fstat(dfd, &st) < 0 || st.st_nlink == 0 ||
           faccessat(dfd, SHIM_CLEANED_MARK, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* shim.pid, under the lock of dir: a cleanup that ran first (cleanup_ran) did not find this
 * shim to kill, so the build stops here. Unlocked, a cleanup could read no shim.pid, then remove
 * dir while this shim went on writing into it (rm_rf: "Directory not empty") and building a
 * sandbox nobody owned, its uid slot given to the next one. */
static int step_pidfile(shim_sandbox *sb, error_rec *err) {
    char p[4200], buf[32];
    _cleanup_close_ int dfd = lock_dir(sb->dir);
    if (dfd < 0)
        return error_set_errno(err, dfd, "lock %s", sb->dir);
    if (cleanup_ran(dfd))
        return error_set(err, -ECANCELED, "sbx-shim cleanup ran for %s", sb->dir);
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
    {"agent-socket", step_agent_socket}, /* before init's build: init binds its directory */
    {"handoff", step_handoff},
    {"pidfile", step_pidfile}, /* before the cgroup: cleanup finds a shim killed later */
    {"cgroup", step_cgroup},
    {"restore", step_restore}, /* a restore's init instead of the next steps' (shim/pause.h) */
    {"fork", step_fork},
    {"cgroup-join", step_cgroup_join}, /* init's go-ahead: its namespaces and mounts... */
    {"socket", step_socket},           /* ...run meanwhile (the daemon's socket, ~0.3 ms) */
    {"userns-map", step_userns},
    {"ready", step_ready},
};

/* Whether a cleanup ran for dir or runs now (dir gone, or its mark there), asked under its lock:
 * then a failed build is not made again (a second build would make dir again, unmarked, and
 * serve a sandbox nobody owns). */
static bool cleaned(const char *dir) {
    _cleanup_close_ int dfd = lock_dir(dir);
    return dfd < 0 || cleanup_ran(dfd);
}

/* One build of dir. *parked_lost, on failure: the parked init it was handed (step_handoff) is
 * exiting (killed after the hand-off), so another build with an init of its own may succeed. */
static int build_once(const char *dir, shim_parked *parked, shim_sandbox **ret, bool *parked_lost,
                      error_rec *err) {
    _cleanup_(shim_parked_freep) shim_parked *p = parked;
    _cleanup_(shim_sandbox_freep) shim_sandbox *sb = calloc(1, sizeof(*sb));
    if (!sb || !(sb->dir = strdup(dir)))
        return error_set(err, -ENOMEM, "out of memory");
    sb->parked = TAKE_PTR(p);
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
            *parked_lost = sb->handed && sb->init_pid > 0 && exiting(sb->init_pid) &&
                           !cleaned(dir); /* (a cleanup may be what killed it) */
            shim_sandbox_teardown(sb, NULL);
            return r;
        }
    }
    *ret = TAKE_PTR(sb);
    return 0;
}

/* A parked init killed after the hand-off fails the build, whose teardown removes dir: dir and
 * its spec.json (kept from before) are made again, as the daemon made them, for a second build
 * with an init of its own. */
int shim_sandbox_build(const char *dir, shim_parked *parked, shim_sandbox **ret, error_rec *err) {
    _cleanup_(shim_parked_freep) shim_parked *p = parked;
    _cleanup_free_ char *spec = NULL;
    char path[4200];
    size_t len = 0;
    bool lost = false;
    snprintf(path, sizeof(path), "%s/spec.json", dir);
    if (p && file_read_all(path, SPEC_FILE_MAX, &spec, &len) < 0)
        spec = NULL; /* (its own build fails on it) */
    int r = build_once(dir, TAKE_PTR(p), ret, &lost, err);
    if (r >= 0 || !lost || !spec)
        return r;
    log_warn("the spare's parked init went away during the build (%s): building again with an "
             "init of its own",
             err->message);
    if ((mkdir(dir, 0711) < 0 && errno != EEXIST) || file_replace_nosync(path, spec, len, 0600) < 0)
        return r;
    *err = (error_rec){0};
    return build_once(dir, NULL, ret, &lost, err);
}

/* Wait (bounded) for init to exit and reap it. When a pid namespace's init exits the kernel
 * has already killed and waited for every other process in it. */
static void reap_init(pid_t *pid) {
    if (*pid <= 0)
        return;
    int pfd = (int)syscall(SYS_pidfd_open, *pid, 0);
    if (pfd >= 0) {
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        poll(&p, 1, 10000);
        close(pfd);
    }
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(*pid, NULL, WNOHANG);
        if (r == *pid || (r < 0 && errno == ECHILD))
            break;
        kill(*pid, SIGKILL);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    *pid = 0;
}

int shim_sandbox_teardown(shim_sandbox *sb, error_rec *err) {
    if (!sb || sb->torn_down)
        return 0;
    sb->torn_down = true;
    int ret = 0;
    if (sb->init_pid > 0)
        kill(sb->init_pid, SIGKILL); /* PID 1 gone: the kernel kills the whole pid namespace */
    reap_init(&sb->init_pid);
    shim_parked_free(TAKE_PTR(sb->parked));
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
    shim_parked_free(sb->parked);
    safe_close(sb->ipc);
    safe_close(sb->listen_fd);
    safe_close(sb->agent_fd);
    shim_cgroup_free(sb->cg);
    shim_spec_free(sb->spec);
    free(sb->bpf);
    free(sb->dir);
    free(sb);
}

static int parked_build(shim_parked *p, error_rec *err) {
    char name[64];
    snprintf(name, sizeof(name), SHIMPROTO_SPARE_CGROUP "%d", (int)getpid());
    int r = shim_cgroup_open(p->cgroup_version, p->cgroup_parent, name, false, &p->cg, err);
    if (r < 0 || (r = shim_cgroup_create(p->cg, 0, 0, SHIM_SPARE_PIDS, err)) < 0)
        return r;
    shim_init_ctx ctx = {
        .parked = true, .cg = p->cgroup_version == 1 ? p->cg : NULL, .park_root = p->park_root};
    if ((r = fork_init(&ctx, &p->init_pid, &p->ipc, err)) < 0 ||
        (r = join_go(p->cg, p->init_pid, false, p->ipc, err)) < 0 ||
        (r = wait_init(p->ipc, SHIM_IPC_PARKED, NULL, 0, err)) < 0)
        return r == -EALREADY ? err->code : r;
    return 0;
}

int shim_parked_make(int cgroup_version, const char *cgroup_parent, const char *park_root,
                     shim_parked **ret, error_rec *err) {
    _cleanup_(shim_parked_freep) shim_parked *p = calloc(1, sizeof(*p));
    if (!p || !(p->cgroup_parent = strdup(cgroup_parent)) ||
        (park_root && !(p->park_root = strdup(park_root))))
        return error_set(err, -ENOMEM, "out of memory");
    p->ipc = -1;
    p->cgroup_version = cgroup_version;
    int r = parked_build(p, err);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(p);
    return 0;
}

int shim_parked_nice(shim_parked *p, int nice) {
    if (p && p->init_pid > 0 && setpriority(PRIO_PROCESS, (id_t)p->init_pid, nice) < 0)
        return negative_errno();
    return setpriority(PRIO_PROCESS, 0, nice) < 0 ? negative_errno() : 0;
}

void shim_parked_free(shim_parked *p) {
    if (!p)
        return;
    if (p->init_pid > 0)
        kill(p->init_pid, SIGKILL);
    reap_init(&p->init_pid);
    safe_close(p->ipc);
    if (p->cg)
        shim_cgroup_destroy(p->cg, NULL);
    shim_cgroup_free(p->cg);
    free(p->cgroup_parent);
    free(p->park_root);
    free(p);
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
    /* held until dir is gone: a shim not yet at its shim.pid sees the mark (step_pidfile) */
    _cleanup_close_ int dfd = lock_dir(dir);
    if (dfd >= 0)
        safe_close(
            openat(dfd, SHIM_CLEANED_MARK, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
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
    if (r < 0 && dfd >= 0) /* dir is left (a shim wrote into it meanwhile): marked again */
        safe_close(
            openat(dfd, SHIM_CLEANED_MARK, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (r < 0 && ret >= 0)
        ret = error_set_errno(err, r, "remove %s", dir);
    return ret;
}
