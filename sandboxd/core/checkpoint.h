/* Pause to disk (CRIU) and resume (core/checkpoint.c): what this node can do, and the two
 * moves between running and paused. */
#pragma once

#include "sandboxd/core/sandbox.h"

/* err: why this node cannot pause a sandbox, code 0 when it can (never NULL). */
typedef void (*sd_checkpoint_probe_fn)(void *ud, const error_rec *err);
/* Whether this node can pause sandboxes: `criu check` and a trial dump of a sleeping process,
 * once (in a files worker, off the loop), the answer kept for the daemon's life; done is called
 * once (maybe before this returns). err is 0 when both pass, -EOPNOTSUPP with what CRIU lacks
 * (from its own error lines, that it is not installed, or that its dump hangs here); any other
 * code is a failure to run criu at all. */
void sd_checkpoint_probe(sd_daemon *d, sd_checkpoint_probe_fn done, void *ud);
/* The probe's answer once known (as sd_checkpoint_probe gives it), else NULL. */
const error_rec *sd_checkpoint_known(void);
/* The waiter with this ud went away: it is not called. */
void sd_checkpoint_probe_cancel(void *ud);

/* A pause or resume finished: err NULL when it did (sb paused, or running again), else why not
 * (sb as it was: running, or paused with its checkpoint). */
typedef void (*sd_checkpoint_done_fn)(void *ud, sd_sandbox *sb, const error_rec *err);
/* <state-dir>/checkpoints/<id>. */
void sd_checkpoint_dir(const sd_sandbox *sb, char *buf, size_t len);
/* Pause sb (running, "pausable", no command running; the caller checked the probe): its shim
 * saves the checkpoint, then ends its processes and exits. Errors: -EBUSY (not running, or
 * running commands), -EPERM (not pausable), else internal. done is called later (never from
 * here) unless this fails: -EBUSY a command started meanwhile, -EOPNOTSUPP no criu, -EIO CRIU
 * failed (its log: the checkpoint's images/dump.log, removed with it). */
int sd_checkpoint_pause(sd_sandbox *sb, sd_checkpoint_done_fn done, void *ud, error_rec *err);
/* Resume paused sb: started like a create from its checkpoint (queued when starts are busy).
 * Errors: -EBUSY (not paused), -EAGAIN (the node is full), -EIO (no whole checkpoint). done
 * is called later; a failure leaves sb paused with its checkpoint. */
int sd_checkpoint_resume(sd_sandbox *sb, sd_checkpoint_done_fn done, void *ud, error_rec *err);
/* Forget sb's done callback if ud registered it (its request went away). */
void sd_checkpoint_cancel(sd_sandbox *sb, void *ud);
/* The listener that follows resumes, ends and lost shims (core/context.h); -ENOSPC. */
int sd_checkpoint_init(sd_daemon *d);
/* A sandbox pausing or resuming whose shim went away (also a restarted daemon's): true when its
 * checkpoint is whole and it is paused now (a pause that finished, a resume that did not). */
bool sd_checkpoint_shim_gone(sd_sandbox *sb);
/* A restarted daemon: a paused record read back (-ENOENT: no whole checkpoint); checkpoints of
 * no paused sandbox removed. */
int sd_checkpoint_restored(sd_sandbox *sb);
void sd_checkpoint_sweep(sd_daemon *d);

/* ---- a move to another node of the fleet (api/move.c; docs/API.md "Pause and resume") ----
 * The paused sandbox's checkpoint is taken by node (it pulls it through this node's API, then
 * resumes it there). -EBUSY (not paused, moving already, under a lease, or bound to this
 * node), -EIO (no whole checkpoint). Saved: a restarted daemon knows to ask that node. */
int sd_checkpoint_move_begin(sd_sandbox *sb, const char *node, error_rec *err);
/* Whether sb can resume only on this node (its volumes are this node's). */
bool sd_checkpoint_node_bound(const sd_sandbox *sb);
/* The move's outcome: moved, sb ends "moved" (hidden: a forward to its node, its checkpoint
 * gone); else it stays paused here. */
void sd_checkpoint_move_end(sd_sandbox *sb, bool moved);
/* On the node that took it: the checkpoint staged (unpacked from the other node's archive,
 * record its sandbox.json) becomes paused sandbox id of this node, its uid slot taken. -EBUSY
 * (a live sandbox with that id here, or its uid slot in use here), -EINVAL (a record that does
 * not fit). */
int sd_checkpoint_import(sd_daemon *d, const char *id, const char *staged, json_t *record,
                         sd_sandbox **ret, error_rec *err);
/* An imported sandbox whose resume here failed: it ends "moved" (a forward back to node from,
 * which keeps it paused), its checkpoint here gone. */
void sd_checkpoint_give_back(sd_sandbox *sb, const char *from);
