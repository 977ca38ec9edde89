/* The sandbox's filesystem, built by init (still host root, in its new mount namespace) before
 * it enters the user namespace: a tmpfs of `disk` bytes holding the writable layer, the image
 * (host /usr read-only, or an overlay of an image directory), a generated /etc, /workspace and
 * /tmp, a fresh masked /proc, a minimal /dev, then pivot_root. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

/* Each function is one named start-up step; `staging` is an empty directory on the host. */
int shim_rootfs_prepare(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_etc(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_proc(const char *staging, error_rec *err);
int shim_rootfs_dev(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_seal(const char *staging, error_rec *err);
int shim_rootfs_pivot(const char *staging, error_rec *err);
