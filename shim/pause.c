/* Pause to disk with CRIU, and the restore (see pause.h). */
#include "shim/pause.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "common/mountinfo.h"
#include "common/shimproto.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "shim/cgroup.h"
#include "shim/init.h"
#include "shim/ipc.h"
#include "shim/layers.h"
#include "shim/ports.h"
#include "shim/rootfs.h"
#include "shim/seed.h"
#include "shim/sockets.h"
#include "shim/volumes.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define INIT_ANSWER_MS 5000 /* init's PAUSED, and its READY on the new channel */
#define CRIU_MAX_MS 300000  /* a dump or restore that takes longer is killed */
#define MAX_MOUNTS 256
#define MAX_EXTERNAL 64

typedef struct mount_line {
    char dev[32], root[512], mnt[512];
} mount_line;

typedef struct externals {
    mount_line m[MAX_EXTERNAL];
    size_t n;
} externals;

/* ---- the mounts CRIU cannot rebuild from the namespace alone ---- */

static int read_mounts(pid_t pid, mount_line *m, size_t max, size_t *ret_n, error_rec *err) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
    _cleanup_free_ char *text = NULL;
    int r = file_read_all(path, 1 << 20, &text, NULL);
    if (r < 0)
        return error_set_errno(err, r, "read %s", path);
    size_t n = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (n == max)
            return error_set(err, -E2BIG, "more than %zu mounts in the sandbox", max);
        if (sscanf(l, "%*d %*d %31s %511s %511s", m[n].dev, m[n].root, m[n].mnt) == 3) {
            mountinfo_unescape(m[n].root); /* (a volume's path may hold a '\\') */
            mountinfo_unescape(m[n].mnt);
            n++;
        }
    }
    *ret_n = n;
    return 0;
}

/* Whether CRIU finds m[i]'s file system in the namespace: m[i] is the whole of it, or another
 * mount (not the root) shows it at or above m[i]'s root (an equal one counts once). */
static bool covered(const mount_line *m, size_t n, size_t i) {
    if (strcmp(m[i].root, "/") == 0)
        return true;
    size_t rl = strlen(m[i].root);
    for (size_t j = 0; j < n; j++) {
        size_t l = strlen(m[j].root);
        if (j == i || strcmp(m[j].dev, m[i].dev) != 0 || strcmp(m[j].mnt, "/") == 0)
            continue;
        if (strcmp(m[j].root, "/") == 0 ||
            (l < rl && strncmp(m[i].root, m[j].root, l) == 0 && m[i].root[l] == '/') ||
            (l == rl && strcmp(m[i].root, m[j].root) == 0 && j < i))
            return true;
    }
    return false;
}

/* The index of the spec's volume mounted at mnt, or -1. */
static ssize_t volume_at(const shim_spec *spec, const char *mnt) {
    size_t i;
    json_t *v;
    json_array_foreach(spec->volumes, i, v) {
        if (strcmp(json_string_value(json_object_get(v, "dst")) ?: "", mnt) == 0)
            return (ssize_t)i;
    }
    return -1;
}

/* The externals, written to ckpt/mounts for the restore: what CRIU cannot find whole in the
 * namespace, and the volumes (their disks are the daemon's). */
static int find_externals(pid_t pid, const char *ckpt, const shim_spec *spec, externals *x,
                          error_rec *err) {
    static mount_line m[MAX_MOUNTS];
    size_t n = 0;
    int r = read_mounts(pid, m, MAX_MOUNTS, &n, err);
    if (r < 0)
        return r;
    char text[MAX_EXTERNAL * 1100];
    size_t tl = 0;
    x->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].mnt, "/") == 0 || (covered(m, n, i) && volume_at(spec, m[i].mnt) < 0))
            continue;
        if (x->n == MAX_EXTERNAL)
            return error_set(err, -E2BIG, "more than %d mounts from outside the sandbox",
                             MAX_EXTERNAL);
        x->m[x->n] = m[i];
        tl += (size_t)snprintf(text + tl, sizeof(text) - tl, "m%zu %s %s\n", x->n, m[i].mnt,
                               m[i].root);
        x->n++;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/mounts", ckpt);
    r = file_replace_nosync(path, text, tl, 0600);
    return r < 0 ? error_set_errno(err, r, "write %s", path) : 0;
}

