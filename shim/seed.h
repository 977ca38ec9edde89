/* A fork's starting files: copy a seed snapshot (a host directory written by the daemon from
 * another sandbox's /workspace and /tmp) into the new sandbox's writable layer, shifting file
 * owners from the seed's uid range to the new sandbox's. Runs in init as host root before
 * pivot_root; never follows a symlink, copies regular files, directories and symlinks only. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

/* Copy spec->seed_path/<name> into dst_dir (which exists). A missing <name> copies nothing. */
int shim_seed_copy(const shim_spec *spec, const char *name, const char *dst_dir, error_rec *err);
