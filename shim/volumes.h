/* Named volumes in the shim (volumes.c): the spec's "volumes", each an id-mapped bind of the
 * daemon's mount of the volume onto its path in the sandbox (docs/API.md "Volumes"). */
#pragma once

#include "common/error.h"
#include "common/spec.h"

/* In init, after the root file system is built (staging/root) and before pivot_root: for each
 * {"src","dst","ro"} make dst inside the root (a directory owned by the sandbox's root; no
 * symlink followed) and bind src there, nosuid and nodev, read-only when ro, id-mapped so that
 * on-disk owners 0..65535 are the sandbox's own ids. Fails with a message naming the volume
 * where the kernel cannot id-map (no fallback: owners would differ between sandboxes). */
int shim_volumes_mount(const shim_spec *s, const char *staging, error_rec *err);
/* One volume's {"src","dst","ro"} as a detached mount as above, id-mapped through userns_fd
 * (for a pausable init, which cannot id-map: the shim makes them, shim/sandbox.c; and for a
 * restore's CRIU, shim/pause.c). */
int shim_volume_tree(json_t *v, int userns_fd, int *ret_fd, error_rec *err);
