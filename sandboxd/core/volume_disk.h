/* A volume's disk (volume_disk.c): its ext4 image file and the mount of it, under one
 * directory (<state-dir>/volumes: <name>.img, <name>.mnt). Knows nothing of sandboxes or of
 * the daemon; safe on a worker thread (host tools run with posix_spawn). */
#pragma once

#include "common/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* dir/name.img and dir/name.mnt */
void sd_vdisk_paths(const char *dir, const char *name, char *img, char *mnt, size_t len);
/* A new sparse image of size bytes with an ext4 file system whose root belongs to the
 * sandbox user (uid/gid 1000 on disk), mounted; all undone on failure. -EEXIST: the image
 * exists. */
int sd_vdisk_make(const char *dir, const char *name, uint64_t size, error_rec *err);
/* Mount name's image unless it is mounted (mount(8) reuses a loop device that still holds it,
 * so a sandbox that kept the old mount shares the same file system). */
int sd_vdisk_mount(const char *dir, const char *name, error_rec *err);
/* Unmount (detached: sandboxes that still hold it keep it until they end; the loop device
 * goes with the last of them), then remove the mount point and the image. */
void sd_vdisk_remove(const char *dir, const char *name);
/* Bytes used in the mounted file system (0 when it cannot tell). */
uint64_t sd_vdisk_used(const char *dir, const char *name);
/* Remove every image and mount point in dir whose name known() does not know. */
void sd_vdisk_sweep(const char *dir, bool (*known)(void *ud, const char *name), void *ud);