static int load_externals(const char *ckpt, externals *x, error_rec *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/mounts", ckpt);
    _cleanup_free_ char *text = NULL;
    int r = file_read_all(path, 1 << 20, &text, NULL);
    if (r < 0)
        return error_set_errno(err, r, "read %s", path);
    x->n = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && x->n < MAX_EXTERNAL;
         l = strtok_r(NULL, "\n", &save)) {
        mount_line *e = &x->m[x->n];
        if (sscanf(l, "m%*u %511s %511s", e->mnt, e->root) != 2)
            return error_set(err, -EBADMSG, "%s: a bad line", path);
        x->n++;
    }
    return 0;
}

/* Where a restore finds external e: the writable layer's /workspace and /tmp, a /proc mask, the
 * sbx-init binary and (an image's) its libraries' directory, or (the host image's binds) the host's
 * own path. */
static void external_source(const mount_line *e, const shim_spec *spec, const char *exe,
                            const char *libs, char *buf, size_t len) {
    const char *staging = SHIM_PAUSABLE_STAGING;
    ssize_t v = volume_at(spec, e->mnt);
    if (v >= 0)
        snprintf(buf, len, "%s/vols/%zd", staging, v);
    else if (strcmp(e->mnt, "/workspace") == 0 || strcmp(e->mnt, "/tmp") == 0)
        snprintf(buf, len, "%s/data%s", staging, e->mnt);
    else if (strncmp(e->mnt, "/proc/", 6) == 0)
        snprintf(buf, len, "%s/mask%s", staging, e->root);
    else if (strcmp(e->mnt, SHIM_INIT_BINARY) == 0)
        snprintf(buf, len, "%s", exe);
    else if (strcmp(e->mnt, SHIM_INIT_LIBS) == 0 && libs)
        snprintf(buf, len, "%s", libs);
    else
        snprintf(buf, len, "%s", e->mnt);
}

/* ---- running CRIU ---- */

/* CRIU's error lines that say what went wrong, not the ones it prints on every run here (no
 * iptables, no RLIMIT_NOFILE for itself, `ip` restoring loopback's addresses) nor its final
 * summary. */
static bool telling(const char *l) {
    static const char *const noise[] = {"rlimit:", "iptables",       "ip6tables",
                                        "FAILED",  "failed with -1", "already assigned"};
    if (!strstr(l, "Error"))
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(noise); i++)
        if (strstr(l, noise[i]))
            return false;
    return true;
}

/* A failed run of CRIU: what its log says (up to three lines, without their "Error (file:line):"
 * prefix), and what that means where it is known. */
static int criu_failed(const char *action, int st, const char *log, error_rec *err) {
    _cleanup_free_ char *text = NULL;
    char said[600] = "";
    size_t n = 0, lines = 0;
    if (file_read_all(log, 1 << 22, &text, NULL) >= 0) {
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l && lines < 3;
             l = strtok_r(NULL, "\n", &save)) {
            char *p = strstr(l, "): ");
            if (!telling(l) || n >= sizeof(said))
                continue;
            n += (size_t)snprintf(said + n, sizeof(said) - n, "%s%s", lines++ ? "; " : "",
                                  p ? p + 3 : l);
        }
    }
    const char *hint =
        strstr(said, "sockets: Can't get 1:16 opt")
            ? " (a TCP or UDP socket: a CRIU before 4.2 cannot read SO_PASSCRED of an inet "
              "socket on Linux 6.16 and later; tests/deps.sh builds 4.2.1)"
        : strstr(said, "Can't move thread")
            ? " (a process with threads: this CRIU lacks sandboxd's patch "
              "tests/criu/thread-cgroups-ignore.patch, which tests/deps.sh applies)"
            : "";
    return error_set(err, -EIO, "criu %s failed (status %d): %s%s", action, st,
                     lines ? said : "see its log", hint);
}

/* argv: "criu", the action, then the rest; the externals are appended (each "--external" and
 * "mnt[...]:..." from ext, NULL-terminated). Waits (bounded); its own log has the details.
 * cg: the restore runs inside the sandbox's cgroup (its processes are forked from CRIU). */
