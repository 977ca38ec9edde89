/* An image's WorkingDir as its sandboxes see it (core/image_workdir.h). */
#include "sandboxd/core/image_workdir.h"

#include "common/macro.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

enum { WD_NONE, WD_DIR, WD_LINK };

static bool is_opaque(int fd) {
    char y;
    return fgetxattr(fd, "trusted.overlay.opaque", &y, 1) == 1 && y == 'y';
}

/* What layers [lo, hi) merged (top first) have at rel, every component above which is a
 * directory there: WD_DIR; WD_LINK with the symlink's target in link (PATH_MAX); WD_NONE for
 * nothing, a whiteout or another file. A non-directory on the way in a layer, or an opaque
 * directory, hides what the layers below have. */
static int merged_lookup(const img_layers_view *v, size_t lo, size_t hi, const char *rel,
                         char link[PATH_MAX]) {
    for (size_t i = hi; i-- > lo;) {
        _cleanup_close_ int fd = v->open_root(v->ud, i);
        bool opaque = false;
        for (const char *p = rel; fd >= 0;) {
            char comp[NAME_MAX + 1];
            size_t n = strcspn(p, "/");
            if (n > NAME_MAX)
                return WD_NONE;
            memcpy(comp, p, n);
            comp[n] = 0;
            p += n + (p[n] == '/');
            struct stat st;
            if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
                break; /* not in this layer */
            if (!*p && S_ISLNK(st.st_mode)) {
                ssize_t k = readlinkat(fd, comp, link, PATH_MAX - 1);
                link[k > 0 ? k : 0] = 0;
                return k > 0 ? WD_LINK : WD_NONE;
            }
            if (!S_ISDIR(st.st_mode))
                return WD_NONE; /* a whiteout, file or symlink hides what is below */
            if (!*p)
                return WD_DIR;
            int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            safe_close(fd);
            fd = next;
            opaque = opaque || (fd >= 0 && is_opaque(fd));
        }
        if (opaque)
            return WD_NONE;
    }
    return WD_NONE;
}

static bool named(const char *comp, size_t n, const char *name) {
    return n == strlen(name) && strncmp(comp, name, n) == 0;
}

/* What a sandbox has at rel where it mounts its own file systems over the image's (shim/rootfs.c
 * shim_rootfs_prepare, shim_rootfs_proc, shim_rootfs_dev_tree and shim_rootfs_dev_mounts;
 * shim/gvisor_oci.c the same), whatever the layers have there: /workspace and /tmp, seeded from
 * a commit's seed layer (shim/seed.h) or empty; /proc; /dev, with /dev/pts and /dev/shm. -1
 * elsewhere (and /etc: the shim writes files into the image's, it mounts nothing there), where
 * the layers say. */
static int sandbox_lookup(const img_layers_view *v, const char *rel, char link[PATH_MAX]) {
    size_t n = strcspn(rel, "/");
    const char *below = rel[n] ? rel + n + 1 : NULL;
    if (named(rel, n, "workspace") || named(rel, n, "tmp")) {
        if (!below)
            return WD_DIR;
        return v->seed < v->n ? merged_lookup(v, v->seed, v->seed + 1, rel, link) : WD_NONE;
    }
    if (named(rel, n, "dev"))
        return !below || !strcmp(below, "pts") || !strcmp(below, "shm") ? WD_DIR : WD_NONE;
    if (named(rel, n, "proc"))
        return below ? WD_NONE : WD_DIR;
    return -1;
}

bool img_workdir_exists(const img_layers_view *v, const char *wd) {
    char todo[PATH_MAX], cur[PATH_MAX] = "", link[PATH_MAX], next[PATH_MAX];
    if (snprintf(todo, sizeof(todo), "%s", wd) >= (int)sizeof(todo))
        return false;
    for (size_t at = 0, links = 0;;) {
        while (todo[at] == '/')
            at++;
        if (!todo[at])
            return true;
        const char *comp = todo + at;
        size_t n = strcspn(comp, "/"), len = strlen(cur);
        at += n;
        if (n == 1 && comp[0] == '.')
            continue;
        if (n == 2 && comp[0] == '.' && comp[1] == '.') {
            char *slash = strrchr(cur, '/');
            *(slash ? slash : cur) = 0;
            continue;
        }
        if (n > NAME_MAX || len + n + 2 > sizeof(cur))
            return false;
        snprintf(cur + len, sizeof(cur) - len, "%s%.*s", len ? "/" : "", (int)n, comp);
        int t = sandbox_lookup(v, cur, link);
        if (t < 0)
            t = merged_lookup(v, 0, v->n, cur, link);
        if (t == WD_DIR)
            continue;
        cur[len] = 0; /* a relative target starts from the link's directory */
        if (t != WD_LINK || ++links > 40 ||
            snprintf(next, sizeof(next), "%s/%s", link, todo + at) >= (int)sizeof(next))
            return false;
        memcpy(todo, next, strlen(next) + 1);
        at = 0;
        if (link[0] == '/')
            cur[0] = 0;
    }
}
