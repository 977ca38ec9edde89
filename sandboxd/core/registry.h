/* The registry: the daemon's table of sandboxes (running and recently ended), uid slots, ids,
 * a sandbox's identity fields and its running cost. */
#pragma once

#include "sandboxd/core/sandbox.h"

#include <stddef.h>

/* Idempotency-Keys kept at most (the oldest ended sandbox's key goes first past it). */
#define SD_IDEM_MAX 4096

sd_sandbox *sd_registry_find(sd_daemon *d, const char *id);
/* The sandbox holding Idempotency-Key key (an index, not a scan), or NULL. */
sd_sandbox *sd_registry_find_idem(sd_daemon *d, const char *key);
/* A new sandbox (starting, not started) with spec c (moved) and a fresh uid slot. */
int sd_registry_add(sd_daemon *d, policy_create *c, sd_sandbox **ret, error_rec *err);
/* Link sb (built by core/state.c from its record) into the table. */
void sd_registry_insert(sd_daemon *d, sd_sandbox *sb);
/* Take sb out of the table (the caller frees it). */
void sd_registry_unlink(sd_daemon *d, sd_sandbox *sb);
/* Sandboxes that take room on the node: not ended, not paused (warm pool entries included),
 * the forks admitted but not made yet (core/fork.c holds their room through its copy), and
 * the uid slots quarantined after a failed cleanup (core/quarantine.h). */
unsigned sd_registry_count_active(sd_daemon *d);

#define SLOTS_MAX 4096 /* uid slots a node has at most (sd_uid_base: 100000 + 65536 * slot) */
int sd_slot_alloc(sd_daemon *d);
/* Whether slot is in use (or out of this node's range). */
bool sd_slot_taken(const sd_daemon *d, int slot);
void sd_slot_claim(sd_daemon *d, int slot);
void sd_slot_release(sd_daemon *d, int slot);
/* Give sb's uid slot back (idempotent). */
void sd_registry_release_slot(sd_sandbox *sb);
/* Take sb's uid slot (sb holds none after); the caller releases it later. */
int sd_registry_take_slot(sd_sandbox *sb);
int sd_uid_base(int slot);

/* A create's Idempotency-Key and the digest of its body (hex sha256; NULL: unknown). */
typedef struct sd_idem {
    const char *key, *digest;
} sd_idem;
/* Set sb's Idempotency-Key and its create's digest (copied; NULL or a NULL key: none) and index
 * the key; at most SD_IDEM_MAX are kept. */
void sd_registry_set_idem_key(sd_sandbox *sb, const sd_idem *idem);
void sd_registry_set_hidden(sd_sandbox *sb, bool hidden);
/* A fork's starting files: the snapshot layer, its owner's uid base, the source's id. */
int sd_registry_set_seed(sd_sandbox *sb, const char *dir, uint32_t uid_base, const char *from);
/* Replace sb's create by c (moved): a warm pool entry handed to a create of its shape. */
void sd_registry_replace_spec(sd_sandbox *sb, policy_create *c);

/* A copy of create src (through its JSON form, as a new create would be read). */
int sd_spec_copy(const policy_create *src, policy_create *ret, error_rec *err);

/* The cost so far (the end's cost once ended). */
double sd_sandbox_cost(const sd_sandbox *sb);
void sd_random_id(const char *prefix, char *buf, size_t len);
/* A sandbox's or lease's id: sd_random_id, then "." + the node name in a fleet. */
void sd_node_id(sd_daemon *d, const char *prefix, char *buf, size_t len);
