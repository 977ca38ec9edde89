/* The sandbox's init: start-up steps inside the new namespaces, then the exec service loop
 * (see init.h). After the start-up steps this process is uid/gid 1000 with no capabilities. */
#include "shim/gpu.h"
#include "shim/init.h"

#include "common/fdutil.h"
#include "common/timeutil.h"
#include "policy/seccomp.h"
#include "shim/cgroup.h"
#include "shim/exec.h"
#include "shim/grading.h"
#include "shim/gvisor.h"
#include "shim/ipc.h"
#include "shim/rootfs.h"
#include "shim/seccomp.h"
#include "shim/volumes.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static shim_ipc_msg *ipc_buf;
char *shim_init_title;
size_t shim_init_title_len;

/* A pausable init's layers, seed and volumes, id-mapped by the shim (SHIM_IPC_LAYER before a
 * go-ahead: common/spec.h layer_mounts). */
static int *layer_mounts;
static size_t n_layer_mounts;

/* Wait for the shim's go-ahead (and take the layers that come before it). */
static int wait_go(int ipc, error_rec *err) {
    for (;;) {
        int fds[3];
        size_t nf;
        int r = shim_ipc_recv(ipc, ipc_buf, fds, &nf);
        if (r < 0)
            return error_set_errno(err, r, "waiting for the shim");
        size_t i = (size_t)ipc_buf->a;
        if (ipc_buf->type == SHIM_IPC_LAYER && nf == 1 && ipc_buf->a >= 0 && i < n_layer_mounts &&
            layer_mounts[i] < 0) {
            layer_mounts[i] = fds[0];
            continue;
        }
        for (size_t k = 0; k < nf; k++)
            safe_close(fds[k]);
        if (ipc_buf->type != SHIM_IPC_GO)
            return error_set(err, -EPROTO, "unexpected message %u from the shim", ipc_buf->type);
        return 0;
    }
}

/* v1: into the sandbox's cgroups before anything else (the shim waits for our next message, so
 * it never sees us outside them); v2: the shim moved us before the go-ahead. */
static int step_sync(shim_init_ctx *c, error_rec *err) {
    if (c->cg) {
        int r = shim_cgroup_join_self(c->cg, err);
        if (r < 0)
            return r;
    }
    return wait_go(c->ipc, err);
}

/* The shim writes our id maps (0..65535 -> uid_base..), then we go on. */
static int userns_mapped(shim_init_ctx *c, error_rec *err) {
    int r = shim_ipc_send(c->ipc, SHIM_IPC_USERNS, 0, 0, 0, NULL, 0, NULL, 0);
    if (r < 0)
        return error_set_errno(err, r, "notify the shim");
    return wait_go(c->ipc, err);
}

/* A pausable sandbox's init was born in its own user namespace, which owns its pid and time
 * namespaces (shim/sandbox.c, fork_userns_first) and every namespace and mount it makes from
 * here on, as CRIU needs to checkpoint it. Once mapped it becomes that namespace's root (host
 * uid_base), so the root it builds has the namespace's own ids (uid_base 0 in its copy of the
 * spec). Its mounts are then its own, not locked (docs/SECURITY.md "Pausable sandboxes"). It
 * leads a session of its own, as a restored tree's root must. */
