/* cgroup v1 and v2 handling for one sandbox (see cgroup.h). */
#include "shim/cgroup.h"

#include "common/fdutil.h"
#include "common/mountinfo.h"

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>

static const char *const v1_ctrls[] = {"memory", "pids", "cpu", "cpuacct", "freezer", "devices"};

static void sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct v1_find {
    const char *ctrl;
    char *buf;
    size_t len;
    bool found;
};

static bool opt_has(const char *opts, const char *word) {
    size_t n = strlen(word);
    for (const char *p = opts; (p = strstr(p, word)); p += n)
        if ((p == opts || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

static int v1_find_cb(const char *mnt, const char *fstype, const char *opts, void *ud) {
    struct v1_find *f = ud;
    if (strcmp(fstype, "cgroup") != 0 || !opt_has(opts, f->ctrl))
        return 0;
    snprintf(f->buf, f->len, "%s", mnt);
    f->found = true;
    return 1;
}

int shim_cgroup_v1_mount(const char *ctrl, char *buf, size_t len) {
    struct v1_find f = {.ctrl = ctrl, .buf = buf, .len = len};
    int r = mountinfo_walk(v1_find_cb, &f);
    if (r < 0)
        return r;
    return f.found ? 0 : -ENOENT;
}

static int v2_find_cb(const char *mnt, const char *fstype, const char *opts, void *ud) {
    if (strcmp(fstype, "cgroup2") != 0)
        return 0;
    char path[600];
    snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
    _cleanup_free_ char *ctl = NULL;
    if (file_read_all(path, 4096, &ctl, NULL) < 0)
        return 0;
    if (!strstr(ctl, "memory") || !strstr(ctl, "pids"))
        return 0;
    *(char **)ud = strdup(mnt);
    return 1;
}

int shim_cgroup_detect(char **ret_v2_mount) {
    char *v2 = NULL;
    int r = mountinfo_walk(v2_find_cb, &v2);
    if (r < 0)
        return r;
    if (v2) {
        if (ret_v2_mount)
            *ret_v2_mount = v2;
        else
            free(v2);
        return 2;
    }
    char buf[512];
    if (shim_cgroup_v1_mount("memory", buf, sizeof(buf)) == 0 &&
        shim_cgroup_v1_mount("pids", buf, sizeof(buf)) == 0)
        return 1;
    return -ENOENT;
}

void shim_cgroup_free(shim_cgroup *cg) {
    if (!cg)
        return;
    for (size_t i = 0; i < cg->n; i++)
        free(cg->dirs[i]);
    safe_close(cg->oom_fd);
    free(cg);
}

/* Each of v1_ctrls' mount points (mnts[i], "" where it is not mounted), in one walk. */
static int v1_all_cb(const char *mnt, const char *fstype, const char *opts, void *ud) {
    char(*mnts)[512] = ud;
    for (size_t i = 0; i < ARRAY_SIZE(v1_ctrls) && strcmp(fstype, "cgroup") == 0; i++)
        if (!mnts[i][0] && opt_has(opts, v1_ctrls[i]))
            snprintf(mnts[i], sizeof(mnts[i]), "%s", mnt);
    return 0;
}

static int open_v1(shim_cgroup *cg, const char *parent, const char *id, bool devices,
                   error_rec *err) {
    char mnts[ARRAY_SIZE(v1_ctrls)][512] = {{0}};
    int r = mountinfo_walk(v1_all_cb, mnts);
    if (r < 0)
        return error_set_errno(err, r, "read /proc/self/mountinfo");
    for (size_t i = 0; i < ARRAY_SIZE(v1_ctrls); i++) {
        char *mnt = mnts[i], dir[2048];
        if (!mnt[0]) {
            if (i < 2) /* memory and pids are required */
                return error_set(err, -ENOENT, "cgroup v1 controller %s is not mounted",
                                 v1_ctrls[i]);
            continue;
        }
        snprintf(dir, sizeof(dir), "%s/%s/%s", mnt, parent, id);
        /* devices only for a sandbox with device rules, or one that has the directory already
         * (its cleanup): a create without GPUs makes and joins no devices cgroup */
        if (strcmp(v1_ctrls[i], "devices") == 0 && !devices && access(dir, F_OK) < 0)
            continue;
        bool dup = false; /* co-mounted controllers (cpu,cpuacct) share a directory */
        for (size_t k = 0; k < cg->n; k++)
            dup = dup || strcmp(cg->dirs[k], dir) == 0;
        if (dup)
            continue;
        if (!(cg->dirs[cg->n] = strdup(dir)))
            return -ENOMEM;
        cg->ctrls[cg->n++] = v1_ctrls[i];
    }
    return 0;
}

int shim_cgroup_open(int version, const char *parent, const char *id, bool devices,
                     shim_cgroup **ret, error_rec *err) {
    _cleanup_(shim_cgroup_freep) shim_cgroup *cg = calloc(1, sizeof(*cg));
    if (!cg)
        return -ENOMEM;
    cg->version = version;
    cg->oom_fd = -1;
    if (version == 2) {
        char dir[2048];
        snprintf(dir, sizeof(dir), "%s/%s", parent, id);
        if (!(cg->dirs[0] = strdup(dir)))
            return -ENOMEM;
        cg->n = 1;
    } else {
        int r = open_v1(cg, parent, id, devices, err);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(cg);
    return 0;
}

static int knob_write(const char *dir, const char *knob, const char *val, error_rec *err) {
    char path[2200];
    snprintf(path, sizeof(path), "%s/%s", dir, knob);
    int r = file_write_str(path, val);
    if (r < 0)
        return error_set_errno(err, r, "cgroup: write %s=%s", path, val);
    return 0;
}

/* The value of the line "key N" in s: a flat-keyed file's text (memory.events, cpu.stat,
 * memory.oom_control). */
static int key_value(const char *s, const char *key, uint64_t *ret) {
    size_t kl = strlen(key);
    for (const char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
            *ret = strtoull(p + kl + 1, NULL, 10);
            return 0;
        }
    return -ENOENT;
}

/* The value of key in the file dir/knob. */
static int knob_read_key(const char *dir, const char *knob, const char *key, uint64_t *ret) {
    char path[2200];
    snprintf(path, sizeof(path), "%s/%s", dir, knob);
    _cleanup_free_ char *s = NULL;
    int r = file_read_all(path, 65536, &s, NULL);
    return r < 0 ? r : key_value(s, key, ret);
}

static const char *dir_of(shim_cgroup *cg, const char *ctrl) {
    if (cg->version == 2)
        return cg->dirs[0];
    for (size_t i = 0; i < cg->n; i++)
        if (strcmp(cg->ctrls[i], ctrl) == 0)
            return cg->dirs[i];
    /* co-mounted: cpuacct may live with cpu */
    if (strcmp(ctrl, "cpuacct") == 0)
        return dir_of(cg, "cpu");
    return NULL;
}

static int limits_v1(shim_cgroup *cg, double cpu, uint64_t memory, uint64_t pids, error_rec *err) {
    char buf[64];
    int r;
    const char *mem = dir_of(cg, "memory");
    if (memory > 0) {
        snprintf(buf, sizeof(buf), "%" PRIu64, memory);
        if ((r = knob_write(mem, "memory.limit_in_bytes", buf, err)) < 0)
            return r;
        char p[2200];
        snprintf(p, sizeof(p), "%s/memory.memsw.limit_in_bytes", mem);
        if (access(p, F_OK) == 0 &&
            (r = knob_write(mem, "memory.memsw.limit_in_bytes", buf, err)) < 0)
            return r;
        knob_write(mem, "memory.swappiness", "0", NULL); /* best effort */
    }
    snprintf(buf, sizeof(buf), "%" PRIu64, pids);
    if ((r = knob_write(dir_of(cg, "pids"), "pids.max", buf, err)) < 0)
        return r;
    const char *cpud = dir_of(cg, "cpu");
    if (cpu > 0 && cpud) {
        snprintf(buf, sizeof(buf), "%lld", MAX(1000LL, (long long)(cpu * 100000)));
        if ((r = knob_write(cpud, "cpu.cfs_period_us", "100000", err)) < 0 ||
            (r = knob_write(cpud, "cpu.cfs_quota_us", buf, err)) < 0)
            return r;
    }
    return 0;
}

static int limits_v2(shim_cgroup *cg, double cpu, uint64_t memory, uint64_t pids, error_rec *err) {
    const char *d = cg->dirs[0];
    char buf[64], p[2200];
    int r;
    if (memory > 0) {
        snprintf(buf, sizeof(buf), "%" PRIu64, memory);
        if ((r = knob_write(d, "memory.max", buf, err)) < 0)
            return r;
        snprintf(p, sizeof(p), "%s/memory.swap.max", d);
        if (access(p, F_OK) == 0 && (r = knob_write(d, "memory.swap.max", "0", err)) < 0)
            return r;
    }
    snprintf(buf, sizeof(buf), "%" PRIu64, pids);
    if ((r = knob_write(d, "pids.max", buf, err)) < 0)
        return r;
    if (cpu > 0) {
        snprintf(buf, sizeof(buf), "%lld 100000", MAX(1000LL, (long long)(cpu * 100000)));
        if ((r = knob_write(d, "cpu.max", buf, err)) < 0)
            return r;
    }
    return 0;
}

/* v2: make sure the parent delegates the controllers we need (best effort). */
static void v2_enable_parent(const char *dir) {
    char parent[2100];
    snprintf(parent, sizeof(parent), "%s", dir);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return;
    *slash = '\0';
    char p[2200];
    snprintf(p, sizeof(p), "%s/cgroup.subtree_control", parent);
    static const char *const ctl[] = {"+memory", "+pids", "+cpu"};
    for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) /* one at a time: cpu may be unavailable */
        file_write_str(p, ctl[i]);
}

int shim_cgroup_create(shim_cgroup *cg, double cpu, uint64_t memory, uint64_t pids,
                       error_rec *err) {
    for (size_t i = 0; i < cg->n; i++) {
        int r = mkdir_p(cg->dirs[i], 0755);
        if (r < 0)
            return error_set_errno(err, r, "cgroup: mkdir %s", cg->dirs[i]);
    }
    if (cg->version == 2)
        v2_enable_parent(cg->dirs[0]);
    return shim_cgroup_limit(cg, cpu, memory, pids, err);
}

int shim_cgroup_limit(shim_cgroup *cg, double cpu, uint64_t memory, uint64_t pids, error_rec *err) {
    if (cg->version == 2)
        return limits_v2(cg, cpu, memory, pids, err);
    return limits_v1(cg, cpu, memory, pids, err);
}

/* dir with its last component replaced by id (malloc'd), or NULL. */
static char *sibling(const char *dir, const char *id) {
    const char *slash = strrchr(dir, '/');
    size_t keep = slash ? (size_t)(slash - dir) + 1 : 0;
    char *s = malloc(keep + strlen(id) + 1);
    if (s) {
        memcpy(s, dir, keep);
        strcpy(s + keep, id);
    }
    return s;
}

int shim_cgroup_rename(shim_cgroup *cg, const char *id, error_rec *err) {
    char *to[SHIM_CGROUP_V1_MAX] = {0};
    size_t done = 0;
    int r = 0;
    for (size_t i = 0; i < cg->n && r == 0; i++)
        if (!(to[i] = sibling(cg->dirs[i], id)))
            r = error_set(err, -ENOMEM, "out of memory");
    while (r == 0 && done < cg->n) {
        if (rename(cg->dirs[done], to[done]) < 0)
            r = error_set_errno(err, negative_errno(), "cgroup: rename %s to %s", cg->dirs[done],
                                to[done]);
        else
            done++;
    }
    for (size_t i = 0; r < 0 && i < done; i++) /* put back the ones renamed */
        (void)rename(to[i], cg->dirs[i]);
    for (size_t i = 0; i < cg->n; i++) {
        if (r == 0) {
            free(cg->dirs[i]);
            cg->dirs[i] = to[i];
        } else {
            free(to[i]);
        }
    }
    return r;
}

int shim_cgroup_add_pid(shim_cgroup *cg, pid_t pid, error_rec *err) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", (int)pid);
    for (size_t i = 0; i < cg->n; i++) {
        int r = knob_write(cg->dirs[i], "cgroup.procs", buf, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int shim_cgroup_join_self(const shim_cgroup *cg, error_rec *err) {
    if (cg->version != 1)
        return error_set(err, -EOPNOTSUPP, "cgroup: a v2 process cannot join by itself");
    for (size_t i = 0; i < cg->n; i++) {
        int r = knob_write(cg->dirs[i], "tasks", "0", err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Signal every pid listed in dir/cgroup.procs; returns how many were listed (or -errno). */
static int signal_procs(const char *dir, int sig) {
    char path[2200];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    _cleanup_free_ char *s = NULL;
    int r = file_read_all(path, 1 << 22, &s, NULL);
    if (r < 0)
        return r == -ENOENT ? 0 : r;
    int n = 0;
    for (char *p = s; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 0) {
            kill((pid_t)pid, sig);
            n++;
        }
        p = end;
        while (*p == '\n')
            p++;
    }
    return n;
}

static void freezer_set(shim_cgroup *cg, bool frozen) {
    if (cg->version == 2) {
        knob_write(cg->dirs[0], "cgroup.freeze", frozen ? "1" : "0", NULL);
        return;
    }
    const char *fz = dir_of(cg, "freezer");
    if (fz)
        knob_write(fz, "freezer.state", frozen ? "FROZEN" : "THAWED", NULL);
}

int shim_cgroup_signal_all(shim_cgroup *cg, int sig) {
    return signal_procs(cg->version == 2 ? cg->dirs[0] : dir_of(cg, "pids"), sig);
}

int shim_cgroup_kill_all(shim_cgroup *cg) {
    const char *d = cg->version == 2 ? cg->dirs[0] : dir_of(cg, "pids");
    if (cg->version == 2)
        knob_write(d, "cgroup.kill", "1", NULL);
    for (int round = 0; round < 500; round++) {
        /* Freeze so nothing forks between reading the list and killing it. */
        freezer_set(cg, true);
        int n = signal_procs(d, SIGKILL);
        freezer_set(cg, false);
        if (n <= 0)
            return n;
        sleep_ms(round < 10 ? 1 : 10);
    }
    return -EBUSY;
}

int shim_cgroup_destroy(shim_cgroup *cg, error_rec *err) {
    int ret = shim_cgroup_kill_all(cg);
    cg->oom_fd = safe_close(cg->oom_fd); /* nothing of it held open while it goes */
    for (size_t i = 0; i < cg->n; i++) {
        int r = -EBUSY;
        for (int tries = 0; tries < 200; tries++) {
            if (rmdir(cg->dirs[i]) == 0 || errno == ENOENT) {
                r = 0;
                break;
            }
            r = -errno;
            if (r != -EBUSY)
                break;
            signal_procs(cg->dirs[i], SIGKILL);
            sleep_ms(10);
        }
        if (r < 0 && ret >= 0)
            ret = error_set_errno(err, r, "cgroup: rmdir %s", cg->dirs[i]);
    }
    return ret < 0 ? ret : 0;
}

/* Read twice per command (server.c): through a descriptor kept open, as a pread at 0 reads a
 * cgroup file afresh, which saves the path walk, the second read and the close of each time. */
int shim_cgroup_oom_kills(shim_cgroup *cg, uint64_t *ret) {
    if (cg->oom_fd < 0) {
        const char *dir = cg->version == 2 ? cg->dirs[0] : dir_of(cg, "memory");
        char path[2200];
        if (!dir)
            return -ENOENT;
        snprintf(path, sizeof(path), "%s/%s", dir,
                 cg->version == 2 ? "memory.events" : "memory.oom_control");
        cg->oom_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (cg->oom_fd < 0)
            return negative_errno();
    }
    char buf[1024];
    ssize_t n = pread(cg->oom_fd, buf, sizeof(buf) - 1, 0);
    if (n < 0)
        return negative_errno();
    buf[n] = 0;
    return key_value(buf, "oom_kill", ret);
}

int shim_cgroup_pids_denials(shim_cgroup *cg, uint64_t *ret) {
    return knob_read_key(cg->version == 2 ? cg->dirs[0] : dir_of(cg, "pids"), "pids.events", "max",
                         ret);
}

int shim_cgroup_stats_read(shim_cgroup *cg, shim_cgroup_stats *ret) {
    shim_cgroup_stats s = {0};
    if (cg->version == 2) {
        const char *d = cg->dirs[0];
        knob_read_key(d, "cpu.stat", "usage_usec", &s.cpu_usec);
        file_read_knob_u64(d, "memory.current", &s.mem_bytes);
        file_read_knob_u64(d, "memory.peak", &s.mem_peak_bytes);
        file_read_knob_u64(d, "pids.current", &s.pids);
    } else {
        const char *acct = dir_of(cg, "cpuacct"), *mem = dir_of(cg, "memory");
        uint64_t ns = 0;
        if (acct && file_read_knob_u64(acct, "cpuacct.usage", &ns) == 0)
            s.cpu_usec = ns / 1000;
        file_read_knob_u64(mem, "memory.usage_in_bytes", &s.mem_bytes);
        file_read_knob_u64(mem, "memory.max_usage_in_bytes", &s.mem_peak_bytes);
        file_read_knob_u64(dir_of(cg, "pids"), "pids.current", &s.pids);
    }
    shim_cgroup_oom_kills(cg, &s.oom_kills);
    *ret = s;
    return 0;
}

int shim_cgroup_oom_fd(shim_cgroup *cg) {
    char path[2200];
    if (cg->version == 2) {
        int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (fd < 0)
            return -errno;
        snprintf(path, sizeof(path), "%s/memory.events", cg->dirs[0]);
        if (inotify_add_watch(fd, path, IN_MODIFY) < 0) {
            int r = -errno;
            close(fd);
            return r;
        }
        return fd;
    }
    const char *mem = dir_of(cg, "memory");
    _cleanup_close_ int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    snprintf(path, sizeof(path), "%s/memory.oom_control", mem);
    _cleanup_close_ int ofd = open(path, O_RDONLY | O_CLOEXEC);
    if (efd < 0 || ofd < 0)
        return -errno;
    char line[64];
    snprintf(line, sizeof(line), "%d %d", efd, ofd);
    snprintf(path, sizeof(path), "%s/cgroup.event_control", mem);
    int r = file_write_str(path, line);
    if (r < 0)
        return r;
    return TAKE_FD(efd);
}

void shim_cgroup_oom_fd_drain(int fd) {
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}
