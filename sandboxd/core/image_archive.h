/* Reading image archives safely (image_archive.c): libarchive loaded on first use, SHA-256 of
 * every byte read, and the layer unpacker that turns one OCI/Docker layer tar into an overlayfs
 * lower directory (whiteouts become 0/0 character devices, opaque directories get
 * trusted.overlay.opaque=y). Pure file work, no daemon state: it runs on a worker thread. */
#pragma once

#include "common/error.h"

#include <stdbool.h>
#include <stdint.h>

#define IMG_DIGEST_HEX 64

/* Shared limits and counters of one import. */
typedef struct img_budget {
    uint64_t unpacked_max; /* bytes written in all (each entry counts at least 512) */
    uint64_t unpacked;
    bool strip_setuid; /* clear setuid/setgid bits instead of refusing the file */
} img_budget;

/* SHA-256 of a whole file, as 64 lowercase hex digits. */
int img_sha256_file(const char *path, char ret_hex[IMG_DIGEST_HEX + 1], error_rec *err);

/* Unpack the layer tar in blob_path (uncompressed, gzip, zstd...) into the empty directory
 * dest_fd; dest_fd -1 only hashes. Writes the SHA-256 of the uncompressed tar (the layer's
 * diff_id) and the bytes of file data written. A whiteout leaves the same layer's entry of its
 * name (a directory of it is made opaque). Refuses absolute paths, "..", names and paths the
 * file system cannot hold, paths through symlinks, devices, FIFOs, sockets, setuid/setgid
 * files (unless b->strip_setuid), owners outside 0..65535, hard links to anything but a
 * regular file earlier in the same layer and relative symlinks that climb above the image's
 * root. -EINVAL (bad input), -EFBIG (over the budget), -ENOSPC/-EDQUOT (disk) or another
 * -errno, message naming the entry. */
int img_unpack_layer(const char *blob_path, int dest_fd, img_budget *b,
                     char ret_diff_id[IMG_DIGEST_HEX + 1], uint64_t *ret_size, error_rec *err);

/* One regular file of an outer (docker save / OCI layout) archive, saved to disk. */
typedef struct img_member {
    char *path; /* cleaned path inside the archive */
    char *link; /* symlink members: the cleaned target path; else NULL */
    char *file; /* where its content was saved */
    uint64_t size;
    char sha256[IMG_DIGEST_HEX + 1];
} img_member;

typedef struct img_members {
    img_member *v;
    size_t n;
} img_members;

/* Save every member of the archive at path into files under dir_fd/dir ("m0", "m1"...),
 * hashing each. Returns 1 when the archive is not an image archive (its first entry is not a
 * docker save / OCI layout name: a rootfs tarball), 0 when saved, or -errno. */
int img_members_save(const char *path, const char *dir, img_budget *b, img_members *ret,
                     error_rec *err);
/* The member at path (its last copy, as tar extraction leaves it; following one symlink
 * member), or NULL. */
const img_member *img_members_find(const img_members *m, const char *path);
void img_members_done(img_members *m);

/* True when path is a clean relative path: no "..", no empty or "." components. */
bool img_path_clean(const char *path);
