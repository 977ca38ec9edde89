/* The core's side of sandbox networking: it turns sandboxes into calls of the egress plumbing
 * (sandboxd/net/net.h, which knows nothing of sandboxes). Networking is opt-in: the config
 * file's "network" object with "enabled": true. */
#pragma once

#include "common/spec.h"
#include "policy/egress.h"
#include "sandboxd/core/sandbox.h"

#include <stdio.h>

/* At start-up: sd_net_init from cfg.network when it says "enabled": true. A failure (a bad
 * value, no nftables) is the start's: the operator asked for networking. */
int sd_network_init(sd_daemon *d, error_rec *err);
/* After a restart: re-adopt the running networked sandboxes' rules; lost(sb, why) for each one
 * whose network could not be restored (why: NULL when not known). */
void sd_network_restore(sd_daemon *d, void (*lost)(sd_sandbox *sb, const char *why));
/* The addresses sb's allow-listed names resolved to at its create, for its record: its
 * /etc/hosts and guard table hold them for its life, so a restart or a move keeps them too.
 * NULL when it has no names. [[], ["203.0.113.20"], ...]: one list per allow entry. */
json_t *sd_network_resolved_json(const sd_sandbox *sb);
/* From the record: sb->egress parsed from its spec with those addresses. A record without
 * them (or with a list that does not fit its spec) leaves sb->egress NULL: resolved again. */
void sd_network_load(sd_sandbox *sb, json_t *resolved);
/* Validate and resolve the `network` value of c. Mode none gives *ret NULL. */
int sd_network_check(sd_daemon *d, const policy_create *c, policy_egress **ret, error_rec *err);
/* Give sb its checked policy (moved; NULL: none). */
void sd_network_attach(sd_sandbox *sb, policy_egress *eg);
/* The shim's spec: network mode, /etc/hosts entries, DNS servers. */
int sd_network_spec(sd_sandbox *sb, shim_spec *spec, error_rec *err);
/* The shim reported init_pid: plumb (mode none: nothing). */
int sd_network_setup(sd_sandbox *sb, error_rec *err);
/* The sandbox ended: remove its network (idempotent). */
void sd_network_teardown(sd_sandbox *sb);
/* A pause begins: remove its network and forget it, keeping its policy and its address slot
 * (sb->net_slot, taken again when still free) for sd_network_setup after the resume or after
 * a failed pause. */
void sd_network_release(sd_sandbox *sb);
/* Memory only (the daemon exits or forgets an ended sandbox). */
void sd_network_free(sd_sandbox *sb);
/* The sandbox object's "network" value. */
json_t *sd_network_json(const sd_sandbox *sb);
/* Egress packets denied so far (running, networked sandboxes); -errno when not known. */
int sd_network_denied(const sd_sandbox *sb, uint64_t *ret);
