/* sbx-gvisor-init: the command runner inside a gvisor-class sandbox (shim/gvisor.h), the first
 * process of gVisor's sandbox. Its standard input is the host socket to the sandbox's init,
 * which relays the shim's exec channel (shim/ipc.h) unchanged, descriptors included. It
 * unmounts its own binary, joins gVisor's pids cgroup with the sandbox's process limit (init
 * sends it with the seccomp program), mounts a cgroup hierarchy with a cgroup per command and
 * starts its keeper (shim/gvinit/cmd_cgroup.h: gVisor has no subreaper), becomes the sandbox user
 * (uid/gid 1000, no capability, no_new_privs, not dumpable), installs the sandbox's seccomp
 * program (sent by init first) as its last step and then serves commands exactly as the native
 * init does (shim/exec.c): a reaper per command, whole-tree kills (its cgroup's), the same exits.
 * Built statically (make: build/sbx-gvisor-init), bound read-only into the sandbox at start and
 * unmounted by itself. */
#include "common/macro.h"
#include "shim/exec.h"
#include "shim/grading.h"
#include "shim/gvinit/cmd_cgroup.h"
#include "shim/gvisor.h"
#include "shim/ipc.h"
#include "shim/seccomp.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define IPC 3
#define CG_ROOT "/sys/fs/cgroup"

static union {
    shim_ipc_msg m;
    char raw[SHIM_IPC_MAX];
} buf;
static struct sock_filter prog_buf[BPF_MAXINSNS];

static _Noreturn void fail(const char *what, int e) {
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "step gvisor-runner: %s: %s", what, strerror(e));
    shim_ipc_send(IPC, SHIM_IPC_ERROR, 0, e, 0, msg, (size_t)n, NULL, 0);
    _exit(1);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The channel on IPC (close-on-exec: this gVisor's close_range has no CLOSE_RANGE_CLOEXEC, on
 * which the native init relies to keep it from commands), /dev/null on 0-2, nothing else. */
static void descriptors(void) {
    if (dup3(0, IPC, O_CLOEXEC) < 0)
        _exit(1);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        fail("open /dev/null", errno);
    for (int i = 0; i < 3; i++)
        if (dup2(null, i) < 0)
            fail("dup2", errno);
    if (close_range(IPC + 1, INT_MAX, 0) < 0) /* (this gVisor: EINVAL for ~0U) */
        fail("close_range", errno);
}

/* The sandbox's process limit, enforced by gVisor's kernel: its pids controller mounted at
 * /sys/fs/cgroup/pids (on a root-owned tmpfs: the sandbox user can neither write a limit nor
 * leave the group), a group "sandbox" with pids.max = the limit, the runner in it (every command
 * inherits it). A fork past it is EAGAIN inside, as in the native class; the host's pids limit
 * (shim/gvisor.h SHIM_GVISOR_HOST_PIDS) stays as the backstop for gVisor's own threads. The
 * mounts stay: unmounting the hierarchy would dissolve it. */
static void pids_limit(uint32_t max) {
    char v[16];
    int n = snprintf(v, sizeof(v), "%u", max), fd = -1;
    if (mount("cgroup", CG_ROOT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=4k") <
            0 ||
        mkdir(CG_ROOT "/pids", 0755) < 0 ||
        mount("pids", CG_ROOT "/pids", "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC, "pids") < 0 ||
        mkdir(CG_ROOT "/pids/sandbox", 0755) < 0)
        fail("mount gVisor's pids cgroup at " CG_ROOT "/pids", errno);
    const char *knob[] = {CG_ROOT "/pids/sandbox/pids.max", CG_ROOT "/pids/sandbox/cgroup.procs"};
    const char *val[] = {v, "0"};
    for (int i = 0; i < 2; i++) {
        fd = open(knob[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, val[i], i ? 1 : (size_t)n) < 0)
            fail(knob[i], errno);
        close(fd);
    }
}

/* As the native init's credentials step (shim/init.c): the sandbox user, nothing more. */
static void credentials(void) {
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            fail("drop the bounding set", errno);
    int r = shim_grading_become(false);
    if (r < 0)
        fail("become uid/gid 1000", -r);
    struct rlimit core = {0, 0};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
        setrlimit(RLIMIT_CORE, &core) < 0)
        fail("no_new_privs/dumpable", errno);
}

int main(void) {
    double t0 = now_ms();
    descriptors();
    int fds[3];
    size_t nf = 0;
    int r = shim_ipc_recv(IPC, &buf.m, fds, &nf);
    if (r < 0 || buf.m.type != SHIM_IPC_GO || buf.m.len > sizeof(prog_buf) ||
        buf.m.len % sizeof(struct sock_filter))
        fail("the seccomp program from init", r < 0 ? -r : EPROTO);
    if (buf.m.a)
        fail("grading sandboxes", EOPNOTSUPP);
    memcpy(prog_buf, buf.m.data, buf.m.len);
    struct sock_fprog prog = {.len = (unsigned short)(buf.m.len / sizeof(struct sock_filter)),
                              .filter = prog_buf};
    if (umount2(SHIM_GVISOR_INIT_PATH, MNT_DETACH) < 0 || remove(SHIM_GVISOR_INIT_PATH) < 0)
        fail("unmount " SHIM_GVISOR_INIT_PATH, errno);
    pids_limit((uint32_t)buf.m.b);
    if ((r = sbx_cmd_cgroup_start(&prog)) < 0)
        fail("a cgroup per command (" CG_ROOT "/cmd) and its keeper", -r);
    credentials();
    if ((r = shim_seccomp_apply_bpf(prog.filter, buf.m.len)) < 0)
        fail("install the seccomp filter", -r);
    char times[64];
    int n = snprintf(times, sizeof(times), "%.2f", now_ms() - t0);
    if (shim_ipc_send(IPC, SHIM_IPC_READY, 0, 0, 0, times, (size_t)n, NULL, 0) < 0)
        _exit(1);
    shim_exec_tty_relay = shim_gvisor_tty_relay; /* a terminal stays in gVisor: relayed */
    shim_exec_track = &sbx_cmd_cgroup_track;     /* no subreaper: a cgroup per command */
    shim_exec_serve(IPC, &prog, &buf.m);
}