static int run_criu(char **argv, const char *log, shim_cgroup *cg, void (*in_child)(void *),
                    void *ud, error_rec *err) {
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd >= 0)
            dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
        if (cg && shim_cgroup_add_pid(cg, getpid(), NULL) < 0)
            _exit(126);
        if (in_child) /* after the cgroup: the files it puts back are the sandbox's memory */
            in_child(ud);
        execvpe(argv[0], argv, spec_host_env);
        _exit(127);
    }
    if (pid < 0)
        return error_set_errno(err, negative_errno(), "fork for criu");
    _cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    if (pfd >= 0 && poll(&p, 1, CRIU_MAX_MS) == 0)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return error_set(err, -ENOENT, "criu is not installed on this node");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 126)
        return error_set(err, -EIO, "criu %s: cannot join the sandbox's cgroup", argv[1]);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 125) /* restore_prepare */
        return error_set(err, -EIO,
                         "criu %s: the sandbox's files could not be put back on its "
                         "writable layer (its disk or memory limit?)",
                         argv[1]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return criu_failed(argv[1], st, log, err);
    return 0;
}

/* ---- the channel to init ---- */

static int wait_msg(int fd, uint32_t want, int32_t *ret_a, error_rec *err) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, INIT_ANSWER_MS);
    if (n <= 0)
        return error_set(err, n == 0 ? -ETIMEDOUT : negative_errno(), "init did not answer");
    int fds[3];
    size_t nf = 0;
    int r = shim_ipc_recv(fd, &buf.m, fds, &nf);
    for (size_t i = 0; i < nf; i++)
        safe_close(fds[i]);
    if (r < 0)
        return error_set_errno(err, r, "init went away");
    if (buf.m.type != want)
        return error_set(err, -EPROTO, "unexpected message %u from init", buf.m.type);
    if (ret_a)
        *ret_a = buf.m.a;
    return 0;
}

/* Connect to init's pause address (in its network namespace) and wait for its READY. */
static int reach_init(pid_t init, int *ret_fd, error_rec *err) {
    _cleanup_close_ int fd = -1;
    int r = shim_socket_in_netns(init, AF_UNIX, SOCK_SEQPACKET, 0, &fd, err);
    if (r < 0)
        return r;
    struct sockaddr_un a;
    socklen_t al = shim_ipc_pause_addr(&a);
    if (connect(fd, (struct sockaddr *)&a, al) < 0)
        return error_set_errno(err, negative_errno(), "connect to the sandbox's init");
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.pid != init)
        return error_set(err, -EPERM, "what listens on the pause address is not init");
    if ((r = wait_msg(fd, SHIM_IPC_READY, NULL, err)) < 0)
        return r;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* ---- files ---- */

static int open_dir(const char *path, int *ret, error_rec *err) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open %s", path);
    *ret = fd;
    return 0;
}

/* Copy the directory src into dst (which exists): its content, then its owner and mode. */
static int copy_into(const char *src, const char *dst, uint32_t uid_base, error_rec *err) {
    _cleanup_close_ int s = -1, d = -1;
    struct stat st;
    int r = open_dir(src, &s, err);
    if (r < 0 || (r = open_dir(dst, &d, err)) < 0 ||
        (r = shim_seed_copy_tree(s, d, uid_base, err)) < 0)
        return r;
    if (fstat(s, &st) < 0 || fchown(d, st.st_uid, st.st_gid) < 0 ||
        fchmod(d, st.st_mode & 07777) < 0)
        return error_set_errno(err, negative_errno(), "set %s as %s", dst, src);
    return 0;
}

static const char *const saved[] = {"root", "workspace", "tmp"};

static bool image_root(const shim_spec *s) {
    return s->image_type == SHIM_IMAGE_DIR || s->image_type == SHIM_IMAGE_LAYERS;
}

/* `cp -a` of the directory src's content into dst (which exists): an overlay's upper
 * directory, whose whiteouts (0/0 devices) and user.overlay.* attributes count. */
static int copy_upper(const char *src, const char *dst, error_rec *err) {
    char from[PATH_MAX + 4], to[PATH_MAX + 4];
    snprintf(from, sizeof(from), "%s/.", src);
    snprintf(to, sizeof(to), "%s/", dst);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char *argv[] = {"cp", "-a", "-x", "--sparse=always", "--", from, to, NULL};
        execvpe(argv[0], argv, spec_host_env);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return error_set_errno(err, negative_errno(), "run cp");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EIO, "cp -a %s %s: status %d", from, to, st);
    return 0;
}

