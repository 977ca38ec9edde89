/* The commit engine: a running sandbox of a store image becomes a new image (its image's layers
 * plus one layer holding its writable layer, /workspace and /tmp). The sandbox is frozen for the
 * copy only. */
#pragma once

#include "sandboxd/core/sandbox.h"

struct sd_image;
typedef struct sd_commit sd_commit;
/* err NULL: img is the new image. freeze_ms: how long the sandbox was frozen. */
typedef void (*sd_commit_done_fn)(void *ud, const error_rec *err, struct sd_image *img,
                                  uint64_t freeze_ms);

/* Commit sb as image name ("name" or "name:tag"). Errors: -EINVAL a bad name, -EBUSY sb is
 * not running or not of a store image, -EEXIST the name is taken (or being made), else internal;
 * later (through done): -EINVAL a setuid/setgid file (unless strip_setuid), -EDQUOT no disk,
 * -EIO. done is called only when this returns 0. */
int sd_commit_start(sd_sandbox *sb, const char *name, bool strip_setuid, sd_commit_done_fn done,
                    void *ud, sd_commit **ret, error_rec *err);
/* The owner is gone: the commit goes on, done is not called. */
void sd_commit_forget(sd_commit *c);
/* The daemon stops: copies are killed, sandboxes thawed (the store's tmp/ is emptied at start). */
void sd_commit_stop(sd_daemon *d);
