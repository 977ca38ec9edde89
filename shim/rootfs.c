/* Filesystem construction for the sandbox (see rootfs.h). Runs in init before pivot_root, as host
 * root in a private mount namespace: every path inside an image is handled without following
 * symlinks, so an image cannot redirect a write onto the host. */
#include "shim/rootfs.h"

#include "common/fdutil.h"
#include "common/mountinfo.h"
#include "shim/grading.h"
#include "shim/layers.h"
#include "shim/seed.h"

#include <fcntl.h>
#include <link.h>
#include <ftw.h>
#include <stdbool.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MS_SAFE (MS_NOSUID | MS_NODEV)

static int mnt(const char *src, const char *tgt, const char *type, unsigned long flags,
               const char *data, error_rec *err) {
    if (mount(src, tgt, type, flags, data) < 0)
        return error_set_errno(err, negative_errno(), "mount %s on %s",
                               type ? type : (src ? src : "(remount)"), tgt);
    return 0;
}

/* Bind src onto tgt, then apply flags (MS_RDONLY, MS_NOSUID...) to the new mount. */
static int bind(const char *src, const char *tgt, unsigned long flags, error_rec *err) {
    int r = mnt(src, tgt, NULL, MS_BIND, NULL, err);
    if (r < 0)
        return r;
    return mnt(NULL, tgt, NULL, MS_REMOUNT | MS_BIND | flags, NULL, err);
}

/* Kernel interfaces that a host may have mounted under /usr (a build chroot's /proc, say): none
 * of them comes into a sandbox with the host's /usr. */
static const char *const pseudo_fs[] = {
    "proc",       "sysfs",       "cgroup", "cgroup2",    "debugfs",  "tracefs",   "bpf",
    "securityfs", "devtmpfs",    "devpts", "mqueue",     "configfs", "fusectl",   "pstore",
    "efivarfs",   "binfmt_misc", "autofs", "rpc_pipefs", "nsfs",     "hugetlbfs", "selinuxfs"};

struct pseudo_find {
    const char *under; /* "<tgt>/" */
    char found[512];
};

static int pseudo_cb(const char *mnt, const char *fstype, const char *opts, void *ud) {
    struct pseudo_find *f = ud;
    (void)opts;
    for (size_t i = 0; i < ARRAY_SIZE(pseudo_fs); i++)
        if (!strcmp(fstype, pseudo_fs[i])) {
            if (strncmp(mnt, f->under, strlen(f->under)) != 0)
                return 0;
            snprintf(f->found, sizeof(f->found), "%s", mnt);
            return 1;
        }
    return 0;
}

/* Detach every pseudo file system mounted under tgt (each detach takes its submounts along). */
static int drop_pseudo(const char *tgt, error_rec *err) {
    char under[4200];
    snprintf(under, sizeof(under), "%s/", tgt);
    for (int i = 0; i < 256; i++) {
        struct pseudo_find f = {.under = under};
        int r = mountinfo_walk(pseudo_cb, &f);
        if (r < 0)
            return error_set_errno(err, r, "read /proc/self/mountinfo");
        if (!f.found[0])
            return 0;
        if (umount2(f.found, MNT_DETACH) < 0)
            return error_set_errno(err, negative_errno(), "umount %s", f.found);
    }
    return error_set(err, -ELOOP, "too many pseudo file systems under %s", tgt);
}

/* Bind src and every mount under it onto tgt, all of them read-only, nosuid and nodev (a host's
 * /usr/local/nvidia or other mount under /usr comes along, never writable), without the kernel
 * interfaces in pseudo_fs. A kernel or host that refuses mount_setattr (ENOSYS before Linux
 * 5.12, EPERM under a container's seccomp profile) gets src alone, as bind() makes it. No
 * process of the sandbox exists yet: nobody sees the tree before it is read-only. */
static int bind_tree_ro(const char *src, const char *tgt, error_rec *err) {
    int r = mnt(src, tgt, NULL, MS_BIND | MS_REC, NULL, err);
    if (r < 0)
        return r;
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (mount_setattr(AT_FDCWD, tgt, AT_RECURSIVE, &a, sizeof(a)) == 0)
        return drop_pseudo(tgt, err);
    r = negative_errno();
    if (r != -ENOSYS && r != -EPERM)
        return error_set_errno(err, r, "read-only %s (and the mounts under it)", tgt);
    if (umount2(tgt, MNT_DETACH) < 0)
        return error_set_errno(err, negative_errno(), "umount %s", tgt);
    return bind(src, tgt, MS_RDONLY | MS_SAFE, err);
}

