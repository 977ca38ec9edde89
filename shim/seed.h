/* A fork's starting files: share or copy a seed snapshot (a host directory written by the daemon
 * from another sandbox's /workspace and /tmp) into the new sandbox's writable layer, shifting file
 * owners from the seed's uid range to the new sandbox's. Runs in init as host root before
 * pivot_root; never follows a symlink, copies regular files, directories and symlinks only. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

/* Copy spec->seed_path/<name> into dst_dir (which exists). A missing <name> copies nothing. */
int shim_seed_copy(const shim_spec *spec, const char *name, const char *dst_dir, error_rec *err);
/* The same copy, of one tree (sfd) into another (dfd, which exists), for a checkpoint
 * (shim/pause.c): owners kept (those outside uid_base's range become its nobody), and a mount
 * met on the way copied as an empty stub (its own content is saved apart, or is the host's). */
int shim_seed_copy_tree(int sfd, int dfd, uint32_t uid_base, error_rec *err);
/* Seed data_dir/workspace and data_dir/tmp (which exist) without copying where the kernel can:
 * each becomes an overlay whose read-only lower layer is the snapshot's <name>, id-mapped from
 * the seed's uid range to the sandbox's, and whose upper layer is on the sandbox's own tmpfs
 * (staging/seed/<name>/): every fork of one snapshot shares its pages, and a fork's `disk`
 * counts only what it changes. Where id-mapped mounts or the overlay are not possible, the
 * snapshot is copied (shim_seed_copy). Nothing to seed (no seed_path): 0. */
int shim_seed_fill(const shim_spec *spec, const char *staging, const char *data_dir,
                   error_rec *err);
