/* A cgroup per command inside gVisor, and its keeper (see cmd_cgroup.h). */
#include "shim/gvinit/cmd_cgroup.h"

#include "common/macro.h"
#include "shim/seccomp.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CMD_ROOT "/sys/fs/cgroup/cmd"
#define ROUNDS 500 /* of 1 ms: a SIGKILL'd cgroup empties in a round or two */

enum { OP_ENTER = 1, OP_LEAVE, OP_EMPTY };
struct request {
    uint32_t op;
    uint64_t id;
};

static int keeper_fd = -1; /* the runner's end (close-on-exec) */
static char procs[64 * 1024];

/* The pids in cgroup.procs of cgroup NAME (NULL: the working directory's) into pids; how many,
 * or -errno when it cannot be read. */
static ssize_t read_procs(const char *name, pid_t *pids, size_t max) {
    char path[96];
    snprintf(path, sizeof(path), "%s%scgroup.procs", name ? name : "", name ? "/" : "");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, procs, sizeof(procs) - 1), k = 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0)
        return -e;
    procs[n] = '\0';
    for (char *p = procs, *end; *p && (size_t)k < max; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v > 0)
            pids[k++] = (pid_t)v;
    }
    return k;
}

/* Write pid into cgroup.procs of cgroup NAME (NULL: the working directory's, the keeper's root).
 * 0 or -errno. */
static int move(const char *name, pid_t pid) {
    char path[96], v[16];
    snprintf(path, sizeof(path), "%s%scgroup.procs", name ? name : "", name ? "/" : "");
    int n = snprintf(v, sizeof(v), "%d", (int)pid), fd = open(path, O_WRONLY | O_CLOEXEC);
    int r = fd < 0 || write(fd, v, (size_t)n) < 0 ? -errno : 0;
    if (fd >= 0)
        close(fd);
    return r;
}

static void nap(void) {
    struct timespec ts = {0, 1000000}; /* a round of ROUNDS */
    nanosleep(&ts, NULL);
}

/* ---- the keeper: gVisor's root, no capability, its root the hierarchy's ---- */

static pid_t keep_pids[8192];

/* Every process of cgroup NAME to the root one (kept), then the cgroup gone. */
static int empty(const char *name) {
    for (int round = 0; round < ROUNDS; round++) {
        ssize_t n = read_procs(name, keep_pids, ARRAY_SIZE(keep_pids));
        for (ssize_t i = 0; i < n; i++)
            move(NULL, keep_pids[i]); /* (ESRCH: it ended meanwhile) */
        if (rmdir(name) == 0 || errno == ENOENT)
            return 0;
        nap();
    }
    return -EBUSY;
}

static int serve_one(const struct request *q) {
    char name[32];
    snprintf(name, sizeof(name), "run/c%llu", (unsigned long long)q->id);
    switch (q->op) {
    case OP_ENTER:
        if (mkdir(name, 0755) < 0 && errno != EEXIST)
            return -errno;
        return move(name, getppid());
    case OP_LEAVE:
        return move(NULL, getppid());
    case OP_EMPTY:
        return empty(name);
    default:
        return -EINVAL;
    }
}

/* Nothing but the hierarchy and the socket; no capability, no way back to one. */
static int confine(int sock, const struct sock_fprog *prog) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2] = {{0}};
    if (dup2(sock, 0) < 0 || close_range(1, INT_MAX, 0) < 0 || chroot(CMD_ROOT) < 0 ||
        chdir("/") < 0)
        return -errno;
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return -errno;
    if (syscall(SYS_capset, &h, d) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return -errno;
    return shim_seccomp_apply_bpf(prog->filter, prog->len * sizeof(struct sock_filter));
}

static _Noreturn void keeper_main(int sock, const struct sock_fprog *prog) {
    /* (out of the sandbox's pids limit, which it is no command's process to count against) */
    if (move("/sys/fs/cgroup/pids", getpid()) < 0 || confine(sock, prog) < 0)
        _exit(1);
    for (;;) {
        struct request q;
        ssize_t n = recv(0, &q, sizeof(q), 0);
        if (n == 0 || (n < 0 && errno != EINTR))
            _exit(0);
        int32_t r = n == sizeof(q) ? serve_one(&q) : -EINVAL;
        if (send(0, &r, sizeof(r), MSG_NOSIGNAL) < 0)
            _exit(0);
    }
}

int sbx_cmd_cgroup_start(const struct sock_fprog *prog) {
    int sp[2];
    if (mkdir(CMD_ROOT, 0755) < 0 ||
        mount("cgroup", CMD_ROOT, "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC, "job") < 0 ||
        mkdir(CMD_ROOT "/run", 0755) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid == 0) {
        close(sp[0]);
        keeper_main(sp[1], prog);
    }
    int e = errno;
    close(sp[1]);
    if (pid < 0) {
        close(sp[0]);
        return -e;
    }
    keeper_fd = sp[0];
    return 0;
}

/* ---- the runner's side ---- */

static int ask(uint32_t op, uint64_t id) {
    struct request q = {.op = op, .id = id};
    int32_t r;
    if (send(keeper_fd, &q, sizeof(q), MSG_NOSIGNAL) != sizeof(q))
        return -EPIPE;
    ssize_t n;
    while ((n = recv(keeper_fd, &r, sizeof(r), 0)) < 0 && errno == EINTR)
        ;
    return n == sizeof(r) ? r : -EPIPE;
}

static int enter(uint64_t id) {
    return ask(OP_ENTER, id);
}

static void leave(void) {
    ask(OP_LEAVE, 0);
}

static pid_t sig_pids[8192];

/* Continue reaper (> 0: one a command stopped still reports), then signal every process of the
 * command's cgroup but it (and the runner); SIGKILL until none is left (a killed process forks no
 * more; what it forked meanwhile is in the next read). -errno when the cgroup cannot be read. */
static int signal_cgroup(uint64_t id, pid_t reaper, int sig) {
    char name[48];
    snprintf(name, sizeof(name), CMD_ROOT "/run/c%llu", (unsigned long long)id);
    pid_t self = getpid();
    if (reaper > 0)
        kill(reaper, SIGCONT);
    for (int round = 0; round < ROUNDS; round++) {
        ssize_t n = read_procs(name, sig_pids, ARRAY_SIZE(sig_pids)), hit = 0;
        if (n < 0)
            return round == 0 ? (int)n : 0; /* (later: the cgroup is gone, emptied) */
        for (ssize_t i = 0; i < n; i++)
            if (sig_pids[i] != reaper && sig_pids[i] != self && kill(sig_pids[i], sig) == 0)
                hit++;
        if (sig != SIGKILL || hit == 0)
            return 0;
        nap();
    }
    return 0;
}

static void end(uint64_t id, bool killed) {
    if (killed)
        signal_cgroup(id, 0, SIGKILL);
    ask(OP_EMPTY, id);
}

const struct shim_exec_track sbx_cmd_cgroup_track = {enter, leave, signal_cgroup, end};
