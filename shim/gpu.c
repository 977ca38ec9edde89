/* GPU nodes in the sandbox's /dev, the driver's files in its image, and the device cgroup
 * (gpu.h). */
#include "shim/gpu.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "shim/devbpf.h"
#include "shim/rootfs.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static bool name_ok(const char *n) {
    const char *base = strncmp(n, "nvidia-caps/", 12) == 0 ? n + 12 : n;
    size_t len = strlen(base);
    return len >= 1 && len < 100 && base[0] != '.' &&
           strspn(base, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

/* The i-th device of the spec, checked. */
static int device(const shim_spec *spec, size_t i, const char **path, const char **name,
                  shim_devbpf_rule *rule, error_rec *err) {
    json_t *e = json_array_get(json_object_get(spec->gpus, "devices"), i);
    json_t *ma = json_object_get(e, "major"), *mi = json_object_get(e, "minor");
    *path = json_string_value(json_object_get(e, "path"));
    *name = json_string_value(json_object_get(e, "name"));
    if (!*path || (*path)[0] != '/' || !*name || !name_ok(*name) || !json_is_integer(ma) ||
        !json_is_integer(mi) || json_integer_value(ma) < 0 || json_integer_value(ma) > 4095 ||
        json_integer_value(mi) < 0 || json_integer_value(mi) > 1048575)
        return error_set(err, -EINVAL, "spec: gpus.devices[%zu] is malformed", i);
    rule->major = (uint32_t)json_integer_value(ma);
    rule->minor = (uint32_t)json_integer_value(mi);
    return 0;
}

static size_t n_devices(const shim_spec *spec) {
    return json_array_size(json_object_get(spec->gpus, "devices"));
}

int shim_gpu_dev(const shim_spec *spec, const char *dev, uid_t root_uid, error_rec *err) {
    char dst[4400];
    for (size_t i = 0; spec->gpus && i < n_devices(spec); i++) {
        const char *path, *name;
        shim_devbpf_rule rule;
        int r = device(spec, i, &path, &name, &rule, err);
        if (r < 0)
            return r;
        if (!strncmp(name, "nvidia-caps/", 12) &&
            (r = shim_rootfs_ensure_dir(dev, "nvidia-caps", 0755, root_uid, err)) < 0)
            return r;
        snprintf(dst, sizeof(dst), "%s/%s", dev, name);
        _cleanup_close_ int fd = open(dst, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0)
            return error_set_errno(err, negative_errno(), "gpus: create %s", dst);
        /* read-only, as the other nodes (shim/rootfs.c): opened for writing as ever, but the
         * host's inode gets no new times from the sandbox */
        if ((r = shim_rootfs_bind(path, dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC, err)) < 0)
            return r;
        struct stat st; /* the node bound is the one the daemon allocated */
        if (stat(dst, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != rule.major ||
            minor(st.st_rdev) != rule.minor)
            return error_set(err, -EINVAL, "gpus: %s is not the device %u:%u", path, rule.major,
                             rule.minor);
    }
    return 0;
}

/* path: absolute, no empty, "." or ".." component, not "/" itself. */
static bool bind_path_ok(const char *path) {
    if (!path || path[0] != '/' || strlen(path) >= PATH_MAX || !path[1])
        return false;
    for (const char *p = path; *p;) {
        size_t n = strcspn(++p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += n;
    }
    return true;
}

/* rel (a path relative to the root, or "") resolved inside root: its symlinks followed as if
 * root were "/", never out of root's mount. */
static int open_in_root(int root, const char *rel, int *ret_fd) {
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    long fd = syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof(how));
    if (fd < 0)
        return negative_errno();
    *ret_fd = (int)fd;
    return 0;
}

/* Make rel's last component (mode 0755, owned by uid) in its parent, resolved in root. */
static int make_dir(int root, char *rel, uid_t uid) {
    char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    _cleanup_close_ int parent = -1;
    if (slash)
        *slash = 0;
    int r = open_in_root(root, slash ? rel : "", &parent);
    if (slash)
        *slash = '/';
    if (r < 0)
        return r;
    if ((mkdirat(parent, name, 0755) < 0 && errno != EEXIST) ||
        fchownat(parent, name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
        return negative_errno();
    return 0;
}

/* The directory dir ("/usr/lib/x86_64-linux-gnu") inside root, opened O_PATH; its missing
 * components are made, each inside the one before it. */
static int dir_in_root(int root, const char *dir, uid_t uid, int *ret_fd, error_rec *err) {
    char rel[PATH_MAX];
    snprintf(rel, sizeof(rel), "%s", dir + 1);
    int r = open_in_root(root, rel, ret_fd);
    for (size_t end = 0, len = strlen(rel); r == -ENOENT && end <= len; end++) {
        if (rel[end] != '/' && rel[end] != 0)
            continue;
        char c = rel[end];
        int fd = -1;
        rel[end] = 0;
        int k = open_in_root(root, rel, &fd);
        k = k == -ENOENT ? make_dir(root, rel, uid) : k;
        safe_close(fd);
        rel[end] = c;
        if (k < 0)
            return error_set_errno(err, k, "gpus: mkdir %s in the image", dir);
        if (end == len)
            r = open_in_root(root, rel, ret_fd);
    }
    return r < 0 ? error_set_errno(err, r, "gpus: %s in the image", dir) : 0;
}

/* A regular file name in dir to mount on: the image's own file is kept (covered), a symlink
 * there is replaced; anything else refused. */
static int mount_point(int dir, const char *name, uid_t uid, error_rec *err) {
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISREG(st.st_mode))
            return 0;
        if (!S_ISLNK(st.st_mode) || unlinkat(dir, name, 0) < 0)
            return error_set(err, -EEXIST, "gpus: %s in the image is not a file", name);
    }
    _cleanup_close_ int fd =
        openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || fchown(fd, uid, uid) < 0)
        return error_set_errno(err, negative_errno(), "gpus: create %s", name);
    return 0;
}

/* Bind the host's file src read-only onto path inside root. */
static int bind_file(int root, const char *src, const char *path, uid_t uid, error_rec *err) {
    char dir[PATH_MAX], fdpath[64];
    const char *name = strrchr(path, '/') + 1;
    snprintf(dir, sizeof(dir), "%.*s", (int)(name - path - 1), path);
    struct stat st;
    if (stat(src, &st) < 0 || !S_ISREG(st.st_mode))
        return error_set(err, -ENOENT, "gpus: driver file %s is gone (restart the daemon)", src);
    _cleanup_close_ int dfd = -1, tfd = -1, mfd = -1;
    int r = dir_in_root(root, dir[0] ? dir : "/", uid, &dfd, err);
    if (r < 0 || (r = mount_point(dfd, name, uid, err)) < 0)
        return r;
    if ((tfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return error_set_errno(err, negative_errno(), "gpus: open %s", path);
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", tfd);
    if (mount(src, fdpath, NULL, MS_BIND, NULL) < 0)
        return error_set_errno(err, negative_errno(), "gpus: bind %s on %s", src, path);
    if ((mfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0) /* the new mount */
        return error_set_errno(err, negative_errno(), "gpus: open %s", path);
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", mfd);
    if (mount(NULL, fdpath, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
        0)
        return error_set_errno(err, negative_errno(), "gpus: read-only %s", path);
    return 0;
}

/* Where a library goes in this image: path, unless the image lacks path's directory and the
 * daemon named an alternative (/usr/lib64 where there is no Debian multiarch directory). */
static const char *place(int root, const char *path, const char *alt) {
    const char *slash = strrchr(path, '/');
    char rel[PATH_MAX];
    if (!alt || !bind_path_ok(alt) || !slash || slash == path)
        return path;
    snprintf(rel, sizeof(rel), "%.*s", (int)(slash - path - 1), path + 1);
    int fd = -1, r = open_in_root(root, rel, &fd);
    safe_close(fd);
    return r == -ENOENT ? alt : path;
}

int shim_gpu_binds(const shim_spec *spec, const char *root, uid_t root_uid, error_rec *err) {
    json_t *binds = json_object_get(spec->gpus, "binds"), *e;
    if (!spec->gpus || spec->image_type == SHIM_IMAGE_HOST || !json_array_size(binds))
        return 0; /* the host image: its /usr is the host's, with the driver's files in it */
    _cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rfd < 0)
        return error_set_errno(err, negative_errno(), "gpus: open %s", root);
    size_t i;
    json_array_foreach(binds, i, e) {
        const char *src = json_string_value(json_object_get(e, "source"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (json_is_string(e))
            src = path = json_string_value(e);
        if (!src || src[0] != '/' || !bind_path_ok(path))
            return error_set(err, -EINVAL, "spec: gpus.binds[%zu] is malformed", i);
        path = place(rfd, path, json_string_value(json_object_get(e, "alt")));
        int r = bind_file(rfd, src, path, root_uid, err);
        if (r < 0)
            return r;
    }
    return 0;
}

static int allow_v1(const char *dir, const shim_devbpf_rule *rules, size_t n, error_rec *err) {
    char path[2200], line[64];
    snprintf(path, sizeof(path), "%s/devices.deny", dir);
    int r = file_write_str(path, "a");
    if (r < 0)
        return error_set_errno(err, r, "cgroup: write %s", path);
    snprintf(path, sizeof(path), "%s/devices.allow", dir);
    for (size_t i = 0; i < n; i++) {
        if (rules[i].minor == SHIM_DEVBPF_ANY)
            snprintf(line, sizeof(line), "c %u:* rwm", rules[i].major);
        else
            snprintf(line, sizeof(line), "c %u:%u rwm", rules[i].major, rules[i].minor);
        if ((r = file_write_str(path, line)) < 0)
            return error_set_errno(err, r, "cgroup: write %s=%s", path, line);
    }
    return 0;
}

int shim_gpu_cgroup(shim_cgroup *cg, const shim_spec *spec, error_rec *err) {
    shim_devbpf_rule rules[SHIM_DEVBPF_MAX_RULES];
    size_t n = 0;
    if (!spec->gpus)
        return 0;
    for (; n < shim_devbpf_n_defaults; n++)
        rules[n] = shim_devbpf_defaults[n];
    for (size_t i = 0; i < n_devices(spec); i++) {
        const char *path, *name;
        if (n >= SHIM_DEVBPF_MAX_RULES)
            return error_set(err, -E2BIG, "spec: too many gpus.devices");
        int r = device(spec, i, &path, &name, &rules[n++], err);
        if (r < 0)
            return r;
    }
    if (cg->version == 2)
        return shim_devbpf_attach(cg->dirs[0], rules, n, err);
    for (size_t i = 0; i < cg->n; i++)
        if (!strcmp(cg->ctrls[i], "devices"))
            return allow_v1(cg->dirs[i], rules, n, err);
    return error_set(err, -ENOENT,
                     "cgroup v1 controller devices is not mounted: a GPU "
                     "sandbox needs it");
}
