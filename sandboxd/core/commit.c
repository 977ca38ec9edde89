/* The commit engine (core/commit.h): a running sandbox of a store image becomes a new image of
 * that image's layers plus one new layer, its writable layer. The sandbox is frozen (cgroup
 * freezer, best effort) while a files worker copies, with `cp -a --sparse=always`, the
 * overlay's upper directory (which init keeps open on SHIM_UPPER_FD: /proc/<init>/fd/N; a
 * pausable sandbox's shim: shim/pause.h) and the
 * sandbox's /workspace and /tmp (through /proc/<init>/root, as a fork does) into a directory
 * under the store's tmp/; then it is thawed and a second worker makes the copy a store layer:
 * owners shifted back from the sandbox's uid range to the image's own ids (each inode once,
 * whatever its number of names: cp -a keeps hard links), overlay whiteouts
 * (0/0 character devices: the store's deletions, image_archive.c) and opaque markers kept, every
 * other trusted.overlay.* attribute dropped, other devices, FIFOs and sockets left out, and a
 * setuid/setgid file refused (or its bits cleared with "setuid":"strip", as an import). The loop
 * thread then moves it into layers/ and writes the image (images.c sd_images_add_commit). */
#include "sandboxd/core/commit.h"

#include "common/fdutil.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "policy/image_name.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/files.h"
#include "sandboxd/core/images.h"
#include "sandboxd/core/registry.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

struct sd_commit {
    sd_daemon *d;
    sd_commit *next; /* d->commits */
    sd_commit_done_fn done;
    void *ud;
    char name[POLICY_IMAGE_NAME_MAX], base[POLICY_IMAGE_NAME_MAX], sb_id[64];
    int init_pid, shim_pid;
    uint32_t uid_base;
    bool strip, frozen, stopping;
    bool pausable; /* its shim holds the upper directory, whose marks are user.overlay.* */
    char work[PATH_MAX], layer[PATH_MAX + 16];
    uint64_t t_freeze, freeze_ms, size;
    sd_files_worker *worker;
};

static void freeze(sd_commit *c, bool frozen) {
    if (sd_cgroup_freeze_hold(c->d, c->sb_id, frozen) < 0)
        log_debug("commit: cannot %s sandbox=%s (copying without a freeze)",
                  frozen ? "freeze" : "thaw", c->sb_id);
    c->frozen = frozen;
}

static void commit_free(sd_commit *c) {
    for (sd_commit **pp = &c->d->commits; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    if (c->work[0])
        rm_rf(c->work);
    free(c);
}

void sd_commit_forget(sd_commit *c) {
    c->done = NULL;
}

static void finish(sd_commit *c, const error_rec *err) {
    if (err)
        log_warn("commit failed sandbox=%s name=%s error=\"%s\"", c->sb_id, c->name, err->message);
    if (c->done)
        c->done(c->ud, err, err ? NULL : sd_images_find(c->d, c->name), c->freeze_ms);
    commit_free(c);
}

/* Run args (a host tool) and wait for it; it dies with the worker. */
static int run_tool(char **args, error_rec *err) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the worker died before the line above */
            _exit(127);
        execvpe(args[0], args, (char **)spec_host_env);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return error_set_errno(err, negative_errno(), "cannot run %s", args[0]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EIO, "copying the sandbox's files failed (%s status %d)", args[0],
                         st);
    return 0;
}

/* Worker 1 (the sandbox frozen): the upper directory, then /workspace and /tmp over its empty
 * mount points. */
static int copy_run(void *ud, error_rec *err) {
    sd_commit *c = ud;
    char upper[64], ws[64], tmp[64], dst[PATH_MAX + 32];
    snprintf(upper, sizeof(upper), "/proc/%d/fd/%d/.", c->pausable ? c->shim_pid : c->init_pid,
             SHIM_UPPER_FD);
    snprintf(ws, sizeof(ws), "/proc/%d/root/workspace", c->init_pid);
    snprintf(tmp, sizeof(tmp), "/proc/%d/root/tmp", c->init_pid);
    snprintf(dst, sizeof(dst), "%s/", c->layer);
    char *cp1[] = {"cp", "-a", "-x", "--sparse=always", "--", upper, dst, NULL};
    /* -x: a volume mounted under /workspace or /tmp stays out of the image */
    char *cp2[] = {"cp", "-a", "-x", "--sparse=always", "--", ws, tmp, dst, NULL};
    int r = run_tool(cp1, err);
    if (r >= 0)
        r = run_tool(cp2, err);
    struct statvfs fs;
    if (r < 0 && statvfs(c->layer, &fs) == 0 && fs.f_bavail * fs.f_frsize < (1u << 20))
        return error_set(err, -EDQUOT, "commit: the image store's disk is full");
    return r;
}

