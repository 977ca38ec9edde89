/* Seeding a fork's /workspace and /tmp from a snapshot directory (see seed.h). */
#include "shim/seed.h"

#include "common/fdutil.h"
#include "common/safepath.h"
#include "shim/layers.h"

#include <sys/mount.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEED_MAX_DEPTH 4096 /* as the files API (a descriptor pair per level) */

typedef struct seed_ctx {
    uint32_t from, to;   /* uid bases */
    bool stop_at_mounts; /* a mount's root is copied as an empty stub (shim_seed_copy_tree) */
    error_rec *err;
} seed_ctx;

/* Whether sfd/name is the root of a mount (its stub only is copied). */
static bool mount_root(int sfd, const char *name) {
    struct statx stx;
    return statx(sfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) == 0 &&
           (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
           (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static uid_t shift(const seed_ctx *c, uint32_t id) {
    if (id >= c->from && id - c->from < SHIM_UID_RANGE)
        return c->to + (id - c->from);
    return c->to + 65534; /* unmapped in the source: nobody */
}

static int copy_dir(seed_ctx *c, int sfd, int dfd, int depth);

static int copy_entry(seed_ctx *c, int sfd, int dfd, const char *name, int depth) {
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return error_set_errno(c->err, negative_errno(), "seed: stat %s", name);
    uid_t u = shift(c, st.st_uid), g = shift(c, st.st_gid);
    mode_t mode = st.st_mode & 07777;
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    int r = 0;
    if (c->stop_at_mounts && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
        mount_root(sfd, name)) { /* the stub: an empty directory or file */
        if ((S_ISDIR(st.st_mode) ? mkdirat(dfd, name, 0700)
                                 : mknodat(dfd, name, S_IFREG | 0600, 0)) < 0 ||
            fchownat(dfd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0 || fchmodat(dfd, name, mode, 0) < 0)
            return error_set_errno(c->err, negative_errno(), "copy: the mount point %s", name);
        return 0;
    }
    if (S_ISDIR(st.st_mode)) {
        if (mkdirat(dfd, name, 0700) < 0)
            return error_set_errno(c->err, negative_errno(), "seed: mkdir %s", name);
        _cleanup_close_ int s2 = -1, d2 = -1;
        if ((r = safepath_dir_at(sfd, name, &s2)) < 0 || (r = safepath_dir_at(dfd, name, &d2)) < 0)
            return error_set_errno(c->err, r, "seed: open %s", name);
        if ((r = copy_dir(c, s2, d2, depth + 1)) < 0)
            return r;
        if (fchown(d2, u, g) < 0 || fchmod(d2, mode) < 0 || futimens(d2, ts) < 0)
            return error_set_errno(c->err, negative_errno(), "seed: set %s", name);
    } else if (S_ISREG(st.st_mode)) {
        /* O_PATH first: what is opened for reading is a regular file, checked, never a FIFO */
        _cleanup_close_ int node = -1, in = -1;
        struct stat ist;
        if ((r = safepath_node(sfd, name, &node, &ist)) < 0 || !S_ISREG(ist.st_mode))
            return error_set_errno(c->err, r < 0 ? r : -EPERM, "seed: open %s", name);
        if ((r = safepath_reopen(node, O_RDONLY | O_NONBLOCK, &in)) < 0 || fstat(in, &ist) < 0 ||
            !S_ISREG(ist.st_mode))
            return error_set_errno(c->err, r < 0 ? r : -EPERM, "seed: open %s", name);
        _cleanup_close_ int out =
            openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
            return error_set_errno(c->err, negative_errno(), "seed: open %s", name);
        /* holes stay holes: a sparse file costs the fork only its data */
        if ((r = safepath_copy_sparse(in, out, (uint64_t)ist.st_size)) < 0)
            return error_set_errno(c->err, r, "seed: copy %s", name);
        if (fchown(out, u, g) < 0 || fchmod(out, mode) < 0 || futimens(out, ts) < 0)
            return error_set_errno(c->err, negative_errno(), "seed: set %s", name);
    } else if (S_ISLNK(st.st_mode)) {
        _cleanup_free_ char *target = malloc(PATH_MAX); /* not on the stack: deep recursion */
        if (!target)
            return error_set(c->err, -ENOMEM, "seed: out of memory");
        ssize_t n = readlinkat(sfd, name, target, PATH_MAX - 1);
        if (n < 0)
            return error_set_errno(c->err, negative_errno(), "seed: readlink %s", name);
        target[n] = 0;
        if (symlinkat(target, dfd, name) < 0 || fchownat(dfd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
            return error_set_errno(c->err, negative_errno(), "seed: symlink %s", name);
    } /* sockets, fifos, devices: not carried over */
    return 0;
}

static int copy_dir(seed_ctx *c, int sfd, int dfd, int depth) {
    if (depth > SEED_MAX_DEPTH)
        return error_set(c->err, -ELOOP, "seed: directories nested deeper than %d", SEED_MAX_DEPTH);
    int fd = dup(sfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int r = negative_errno();
        if (fd >= 0)
            close(fd);
        return error_set_errno(c->err, r, "seed: read a directory");
    }
    struct dirent *de;
    int r = 0;
    while (r >= 0 && (de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            r = copy_entry(c, sfd, dfd, de->d_name, depth);
    closedir(d);
    return r;
}

int shim_seed_copy(const shim_spec *spec, const char *name, const char *dst_dir, error_rec *err) {
    if (!spec->seed_path)
        return 0;
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "%s/%s", spec->seed_path, name);
    _cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0 && errno == ENOENT)
        return 0;
    _cleanup_close_ int dfd = open(dst_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0 || dfd < 0)
        return error_set_errno(err, negative_errno(), "seed: open %s", sfd < 0 ? src : dst_dir);
    seed_ctx c = {.from = spec->seed_uid_base, .to = spec->uid_base, .err = err};
    return copy_dir(&c, sfd, dfd, 0);
}

int shim_seed_copy_tree(int sfd, int dfd, uint32_t uid_base, error_rec *err) {
    seed_ctx c = {.from = uid_base, .to = uid_base, .stop_at_mounts = true, .err = err};
    return copy_dir(&c, sfd, dfd, 0);
}

/* ---- sharing: the snapshot as the read-only lower layer of an overlay ---- */

/* staging/seed/<name>/{lower,upper,work}; upper takes dst's owner and mode (the merged root
 * directory shows the upper's). */
static int share_dirs(const char *staging, const char *name, const char *dst, char lower[PATH_MAX],
                      char upper[PATH_MAX], char work[PATH_MAX], error_rec *err) {
    struct stat st;
    char p[PATH_MAX];
    if (stat(dst, &st) < 0)
        return error_set_errno(err, negative_errno(), "seed: stat %s", dst);
    snprintf(p, sizeof(p), "%s/seed", staging);
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return error_set_errno(err, negative_errno(), "seed: mkdir %s", p);
    snprintf(p, sizeof(p), "%s/seed/%s", staging, name);
    snprintf(lower, PATH_MAX, "%s/lower", p);
    snprintf(upper, PATH_MAX, "%s/upper", p);
    snprintf(work, PATH_MAX, "%s/work", p);
    if (mkdir(p, 0700) < 0 || mkdir(lower, 0700) < 0 || mkdir(upper, 0700) < 0 ||
        mkdir(work, 0700) < 0 || chown(upper, st.st_uid, st.st_gid) < 0 ||
        chmod(upper, st.st_mode & 07777) < 0)
        return error_set_errno(err, negative_errno(), "seed: prepare %s", p);
    return 0;
}

/* 1: dst is an overlay over the id-mapped snapshot of name; 0: nothing to seed; -EOPNOTSUPP:
 * not possible here (nothing is left mounted); else a failure. */
static int share_one(const shim_spec *spec, const char *name, const char *staging, const char *dst,
                     int userns_fd, error_rec *err) {
    char src[PATH_MAX], lower[PATH_MAX], upper[PATH_MAX], work[PATH_MAX], opts[3 * PATH_MAX + 64];
    snprintf(src, sizeof(src), "%s/%s", spec->seed_path, name);
    struct stat st;
    if (lstat(src, &st) < 0 && errno == ENOENT)
        return 0;
    if (userns_fd < 0)
        return -EOPNOTSUPP;
    int r = share_dirs(staging, name, dst, lower, upper, work, err);
    if (r < 0)
        return r;
    error_rec ignored = {0};
    if (shim_layer_bind_idmapped(src, lower, userns_fd, &ignored) < 0)
        return -EOPNOTSUPP; /* no id-mapped mounts for this file system or kernel */
    /* redirect_dir: a directory of the snapshot can be renamed (no EXDEV) */
    snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=on", lower, upper,
             work);
    if (mount("sbx-seed", dst, "overlay", MS_NOSUID | MS_NODEV, opts) < 0) {
        r = negative_errno();
        umount2(lower, MNT_DETACH);
        if (r == -EINVAL || r == -EOPNOTSUPP || r == -ENODEV)
            return -EOPNOTSUPP;
        return error_set_errno(err, r, "seed: mount the overlay on %s", dst);
    }
    umount2(lower, MNT_DETACH); /* the overlay holds its own reference to the layer */
    return 1;
}

/* A pausable init's seed (common/spec.h layer_mounts: id-mapped by the shim, its owners
 * already the sandbox's) is copied: /workspace and /tmp stay plain directories, which a pause
 * saves and a restore puts back as they are. */
static int copy_sent(const shim_spec *spec, const char *staging, const char *data_dir,
                     error_rec *err) {
    static const char *const names[] = {"workspace", "tmp"};
    size_t base = SHIM_SEED_MOUNTS_AT(spec);
    char src[PATH_MAX], dst[PATH_MAX];
    snprintf(src, sizeof(src), "%s/seed-sent", staging);
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(names) && r >= 0; i++) {
        int fd = spec->layer_mounts[base + i];
        spec->layer_mounts[base + i] = -1;
        if (fd < 0)
            continue;
        snprintf(dst, sizeof(dst), "%s/%s", data_dir, names[i]);
        r = mkdir(src, 0700) < 0 ? negative_errno() : 0;
        if (r == 0 && move_mount(fd, "", AT_FDCWD, src, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            r = negative_errno(), rmdir(src);
        close(fd);
        if (r < 0)
            return error_set_errno(err, r, "seed: mount the %s sent", names[i]);
        _cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        seed_ctx c = {.from = spec->uid_base, .to = spec->uid_base, .err = err};
        r = sfd < 0 || dfd < 0 ? error_set_errno(err, negative_errno(), "seed: open %s", dst)
                               : copy_dir(&c, sfd, dfd, 0);
        umount2(src, MNT_DETACH);
        rmdir(src);
    }
    return r < 0 ? r : 0;
}

int shim_seed_fill(const shim_spec *spec, const char *staging, const char *data_dir,
                   error_rec *err) {
    if (!spec->seed_path)
        return 0;
    if (spec->layer_mounts)
        return copy_sent(spec, staging, data_dir, err);
    int userns_fd = -1;
    if (shim_idmap_userns(spec->seed_uid_base, spec->uid_base, &userns_fd) < 0)
        userns_fd = -1; /* no user namespaces for id-mapping: copy */
    static const char *const names[] = {"workspace", "tmp"};
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(names) && r >= 0; i++) {
        char dst[PATH_MAX];
        snprintf(dst, sizeof(dst), "%s/%s", data_dir, names[i]);
        r = share_one(spec, names[i], staging, dst, userns_fd, err);
        if (r == -EOPNOTSUPP)
            r = shim_seed_copy(spec, names[i], dst, err);
    }
    safe_close(userns_fd);
    return r < 0 ? r : 0;
}
