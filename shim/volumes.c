/* Named volumes in the sandbox (see volumes.h). Runs in init as host root in the sandbox's
 * private mount namespace, after the root, /workspace and /tmp are mounted. */
#include "shim/volumes.h"

#include "common/fdutil.h"
#include "shim/layers.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open dst (absolute) under root, making missing directories (mode 0755, owner uid): every
 * component must be a directory, never a symlink. */
static int open_target(int rootfd, const char *dst, uid_t uid, int *ret_fd, error_rec *err) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", dst);
    int fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "volume at %s: dup", dst);
    char *save = NULL;
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        struct stat st;
        if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0) {
            close(fd);
            return error_set(err, -EINVAL, "volume at %s: not a normal path", dst);
        }
        if (fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
            (errno != ENOENT || mkdirat(fd, c, 0755) < 0 ||
             fchownat(fd, c, uid, uid, AT_SYMLINK_NOFOLLOW) < 0 ||
             fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) < 0)) {
            int r = negative_errno();
            close(fd);
            return error_set_errno(err, r, "volume at %s: make the directory %s", dst, c);
        }
        if (!S_ISDIR(st.st_mode)) {
            close(fd);
            return error_set(err, -ENOTDIR,
                             "volume at %s: %s is not a directory in the sandbox's image (a "
                             "symlink or a file)",
                             dst, c);
        }
        int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        if (next < 0)
            return error_set_errno(err, negative_errno(), "volume at %s: open %s", dst, c);
        fd = next;
    }
    *ret_fd = fd;
    return 0;
}

int shim_volume_tree(json_t *v, int userns_fd, int *ret_fd, error_rec *err) {
    const char *src = json_string_value(json_object_get(v, "src"));
    const char *dst = json_string_value(json_object_get(v, "dst"));
    if (!src || src[0] != '/' || !dst || dst[0] != '/' || strlen(dst) < 2)
        return error_set(err, -EINVAL, "spec: volumes need absolute \"src\" and \"dst\"");
    _cleanup_close_ int tree = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0)
        return error_set_errno(err, negative_errno(), "volume at %s: open_tree %s", dst, src);
    struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_IDMAP,
                           .userns_fd = (uint64_t)userns_fd};
    if (json_is_true(json_object_get(v, "ro")))
        a.attr_set |= MOUNT_ATTR_RDONLY;
    if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
        return error_set_errno(err, negative_errno(),
                               "volume at %s: this kernel cannot id-map the volume's mount "
                               "(volumes need id-mapped ext4 mounts, Linux 5.12 or later)",
                               dst);
    *ret_fd = TAKE_FD(tree);
    return 0;
}

/* The volume's tree (taken) at its path in the root. */
static int attach_one(json_t *v, int tree, int rootfd, uid_t uid, error_rec *err) {
    const char *dst = json_string_value(json_object_get(v, "dst"));
    _cleanup_close_ int t = tree, target = -1;
    int r = open_target(rootfd, dst, uid, &target, err);
    if (r < 0)
        return r;
    if (move_mount(t, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return error_set_errno(err, negative_errno(), "volume at %s: move_mount", dst);
    return 0;
}

int shim_volumes_mount(const shim_spec *s, const char *staging, error_rec *err) {
    if (!s->volumes || json_array_size(s->volumes) == 0)
        return 0;
    char root[4200];
    snprintf(root, sizeof(root), "%s/root", staging);
    _cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0)
        return error_set_errno(err, negative_errno(), "open %s", root);
    _cleanup_close_ int userns_fd = -1;
    int r = s->layer_mounts ? 0 : shim_idmap_userns(0, s->uid_base, &userns_fd);
    if (r < 0)
        return error_set_errno(err, r,
                               "volumes: no user namespace for the id-mapping of their mounts");
    size_t i, base = SHIM_VOLUME_MOUNTS_AT(s);
    json_t *v;
    json_array_foreach(s->volumes, i, v) {
        int tree = -1;
        if (s->layer_mounts) /* a pausable init's: the shim id-mapped them (common/spec.h) */
            tree = s->layer_mounts[base + i], s->layer_mounts[base + i] = -1;
        else if ((r = shim_volume_tree(v, userns_fd, &tree, err)) < 0)
            return r;
        if ((r = attach_one(v, tree, rootfd, s->uid_base, err)) < 0)
            return r;
    }
    return 0;
}
