/* Pause to disk (CRIU): what this node can do (core/checkpoint.c). */
#pragma once

#include "sandboxd/core/sandbox.h"

/* err NULL: CRIU can checkpoint here (criu check passed). */
typedef void (*sd_checkpoint_probe_fn)(void *ud, const error_rec *err);
/* Whether CRIU works on this node: `criu check` once (in a files worker, off the loop), its
 * answer kept for the daemon's life; done is called once (maybe before this returns). On a
 * refusal err is -EOPNOTSUPP with what CRIU lacks, from its own error lines. */
void sd_checkpoint_probe(sd_daemon *d, sd_checkpoint_probe_fn done, void *ud);
/* The waiter with this ud went away: it is not called. */
void sd_checkpoint_probe_cancel(void *ud);