static void path_join(char *buf, size_t len, const char *a, const char *b) {
    snprintf(buf, len, "%s/%s", a, b);
}

/* Make rfd/name (rfd: root, named in errors) a real directory, replacing a symlink or file an
 * image may have put there. Where nothing was, the one mkdirat made it: no process of the
 * sandbox exists yet, so nothing can have put another file in its place before the chmod and
 * chown (3 calls instead of 8: a create makes ~25 directories). */
static int ensure_dirat(int rfd, const char *root, const char *name, mode_t mode, uid_t uid,
                        error_rec *err) {
    if (mkdirat(rfd, name, mode) == 0) {
        if (fchmodat(rfd, name, mode, 0) < 0 ||
            (uid != (uid_t)-1 && fchownat(rfd, name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0))
            return error_set_errno(err, negative_errno(), "prepare %s/%s", root, name);
        return 0;
    }
    if (errno != EEXIST)
        return error_set_errno(err, negative_errno(), "mkdir %s/%s", root, name);
    struct stat st;
    if (fstatat(rfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
        (unlinkat(rfd, name, 0) < 0 || mkdirat(rfd, name, mode) < 0))
        return error_set_errno(err, negative_errno(), "replace %s/%s", root, name);
    _cleanup_close_ int dfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || fchmod(dfd, mode) < 0 || (uid != (uid_t)-1 && fchown(dfd, uid, uid) < 0))
        return error_set_errno(err, negative_errno(), "prepare %s/%s", root, name);
    return 0;
}

static int open_root(const char *root, int *ret_fd, error_rec *err) {
    int fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open %s", root);
    *ret_fd = fd;
    return 0;
}

static int ensure_dir(const char *root, const char *name, mode_t mode, uid_t uid, error_rec *err) {
    _cleanup_close_ int rfd = -1;
    int r = open_root(root, &rfd, err);
    return r < 0 ? r : ensure_dirat(rfd, root, name, mode, uid, err);
}

/* ensure_dir for each of names[0..n) under root, all with one mode. */
static int ensure_dirs(const char *root, const char *const *names, size_t n, mode_t mode, uid_t uid,
                       error_rec *err) {
    _cleanup_close_ int rfd = -1;
    int r = open_root(root, &rfd, err);
    for (size_t i = 0; i < n && r >= 0; i++)
        r = ensure_dirat(rfd, root, names[i], mode, uid, err);
    return r;
}

/* Write a fresh file dirfd/name (never through a symlink). */
static int write_new(int dirfd, const char *name, const void *buf, size_t len, uid_t uid,
                     error_rec *err) {
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    _cleanup_close_ int fd = openat(dirfd, name, flags, 0644);
    if (fd < 0 && errno == EEXIST) { /* the image's own: replaced, never written through */
        if (unlinkat(dirfd, name, 0) < 0)
            return error_set_errno(err, negative_errno(), "replace /etc/%s", name);
        fd = openat(dirfd, name, flags, 0644);
    }
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "create /etc/%s", name);
    int r = fd_write_all(fd, buf, len);
    if (r < 0 || fchown(fd, uid, uid) < 0 || fchmod(fd, 0644) < 0)
        return error_set_errno(err, r < 0 ? r : negative_errno(), "write /etc/%s", name);
    return 0;
}

static int prepare_host_image(const char *root, uid_t root_uid, error_rec *err) {
    static const char *const dirs[] = {"usr", "etc",  "proc", "dev", "tmp", "workspace", "run",
                                       "var", "root", "home", "mnt", "opt", "srv"};
    int r = ensure_dirs(root, dirs, ARRAY_SIZE(dirs), 0755, root_uid, err);
    if (r < 0)
        return r;
    static const char *const links[][2] = {{"bin", "usr/bin"},     {"sbin", "usr/sbin"},
                                           {"lib", "usr/lib"},     {"lib64", "usr/lib64"},
                                           {"lib32", "usr/lib32"}, {"libx32", "usr/libx32"}};
    char p[4096], host[64];
    for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
        snprintf(host, sizeof(host), "/%s", links[i][1]);
        if (access(host, F_OK) < 0)
            continue;
        path_join(p, sizeof(p), root, links[i][0]);
        if (symlink(links[i][1], p) < 0 || lchown(p, root_uid, root_uid) < 0)
            return error_set_errno(err, negative_errno(), "symlink %s", p);
    }
    path_join(p, sizeof(p), root, "var/tmp");
    if (symlink("/tmp", p) < 0)
        return error_set_errno(err, negative_errno(), "symlink %s", p);
    path_join(p, sizeof(p), root, "usr");
    return bind_tree_ro("/usr", p, err);
}

