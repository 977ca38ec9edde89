/* The daemon's cgroup subtree: on cgroup v2 the daemon moves itself into <own>/daemon and gives
 * shims <own>/sandboxes (controllers enabled), using the delegated cgroup systemd gives it (or
 * finds itself in <unit>/daemon already, with systemd's DelegateSubgroup=daemon); with
 * --cgroup-parent NAME (or when it runs in the root cgroup) it uses /NAME instead, with the
 * root's controllers enabled for it. On v1 the shims get the parent name ("sandboxd" or
 * --cgroup-parent) in every controller, and the daemon keeps an empty cgroup of its own frozen
 * there (the freeze anchor, below). */
#include "sandboxd/core/cgroup.h"

#include "common/fdutil.h"
#include "common/log.h"
#include "common/shimproto.h"
#include "sandboxd/core/registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"

static int own_cgroup_v2(char *buf, size_t len) {
    _cleanup_free_ char *s = NULL;
    int r = file_read_all("/proc/self/cgroup", 65536, &s, NULL);
    if (r < 0)
        return r;
    char *p = strstr(s, "0::");
    if (!p)
        return -ENOENT;
    p += 3;
    p[strcspn(p, "\n")] = 0;
    snprintf(buf, len, "%s", p);
    return 0;
}

static void enable_controllers(const char *dir) {
    static const char *const ctl[] = {"+cpu", "+memory", "+pids", "+io"};
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
    for (size_t i = 0; i < ARRAY_SIZE(ctl); i++)
        file_write_str(path, ctl[i]); /* a controller the kernel lacks is not fatal */
}

static int setup_v2(sd_daemon *d, error_rec *err) {
    char own[PATH_MAX / 2] = "/", base[PATH_MAX], path[PATH_MAX + 32];
    own_cgroup_v2(own, sizeof(own));
    if (d->cfg.cgroup_parent || strcmp(own, "/") == 0) {
        snprintf(base, sizeof(base), CG_ROOT "/%s",
                 d->cfg.cgroup_parent ? d->cfg.cgroup_parent : "sandboxd");
        if (mkdir(base, 0755) < 0 && errno != EEXIST)
            return error_set_errno(err, negative_errno(), "mkdir %s", base);
        enable_controllers(CG_ROOT); /* base's own controllers come from the root's */
    } else {
        /* under systemd's DelegateSubgroup=daemon the daemon already runs in <unit>/daemon */
        size_t n = strlen(own);
        if (n > 7 && strcmp(own + n - 7, "/daemon") == 0)
            own[n - 7] = 0;
        snprintf(base, sizeof(base), CG_ROOT "%s", own);
        snprintf(path, sizeof(path), "%s/daemon", base);
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return error_set_errno(err, negative_errno(), "mkdir %s", path);
        char pid[32];
        snprintf(pid, sizeof(pid), "%d", getpid());
        snprintf(path, sizeof(path), "%s/daemon/cgroup.procs", base);
        int r = file_write_str(path, pid);
        if (r < 0)
            return error_set_errno(err, r, "move the daemon into %s", path);
    }
    enable_controllers(base);
    snprintf(path, sizeof(path), "%s/sandboxes", base);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return error_set_errno(err, negative_errno(), "mkdir %s", path);
    enable_controllers(path);
    d->cgroup_version = 2;
    snprintf(d->cgroup_parent, sizeof(d->cgroup_parent), "%s",
             path); /* absolute, as the shim wants */
    return 0;
}

/* Since Linux 6.1, v1's freezer turns a kernel static key on as a cgroup starts freezing while
 * none is, and off as the last one thaws; each switch rewrites kernel text on every CPU (2.75-3.05
 * ms of CPU per freeze and thaw of an empty cgroup on a 2-core VM, against 0.04-0.06 ms while
 * another cgroup stays frozen: docs/BENCHMARKS.md). Every sandbox's end freezes its cgroup
 * (shim_cgroup_kill_all), forks and commits freeze theirs; so while the daemon runs, an empty
 * cgroup FREEZE_ANCHOR<its pid> under the freezer parent stays frozen and keeps the key on. Before
 * 6.1 the freezer only counted (an atomic), and no anchor is made. Best effort: without it, only
 * slower. */
#define FREEZE_ANCHOR "freeze-anchor-"

static bool freezer_has_static_key(void) {
    struct utsname u;
    unsigned major, minor;
    if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
        return false;
    return major > 6 || (major == 6 && minor >= 1);
}

static void freeze_anchor_dir(const sd_daemon *d, char *buf, size_t len) {
    snprintf(buf, len, CG_ROOT "/freezer/%s/" FREEZE_ANCHOR "%d", d->cgroup_parent, (int)getpid());
}