/* What an image's root was made of: its store layers' names (bottom first), or its directory. */
static void image_text(const shim_spec *s, char *buf, size_t len) {
    size_t o = 0;
    if (s->image_type == SHIM_IMAGE_DIR)
        o = (size_t)snprintf(buf, len, "dir %s\n", s->image_path);
    for (size_t i = 0; s->image_type == SHIM_IMAGE_LAYERS && i < s->n_layers && o < len; i++) {
        const char *b = strrchr(s->layers[i], '/');
        o += (size_t)snprintf(buf + o, len - o, "layer %s\n", b ? b + 1 : s->layers[i]);
    }
}

/* The tree is stopped: its root's own files (an image's: its upper directory, which the shim
 * holds), its /workspace and its /tmp. */
static int save_files(pid_t init, const char *ckpt, const shim_spec *spec, error_rec *err) {
    char src[PATH_MAX], dst[PATH_MAX];
    bool image = image_root(spec);
    for (size_t i = 0; i < ARRAY_SIZE(saved); i++) {
        snprintf(src, sizeof(src), "/proc/%d/root/%s", (int)init, i ? saved[i] : "");
        snprintf(dst, sizeof(dst), "%s/files/%s", ckpt, i || !image ? saved[i] : "upper");
        if (mkdir(dst, 0700) < 0)
            return error_set_errno(err, negative_errno(), "mkdir %s", dst);
        if (!i && image)
            snprintf(src, sizeof(src), "/proc/%d/fd/%d", (int)getpid(), SHIM_UPPER_FD);
        int r = !i && image ? copy_upper(src, dst, err) : copy_into(src, dst, spec->uid_base, err);
        if (r < 0)
            return r;
    }
    if (!image)
        return 0;
    static char text[1 << 16];
    image_text(spec, text, sizeof(text));
    snprintf(dst, sizeof(dst), "%s/image", ckpt);
    int r = file_replace_nosync(dst, text, strlen(text), 0600);
    return r < 0 ? error_set_errno(err, r, "write %s", dst) : 0;
}

/* A restore's image is the one the checkpoint was made on (the same layers, or directory). */
static int same_image(const shim_spec *spec, const char *ckpt, error_rec *err) {
    if (!image_root(spec))
        return 0;
    static char want[1 << 16];
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/image", ckpt);
    _cleanup_free_ char *had = NULL;
    int r = file_read_all(path, sizeof(want), &had, NULL);
    if (r < 0)
        return error_set_errno(err, r, "read %s", path);
    image_text(spec, want, sizeof(want));
    if (strcmp(had, want) != 0)
        return error_set(err, -ESTALE,
                         "the sandbox's image here is not the one it was paused on (other "
                         "layers or directory)");
    return 0;
}

int shim_keep_upper(int fd, uid_t uid_base, error_rec *err) {
    struct stat st;
    struct statfs fs;
    int r = fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0 ? negative_errno() : 0;
    if (r == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != uid_base || fs.f_type != TMPFS_MAGIC))
        r = -EPERM; /* not the sandbox's upper directory on its writable layer */
    if (r == 0 && fd != SHIM_UPPER_FD && dup3(fd, SHIM_UPPER_FD, O_CLOEXEC) < 0)
        r = negative_errno();
    if (fd != SHIM_UPPER_FD)
        close(fd);
    return r < 0 ? error_set_errno(err, r, "keep the upper directory") : 0;
}

/* ---- pause ---- */

static void dump_argv(const char *images, pid_t init, const externals *x, char **argv,
                      char keys[][PATH_MAX + 600]) {
    static char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)init);
    size_t n = 0;
    const char *fixed[] = {"criu",
                           "dump",
                           "-t",
                           pid,
                           "-D",
                           images,
                           "-o",
                           "dump.log",
                           "--leave-stopped",
                           "--network-lock",
                           "skip",
                           "--tcp-established"};
    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
        argv[n++] = (char *)fixed[i];
    for (size_t i = 0; i < x->n; i++) {
        snprintf(keys[i], PATH_MAX + 600, "mnt[%s]:m%zu", x->m[i].mnt, i);
        argv[n++] = "--external";
        argv[n++] = keys[i];
    }
    argv[n] = NULL;
}

/* A failed pause: the stopped processes go on, the shim reaches init again. */
static void pause_undo(shim_sandbox *sb) {
    shim_cgroup_signal_all(sb->cg, SIGCONT);
    error_rec e = {0};
    if (reach_init(sb->init_pid, &sb->ipc, &e) < 0)
        sb->ipc = -1;
}