/* The upper directory (under staging) stays open on SHIM_UPPER_FD for a commit; a pausable
 * sandbox's across init's exec (step_reexec), for init to hand it to the shim. */
static int keep_upper(const char *staging, bool pausable, error_rec *err) {
    char p[4200];
    snprintf(p, sizeof(p), "%s/upper", staging);
    int fd = open(p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || (fd != SHIM_UPPER_FD && dup3(fd, SHIM_UPPER_FD, pausable ? 0 : O_CLOEXEC) < 0) ||
        (fd == SHIM_UPPER_FD && pausable && fcntl(fd, F_SETFD, 0) < 0)) {
        int r = negative_errno();
        if (fd >= 0)
            close(fd);
        return error_set_errno(err, r, "keep the upper directory open");
    }
    if (fd != SHIM_UPPER_FD)
        close(fd);
    return 0;
}

/* The overlay root of an image over the upper directory (the cwd: staging): a pausable
 * sandbox's in its user namespace keeps the overlay's own attributes (whiteouts, opaque
 * directories) in user.overlay.* (userxattr: trusted.* is the host's), at its create and at
 * its restore alike; its directory image is id-mapped as one layer (in its user namespace,
 * the host's owners would be unmapped). */
int shim_rootfs_overlay(const shim_spec *spec, const char *staging, const char *root,
                        error_rec *err) {
    char lower[4200];
    int r = 0;
    snprintf(lower, sizeof(lower), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work",
             spec->image_path, staging, staging);
    /* images: store layers are mounted under staging/l/ and named relative to it (one page of
     * mount options holds ~100 layers) */
    bool layers = spec->image_type == SHIM_IMAGE_LAYERS || spec->pausable; /* (layers.h) */
    if (layers && ((r = shim_layers_mount(spec, staging, lower, sizeof(lower) - 48, err)) < 0 ||
                   chdir(staging) < 0))
        return r < 0 ? r : error_set_errno(err, negative_errno(), "chdir %s", staging);
    if (layers)
        strcat(lower, ",upperdir=upper,workdir=work");
    if (spec->pausable)
        strcat(lower, ",userxattr");
    if ((r = mnt("sbx-image", root, "overlay", MS_SAFE, lower, err)) < 0)
        return r;
    if (spec->image_type == SHIM_IMAGE_LAYERS || spec->pausable)
        return keep_upper(staging, spec->pausable, err);
    return 0;
}

/* The writable layer's tmpfs options: its size and inodes (one per 4 KiB, 16 Ki to 4 Mi). */
static void disk_opts(const shim_spec *spec, char *buf, size_t len) {
    uint64_t inodes = MIN(MAX(spec->disk / 4096, (uint64_t)16384), (uint64_t)4 << 20);
    snprintf(buf, len, "size=%" PRIu64 ",nr_inodes=%" PRIu64, spec->disk, inodes);
}

int shim_rootfs_mount_disk(const shim_spec *spec, const char *staging, error_rec *err) {
    char opts[128];
    disk_opts(spec, opts, sizeof(opts));
    strcat(opts, ",mode=0700");
    return mnt("sbx-disk", staging, "tmpfs", MS_SAFE, opts, err);
}