static void freeze_anchor_make(const sd_daemon *d) {
    char dir[PATH_MAX], file[PATH_MAX + 16];
    int r;
    if (!freezer_has_static_key() || access(CG_ROOT "/freezer/cgroup.procs", F_OK) < 0)
        return; /* nothing to keep on; or no v1 freezer, where mkdir_p would make plain dirs */
    freeze_anchor_dir(d, dir, sizeof(dir));
    snprintf(file, sizeof(file), "%s/freezer.state", dir);
    if ((r = mkdir_p(dir, 0755)) < 0 || (r = file_write_str(file, "FROZEN")) < 0)
        log_debug("no freeze anchor at %s (%s): sandboxes' freezes cost more", dir, strerror(-r));
}

/* Thawed first: an rmdir alone would switch the key off only once the kernel offlines the cgroup
 * (after an RCU grace period, from a workqueue). */
static void freeze_anchor_remove(const char *dir) {
    char file[PATH_MAX + 16];
    snprintf(file, sizeof(file), "%s/freezer.state", dir);
    (void)file_write_str(file, "THAWED");
    (void)rmdir(dir);
}

int sd_cgroup_setup(sd_daemon *d, error_rec *err) {
    if (access(CG_ROOT "/cgroup.controllers", F_OK) == 0)
        return setup_v2(d, err);
    d->cgroup_version = 1;
    snprintf(d->cgroup_parent, sizeof(d->cgroup_parent), "%s",
             d->cfg.cgroup_parent ? d->cfg.cgroup_parent : "sandboxd");
    freeze_anchor_make(d);
    return 0;
}

/* The pid in name when it is <prefix><pid>, else 0. */
static long named_pid(const char *name, const char *prefix) {
    size_t pl = strlen(prefix);
    char *end;
    if (strncmp(name, prefix, pl) != 0)
        return 0;
    long pid = strtol(name + pl, &end, 10);
    return *end || pid < 0 ? 0 : pid;
}

/* rmdir parent/spare-<pid> (with anchors, parent/freeze-anchor-<pid> too) for every such pid that
 * no longer runs (an empty one only). A stale anchor needs no thaw first: this daemon's own,
 * made before the first sweep, keeps the key on. */
static void remove_stale_in(const char *parent, bool anchors) {
    DIR *dir = opendir(parent);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        long pid = named_pid(de->d_name, SHIMPROTO_SPARE_CGROUP);
        if (pid == 0 && anchors)
            pid = named_pid(de->d_name, FREEZE_ANCHOR); /* left by a daemon that was killed */
        if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", parent, de->d_name);
        (void)rmdir(path); /* not empty: its init is still ending; next time */
    }
    closedir(dir);
}

void sd_cgroup_remove_stale(const sd_daemon *d) {
    if (d->cgroup_version == 2) {
        remove_stale_in(d->cgroup_parent, false);
        return;
    }
    DIR *root = opendir(CG_ROOT);
    if (!root)
        return;
    struct dirent *de;
    while ((de = readdir(root))) {
        char path[PATH_MAX];
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), CG_ROOT "/%s/%s", de->d_name, d->cgroup_parent);
        remove_stale_in(path, strcmp(de->d_name, "freezer") == 0);
    }
    closedir(root);
}

void sd_cgroup_release(const sd_daemon *d) {
    if (d->cgroup_version != 1)
        return; /* v2: the parent is the daemon's own delegated cgroup, owned by systemd */
    char anchor[PATH_MAX];
    freeze_anchor_dir(d, anchor, sizeof(anchor));
    freeze_anchor_remove(anchor);
    DIR *root = opendir(CG_ROOT);
    if (!root)
        return;
    struct dirent *de;
    while ((de = readdir(root))) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), CG_ROOT "/%s/%s", de->d_name, d->cgroup_parent);
        (void)rmdir(path); /* fails, as it should, while sandboxes still live in it */
    }
    closedir(root);
}

/* The uid, real, effective, saved or filesystem, that /proc/<pid>/status names in [lo, lo + n)
 * (a zombie leader's too: its threads may live on): 0 and *ret_uid, or -ENOENT (none, or gone). */
static int status_uid_in(const char *pid, uid_t lo, uid_t n, uid_t *ret_uid) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (len <= 0)
        return -ENOENT; /* gone */
    buf[len] = 0;
    const char *u = strstr(buf, "\nUid:");
    unsigned ids[4];
    if (!u || sscanf(u + 5, "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) != 4)
        return -ENOENT;
    for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
        if (ids[i] >= lo && ids[i] - lo < n) {
            *ret_uid = ids[i];
            return 0;
        }
    return -ENOENT;
}

/* Whether /proc/<pid>/cgroup puts it under the daemon's parent (a line ":<rel>/<name>..."), and
 * then the cgroup right under the parent in name (the first such line's). */
static bool in_our_tree(const char *pid, const char *rel, char *name, size_t len) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
    _cleanup_free_ char *s = NULL;
    if (file_read_all(path, 65536, &s, NULL) < 0)
        return false; /* gone */
    size_t rl = strlen(rel);
    for (const char *p = strchr(s, ':'); p; p = strchr(p + 1, ':'))
        if (strncmp(p + 1, rel, rl) == 0 && p[1 + rl] == '/') {
            const char *c = p + 2 + rl;
            snprintf(name, len, "%.*s", (int)strcspn(c, "/\n"), c);
            return true;
        }
    return false;
}

