/* The gvisor class, init's side (see gvisor.h): the bundle in <staging>/gv, `runsc run`, the
 * chroot and the relay between the shim and the runner inside gVisor. */
#include "shim/gvisor.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "shim/cgroup.h"
#include "shim/ipc.h"
#include "shim/rootfs.h"
#include "shim/sandbox.h"

#include <fcntl.h>
#include <inttypes.h>
#include <grp.h>
#include <linux/mount.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS_SAFE (MS_NOSUID | MS_NODEV)
#define LOG_TAIL 600
/* In init's mount namespace only: a tmpfs on /run with the staging tree bound at BASE, so
 * that the mapped root reaches it whatever the modes of the run directory's parents. */
#define COVER "/run"
#define BASE COVER "/sbx"

static int log_fd = -1;      /* <staging>/gv/runsc.log, runsc's stdout and stderr */
static int inner_fd = -1;    /* init's end of the channel to the runner (runsc's stdin) */
static pid_t runsc_pid = -1; /* `runsc run`, init's child */

static int write_bundle(shim_init_ctx *c, int gvfd, uid_t ruid, error_rec *err) {
    json_t *oci = shim_gvisor_oci(c->spec, BASE);
    _cleanup_free_ char *text = oci ? json_dumps(oci, JSON_INDENT(1)) : NULL;
    json_decref(oci);
    if (!text)
        return error_set(err, -ENOMEM, "out of memory");
    _cleanup_close_ int fd =
        openat(gvfd, "config.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fd_write_all(fd, text, strlen(text)) < 0 || fchown(fd, ruid, ruid) < 0)
        return error_set_errno(err, negative_errno(), "write the OCI bundle");
    log_fd = openat(gvfd, "runsc.log", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (log_fd < 0 || fchown(log_fd, ruid, ruid) < 0)
        return error_set_errno(err, negative_errno(), "create runsc.log");
    return 0;
}

/* gv/meminfo: the host's /proc/meminfo with MemTotal at the sandbox's memory limit (when lower).
 * Bound over /proc/meminfo in init's mount namespace, it is what `runsc run` reads for the
 * Sentry's total memory (its --total-memory, otherwise taken from a cgroup runsc manages itself,
 * which it cannot here): `free` and /proc/meminfo inside then show the limit. */
static int write_meminfo(shim_init_ctx *c, int gvfd, error_rec *err) {
    _cleanup_free_ char *host = NULL;
    int r = file_read_all("/proc/meminfo", 1 << 16, &host, NULL);
    if (r < 0)
        return error_set_errno(err, r, "read /proc/meminfo");
    unsigned long long kb = 0;
    char *line = strstr(host, "MemTotal:"), *end = line ? strchr(line, '\n') : NULL;
    if (!end || sscanf(line, "MemTotal: %llu kB", &kb) != 1)
        return error_set(err, -EINVAL, "/proc/meminfo has no MemTotal line");
    uint64_t lim = c->spec->memory / 1024;
    _cleanup_close_ int fd =
        openat(gvfd, "meminfo", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || dprintf(fd, "%.*sMemTotal:       %llu kB%s", (int)(line - host), host,
                          lim && lim < kb ? (unsigned long long)lim : kb, end) < 0)
        return error_set_errno(err, negative_errno(), "write gv/meminfo");
    return 0;
}

/* A copy of the staging tree (sealed root and all) at BASE, on a fresh tmpfs over COVER. */
static int expose(const char *staging, error_rec *err) {
    _cleanup_close_ int tree = (int)syscall(SYS_open_tree, AT_FDCWD, staging,
                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0)
        return error_set_errno(err, negative_errno(), "open_tree %s", staging);
    if (mount("sbx-gvisor", COVER, "tmpfs", MS_SAFE | MS_NOEXEC, "mode=0711,size=64k") < 0 ||
        mkdir(BASE, 0711) < 0)
        return error_set_errno(err, negative_errno(), "a tmpfs on " COVER);
    int r = shim_gvisor_tty_prepare(COVER "/pts", err);
    if (r < 0)
        return r;
    if (syscall(SYS_move_mount, tree, "", AT_FDCWD, BASE, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return error_set_errno(err, negative_errno(), "move_mount %s to " BASE, staging);
    /* runsc reads /proc/<pid> of its children: a /proc of the sandbox's pid namespace, with
     * gv/meminfo over its meminfo; the kernel lets runsc's user namespace mount a proc only
     * while one is fully visible: a second, untouched one at COVER/proc */
    if (mount("proc", "/proc", "proc", MS_SAFE | MS_NOEXEC, NULL) < 0 ||
        mkdir(COVER "/proc", 0555) < 0 ||
        mount("proc", COVER "/proc", "proc", MS_SAFE | MS_NOEXEC, NULL) < 0)
        return error_set_errno(err, negative_errno(), "mount /proc");
    return shim_rootfs_bind(BASE "/gv/meminfo", "/proc/meminfo", MS_RDONLY | MS_SAFE, err);
}

/* The helpers bound into gVisor's sandbox: shipped next to sbx-shim, bound at gv/NAME (the
 * OCI mounts' sources), their mount points on a small tmpfs at root/dev (gVisor mounts its
 * own /dev over it; the image's /dev and a sealed root stay untouched). */
static const struct {
    const char *file, *name, *path;
} helpers[] = {{SHIM_GVISOR_INIT, "init", SHIM_GVISOR_INIT_PATH},
               {SHIM_GVISOR_STATX, "statx.so", SHIM_GVISOR_STATX_PATH}};

static int bind_helpers(shim_init_ctx *c, int gvfd, error_rec *err) {
    char dev[4200], host[4200], dst[4300];
    snprintf(dev, sizeof(dev), "%s/root/dev", c->staging);
    if (mount("sbx-gvisor-dev", dev, "tmpfs", MS_SAFE | MS_NOEXEC, "mode=0755,size=16k") < 0)
        return error_set_errno(err, negative_errno(), "mount a tmpfs on %s", dev);
    _cleanup_close_ int devfd = open(dev, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < ARRAY_SIZE(helpers); i++) {
        int r = shim_rootfs_helper_path(helpers[i].file, host, sizeof(host), err);
        if (r < 0)
            return r;
        int a = devfd < 0 ? -1
                          : openat(devfd, helpers[i].path + 5,
                                   O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0555);
        int b = openat(gvfd, helpers[i].name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0555);
        r = a < 0 || b < 0 ? negative_errno() : 0;
        safe_close(a), safe_close(b);
        if (r < 0)
            return error_set_errno(err, r, "mount points for %s", helpers[i].file);
        snprintf(dst, sizeof(dst), "%s/gv/%s", c->staging, helpers[i].name);
        if ((r = shim_rootfs_bind(host, dst, MS_RDONLY | MS_SAFE, err)) < 0)
            return r;
    }
    return 0;
}

/* As host root, after the seal: gv/ with the helpers, config.json, state/ and the log, all the
 * mapped root's; the staging tmpfs becomes searchable (0711) so that the mapped root reaches
 * gv/ and root/, and the tree is exposed at BASE. */
int shim_gvisor_prepare(shim_init_ctx *c, error_rec *err) {
    uid_t ruid = c->spec->uid_base;
    char gv[4200];
    int r = shim_rootfs_ensure_dir(c->staging, "gv", 0700, ruid, err);
    if (r < 0)
        return r;
    snprintf(gv, sizeof(gv), "%s/gv", c->staging);
    if ((r = shim_rootfs_ensure_dir(gv, "state", 0700, ruid, err)) < 0)
        return r;
    if (chmod(c->staging, 0711) < 0)
        return error_set_errno(err, negative_errno(), "chmod %s", c->staging);
    _cleanup_close_ int gvfd = open(gv, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (gvfd < 0)
        return error_set_errno(err, negative_errno(), "open %s", gv);
    if ((r = bind_helpers(c, gvfd, err)) < 0 || (r = write_bundle(c, gvfd, ruid, err)) < 0 ||
        (r = write_meminfo(c, gvfd, err)) < 0)
        return r;
    return expose(c->staging, err);
}

static _Noreturn void exec_runsc(shim_init_ctx *c, int chan) {
    char root[4300], bundle[4300];
    snprintf(root, sizeof(root), "--root=%s/gv/state", BASE);
    snprintf(bundle, sizeof(bundle), "%s/gv", BASE);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* the user namespace's root: host uid_base, the owner of the bundle and the sandbox's root */
    if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        _exit(125);
    if (dup2(chan, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
        _exit(126);
    close_range(3, ~0U, 0);
    const char *argv[] = {c->spec->runsc,
                          root,
                          "--platform=ptrace",
                          "--network=host",
                          "--ignore-cgroups",
                          "--file-access=shared",
                          "run",
                          "--bundle",
                          bundle,
                          c->spec->id,
                          NULL};
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    execve(argv[0], (char **)argv, envp);
    dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* As root of the sandbox's user namespace (init.c's userns step ran): fork `runsc run`. */
int shim_gvisor_start(shim_init_ctx *c, error_rec *err) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return error_set_errno(err, negative_errno(), "socketpair");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL); /* shim_gvisor_serve hears runsc's end on a signalfd */
    pid_t pid = fork();
    if (pid == 0)
        exec_runsc(c, sp[1]);
    int fe = errno;
    close(sp[1]);
    if (pid < 0) {
        close(sp[0]);
        return error_set_errno(err, -fe, "fork runsc");
    }
    runsc_pid = pid;
    inner_fd = sp[0];
    return 0;
}

/* Init keeps no host descriptor but its channels and runsc's log: stdio becomes /dev/null. */
int shim_gvisor_chroot(shim_init_ctx *c, error_rec *err) {
    char root[4200];
    snprintf(root, sizeof(root), "%s/root", c->staging);
    _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        return error_set_errno(err, negative_errno(), "stdio to /dev/null");
    if (chroot(root) < 0 || chdir("/") < 0)
        return error_set_errno(err, negative_errno(), "chroot %s", root);
    return 0;
}

/* The end of runsc's log, one line: what went wrong when it ended before the runner was up. */
static void log_tail(char *buf, size_t len) {
    struct stat st;
    buf[0] = '\0';
    if (log_fd < 0 || fstat(log_fd, &st) < 0)
        return;
    off_t off = st.st_size > (off_t)len - 1 ? st.st_size - (off_t)len + 1 : 0;
    ssize_t n = pread(log_fd, buf, len - 1, off);
    buf[n > 0 ? n : 0] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
}

static _Noreturn void runsc_gone(shim_init_ctx *c, int status, bool ready) {
    if (!ready) {
        char tail[LOG_TAIL], msg[LOG_TAIL + 128];
        log_tail(tail, sizeof(tail));
        int n = snprintf(msg, sizeof(msg),
                         "step gvisor: runsc ended (%s %d) before the sandbox "
                         "was up: %s",
                         WIFSIGNALED(status) ? "signal" : "status",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), tail);
        shim_ipc_send(c->ipc, SHIM_IPC_ERROR, 0, EIO, 0, msg, (size_t)MIN(n, (int)sizeof(msg) - 1),
                      NULL, 0);
    }
    _exit(1);
}

/* READY from the runner: init's step times, then the runner's. */
static void forward_ready(int ipc, const shim_ipc_msg *m, const char *times, size_t tl) {
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "%.*s init.gvisor-runner=%.*s", (int)tl, times,
                     (int)MIN(m->len, 400u), m->data);
    shim_ipc_send(ipc, SHIM_IPC_READY, 0, 0, 0, buf, (size_t)MIN(n, (int)sizeof(buf) - 1), NULL, 0);
}

/* A command's environment gets LD_PRELOAD=SHIM_GVISOR_STATX_PATH unless it sets LD_PRELOAD
 * itself (data: [rows(2) cols(2) with SHIM_IPC_TTY] cwd\0argv...\0env...\0 [the file with
 * SHIM_IPC_FILE], a = argc, b = envc; see shim/ipc.h): inserted after the last env entry. */
static void add_preload(shim_ipc_msg *m) {
    static const char kv[] = "LD_PRELOAD=" SHIM_GVISOR_STATX_PATH;
    size_t off = m->type & SHIM_IPC_TTY ? 4 : 0;
    for (int32_t i = 0; i < 1 + m->a + m->b && off < m->len; i++) {
        if (i > m->a && strncmp(m->data + off, "LD_PRELOAD=", 11) == 0)
            return;
        off += strnlen(m->data + off, m->len - off) + 1;
    }
    if (off > m->len || (off < m->len && !(m->type & SHIM_IPC_FILE)) ||
        m->len + sizeof(kv) > SHIM_IPC_MAX - sizeof(*m))
        return; /* malformed: the runner refuses it; full: left as it is */
    memmove(m->data + off + sizeof(kv), m->data + off, m->len - off);
    memcpy(m->data + off, kv, sizeof(kv));
    m->len += (uint32_t)sizeof(kv);
    m->b++;
}

/* A terminal's exec on its way in, and the runner's answers about one (gvisor_tty.c): STARTED
 * carries the host terminal's master to the shim; a failed or ended exec drops it. Returns
 * false when the message was answered here. */
static bool tty_relay(int from, shim_ipc_msg *m, int fds[3], size_t nf, int *ret_fd) {
    if (shim_ipc_is_exec(m->type) && (m->type & SHIM_IPC_TTY)) {
        int r = shim_gvisor_tty_exec(m, fds, nf);
        static const char what[] = "a terminal for gvisor";
        if (r < 0)
            shim_ipc_send(from, SHIM_IPC_EXECFAIL, m->id, -r, 0, what, sizeof(what) - 1, NULL, 0);
        return r == 0;
    }
    if (m->type == SHIM_IPC_STARTED)
        *ret_fd = shim_gvisor_tty_take(m->id);
    else if (m->type == SHIM_IPC_EXECFAIL || m->type == SHIM_IPC_EXIT)
        safe_close(shim_gvisor_tty_take(m->id));
    return true;
}

/* One message from `from` to `to`; returns -ECONNRESET when `from` is closed. */
static int relay_one(int from, int to, shim_ipc_msg *buf, uint32_t *ret_type) {
    int fds[3];
    size_t nf = 0;
    int r = shim_ipc_recv(from, buf, fds, &nf);
    if (r < 0)
        return r == -ECONNRESET ? r : 0;
    *ret_type = buf->type;
    int tty = -1;
    if (buf->type != SHIM_IPC_READY && tty_relay(from, buf, fds, nf, &tty)) {
        if (shim_ipc_is_exec(buf->type))
            add_preload(buf);
        bool out = tty >= 0 && nf == 0; /* STARTED: the host terminal's master goes along */
        shim_ipc_send(to, buf->type, buf->id, buf->a, buf->b, buf->data, buf->len, out ? &tty : fds,
                      out ? 1 : nf);
    }
    safe_close(tty);
    for (size_t i = 0; i < nf; i++)
        close(fds[i]);
    return 1;
}

_Noreturn void shim_gvisor_serve(shim_init_ctx *c, const char *times, size_t tl) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    /* the runner's first message: the sandbox's seccomp program (it installs it last) */
    if (sfd < 0 ||
        shim_ipc_send(inner_fd, SHIM_IPC_GO, 0, c->spec->grading, (int32_t)c->spec->pids,
                      c->prog.filter, c->prog.len * sizeof(struct sock_filter), NULL, 0) < 0)
        _exit(1);
    bool ready = false;
    for (;;) {
        struct pollfd p[3] = {{.fd = c->ipc, .events = POLLIN},
                              {.fd = inner_fd, .events = POLLIN},
                              {.fd = sfd, .events = POLLIN}};
        if (poll(p, inner_fd >= 0 ? 3 : 1, -1) < 0 && errno != EINTR)
            _exit(1);
        int st;
        if (p[2].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            pid_t w;
            while ((w = waitpid(-1, &st, WNOHANG)) > 0)
                if (w == runsc_pid)
                    runsc_gone(c, st, ready);
        }
        uint32_t type = 0;
        if (p[0].revents && relay_one(c->ipc, inner_fd, &buf.m, &type) == -ECONNRESET)
            _exit(0); /* the shim is gone: so is the sandbox (init is its pid namespace's 1) */
        if (p[1].revents) {
            int r = relay_one(inner_fd, c->ipc, &buf.m, &type);
            if (r == -ECONNRESET) { /* the runner ended: runsc follows; wait for it */
                inner_fd = safe_close(inner_fd);
                if (waitpid(runsc_pid, &st, 0) == runsc_pid)
                    runsc_gone(c, st, ready);
                _exit(1);
            }
            if (r > 0 && type == SHIM_IPC_READY && !ready) {
                ready = true;
                forward_ready(c->ipc, &buf.m, times, tl);
            }
        }
    }
}

const char *shim_gvisor_end_cause(shim_sandbox *sb, uint64_t oom_start, uint64_t pids_start,
                                  char *msg, size_t len) {
    uint64_t n = 0;
    if (shim_cgroup_oom_kills(sb->cg, &n) == 0 && n > oom_start)
        return snprintf(msg, len, "the sandbox ran out of memory (limit %" PRIu64 " bytes)",
                        sb->spec->memory),
               "oom";
    if (shim_cgroup_pids_denials(sb->cg, &n) == 0 && n > pids_start)
        return snprintf(msg, len, "gVisor's threads reached the host's pids limit (%" PRIu64 ")",
                        SHIM_GVISOR_HOST_PIDS(sb->spec->pids)),
               "pids";
    return NULL;
}