int shim_rootfs_prepare(const shim_spec *spec, const char *staging, error_rec *err) {
    char p[4096], root[4096];
    uid_t ruid = spec->uid_base, suid = spec->uid_base + SHIM_SANDBOX_UID;
    int r = mnt(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err);
    if (r < 0 || (r = shim_rootfs_mount_disk(spec, staging, err)) < 0)
        return r;
    static const char *const sub[] = {"root", "upper", "work", "data"};
    if ((r = ensure_dirs(staging, sub, ARRAY_SIZE(sub), 0755, ruid, err)) < 0)
        return r;
    path_join(p, sizeof(p), staging, "data");
    if ((r = ensure_dir(p, "workspace", 0755, suid, err)) < 0 ||
        (r = ensure_dir(p, "tmp", 01777, ruid, err)) < 0)
        return r;
    if ((r = shim_seed_fill(spec, staging, p, err)) < 0)
        return r;
    path_join(root, sizeof(root), staging, "root");
    if (spec->image_type == SHIM_IMAGE_DIR || spec->image_type == SHIM_IMAGE_LAYERS) {
        if ((r = shim_rootfs_overlay(spec, staging, root, err)) < 0)
            return r;
        static const char *const dirs[] = {"etc", "proc", "dev", "workspace"};
        if ((r = ensure_dirs(root, dirs, ARRAY_SIZE(dirs), 0755, ruid, err)) < 0 ||
            (r = ensure_dir(root, "tmp", 01777, ruid, err)) < 0)
            return r;
    } else {
        if ((r = mnt(root, root, NULL, MS_BIND, NULL, err)) < 0 ||
            (r = prepare_host_image(root, ruid, err)) < 0)
            return r;
    }
    char src[4200], dst[4200];
    snprintf(src, sizeof(src), "%s/data/workspace", staging);
    snprintf(dst, sizeof(dst), "%s/workspace", root);
    if ((r = bind(src, dst, MS_SAFE, err)) < 0)
        return r;
    snprintf(src, sizeof(src), "%s/data/tmp", staging);
    snprintf(dst, sizeof(dst), "%s/tmp", root);
    return bind(src, dst, MS_SAFE, err);
}

static int copy_host_file(const char *src, int etcfd, const char *name, uid_t uid, error_rec *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = file_read_all(src, 64u << 20, &buf, &len);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return error_set_errno(err, r, "read %s", src);
    return write_new(etcfd, name, buf, len, uid, err);
}

/* passwd, group and nsswitch.conf: the users a sandbox has. */
static int etc_accounts(const shim_spec *spec, int etcfd, error_rec *err) {
    uid_t u = spec->uid_base;
    char buf[1024];
    int n =
        snprintf(buf, sizeof(buf),
                 "root:x:0:0:root:/root:/bin/sh\n"
                 "sandbox:x:%u:%u:sandbox:%s:/bin/sh\n"
                 "%s"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                 SHIM_SANDBOX_UID, SHIM_SANDBOX_UID, spec->grading ? SHIM_AGENT_HOME : "/workspace",
                 spec->grading ? "grader:x:1001:1001:grader:" SHIM_GRADER_HOME ":/bin/sh\n" : "");
    int r = write_new(etcfd, "passwd", buf, (size_t)n, u, err);
    if (r < 0)
        return r;
    n = snprintf(buf, sizeof(buf), "root:x:0:\ntty:x:5:\nsandbox:x:%u:\n%snogroup:x:65534:\n",
                 SHIM_SANDBOX_UID, spec->grading ? "grader:x:1001:\n" : "");
    if ((r = write_new(etcfd, "group", buf, (size_t)n, u, err)) < 0)
        return r;
    static const char nss[] = "passwd: files\ngroup: files\nshadow: files\n"
                              "hosts: files dns\nnetworks: files\nprotocols: files\n"
                              "services: files\n";
    return write_new(etcfd, "nsswitch.conf", nss, sizeof(nss) - 1, u, err);
}

/* hostname, hosts and resolv.conf: the sandbox's own names. */
static int etc_names(const shim_spec *spec, int etcfd, error_rec *err) {
    uid_t u = spec->uid_base;
    char buf[16384];
    int n = snprintf(buf, sizeof(buf), "%s\n", spec->hostname);
    int r = write_new(etcfd, "hostname", buf, (size_t)n, u, err);
    if (r < 0)
        return r;
    n = snprintf(buf, sizeof(buf),
                 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
                 "127.0.1.1\t%s\n",
                 spec->hostname);
    for (size_t i = 0; i < spec->n_hosts && (size_t)n < sizeof(buf); i++)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s\t%s\n", spec->hosts[i].addr,
                      spec->hosts[i].names);
    if ((r = write_new(etcfd, "hosts", buf, MIN((size_t)n, sizeof(buf) - 1), u, err)) < 0)
        return r;
    n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < spec->n_dns && (size_t)n < sizeof(buf); i++)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "nameserver %s\n", spec->dns[i]);
    return write_new(etcfd, "resolv.conf", buf, MIN((size_t)n, sizeof(buf) - 1), u, err);
}