static int step_userns_first(shim_init_ctx *c, error_rec *err) {
    static shim_spec own;
    if (!c->spec || !c->spec->pausable) /* (a spare's init has no spec yet: it is not) */
        return 0;
    own = *c->spec;
    if (SHIM_SENDS_MOUNTS(&own)) { /* with the go-ahead (shim/sandbox.c send_mounts) */
        size_t n = SHIM_MOUNTS_SENT(&own);
        if (!(layer_mounts = malloc(n * sizeof(int))))
            return error_set(err, -ENOMEM, "out of memory");
        n_layer_mounts = n;
        for (size_t i = 0; i < n_layer_mounts; i++)
            layer_mounts[i] = -1;
        own.layer_mounts = layer_mounts;
    }
    int r = userns_mapped(c, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n_layer_mounts; i++) /* (a seed may have no workspace or tmp) */
        if (layer_mounts[i] < 0 &&
            (i < SHIM_SEED_MOUNTS_AT(&own) || i >= SHIM_VOLUME_MOUNTS_AT(&own)))
            return error_set(err, -EPROTO, "the shim sent no mount %zu", i);
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 || setgroups(0, NULL) < 0)
        return error_set_errno(err, negative_errno(), "become the user namespace's root");
    if (setsid() < 0)
        return error_set_errno(err, negative_errno(), "setsid");
    own.uid_base = 0;
    c->spec = &own;
    c->staging = SHIM_PAUSABLE_STAGING; /* the run directory is not for its user */
    return 0;
}

static int step_namespaces(shim_init_ctx *c, error_rec *err) {
    /* The cgroup namespace is made after the shim moved us into the sandbox's cgroup. */
    if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) < 0)
        return error_set_errno(err, negative_errno(), "unshare");
    return 0;
}

/* A spare's init builds, in a mount namespace of its own, the root of a host-image sandbox
 * (the common case: no image, volume, seed or GPU; grading adds to it) on park_root, with ids from
 * SHIM_PARK_UID_BASE, and keeps the host's mount namespace open: a sandbox that takes the root
 * gets its ids and sizes (shim_rootfs_adopt) and its names; any other goes back to the host's
 * namespace (step_mount_namespace), so that it sees what the daemon mounted meanwhile (a fork's
 * layer, a volume's disk). */
static int step_root_ahead(shim_init_ctx *c, error_rec *err) {
    if (!c->park_root)
        return 0;
    int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open the mount namespace");
    if (unshare(CLONE_NEWNS) < 0) {
        int r = negative_errno();
        close(fd);
        return error_set_errno(err, r, "unshare mount namespace");
    }
    c->host_mnt = fd, c->root_parked = true; /* from here on, step_mount_namespace undoes it */
    static shim_spec t = {
        .image_type = SHIM_IMAGE_HOST, .uid_base = SHIM_PARK_UID_BASE, .disk = 64ull << 20};
    int r = shim_rootfs_prepare(&t, c->park_root, err);
    if (r >= 0 && (r = shim_rootfs_etc_base(&t, c->park_root, err)) >= 0 &&
        (r = shim_rootfs_proc(&t, c->park_root, err)) >= 0)
        r = shim_rootfs_dev_tree(&t, c->park_root, err);
    return r;
}

/* Whether the root built ahead serves s (see step_root_ahead). */
static bool root_fits(const shim_spec *s) {
    return s->image_type == SHIM_IMAGE_HOST && !s->seed_path && !s->gpus && !s->runsc &&
           json_array_size(s->volumes) == 0;
}

/* Apart from the others: a spare's init makes its mount namespace only once it has its sandbox
 * (or takes the one it built the root in, step_root_ahead). */
static int step_mount_namespace(shim_init_ctx *c, error_rec *err) {
    if (c->root_parked) {
        int r = c->root_ahead || setns(c->host_mnt, CLONE_NEWNS) == 0 ? 0 : negative_errno();
        c->host_mnt = safe_close(c->host_mnt); /* nothing of the host's goes further */
        c->root_parked = false;
        if (r < 0)
            return error_set_errno(err, r, "back to the host's mount namespace");
        if (c->root_ahead)
            return 0;
    }
    if (unshare(CLONE_NEWNS) < 0)
        return error_set_errno(err, negative_errno(), "unshare mount namespace");
    return 0;
}

static int step_hostname(shim_init_ctx *c, error_rec *err) {
    const char *h = c->spec->hostname;
    if (sethostname(h, strlen(h)) < 0 || setdomainname("", 0) < 0)
        return error_set_errno(err, negative_errno(), "sethostname");
    return 0;
}