int shim_pause(shim_sandbox *sb, const char *ckpt, size_t running, shim_pause_info *ret,
               error_rec *err) {
    static externals x;
    static char keys[MAX_EXTERNAL][PATH_MAX + 600];
    char *argv[16 + 2 * MAX_EXTERNAL];
    char images[PATH_MAX], files[PATH_MAX];
    if (!sb->spec->pausable)
        return error_set(err, -EOPNOTSUPP, "pause: the sandbox was not created pausable");
    if (!ckpt || ckpt[0] != '/')
        return error_set(err, -EINVAL, "pause: dir must be an absolute path");
    if (running)
        return error_set(err, -EBUSY, "pause: %zu command(s) still running", running);
    /* first: the daemon takes the network away (its release may still run, or a restart may
     * have stopped it): its sockets end and its veth goes, even if the pause fails */
    int ended = shim_sockets_end_outside(sb->init_pid, err);
    if (ended < 0)
        return ended;
    int r = shim_sockets_remove_links(sb->init_pid, err);
    if (r < 0)
        return r;
    snprintf(images, sizeof(images), "%s/images", ckpt);
    snprintf(files, sizeof(files), "%s/files", ckpt);
    int32_t refused = 0;
    r = mkdir(images, 0700) < 0 || mkdir(files, 0700) < 0 ? negative_errno() : 0;
    if (r < 0)
        error_set_errno(err, r, "mkdir in %s", ckpt);
    if (r >= 0)
        r = find_externals(sb->init_pid, ckpt, sb->spec, &x, err);
    if (r >= 0 && (r = shim_ipc_send(sb->ipc, SHIM_IPC_PAUSE, 0, 0, 0, NULL, 0, NULL, 0)) < 0)
        error_set_errno(err, r, "ask init to pause");
    if (r >= 0)
        r = wait_msg(sb->ipc, SHIM_IPC_PAUSED, &refused, err);
    if (r >= 0 && refused)
        r = error_set_errno(err, -refused, "init cannot pause");
    if (r < 0) /* init still serves the old channel (or is gone) */
        return r;
    sb->ipc = safe_close(sb->ipc); /* init closed its end */
    dump_argv(images, sb->init_pid, &x, argv, keys);
    uint64_t t0 = now_mono_us();
    char log[PATH_MAX + 16];
    snprintf(log, sizeof(log), "%s/dump.log", images);
    if ((r = run_criu(argv, log, NULL, NULL, NULL, err)) < 0) {
        pause_undo(sb);
        return r;
    }
    uint64_t t1 = now_mono_us();
    if ((r = save_files(sb->init_pid, ckpt, sb->spec, err)) < 0) {
        error_prefix(err, "save the sandbox's files");
        pause_undo(sb);
        return r;
    }
    *ret = (shim_pause_info){.dump_ms = (double)(t1 - t0) / 1000.0,
                             .files_ms = (double)(now_mono_us() - t1) / 1000.0,
                             .sockets_ended = (unsigned)ended};
    char done[PATH_MAX + 32], text[160];
    snprintf(done, sizeof(done), "%s/" SHIMPROTO_CHECKPOINT_DONE, ckpt);
    int n =
        snprintf(text, sizeof(text), "{\"dump_ms\":%.3f,\"files_ms\":%.3f,\"sockets_ended\":%u}\n",
                 ret->dump_ms, ret->files_ms, ret->sockets_ended);
    if ((r = file_replace_nosync(done, text, (size_t)n, 0600)) < 0) {
        error_set_errno(err, r, "write %s", done);
        pause_undo(sb);
        return r;
    }
    return 0;
}

/* ---- restore ---- */

/* CRIU reads the images partly as the restored tree: the sandbox's root (host uid_base), or
 * before its id maps are written an unmapped user (timens-N.img, say). The images directory and
 * its files become uid_base's and readable by all (0755, 0644): the checkpoint's own directory
 * (0700, root's) keeps the host's other users out, CRIU opens the images through a descriptor. */
