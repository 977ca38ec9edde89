/* Pause to disk (CRIU): what this node can do (core/checkpoint.c). */
#pragma once

#include "sandboxd/core/sandbox.h"

/* err: why this node cannot pause a sandbox (never NULL: see sd_checkpoint_probe). */
typedef void (*sd_checkpoint_probe_fn)(void *ud, const error_rec *err);
/* Why CRIU cannot checkpoint a sandbox on this node: `criu check` once (in a files worker, off
 * the loop), its answer kept for the daemon's life; done is called once (maybe before this
 * returns). err is -EOPNOTSUPP with what CRIU lacks, from its own error lines, or, where criu
 * check passes, why CRIU cannot dump a sandbox's process tree (SD_CHECKPOINT_NS_REASON); any
 * other code is a failure to run criu at all. */
void sd_checkpoint_probe(sd_daemon *d, sd_checkpoint_probe_fn done, void *ud);
/* Where criu check passes (CRIU 4.1.1 built from Debian 13's source does, on kernel 6.18),
 * `criu dump` of a sandbox still fails: native, in its namespace check (criu/namespaces.c: it
 * enters the tree's user namespace, then cannot open the others from there); gvisor, when it
 * seizes the tasks, which runsc's ptrace platform already traces. */
#define SD_CHECKPOINT_NS_REASON                                                                    \
    "pause: criu check passes here, but CRIU cannot dump a sandbox: a native sandbox's mount, "    \
    "network, IPC and UTS namespaces belong to the host's user namespace, not its own (made "      \
    "first, so that its mounts are locked): \"One or more namespaces doesn't belong to the "       \
    "target user namespace\"; a gvisor sandbox's processes are already traced by runsc (ptrace "   \
    "platform): \"Unseizable non-zombie\""
/* The waiter with this ud went away: it is not called. */
void sd_checkpoint_probe_cancel(void *ud);