static int step_loopback(shim_init_ctx *c, error_rec *err) {
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return error_set_errno(err, negative_errno(), "lo flags");
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return error_set_errno(err, negative_errno(), "lo up");
    return 0;
}

static int step_rootfs(shim_init_ctx *c, error_rec *err) {
    int r = c->root_ahead ? shim_rootfs_adopt(c->spec, c->staging, SHIM_PARK_UID_BASE, err)
                          : shim_rootfs_prepare(c->spec, c->staging, err);
    if (r < 0 || !c->spec->grading)
        return r;
    return shim_grading_rootfs(c->spec, c->staging, c->dir, err);
}
static int step_volumes(shim_init_ctx *c, error_rec *err) {
    return shim_volumes_mount(c->spec, c->staging, err); /* volumes: shim/volumes.c */
}
/* A root built ahead was built for a sandbox that is not grading: a grading one gets its
 * accounts and its /proc's options here. */
static int step_etc(shim_init_ctx *c, error_rec *err) {
    int r = !c->root_ahead     ? shim_rootfs_etc_base(c->spec, c->staging, err)
            : c->spec->grading ? shim_rootfs_etc_accounts(c->spec, c->staging, err)
                               : 0;
    return r < 0 ? r : shim_rootfs_etc_names(c->spec, c->staging, err);
}
static int step_proc(shim_init_ctx *c, error_rec *err) {
    if (!c->root_ahead)
        return shim_rootfs_proc(c->spec, c->staging, err);
    return c->spec->grading ? shim_rootfs_proc_grading(c->spec, c->staging, err) : 0;
}
static int step_dev(shim_init_ctx *c, error_rec *err) {
    char dev[4200];
    snprintf(dev, sizeof(dev), "%s/root/dev", c->staging);
    int r = c->root_ahead ? 0 : shim_rootfs_dev_tree(c->spec, c->staging, err);
    if (r >= 0)
        r = shim_rootfs_dev_mounts(c->spec, c->staging, err);
    if (r >= 0 && c->spec->pausable) { /* for step_reexec */
        r = shim_rootfs_init_binary(c->staging, SHIM_INIT_EXE_FD, err);
        close(SHIM_INIT_EXE_FD);
    }
    if (r >= 0 && c->loader) {
        r = shim_rootfs_init_libs(c->staging, SHIM_INIT_LIB_FD, err);
        close(SHIM_INIT_LIB_FD);
    }
    if (r < 0 || !c->spec->gpus || (r = shim_gpu_dev(c->spec, dev, c->spec->uid_base, err)) < 0)
        return r; /* GPUs: gpu.c (nodes in /dev, the driver's files in the image) */
    dev[strlen(dev) - strlen("/dev")] = 0; /* staging/root */
    return shim_gpu_binds(c->spec, dev, c->spec->uid_base, err);
}
static int step_seal(shim_init_ctx *c, error_rec *err) {
    if (c->spec->image_type == SHIM_IMAGE_LAYERS)
        return 0; /* images: a store image's root stays writable (its upper is on the disk) */
    return shim_rootfs_seal(c->staging, err);
}

/* No host path in /proc/1/cmdline: main's argv area says "sbx-init". */
static void set_title(void) {
    if (shim_init_title && shim_init_title_len > 8) {
        memset(shim_init_title, 0, shim_init_title_len);
        memcpy(shim_init_title, "sbx-init", 8);
    }
    prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
}

static int step_pivot(shim_init_ctx *c, error_rec *err) {
    int r = shim_rootfs_pivot(c->staging, err);
    if (r < 0)
        return r;
    /* Nothing of the host stays reachable: stdio becomes the sandbox's /dev/null. */
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open /dev/null");
    for (int i = 0; i < 3; i++)
        if (dup2(fd, i) < 0)
            return error_set_errno(err, negative_errno(), "dup2");
    if (fd > 2)
        close(fd);
    set_title();
    return 0;
}