static int images_to(const char *images, uid_t uid, error_rec *err) {
    _cleanup_close_ int fd = -1;
    int r = open_dir(images, &fd, err);
    if (r < 0)
        return r;
    int dfd = dup(fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        safe_close(dfd);
        return error_set_errno(err, -ENOMEM, "read %s", images);
    }
    struct dirent *de;
    r = fchown(fd, uid, uid) < 0 || fchmod(fd, 0755) < 0 ? negative_errno() : 0;
    while (r == 0 && (de = readdir(d)))
        if (de->d_type == DT_REG && (fchownat(fd, de->d_name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0 ||
                                     fchmodat(fd, de->d_name, 0644, 0) < 0))
            r = negative_errno();
    closedir(d);
    return r < 0 ? error_set_errno(err, r, "chown %s", images) : 0;
}

typedef struct restore_ctx {
    const shim_spec *spec;
    int sock; /* an image's root: its upper directory goes back to the shim on it */
} restore_ctx;

/* An image's root: the overlay of its image over the saved upper directory, on staging/root
 * (the overlay's user.overlay.* attributes: shim_rootfs_overlay); its upper directory to the
 * shim (sock). */
static int restore_image_root(const restore_ctx *c, const char *staging, error_rec *err) {
    char p[PATH_MAX], src[PATH_MAX];
    static const char *const dirs[] = {"upper", "work", "root"};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        snprintf(p, sizeof(p), "%s/%s", staging, dirs[i]);
        if (mkdir(p, 0711) < 0)
            return error_set_errno(err, negative_errno(), "mkdir %s", p);
    }
    snprintf(p, sizeof(p), "%s/upper", staging);
    snprintf(src, sizeof(src), "%s/files/upper", c->spec->restore);
    int r = copy_upper(src, p, err);
    if (r < 0)
        return r;
    snprintf(p, sizeof(p), "%s/root", staging);
    if ((r = shim_rootfs_overlay(c->spec, staging, p, err)) < 0)
        return r;
    int fd = SHIM_UPPER_FD;
    r = shim_ipc_send(c->sock, SHIM_IPC_READY, 0, 0, 0, NULL, 0, &fd, 1);
    close(fd);
    return r < 0 ? error_set_errno(err, r, "send the upper directory") : 0;
}

/* The volumes, id-mapped as at the create, on staging/vols/<i> for CRIU to bind (the
 * externals: external_source). */
static int restore_volumes(const shim_spec *s, const char *staging, error_rec *err) {
    if (json_array_size(s->volumes) == 0)
        return 0;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/vols", staging);
    _cleanup_close_ int userns = -1;
    int r = mkdir(p, 0711) < 0 ? negative_errno() : shim_idmap_userns(0, s->uid_base, &userns);
    if (r < 0)
        return error_set_errno(err, r, "the volumes' mounts");
    size_t i;
    json_t *v;
    json_array_foreach(s->volumes, i, v) {
        int tree = -1;
        snprintf(p, sizeof(p), "%s/vols/%zu", staging, i);
        if (mkdir(p, 0711) < 0)
            return error_set_errno(err, negative_errno(), "mkdir %s", p);
        if ((r = shim_volume_tree(v, userns, &tree, err)) < 0)
            return r;
        r = move_mount(tree, "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? negative_errno() : 0;
        close(tree);
        if (r < 0)
            return error_set_errno(err, r, "move_mount %s", p);
    }
    return 0;
}

/* In CRIU's process, before its exec (ud: a restore_ctx): a mount namespace of its own holding
 * the new writable layer on SHIM_PAUSABLE_STAGING, where the sandbox's init built it, the
 * sandbox's files put back on it (an image's: its overlay, restore_image_root), and the masks;
 * CRIU binds them into the sandbox. CRIU opens what it binds as the sandbox's root user, so
 * every directory on the way lets others through (0711; the run directory does not). Exits on
 * failure (status 125; nothing of it is left: its namespace dies with it). */
static void restore_prepare(void *ud) {
    const restore_ctx *c = ud;
    const shim_spec *s = c->spec;
    const char *staging = SHIM_PAUSABLE_STAGING;
    bool image = image_root(s);
    error_rec e = {0};
    char p[PATH_MAX], src[PATH_MAX], mask[PATH_MAX];
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        shim_rootfs_mount_disk(s, staging, &e) < 0 || chmod(staging, 0711) < 0)
        _exit(125);
    snprintf(p, sizeof(p), "%s/data", staging);
    if (mkdir(p, 0711) < 0)
        _exit(125);
    for (size_t i = image ? 1 : 0; i < ARRAY_SIZE(saved); i++) {
        snprintf(p, sizeof(p), "%s/%s%s", staging, i ? "data/" : "", saved[i]);
        snprintf(src, sizeof(src), "%s/files/%s", s->restore, saved[i]);
        if (mkdir(p, 0700) < 0 || copy_into(src, p, s->uid_base, &e) < 0)
            _exit(125);
    }
    if ((image && restore_image_root(c, staging, &e) < 0) || restore_volumes(s, staging, &e) < 0 ||
        shim_rootfs_make_mask(staging, mask, sizeof(mask), &e) < 0)
        _exit(125);
}

