/* Persistence: each sandbox's record in state-dir/sandboxes/<id>.json and the other kinds of
 * record (leases) in state-dir/<kind>/<id>.json, written atomically, read back at start-up. */
#pragma once

#include "sandboxd/core/sandbox.h"

#include <stdbool.h>

/* Limits for a create already admitted once (a fork, a pool entry, a restored record): any
 * size fits. Here, below the registry, since a restored record is read with them. */
extern const policy_host sd_any_host;

/* Write sb's record (after every change a restart must know). */
int sd_state_save(sd_sandbox *sb);
/* The record sd_state_save writes (NULL: out of memory); sd_state_load reads it back. */
json_t *sd_state_record(const sd_sandbox *sb);
void sd_state_remove(sd_daemon *d, const char *id);
/* Where sandbox id's checkpoint lives (core/checkpoint.c): state-dir/checkpoints/<id>. */
void sd_state_checkpoint_dir(const sd_daemon *d, const char *id, char *buf, size_t len);
/* Build a sandbox from its record (not linked into the table). *ret_pool: it was a warm pool
 * entry. Returns -EINVAL for a record that cannot be read. */
int sd_state_load(sd_daemon *d, json_t *j, sd_sandbox **ret, bool *ret_pool);

/* Records of another kind: write j (stolen; durable: fsynced) as <kind>/<id>.json. */
int sd_state_write(sd_daemon *d, const char *kind, const char *id, json_t *j, bool durable);
void sd_state_unlink(sd_daemon *d, const char *kind, const char *id);
/* Call fn with every readable <kind>/<id>.json record; an unreadable one, or one fn refuses
 * (returns < 0), is removed, as are interrupted writes. */
void sd_state_foreach(sd_daemon *d, const char *kind, int (*fn)(sd_daemon *d, json_t *j));
/* For records that guard data (volumes): keep gets every <kind>/<id>.json by its id, j NULL
 * and why saying so when it is not valid JSON; no record is removed (interrupted writes are). */
typedef void (*sd_state_keep_fn)(sd_daemon *d, const char *id, json_t *j, const char *why);
void sd_state_foreach_keep(sd_daemon *d, const char *kind, sd_state_keep_fn keep);