/* "init.name=ms ..." of every step so far, for the shim's ready line (and step_reexec) */
static char times[512];
static size_t times_len;

/* A pausable sandbox's init runs sbx-shim again, from inside the sandbox (the host's binary,
 * bound on SHIM_INIT_BINARY by step_dev; an image's through the host's loader and libraries on
 * SHIM_INIT_LIBS): its memory then maps files on the sandbox's own mounts and belongs to the
 * sandbox's user namespace, so CRIU (inside that namespace) can read and restore it. It goes on
 * with the steps after this one (shim_init_again); the seccomp program travels on a memfd
 * (SHIM_INIT_BPF_FD), the step times in argv. */
#define PRELOAD "/etc/ld.so.preload"

static int step_reexec(shim_init_ctx *c, error_rec *err) {
    if (!c->spec->pausable)
        return 0;
    int fd = memfd_create("sbx-seccomp", 0);
    size_t len = c->prog.len * sizeof(struct sock_filter);
    if (fd < 0 || fd_write_all(fd, c->prog.filter, len) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
        (fd != SHIM_INIT_BPF_FD && dup2(fd, SHIM_INIT_BPF_FD) < 0))
        return error_set_errno(err, negative_errno(), "the seccomp program's memfd");
    if (fd != SHIM_INIT_BPF_FD)
        close(fd);
    if (fd_set_cloexec(c->ipc, false) < 0) /* the channel goes on (shim_init_again sets it) */
        return error_set_errno(err, negative_errno(), "the channel to the shim");
    char *argv[] = {"sbx-init", SHIM_INIT_AGAIN, times, NULL}, *envp[] = {NULL};
    if (!c->loader) { /* the host's /usr is the sandbox's */
        execve(SHIM_INIT_BINARY, argv, envp);
        return error_set_errno(err, negative_errno(), "exec %s", SHIM_INIT_BINARY);
    }
    char loader[4200];
    snprintf(loader, sizeof(loader), SHIM_INIT_LIBS "/%s", c->loader);
    /* the loader reads the image's /etc/ld.so.preload: masked for this exec (the image's code
     * never runs in init), unmasked again after it (shim_init_again) */
    if (access(PRELOAD, F_OK) == 0 && mount("/dev/null", PRELOAD, NULL, MS_BIND, NULL) < 0)
        return error_set_errno(err, negative_errno(), "mask %s", PRELOAD);
    char *with[] = {
        "sbx-init", "--library-path", SHIM_INIT_LIBS, SHIM_INIT_BINARY, SHIM_INIT_AGAIN, times,
        NULL};
    execve(loader, with, envp);
    return error_set_errno(err, negative_errno(), "exec %s", loader);
}

/* gvisor: init's root becomes the sandbox's by chroot (runsc, its child, keeps the host's) */
static int step_gvisor_chroot(shim_init_ctx *c, error_rec *err) {
    int r = shim_gvisor_chroot(c, err);
    if (r >= 0)
        set_title();
    return r;
}

/* Every process of the sandbox, init included, is an ordinary candidate for the OOM killer
 * (0, as a Docker container's are), whatever the daemon's own value: a daemon that protects
 * itself never shields a sandbox's memory hog from the host's OOM killer. In the sandbox's own
 * memory cgroup the killer picks the largest process, a command rather than init. Init is not
 * lowered below its commands: they share its memory until their exec, which is not dumpable, so
 * they could not open their /proc/self/oom_score_adj to raise theirs back (docs/SECURITY.md).
 * Best effort: the kernel refuses to go below a minimum that a privileged process set. */
static int step_oom_score(shim_init_ctx *c, error_rec *err) {
    int r = file_write_str("/proc/self/oom_score_adj", "0");
    if (r < 0 && r != -EACCES && r != -EPERM)
        return error_set_errno(err, r, "oom_score_adj");
    return 0;
}

