/* Store image layers as overlay lower layers (see layers.h). Runs in init before pivot_root, as
 * host root in the sandbox's private mount namespace. */
#include "shim/layers.h"

#include "common/fdutil.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int shim_idmap_userns(uint32_t inside, uint32_t outside, int *ret_fd) {
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(ready, O_CLOEXEC) < 0) {
        close(go[0]), close(go[1]);
        return -errno;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* init's /proc is still the host's: its pid there, not fork's, names it */
        close(go[1]), close(ready[0]);
        char self[32] = "";
        if (unshare(CLONE_NEWUSER) < 0 || readlink("/proc/self", self, sizeof(self) - 1) < 0)
            self[0] = 0;
        (void)!write(ready[1], self, sizeof(self));
        (void)!read(go[0], self, 1);
        _exit(0);
    }
    close(go[0]), close(ready[1]);
    char c[32] = "", path[64], line[64];
    int r = pid < 0 ? -errno : 0, fd = -1;
    if (r == 0 && (read(ready[0], c, sizeof(c)) != sizeof(c) || !c[0] || strlen(c) > 10))
        r = -EPERM;
    snprintf(line, sizeof(line), "%u %u %u\n", inside, outside, SHIM_UID_RANGE);
    static const char *const maps[] = {"uid_map", "gid_map"};
    for (size_t i = 0; i < ARRAY_SIZE(maps) && r == 0; i++) {
        snprintf(path, sizeof(path), "/proc/%s/%s", c, maps[i]);
        r = file_write_str(path, line);
    }
    snprintf(path, sizeof(path), "/proc/%s/ns/user", c);
    if (r == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        r = -errno;
    close(go[1]), close(ready[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    if (r == 0)
        *ret_fd = fd;
    return r;
}

/* A detached read-only, nosuid, nodev bind of layer: id-mapped when userns_fd >= 0 and the
 * kernel can, else (unless strict) a plain bind. */
static int layer_tree(const char *layer, int userns_fd, bool strict, int *ret_fd, error_rec *err) {
    _cleanup_close_ int fd = open_tree(AT_FDCWD, layer, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open_tree %s", layer);
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (userns_fd >= 0) {
        struct mount_attr id = a;
        id.attr_set |= MOUNT_ATTR_IDMAP;
        id.userns_fd = (uint64_t)userns_fd;
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &id, sizeof(id)) == 0)
            userns_fd = -2; /* done */
        else if (strict)
            return error_set_errno(err, negative_errno(), "id-mapped mount of %s", layer);
    }
    if (userns_fd != -2 && mount_setattr(fd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
        return error_set_errno(err, negative_errno(), "mount_setattr %s", layer);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* A detached mount (fd) at dst; fd is closed either way. */
static int attach(int fd, const char *dst, error_rec *err) {
    int r = move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? negative_errno() : 0;
    safe_close(fd);
    return r < 0 ? error_set_errno(err, r, "move_mount %s", dst) : 0;
}

static int bind_layer(const char *layer, const char *dst, int userns_fd, bool strict,
                      error_rec *err) {
    int fd = -1;
    int r = layer_tree(layer, userns_fd, strict, &fd, err);
    return r < 0 ? r : attach(fd, dst, err);
}

int shim_layer_tree_idmapped(const char *layer, int userns_fd, int *ret_fd, error_rec *err) {
    return layer_tree(layer, userns_fd, true, ret_fd, err);
}

int shim_layer_bind_idmapped(const char *src, const char *dst, int userns_fd, error_rec *err) {
    return bind_layer(src, dst, userns_fd, true, err);
}

int shim_layers_mount(const shim_spec *s, const char *staging, char *buf, size_t len,
                      error_rec *err) {
    char p[4200];
    snprintf(p, sizeof(p), "%s/l", staging);
    if (mkdir(p, 0700) < 0)
        return error_set_errno(err, negative_errno(), "mkdir %s", p);
    int userns_fd = -1;
    if (!s->layer_mounts && shim_idmap_userns(0, s->uid_base, &userns_fd) < 0) {
        if (s->pausable) /* (its create id-mapped them) */
            return error_set(err, -EOPNOTSUPP, "no user namespace to id-map the layers");
        userns_fd = -1; /* no user namespaces: owners show as nobody inside (SECURITY.md) */
    }
    size_t o = (size_t)snprintf(buf, len, "lowerdir=");
    int r = 0;
    /* a pausable sandbox's directory image: one layer, id-mapped as a store layer is */
    bool dir = s->image_type == SHIM_IMAGE_DIR;
    char *const *layers = dir ? &s->image_path : s->layers;
    size_t n = dir ? 1 : s->n_layers;
    for (size_t i = n; i-- > 0 && r == 0;) {
        snprintf(p, sizeof(p), "%s/l/%zu", staging, i);
        if (mkdir(p, 0700) < 0) {
            r = error_set_errno(err, negative_errno(), "mkdir %s", p);
            break;
        }
        if (s->layer_mounts) { /* a pausable init's: made by the shim (shim/init.c) */
            r = attach(s->layer_mounts[i], p, err);
            s->layer_mounts[i] = -1;
        } else
            r = bind_layer(layers[i], p, userns_fd, s->pausable, err); /* (as at its create) */
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%sl/%zu", i + 1 == n ? "" : ":", i);
    }
    safe_close(userns_fd);
    if (r == 0 && o >= len)
        r = error_set(err, -E2BIG, "too many layers for one overlay mount");
    return r;
}