static int open_etc(const char *staging, char *etc, size_t len, int *ret_fd, error_rec *err) {
    snprintf(etc, len, "%s/root/etc", staging);
    int fd = open(etc, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open %s", etc);
    *ret_fd = fd;
    return 0;
}

int shim_rootfs_etc_base(const shim_spec *spec, const char *staging, error_rec *err) {
    char etc[4200];
    _cleanup_close_ int etcfd = -1;
    int r = open_etc(staging, etc, sizeof(etc), &etcfd, err);
    if (r < 0)
        return r;
    bool host = spec->image_type == SHIM_IMAGE_HOST;
    struct stat st;
    if ((host || fstatat(etcfd, "passwd", &st, AT_SYMLINK_NOFOLLOW) < 0) &&
        (r = etc_accounts(spec, etcfd, err)) < 0)
        return r;
    if (!host)
        return 0;
    /* ld.so needs its cache to find /usr/lib/<triplet>; alternatives, ssl and the JDK's
     * configuration (its conf/ links there; java does not start without it) are read-only. */
    if ((r = copy_host_file("/etc/ld.so.cache", etcfd, "ld.so.cache", spec->uid_base, err)) < 0)
        return r;
    static const char *const ro[] = {"alternatives", "ssl", "ca-certificates", "java-17-openjdk",
                                     "java-21-openjdk"};
    for (size_t i = 0; i < ARRAY_SIZE(ro); i++) {
        char src[64], dst[4400];
        snprintf(src, sizeof(src), "/etc/%s", ro[i]);
        if (access(src, F_OK) < 0)
            continue;
        if ((r = ensure_dirat(etcfd, etc, ro[i], 0755, spec->uid_base, err)) < 0)
            return r;
        snprintf(dst, sizeof(dst), "%s/%s", etc, ro[i]);
        if ((r = bind(src, dst, MS_RDONLY | MS_SAFE, err)) < 0)
            return r;
    }
    return 0;
}

/* fn on the root's /etc. */
static int with_etc(const shim_spec *spec, const char *staging,
                    int (*fn)(const shim_spec *, int, error_rec *), error_rec *err) {
    char etc[4200];
    _cleanup_close_ int etcfd = -1;
    int r = open_etc(staging, etc, sizeof(etc), &etcfd, err);
    return r < 0 ? r : fn(spec, etcfd, err);
}

int shim_rootfs_etc_accounts(const shim_spec *spec, const char *staging, error_rec *err) {
    return with_etc(spec, staging, etc_accounts, err);
}

int shim_rootfs_etc_names(const shim_spec *spec, const char *staging, error_rec *err) {
    return with_etc(spec, staging, etc_names, err);
}

/* A small read-only tmpfs holding an empty file and an empty directory: a bind mount copies
 * its source mount's flags, so each masked /proc entry costs one mount(2) (no remount, no new
 * superblock per directory). */
int shim_rootfs_make_mask(const char *staging, char *mask, size_t len, error_rec *err) {
    snprintf(mask, len, "%s/mask", staging);
    if (mkdir(mask, 0755) < 0)
        return error_set_errno(err, negative_errno(), "mkdir %s", mask);
    int r =
        mnt("sbx-mask", mask, "tmpfs", MS_SAFE | MS_NOEXEC, "size=4k,nr_inodes=4,mode=0555", err);
    if (r < 0)
        return r;
    char p[4300];
    snprintf(p, sizeof(p), "%s/file", mask);
    int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "create %s", p);
    close(fd);
    snprintf(p, sizeof(p), "%s/dir", mask);
    if (mkdir(p, 0555) < 0)
        return error_set_errno(err, negative_errno(), "mkdir %s", p);
    return mnt(NULL, mask, NULL, MS_REMOUNT | MS_RDONLY | MS_SAFE | MS_NOEXEC,
               "size=4k,nr_inodes=4,mode=0555", err);
}

