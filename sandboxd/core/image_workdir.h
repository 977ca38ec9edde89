/* Whether an image's WorkingDir is a directory where its sandboxes run (image_workdir.c): the
 * image's layers merged as the overlay merges them, under what a sandbox mounts over them. Pure
 * file work on the layers' directories: an import's worker thread, or a commit's loop thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* An image's layers as directories. */
typedef struct img_layers_view {
    size_t n; /* layers, bottom first */
    /* layer i's root, opened O_RDONLY | O_DIRECTORY (closed by the caller), or -1 */
    int (*open_root)(void *ud, size_t i);
    void *ud;
    size_t seed; /* the layer whose workspace/ and tmp/ seed a sandbox's (a commit's); n: none */
} img_layers_view;

/* Whether wd (absolute) is a directory as a sandbox's chdir sees it: its symlinks followed inside
 * the image (at most 40, as the kernel's; ".." stops at the root). Where a sandbox mounts its own
 * file systems, whatever the layers have there: /workspace and /tmp (empty, or what the seed
 * layer's workspace/ and tmp/ hold), /proc (a procfs of the sandbox's own, whose content below
 * is not known before it runs: absent), /dev (its own tmpfs of device nodes and links, whose
 * only directories are /dev/pts and /dev/shm, both empty of directories). */
bool img_workdir_exists(const img_layers_view *v, const char *wd);
