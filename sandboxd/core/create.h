/* Admission of a create: Idempotency-Key replay, network and image checks, the lease, a warm
 * pool hit, room on the node (ending a pool entry when needed), the record, the start. */
#pragma once

#include "sandboxd/core/registry.h"
#include "sandboxd/core/sandbox.h"

/* Create c (moved) under an Idempotency-Key (idem: NULL or a NULL key for none). *ret: the sandbox.
 * *ret_starting: it is not running yet; its answer comes through the listeners' create_finished. A
 * new sandbox is not started here: the caller registers its interest in sb, then calls
 * sd_sandbox_start_or_queue (a start can fail at once). An Idempotency-Key replay of a
 * starting sandbox gives the same sandbox, already started; the same key with another body is
 * -EEXIST. Errors: -EINVAL, -ENOENT (no such lease), -EAGAIN (the node is full), -EDQUOT (its
 * record could not be saved), else internal. */
int sd_create(sd_daemon *d, policy_create *c, const sd_idem *idem, sd_sandbox **ret,
              bool *ret_starting, bool *ret_new, error_rec *err);
/* What a create that sets nothing gets here: the config's "defaults" parsed as a create on
 * this host (-EINVAL naming the field when no create here could have them). */
int sd_create_defaults(sd_daemon *d, policy_create *ret, error_rec *err);