int shim_rootfs_mask(const char *proc, const char *const *names, size_t n, const char *mask,
                     const char *other, error_rec *err) {
    char p[4400];
    /* a missing source fails as a missing target does: both must be there */
    if (access(mask, F_OK) < 0 || access(other, F_OK) < 0)
        return error_set_errno(err, negative_errno(), "the masks %s, %s", mask, other);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof(p), "%s/%s", proc, names[i]);
        if (mount(mask, p, NULL, MS_BIND, NULL) == 0 || errno == ENOENT)
            continue;
        if (errno != ENOTDIR)
            return error_set_errno(err, negative_errno(), "mask %s", p);
        int r = mnt(other, p, NULL, MS_BIND, NULL, err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The /proc mount options of a grading sandbox ("hidepid=2,gid=N", N the host gid of
 * SHIM_PROC_GID), written into buf. Here, not in grading.c: grading.c builds on this file. */
static void rootfs_grading_proc_opts(const shim_spec *spec, char *buf, size_t len) {
    snprintf(buf, len, "hidepid=2,gid=%u", spec->uid_base + SHIM_PROC_GID);
}

int shim_rootfs_proc(const shim_spec *spec, const char *staging, error_rec *err) {
    char proc[4200], p[4400], mask[4200], empty_file[4300], empty_dir[4300];
    snprintf(proc, sizeof(proc), "%s/root/proc", staging);
    int r = shim_rootfs_make_mask(staging, mask, sizeof(mask), err);
    if (r < 0)
        return r;
    snprintf(empty_file, sizeof(empty_file), "%s/file", mask);
    snprintf(empty_dir, sizeof(empty_dir), "%s/dir", mask);
    char popts[64] = "";
    if (spec->grading) /* docs/GRPO.md: the grader and the agent do not see each other */
        rootfs_grading_proc_opts(spec, popts, sizeof(popts));
    if ((r = mnt("proc", proc, "proc", MS_SAFE | MS_NOEXEC, popts[0] ? popts : NULL, err)) < 0)
        return r;
    /* Masked like Docker's defaults: files show an empty read-only file, directories an empty
     * read-only directory. */
    static const char *const files[] = {
        "kcore",       "keys",        "latency_stats", "timer_list",   "timer_stats",
        "sched_debug", "kmsg",        "interrupts",    "kallsyms",     "sysrq-trigger",
        "config.gz",   "vmallocinfo", "slabinfo",      "pagetypeinfo", "kpagecount",
        "kpageflags",  "kpagecgroup", "iomem",         "ioports"};
    static const char *const dirs[] = {"acpi", "scsi", "asound", "firmware", "driver", "pressure"};
    if ((r = shim_rootfs_mask(proc, files, ARRAY_SIZE(files), empty_file, empty_dir, err)) < 0 ||
        (r = shim_rootfs_mask(proc, dirs, ARRAY_SIZE(dirs), empty_dir, empty_file, err)) < 0)
        return r;
    static const char *const ro[] = {"sys", "irq", "bus", "fs"};
    for (size_t i = 0; i < ARRAY_SIZE(ro); i++) {
        snprintf(p, sizeof(p), "%s/%s", proc, ro[i]);
        if (access(p, F_OK) == 0 && (r = bind(p, p, MS_RDONLY | MS_SAFE | MS_NOEXEC, err)) < 0)
            return r;
    }
    return 0;
}

int shim_rootfs_proc_grading(const shim_spec *spec, const char *staging, error_rec *err) {
    char proc[4200], popts[64];
    snprintf(proc, sizeof(proc), "%s/root/proc", staging);
    rootfs_grading_proc_opts(spec, popts, sizeof(popts));
    return mnt(NULL, proc, NULL, MS_REMOUNT | MS_SAFE | MS_NOEXEC, popts, err);
}

static int dev_nodes(const char *dev, uid_t root_uid, error_rec *err) {
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    char src[64], dst[4400];
    int r;
    for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
        snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dev, nodes[i]);
        _cleanup_close_ int fd = open(dst, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0)
            return error_set_errno(err, negative_errno(), "create %s", dst);
        /* read-only: a node stays readable and writable (a device's open takes no write on
         * its mount), but its inode, the host's own, gets no new times from touch */
        if ((r = bind(src, dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC, err)) < 0)
            return r;
    }
    static const char *const links[][2] = {
        {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"},
        {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}, {"core", "/dev/null"}};
    for (size_t i = 0; i < ARRAY_SIZE(links) - 1; i++) {
        snprintf(dst, sizeof(dst), "%s/%s", dev, links[i][0]);
        if (symlink(links[i][1], dst) < 0 || lchown(dst, root_uid, root_uid) < 0)
            return error_set_errno(err, negative_errno(), "symlink %s", dst);
    }
    return 0;
}