static int step_userns(shim_init_ctx *c, error_rec *err) {
    if (c->spec->pausable)
        return 0; /* in it from the start (step_userns_first) */
    if (unshare(CLONE_NEWUSER) < 0)
        return error_set_errno(err, negative_errno(), "unshare user namespace");
    return userns_mapped(c, err);
}

static int step_process_limits(error_rec *err);

static int step_credentials(shim_init_ctx *c, error_rec *err) {
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return error_set_errno(err, negative_errno(), "drop bounding capability %d", cap);
    if (c->spec->grading) {
        int r = shim_grading_init_credentials(err);
        return r < 0 ? r : step_process_limits(err);
    }
    if (prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
              0, 0, 0) < 0)
        return error_set_errno(err, negative_errno(), "securebits");
    gid_t g = SHIM_SANDBOX_UID;
    if (setgroups(0, NULL) < 0 || setresgid(g, g, g) < 0 ||
        setresuid(SHIM_SANDBOX_UID, SHIM_SANDBOX_UID, SHIM_SANDBOX_UID) < 0)
        return error_set_errno(err, negative_errno(), "switch to uid/gid %u", SHIM_SANDBOX_UID);
    cap_t none = cap_init();
    int r = none ? cap_set_proc(none) : -1;
    cap_free(none);
    if (r < 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        return error_set_errno(err, negative_errno(), "clear capabilities");
    return step_process_limits(err);
}

/* No new privileges, not dumpable, killed with the shim, no core files. */
static int step_process_limits(error_rec *err) {
    struct rlimit core = {0, 0};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
        return error_set_errno(err, negative_errno(), "no_new_privs/dumpable/pdeathsig");
    return 0;
}

/* The sandbox's seccomp filter, installed once on init (last, after everything that needs
 * more than the profile allows) instead of once per command: every reaper and command is
 * cloned from init and inherits it through clone, vfork and execve, so each command runs
 * under exactly the filter it got before, without paying its load and JIT per command.
 * Everything init itself does from here on (the exec service in exec.c) is in the profile. */
static int step_seccomp(shim_init_ctx *c, error_rec *err) {
    int r = shim_seccomp_apply_bpf(c->prog.filter, c->prog.len * sizeof(struct sock_filter));
    return r < 0 ? error_set_errno(err, r, "install the seccomp filter") : 0;
}

/* A spare's init (shim/sandbox.h, shim_parked_make) has done the first STEPS_AHEAD steps: it
 * says so and waits for the sandbox's directory, then reads what a fresh init got from the
 * shim: the spec, the seccomp program, the staging directory. */
static int init_park(shim_init_ctx *c, error_rec *err) {
    static char staging[4200], dir[4200];
    char spec[4200];
    int fds[3];
    size_t nf;
    int r = shim_ipc_send(c->ipc, SHIM_IPC_PARKED, 0, 0, 0, NULL, 0, NULL, 0);
    if (r < 0)
        return error_set_errno(err, r, "notify the shim");
    r = shim_ipc_recv(c->ipc, ipc_buf, fds, &nf);
    for (size_t i = 0; i < nf; i++)
        safe_close(fds[i]);
    if (r < 0)
        return error_set_errno(err, r, "waiting for the sandbox");
    if (ipc_buf->type != SHIM_IPC_BUILD || ipc_buf->len == 0 || ipc_buf->len >= 4096)
        return error_set(err, -EPROTO, "unexpected message %u from the shim", ipc_buf->type);
    int n = (int)ipc_buf->len;
    snprintf(dir, sizeof(dir), "%.*s", n, ipc_buf->data);
    snprintf(staging, sizeof(staging), "%s/rootfs", dir);
    snprintf(spec, sizeof(spec), "%.*s/spec.json", n, ipc_buf->data);
    shim_spec *s = NULL;
    void *bpf = NULL;
    size_t len = 0;
    if ((r = shim_spec_load(spec, &s, err)) < 0 ||
        (r = policy_seccomp_read_bpf(s->seccomp_bpf, &bpf, &len, err)) < 0)
        return r; /* init exits: nothing to free */
    c->spec = s;
    c->dir = dir;
    c->root_ahead = c->root_parked && root_fits(s);
    c->staging = c->root_ahead ? c->park_root : staging;
    c->prog.filter = bpf;
    c->prog.len = (unsigned short)(len / sizeof(struct sock_filter));
    return 0;
}