/* ---- worker 2: the copy becomes a store layer ---- */

static sd_commit *fix_c; /* nftw has no user pointer (the worker is a process of its own) */
static error_rec *fix_err;
static const char *fix_root;

/* The inodes of more than one name met so far (cp -a keeps hard links): each is fixed once, at
 * its first name; unshifting its owner twice would make it nobody's, its size count twice.
 * A tsearch(3) tree of (dev, ino), freed after the walk. */
typedef struct {
    dev_t dev;
    ino_t ino;
} inode_key;
static void *seen;

static int inode_cmp(const void *a, const void *b) {
    const inode_key *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* 1: another name of st's inode came first; 0: the first, now remembered; -ENOMEM. */
static int seen_before(const struct stat *st) {
    inode_key *k = malloc(sizeof(*k));
    if (!k)
        return -ENOMEM;
    *k = (inode_key){st->st_dev, st->st_ino};
    inode_key **found = tsearch(k, &seen, inode_cmp);
    if (found && *found == k)
        return 0;
    free(k);
    return found ? 1 : -ENOMEM;
}

static uid_t unshift(uint32_t id) {
    uint32_t base = fix_c->uid_base;
    return id >= base && id - base < SHIM_UID_RANGE ? id - base : 65534;
}

/* The names of path's attributes (*ret: malloc'd, *ret_len bytes), sized by asking first. */
static int list_xattrs(const char *path, char **ret, size_t *ret_len) {
    for (int tries = 0; tries < 8; tries++) {
        ssize_t n = llistxattr(path, NULL, 0);
        if (n < 0)
            return negative_errno();
        char *names = malloc((size_t)n + 1);
        if (!names)
            return -ENOMEM;
        ssize_t m = n ? llistxattr(path, names, (size_t)n) : 0;
        if (m >= 0) {
            *ret = names;
            *ret_len = (size_t)m;
            return 0;
        }
        int r = negative_errno();
        free(names);
        if (r != -ERANGE) /* ERANGE: the list grew since the size was asked */
            return r;
    }
    return -ERANGE;
}

/* The overlay's own attributes: trusted.overlay.opaque kept (a pausable sandbox's overlay
 * keeps it as user.overlay.opaque, shim/rootfs.c: made trusted.*, as the store's layers have
 * it; anywhere else user.* attributes are the sandbox's own), every other one dropped. A list
 * that cannot be read fails the commit: its overlay attributes would stay in the layer. */
static int drop_overlay_xattrs(const char *path, const char *rel) {
    _cleanup_free_ char *names = NULL;
    size_t n = 0;
    int r = list_xattrs(path, &names, &n);
    if (r == -EOPNOTSUPP) /* the store's file system has none, so none were copied */
        return 0;
    if (r < 0)
        return error_set_errno(fix_err, r, "commit: %s: cannot list its attributes", rel);
    for (size_t o = 0; o < n; o += strlen(names + o) + 1) {
        const char *a = names + o;
        if (fix_c->pausable && strcmp(a, "user.overlay.opaque") == 0 &&
            lsetxattr(path, "trusted.overlay.opaque", "y", 1, 0) < 0)
            return error_set_errno(fix_err, negative_errno(), "commit: %s: set %s", rel,
                                   "trusted.overlay.opaque");
        if (((strncmp(a, "trusted.overlay.", 16) == 0 && strcmp(a, "trusted.overlay.opaque")) ||
             (fix_c->pausable && strncmp(a, "user.overlay.", 13) == 0)) &&
            lremovexattr(path, a) < 0 && errno != ENODATA)
            return error_set_errno(fix_err, negative_errno(), "commit: %s: remove %s", rel, a);
    }
    return 0;
}

static int fix_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)flag, (void)ftw;
    const char *rel = path + strlen(fix_root);
    rel = *rel ? rel : "/";
    mode_t t = st->st_mode & S_IFMT;
    if (t == S_IFCHR && st->st_rdev == makedev(0, 0)) { /* a whiteout: a deletion */
        (void)!lchown(path, 0, 0);
        return 0;
    }
    if (t == S_IFCHR || t == S_IFBLK || t == S_IFIFO || t == S_IFSOCK) {
        if (unlink(path) < 0)
            return error_set_errno(fix_err, negative_errno(), "commit: remove %s", rel), 1;
        return 0;
    }
    int r = t != S_IFDIR && st->st_nlink > 1 ? seen_before(st) : 0;
    if (r < 0)
        return error_set(fix_err, r, "commit: out of memory"), 1;
    if (r > 0) /* another name of an inode fixed at its first */
        return 0;
    mode_t perm = st->st_mode & 07777;
    if (t == S_IFDIR)
        perm &= ~(mode_t)S_ISUID; /* setgid on a directory only passes its group on */
    else if ((perm & (S_ISUID | S_ISGID)) && !fix_c->strip)
        return error_set(fix_err, -EINVAL,
                         "commit: %s: setuid/setgid files are not allowed (commit with "
                         "\"setuid\":\"strip\" to clear the bits)",
                         rel),
               1;
    else
        perm &= ~(mode_t)(S_ISUID | S_ISGID);
    if (lchown(path, unshift(st->st_uid), unshift(st->st_gid)) < 0 ||
        (t != S_IFLNK && chmod(path, perm) < 0))
        return error_set_errno(fix_err, negative_errno(), "commit: set %s", rel), 1;
    if (t != S_IFLNK && drop_overlay_xattrs(path, rel) < 0)
        return 1;
    if (t == S_IFREG)
        fix_c->size += (uint64_t)st->st_blocks * 512;
    return 0;
}