int shim_rootfs_dev_tree(const shim_spec *spec, const char *staging, error_rec *err) {
    char dev[4200];
    uid_t ru = spec->uid_base;
    snprintf(dev, sizeof(dev), "%s/root/dev", staging);
    int r = mnt("sbx-dev", dev, "tmpfs", MS_SAFE | MS_NOEXEC, "size=64k,mode=0755", err);
    if (r < 0 || (r = ensure_dir(dev, "pts", 0755, ru, err)) < 0 ||
        (r = ensure_dir(dev, "shm", 01777, ru, err)) < 0 || (r = dev_nodes(dev, ru, err)) < 0)
        return r;
    if (chown(dev, ru, ru) < 0)
        return error_set_errno(err, negative_errno(), "chown %s", dev);
    return 0;
}

/* A detached tree on dst, read-only, nosuid, nodev (and executable). */
static int attach_ro(int tree, const char *dst, error_rec *err) {
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (move_mount(tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
        mount_setattr(AT_FDCWD, dst, 0, &a, sizeof(a)) < 0)
        return error_set_errno(err, negative_errno(), "bind on %s", dst);
    return 0;
}

int shim_rootfs_init_binary(const char *staging, int exe_tree, error_rec *err) {
    char dst[4200];
    snprintf(dst, sizeof(dst), "%s/root" SHIM_INIT_BINARY, staging);
    _cleanup_close_ int fd = open(dst, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0555);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "create %s", dst);
    return attach_ro(exe_tree, dst, err);
}

int shim_rootfs_init_libs(const char *staging, int lib_tree, error_rec *err) {
    char dst[4200];
    snprintf(dst, sizeof(dst), "%s/root" SHIM_INIT_LIBS, staging);
    if (mkdir(dst, 0555) < 0)
        return error_set_errno(err, negative_errno(), "mkdir %s", dst);
    return attach_ro(lib_tree, dst, err);
}

typedef struct libdir_walk {
    char dir[PATH_MAX], loader[PATH_MAX], other[PATH_MAX];
    bool seen_main, static_main; /* the first object is the main program */
} libdir_walk;

/* dl_iterate_phdr: the main program's PT_INTERP (none: static), and each mapped object's
 * directory. */
static int libdir_cb(struct dl_phdr_info *info, size_t size, void *ud) {
    libdir_walk *w = ud;
    char real[PATH_MAX];
    const char *name = info->dlpi_name;
    for (size_t i = 0; !name[0] && i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP)
            name = (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!w->seen_main)
        w->seen_main = true, w->static_main = !name[0];
    if (name[0] != '/' || !realpath(name, real))
        return 0; /* the vDSO */
    char *slash = strrchr(real, '/');
    *slash = 0;
    if (!info->dlpi_name[0])
        snprintf(w->loader, sizeof(w->loader), "%s", slash + 1);
    if (!w->dir[0])
        snprintf(w->dir, sizeof(w->dir), "%s", real);
    else if (strcmp(w->dir, real) != 0)
        snprintf(w->other, sizeof(w->other), "%s", real);
    return 0;
}

int shim_rootfs_libdir(char *dir, size_t len, char *loader, size_t llen, error_rec *err) {
    static libdir_walk w;
    memset(&w, 0, sizeof(w));
    dl_iterate_phdr(libdir_cb, &w);
    if (w.static_main) {
        dir[0] = loader[0] = 0;
        return 0;
    }
    if (!w.dir[0] || !w.loader[0] || w.other[0])
        return error_set(err, -ENOTSUP,
                         "sbx-shim's loader and libraries are not in one directory (%s, %s): a "
                         "pausable sandbox of an image cannot run it",
                         w.dir, w.other[0] ? w.other : "no loader");
    snprintf(dir, len, "%s", w.dir);
    snprintf(loader, llen, "%s", w.loader);
    return 0;
}