/* The restored image root's upper directory, which restore_prepare sent (it is there: CRIU
 * ran after it). */
static int take_upper(int sock, uid_t uid_base, error_rec *err) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    int fds[3];
    size_t nf = 0;
    fd_set_nonblock(sock, 1);
    int r = shim_ipc_recv(sock, &buf.m, fds, &nf);
    for (size_t i = 1; i < nf; i++)
        safe_close(fds[i]);
    if (r < 0 || nf == 0)
        return error_set_errno(err, r < 0 ? r : -EPROTO, "the restored upper directory");
    return shim_keep_upper(fds[0], uid_base, err);
}

int shim_restore(shim_sandbox *sb, error_rec *err) {
    static externals x;
    static char keys[MAX_EXTERNAL][3 * PATH_MAX];
    const char *ckpt = sb->spec->restore;
    const char *staging = SHIM_PAUSABLE_STAGING;
    char images[PATH_MAX], root[PATH_MAX + 8], pidfile[PATH_MAX + 16], log[PATH_MAX + 16],
        exe[PATH_MAX], src[2 * PATH_MAX];
    snprintf(images, sizeof(images), "%s/images", ckpt);
    snprintf(root, sizeof(root), "%s/root", staging);
    snprintf(pidfile, sizeof(pidfile), "%s/restore.pid", sb->dir);
    snprintf(log, sizeof(log), "%s/restore.log", images);
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el <= 0)
        return error_set_errno(err, negative_errno(), "readlink /proc/self/exe");
    exe[el] = 0;
    static char libs[PATH_MAX], loader[PATH_MAX];
    libs[0] = 0;
    int r = load_externals(ckpt, &x, err);
    if (r >= 0 && image_root(sb->spec))
        r = shim_rootfs_libdir(libs, sizeof(libs), loader, sizeof(loader), err);
    if (r < 0 || (r = same_image(sb->spec, ckpt, err)) < 0 ||
        (r = images_to(images, sb->spec->uid_base, err)) < 0)
        return r;
    if (access(staging, F_OK) < 0)
        return error_set_errno(err, negative_errno(), "%s (a restore's staging)", staging);
    char *argv[24 + 2 * MAX_EXTERNAL];
    size_t n = 0;
    const char *fixed[] = {"criu",
                           "restore",
                           "-D",
                           images,
                           "-o",
                           "restore.log",
                           "--root",
                           root,
                           "--restore-detached",
                           "--restore-sibling",
                           "--pidfile",
                           pidfile,
                           "--manage-cgroups=ignore",
                           "--tcp-established"};
    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
        argv[n++] = (char *)fixed[i];
    for (size_t i = 0; i < x.n; i++) {
        external_source(&x.m[i], sb->spec, exe, libs[0] ? libs : NULL, src, sizeof(src));
        snprintf(keys[i], sizeof(keys[i]), "mnt[m%zu]:%s", i, src);
        argv[n++] = "--external";
        argv[n++] = keys[i];
    }
    argv[n] = NULL;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return error_set_errno(err, negative_errno(), "socketpair");
    restore_ctx c = {.spec = sb->spec, .sock = sp[1]};
    r = run_criu(argv, log, sb->cg, restore_prepare, &c, err);
    close(sp[1]);
    if (r >= 0 && image_root(sb->spec))
        r = take_upper(sp[0], sb->spec->uid_base, err);
    close(sp[0]);
    if (r < 0)
        return r;
    _cleanup_free_ char *pid = NULL;
    if ((r = file_read_all(pidfile, 64, &pid, NULL)) < 0 || atoi(pid) <= 0)
        return error_set_errno(err, r < 0 ? r : -EBADMSG, "read %s", pidfile);
    sb->init_pid = atoi(pid);
    unlink(pidfile);
    return reach_init(sb->init_pid, &sb->ipc, err);
}