static int fix_run(void *ud, error_rec *err) {
    fix_c = ud;
    fix_err = err;
    fix_root = fix_c->layer;
    int r = nftw(fix_c->layer, fix_one, 64, FTW_PHYS | FTW_MOUNT);
    int walk_errno = r < 0 ? negative_errno() : 0;
    tdestroy(seen, free);
    seen = NULL;
    if (r < 0)
        return error_set_errno(err, walk_errno, "commit: walk the copy");
    if (r > 0)
        return err->code;
    /* the size travels back through the record's message */
    snprintf(err->message, sizeof(err->message), "%llu", (unsigned long long)fix_c->size);
    return 0;
}

static void fix_done(void *ud, const error_rec *e) {
    sd_commit *c = ud;
    c->worker = NULL;
    if (e->code < 0 || c->stopping) {
        error_rec err = *e;
        if (c->stopping)
            error_set(&err, -EIO, "commit: the daemon stopped during the commit");
        finish(c, &err);
        return;
    }
    uint64_t size = strtoull(e->message, NULL, 10);
    unsigned char rnd[32];
    char hex[IMG_DIGEST_HEX + 1];
    error_rec err = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        error_set(&err, -EIO, "commit: no random bytes for the layer's name");
        finish(c, &err);
        return;
    }
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    if (sd_images_add_commit(c->d, c->name, c->base, c->layer, hex, size, c->sb_id, &err) < 0) {
        finish(c, &err);
        return;
    }
    log_info("commit done sandbox=%s name=%s freeze_ms=%llu bytes=%llu", c->sb_id, c->name,
             (unsigned long long)c->freeze_ms, (unsigned long long)size);
    finish(c, NULL);
}

static void copy_done(void *ud, const error_rec *e) {
    sd_commit *c = ud;
    c->worker = NULL;
    if (c->frozen)
        freeze(c, false);
    c->freeze_ms = (now_mono_us() - c->t_freeze) / 1000;
    error_rec err = *e;
    if (c->stopping)
        error_set(&err, -EIO, "commit: the daemon stopped during the copy");
    if (err.code >= 0 && sd_files_worker_start(c->d->loop, NULL, (const int[]){STDERR_FILENO}, 1,
                                               fix_run, c, fix_done, c, &c->worker, &err) >= 0)
        return;
    if (err.code == -ENOSPC || err.code == -EDQUOT)
        err.code = -EDQUOT;
    else if (err.code != -EINVAL)
        err.code = -EIO;
    finish(c, &err);
}

