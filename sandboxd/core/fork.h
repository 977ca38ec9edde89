/* The fork engine: N new sandboxes whose /workspace and /tmp start as copies of a running
 * source's. All or nothing: the owner hears once, with every fork running or with the error
 * (the ones that started are then ended). */
#pragma once

#include "sandboxd/core/sandbox.h"

#define SD_FORK_MAX 256

typedef struct sd_fork sd_fork;
/* err NULL: sbs[0..n) run. After this call the fork is gone. */
typedef void (*sd_fork_done_fn)(void *ud, sd_sandbox **sbs, unsigned n, const error_rec *err);

/* Register the engine's listener (forks finishing their start). */
int sd_fork_init(sd_daemon *d);
/* Fork src count times; overrides: create fields laid over the source's (a JSON object; its
 * "count" is ignored). Errors: -EBUSY src is not running, -EINVAL a bad field, -ENOENT no such
 * lease, -EAGAIN no room, -EDQUOT the source's files do not fit in what its memory limit has
 * left (the snapshot layer is charged to the source), else internal; done is called only when this
 * returns 0. */
int sd_fork_start(sd_sandbox *src, json_t *overrides, unsigned count, sd_fork_done_fn done,
                  void *ud, sd_fork **ret, error_rec *err);
/* The daemon stops: copies in progress are killed, their sources thawed, their layers removed. */
void sd_fork_stop(sd_daemon *d);
/* After a restart (core/restore.c): thaw every restored sandbox (a copy the stopped daemon did
 * not finish may have left it frozen) and remove the snapshot layers it left. */
void sd_fork_recover(sd_daemon *d);
/* The owner is gone: the forks go on, done is not called. */
void sd_fork_forget(sd_fork *f);
