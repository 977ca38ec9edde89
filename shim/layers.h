/* Store images in the shim (layers.c): the spec's {"type":"layers","layers":[...]} and the
 * overlay lower layers built from them, each an id-mapped read-only bind of a store layer so
 * that files keep their owners as seen from inside the sandbox. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

#include <stddef.h>
#include <stdint.h>

/* Mount each layer at <staging>/l/<i> (id-mapped to the sandbox's uid range where the kernel
 * can; plain read-only binds elsewhere, but never for a pausable sandbox; s->layer_mounts' when
 * it has them, each closed; a pausable sandbox's directory image is one layer) and write the
 * overlay "lowerdir=" list, relative to staging and top layer first, into buf. */
int shim_layers_mount(const shim_spec *s, const char *staging, char *buf, size_t len,
                      error_rec *err);
/* A user namespace mapping uids and gids inside..inside+65535 to outside..: the id-mapping of
 * a layer mount (an on-disk owner `inside + n` shows as `outside + n`). A short-lived child
 * makes it; the namespace lives on in *ret_fd. */
int shim_idmap_userns(uint32_t inside, uint32_t outside, int *ret_fd);
/* A read-only, nosuid, nodev bind of src at dst, id-mapped through userns_fd; fails (nothing
 * mounted) where the kernel or src's file system cannot id-map. */
int shim_layer_bind_idmapped(const char *src, const char *dst, int userns_fd, error_rec *err);
/* The same bind, detached (*ret_fd, for move_mount): for a pausable sandbox's init, which
 * cannot id-map in its own user namespace (the shim sends it its layers, shim/sandbox.c). */
int shim_layer_tree_idmapped(const char *layer, int userns_fd, int *ret_fd, error_rec *err);