static int admit(sd_sandbox *sb, const char *raw, sd_commit *c, error_rec *err) {
    sd_daemon *d = sb->d;
    int r = policy_image_name(raw, "name", c->name, err);
    if (r < 0)
        return r;
    if (strcmp(c->name, "host:latest") == 0 || strcmp(c->name, "host") == 0)
        return error_set(err, -EINVAL, "name: host is not a name an image can take");
    if (sb->state != SD_RUNNING || sb->pausing)
        return error_set(err, -EBUSY, "sandbox %s is %s: only a running sandbox can be committed",
                         sb->id,
                         sb->state == SD_ENDED    ? "ended"
                         : sb->state == SD_PAUSED ? "paused (resume it first)"
                         : sb->pausing            ? "pausing"
                                                  : "still starting");
    for (sd_commit *o = d->commits; o; o = o->next)
        if (strcmp(o->sb_id, sb->id) == 0) /* one freeze at a time: its thaw would end ours */
            return error_set(err, -EBUSY, "sandbox %s is being committed as %s", sb->id, o->name);
    sd_image *base = sd_images_find(d, sb->spec.image);
    if (!base || base->dir_path)
        return error_set(err, -EBUSY,
                         "sandbox %s runs image %s: only a sandbox of a store image (imported "
                         "or committed) can be committed",
                         sb->id, sb->spec.image);
    bool taken = sd_images_find(d, c->name) != NULL;
    for (sd_commit *o = d->commits; o && !taken; o = o->next)
        taken = strcmp(o->name, c->name) == 0;
    for (struct img_job *j = d->images->jobs; j && !taken; j = j->next)
        taken = strcmp(j->name, c->name) == 0;
    if (taken)
        return error_set(err, -EEXIST, "name: image %s already exists or is being made", c->name);
    snprintf(c->base, sizeof(c->base), "%s", sb->spec.image);
    snprintf(c->sb_id, sizeof(c->sb_id), "%s", sb->id);
    c->init_pid = sb->init_pid;
    c->shim_pid = sb->shim_pid;
    c->pausable = sb->spec.pausable; /* shim/pause.h, shim/rootfs.c shim_rootfs_overlay */
    c->uid_base = (uint32_t)sd_uid_base(sb->uid_slot);
    return 0;
}

int sd_commit_start(sd_sandbox *sb, const char *name, bool strip_setuid, sd_commit_done_fn done,
                    void *ud, sd_commit **ret, error_rec *err) {
    sd_daemon *d = sb->d;
    sd_commit *c = calloc(1, sizeof(*c));
    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    *c = (sd_commit){.d = d, .strip = strip_setuid};
    int r = admit(sb, name, c, err);
    if (r < 0) {
        free(c);
        return r;
    }
    c->next = d->commits;
    d->commits = c;
    snprintf(c->work, sizeof(c->work), "%s/tmp/commit-XXXXXX", d->images->root);
    if (!mkdtemp(c->work)) {
        r = error_set_errno(err, negative_errno(), "commit: mkdir %s", c->work);
        c->work[0] = 0;
        commit_free(c);
        return r;
    }
    snprintf(c->layer, sizeof(c->layer), "%s/layer", c->work);
    if (mkdir(c->layer, 0755) < 0) {
        r = error_set_errno(err, negative_errno(), "commit: mkdir %s", c->layer);
        commit_free(c);
        return r;
    }
    c->t_freeze = now_mono_us();
    freeze(c, true);
    if ((r = sd_files_worker_start(d->loop, NULL, (const int[]){STDERR_FILENO}, 1, copy_run, c,
                                   copy_done, c, &c->worker, err)) < 0) {
        freeze(c, false);
        commit_free(c);
        return r;
    }
    c->done = done;
    c->ud = ud;
    *ret = c;
    log_info("commit started sandbox=%s name=%s", c->sb_id, c->name);
    return 0;
}

void sd_commit_stop(sd_daemon *d) {
    for (sd_commit *c = d->commits; c; c = c->next) {
        c->stopping = true;
        if (c->worker)
            sd_files_worker_cancel(c->worker); /* cp dies with it (PR_SET_PDEATHSIG) */
        if (c->frozen)
            freeze(c, false);
    }
}