int sd_cgroup_each_uid_user(const sd_daemon *d, uid_t lo, uid_t n, sd_cgroup_uid_user_fn fn,
                            void *ud) {
    char rel[PATH_MAX], name[256];
    const char *p = d->cgroup_parent;
    if (d->cgroup_version == 2) /* as /proc/<pid>/cgroup names it: below the cgroup root */
        snprintf(rel, sizeof(rel), "%s",
                 strncmp(p, CG_ROOT "/", sizeof(CG_ROOT)) == 0 ? p + strlen(CG_ROOT) : p);
    else
        snprintf(rel, sizeof(rel), "/%s", d->cgroup_parent);
    DIR *dir = opendir("/proc");
    if (!dir)
        return negative_errno();
    struct dirent *de;
    uid_t uid;
    while ((de = readdir(dir)))
        if (de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
            status_uid_in(de->d_name, lo, n, &uid) == 0 &&
            in_our_tree(de->d_name, rel, name, sizeof(name)) && fn(ud, uid, name))
            break;
    closedir(dir);
    return 0;
}

static bool found(void *ud, uid_t uid, const char *name) {
    (void)uid, (void)name;
    *(bool *)ud = true;
    return true; /* one is enough */
}

bool sd_cgroup_uids_in_use(const sd_daemon *d, uid_t lo, uid_t n) {
    bool used = false;
    if (sd_cgroup_each_uid_user(d, lo, n, found, &used) < 0)
        return true; /* cannot tell: in use */
    return used;
}

bool sd_cgroup_sandbox_left(const sd_daemon *d, const char *id) {
    static const char *const v1[] = {"memory", "pids"}; /* every sandbox process is in both */
    char path[PATH_MAX];
    for (size_t i = 0; i < (d->cgroup_version == 2 ? 1 : ARRAY_SIZE(v1)); i++) {
        if (d->cgroup_version == 2)
            snprintf(path, sizeof(path), "%s/%s", d->cgroup_parent, id);
        else
            snprintf(path, sizeof(path), CG_ROOT "/%s/%s/%s", v1[i], d->cgroup_parent, id);
        if (access(path, F_OK) == 0 || errno != ENOENT)
            return true; /* (cannot tell: left) */
    }
    return false;
}

bool sd_cgroup_sandbox_remove(const sd_daemon *d, const char *id) {
    char path[PATH_MAX];
    if (d->cgroup_version == 2) {
        snprintf(path, sizeof(path), "%s/%s", d->cgroup_parent, id);
        return rmdir(path) == 0 || errno == ENOENT;
    }
    DIR *root = opendir(CG_ROOT);
    if (!root)
        return false;
    bool gone = true;
    struct dirent *de;
    while ((de = readdir(root))) /* each controller's (a co-mounted one's link: ENOENT then) */
        if (de->d_name[0] != '.') {
            snprintf(path, sizeof(path), CG_ROOT "/%s/%s/%s", de->d_name, d->cgroup_parent, id);
            gone &= rmdir(path) == 0 || errno == ENOENT || errno == ENOTDIR;
        }
    closedir(root);
    return gone;
}

void sd_cgroup_memcg_dir(const sd_daemon *d, const char *id, char *buf, size_t len) {
    if (d->cgroup_version == 2)
        snprintf(buf, len, "%s/%s", d->cgroup_parent, id);
    else
        snprintf(buf, len, "/sys/fs/cgroup/memory/%s/%s", d->cgroup_parent, id);
}

int sd_cgroup_freeze_hold(sd_daemon *d, const char *id, bool hold) {
    sd_sandbox *sb = sd_registry_find(d, id);
    if (sb && hold && sb->freeze_holds++ > 0)
        return 0; /* frozen already, for another copy */
    if (sb && !hold && sb->freeze_holds > 0 && --sb->freeze_holds > 0)
        return 0; /* another copy still runs */
    return sd_cgroup_freeze(d, id, hold);
}

int sd_cgroup_freeze(const sd_daemon *d, const char *id, bool frozen) {
    char path[PATH_MAX + 64];
    const char *file = d->cgroup_version == 2 ? "cgroup.freeze" : "freezer.state";
    const char *val = d->cgroup_version == 2 ? (frozen ? "1" : "0") : frozen ? "FROZEN" : "THAWED";
    if (d->cgroup_version == 2)
        snprintf(path, sizeof(path), "%s/%s/%s", d->cgroup_parent, id, file);
    else
        snprintf(path, sizeof(path), "/sys/fs/cgroup/freezer/%s/%s/%s", d->cgroup_parent, id, file);
    return file_write_str(path, val);
}