typedef int (*init_step_fn)(shim_init_ctx *, error_rec *);
#define STEPS_AHEAD 5
enum { BOTH, NATIVE, GVISOR }; /* which isolation class runs a step (gvisor.h) */
static const struct {
    const char *name;
    init_step_fn fn;
    int only;
} init_steps[] = {
    /* a spare's init does these STEPS_AHEAD before it knows its sandbox */
    {"sync", step_sync, BOTH},
    {"userns-first", step_userns_first, NATIVE}, /* pausable only */
    {"namespaces", step_namespaces, BOTH},
    {"loopback", step_loopback, BOTH},
    {"root-ahead", step_root_ahead, BOTH}, /* a spare's only */
    /* the rest once it does */
    {"mount-namespace", step_mount_namespace, BOTH},
    {"hostname", step_hostname, BOTH},
    {"rootfs", step_rootfs, BOTH},
    {"volumes", step_volumes, BOTH},
    {"etc", step_etc, BOTH},
    {"proc", step_proc, NATIVE},
    {"dev", step_dev, NATIVE},
    {"seal", step_seal, BOTH},
    {"gvisor-bundle", shim_gvisor_prepare, GVISOR},
    {"pivot-root", step_pivot, NATIVE},
    {"reexec", step_reexec, NATIVE}, /* pausable only; shim_init_again goes on after it */
    {"oom-score", step_oom_score, BOTH},
    {"userns", step_userns, BOTH},
    {"gvisor-start", shim_gvisor_start, GVISOR},
    {"gvisor-chroot", step_gvisor_chroot, GVISOR},
    {"credentials", step_credentials, BOTH},
    {"seccomp", step_seccomp, BOTH},
};

static _Noreturn void init_fail(shim_init_ctx *c, const char *step, error_rec *err) {
    char msg[ERROR_MSG_MAX + 64];
    int n = snprintf(msg, sizeof(msg), "step %s: %s", step, err->message);
    shim_ipc_send(c->ipc, SHIM_IPC_ERROR, 0, err->code < 0 ? -err->code : EIO, 0, msg,
                  (size_t)MIN(n, (int)sizeof(msg) - 1), NULL, 0);
    _exit(1);
}

static void note_time(const char *name, uint64_t t0) {
    size_t room = sizeof(times) - times_len;
    int n = snprintf(times + times_len, room, "%sinit.%s=%.2f", times_len ? " " : "", name,
                     (double)(now_mono_us() - t0) / 1000.0);
    if (n > 0 && (size_t)n < room)
        times_len += (size_t)n;
}

