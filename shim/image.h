/* Images: a rootfs tarball imported into a directory that a sandbox then uses as its read-only
 * overlay lower layer ({"type":"dir","path":...} in the spec). */
#pragma once

#include "common/error.h"

/* Extract tar_path (any compression libarchive reads) into dest_dir, which must not exist yet.
 * Safe against hostile archives: absolute paths, ".." components and hard links that leave the
 * tree are rejected, nothing is ever written through a symlink, device nodes and sockets are
 * rejected, setuid/setgid bits are stripped and ownership is not restored. On any failure
 * dest_dir is removed again. */
int shim_image_import_tar(const char *tar_path, const char *dest_dir, error_rec *err);