int shim_rootfs_dev_mounts(const shim_spec *spec, const char *staging, error_rec *err) {
    char p[4400], opts[128];
    uid_t ru = spec->uid_base;
    snprintf(p, sizeof(p), "%s/root/dev/pts", staging);
    snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,gid=%u", ru + 5);
    /* not nodev: its nodes are this instance's terminals only (tty: true), as in Docker */
    int r = mnt("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, opts, err);
    if (r < 0)
        return r;
    snprintf(p, sizeof(p), "%s/root/dev/shm", staging);
    uint64_t shm = spec->memory ? MIN(spec->memory / 2, (uint64_t)64 << 20) : (uint64_t)64 << 20;
    snprintf(opts, sizeof(opts), "size=%" PRIu64 ",mode=1777,uid=%u,gid=%u", shm, ru, ru);
    return mnt("shm", p, "tmpfs", MS_SAFE | MS_NOEXEC, opts, err);
}

/* The ids a walk moves: [from, from + SHIM_UID_RANGE) to the same offsets from `to`; r: the
 * first failure. nftw's callback takes no argument; init is one thread. */
static struct {
    uid_t from, to;
    int r;
} rebase;

static uid_t rebased(uid_t id) {
    return id - rebase.from < SHIM_UID_RANGE ? id - rebase.from + rebase.to : id;
}

static int rebase_cb(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    if (type == FTW_NS) {
        rebase.r = -EIO;
        return 1;
    }
    uid_t u = rebased(st->st_uid), g = rebased(st->st_gid);
    if ((u != st->st_uid || g != st->st_gid) && lchown(path, u, g) < 0) {
        rebase.r = negative_errno();
        return 1;
    }
    return 0;
}

/* Every file of the file system at dir (not below its mounts) owned by from's range moves to
 * to's. */
static int rebase_tree(const char *dir, uid_t from, uid_t to, error_rec *err) {
    rebase.from = from, rebase.to = to, rebase.r = 0;
    int r = nftw(dir, rebase_cb, 16, FTW_PHYS | FTW_MOUNT);
    if (r != 0)
        return error_set_errno(err, r > 0 ? rebase.r : negative_errno(), "the ids under %s", dir);
    return 0;
}

int shim_rootfs_adopt(const shim_spec *spec, const char *staging, uid_t from, error_rec *err) {
    char opts[128], dev[4200];
    disk_opts(spec, opts, sizeof(opts));
    int r = mnt(NULL, staging, NULL, MS_REMOUNT | MS_SAFE, opts, err);
    if (r < 0)
        return r;
    snprintf(dev, sizeof(dev), "%s/root/dev", staging);
    if ((r = rebase_tree(staging, from, spec->uid_base, err)) < 0)
        return r;
    return rebase_tree(dev, from, spec->uid_base, err);
}

int shim_rootfs_seal(const char *staging, error_rec *err) {
    char root[4200];
    snprintf(root, sizeof(root), "%s/root", staging);
    return mnt(NULL, root, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_SAFE, NULL, err);
}

int shim_rootfs_pivot(const char *staging, error_rec *err) {
    char root[4200];
    snprintf(root, sizeof(root), "%s/root", staging);
    if (chdir(root) < 0)
        return error_set_errno(err, negative_errno(), "chdir %s", root);
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return error_set_errno(err, negative_errno(), "pivot_root");
    if (umount2(".", MNT_DETACH) < 0)
        return error_set_errno(err, negative_errno(), "detach the old root");
    if (chdir("/") < 0)
        return error_set_errno(err, negative_errno(), "chdir /");
    return 0;
}

int shim_rootfs_ensure_dir(const char *root, const char *name, mode_t mode, uid_t uid,
                           error_rec *err) {
    return ensure_dir(root, name, mode, uid, err);
}

int shim_rootfs_bind(const char *src, const char *tgt, unsigned long flags, error_rec *err) {
    return bind(src, tgt, flags, err);
}

int shim_rootfs_helper_path(const char *name, char *buf, size_t len, error_rec *err) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return error_set_errno(err, negative_errno(), "readlink /proc/self/exe");
    exe[n] = 0;
    snprintf(buf, len, "%s/%s", dirname(exe), name);
    if (access(buf, X_OK) < 0)
        return error_set_errno(err, negative_errno(), "%s (shipped next to sbx-shim)", buf);
    return 0;
}