/* The steps from `first` on, then the exec service. */
static _Noreturn void init_run(shim_init_ctx *c, size_t first) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    ipc_buf = &buf.m;
    for (size_t i = first; i < ARRAY_SIZE(init_steps); i++) {
        error_rec err = {0};
        if (c->parked && i == STEPS_AHEAD) {
            if (init_park(c, &err) < 0)
                init_fail(c, "park", &err);
            c->parked = false;
            times_len = 0; /* the steps done ahead are not the create's */
        }
        if (c->spec && init_steps[i].only == (c->spec->runsc ? NATIVE : GVISOR))
            continue;
        uint64_t t0 = now_mono_us();
        if (init_steps[i].fn(c, &err) < 0)
            init_fail(c, init_steps[i].name, &err);
        note_time(init_steps[i].name, t0);
    }
    if (c->spec->runsc)
        shim_gvisor_serve(c, times, times_len);
    /* a pausable sandbox's upper directory goes to the shim: CRIU could not dump it here */
    int upper = SHIM_UPPER_FD;
    bool give = c->spec->pausable && fcntl(upper, F_GETFD) >= 0;
    if (shim_ipc_send(c->ipc, SHIM_IPC_READY, 0, 0, 0, times, times_len, give ? &upper : NULL,
                      give) < 0)
        _exit(1);
    if (give)
        close(upper);
    shim_exec_grading = c->spec->grading;
    shim_exec_serve(c->ipc, &c->prog, ipc_buf);
}

_Noreturn void shim_init_main(shim_init_ctx *c) {
    /* Drop every inherited descriptor except the channel to the shim (and stdio until pivot). */
    /* each moved above the fixed numbers first: none is overwritten by another's dup2 */
    bool exe = c->spec && c->spec->pausable; /* step_dev's */
    int ipc = fcntl(c->ipc, F_DUPFD, SHIM_INIT_LIB_FD + 1);
    int tree = exe ? fcntl(c->exe_tree, F_DUPFD, SHIM_INIT_LIB_FD + 1) : -1;
    int libs = exe && c->loader ? fcntl(c->lib_tree, F_DUPFD, SHIM_INIT_LIB_FD + 1) : -1;
    /* close-on-exec, as every descriptor: no command inherits the channel (step_reexec clears
     * it for its own exec only) */
    if (ipc < 0 || dup3(ipc, SHIM_INIT_IPC_FD, O_CLOEXEC) < 0 ||
        (exe && (tree < 0 || dup3(tree, SHIM_INIT_EXE_FD, O_CLOEXEC) < 0)) ||
        (c->loader && (libs < 0 || dup3(libs, SHIM_INIT_LIB_FD, O_CLOEXEC) < 0)))
        _exit(1);
    c->ipc = SHIM_INIT_IPC_FD;
    close_range(libs >= 0 ? SHIM_INIT_LIB_FD + 1
                : exe     ? SHIM_INIT_EXE_FD + 1
                          : SHIM_INIT_IPC_FD + 1,
                ~0U, 0);
    init_run(c, 0);
}

_Noreturn void shim_init_again(const char *times_so_far) {
    static shim_spec spec = {.pausable = true}; /* all the steps after step_reexec look at */
    static shim_init_ctx c = {.spec = &spec, .ipc = SHIM_INIT_IPC_FD};
    times_len = (size_t)snprintf(times, sizeof(times), "%s", times_so_far);
    times_len = MIN(times_len, sizeof(times) - 1);
    set_title();                                    /* (clears argv, times_so_far included) */
    if (fd_set_cloexec(SHIM_INIT_IPC_FD, true) < 0) /* (step_reexec cleared it) */
        _exit(1);
    char *bpf = NULL;
    size_t len = 0, first = 0;
    int r = fd_read_all(SHIM_INIT_BPF_FD, 1 << 20, &bpf, &len);
    close(SHIM_INIT_BPF_FD);
    if (r < 0 || len == 0 || len % sizeof(struct sock_filter)) {
        error_rec err = {0};
        error_set_errno(&err, r < 0 ? r : -EINVAL, "the seccomp program's memfd");
        init_fail(&c, "reexec", &err);
    }
    c.prog.filter = (struct sock_filter *)bpf;
    c.prog.len = (unsigned short)(len / sizeof(struct sock_filter));
    while (strcmp(init_steps[first].name, "reexec") != 0)
        first++;
    (void)umount2(PRELOAD, MNT_DETACH); /* step_reexec's mask (none: EINVAL) */
    note_time("reexec", now_mono_us()); /* (its time: the exec, not measured here) */
    init_run(&c, first + 1);
}
