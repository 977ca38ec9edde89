/* Warm pools of ready sandboxes per template (image, limits, network mode). */
#pragma once

#include "sandboxd/core/registry.h"
#include "sandboxd/core/sandbox.h"

/* Parse cfg.pools and listen for starts and ends (refills). */
int sd_pool_init(sd_daemon *d, error_rec *err);
void sd_pool_done(sd_daemon *d);
/* A running, never handed-out entry whose template matches c, or NULL (a miss when a template
 * of c's shape exists). */
sd_sandbox *sd_pool_take(sd_daemon *d, const policy_create *c);
/* Give entry sb to a create: its spec becomes c (moved), timers and cost start now. Returns
 * the state file's save result; on failure the caller ends sb (nobody has used it). */
int sd_pool_hand_out(sd_sandbox *sb, policy_create *c, const sd_idem *idem);
/* A create of c's shape is coming (SandboxFusion's requests): counts it toward the size of
 * c's demand template, made on first use (none for GPUs or allow-lists). */
void sd_pool_demand(sd_daemon *d, const policy_create *c);
/* Templates: the configured ones, then those made by demand. */
unsigned sd_pool_count(const sd_daemon *d);
bool sd_pool_is_demand(const sd_daemon *d, unsigned t);
/* Start entries until every pool is full, within the budget and --max-sandboxes. */
void sd_pool_refill(sd_daemon *d);
/* The same once the loop has run what is due (timers: the request that took an entry sends its
 * first command before the refill forks new shims). */
void sd_pool_refill_later(sd_daemon *d);
/* Room for n more sandboxes on the node (--max-sandboxes), ending pool entries (those still
 * starting first) as needed, for `what` ("a create", "a fork", "a resume": their end message
 * says so). False when ending every entry would not make it. */
bool sd_pool_make_room(sd_daemon *d, unsigned n, const char *what);
/* After restore: keep restored entry sb when its template is still configured and not full
 * (true); else it is marked as an orphan entry for the caller to end (false). */
bool sd_pool_adopt_restored(sd_sandbox *sb);
/* Whether a create of c's shape would take a running entry now (sd_pool_take, not taking). */
bool sd_pool_has_ready(sd_daemon *d, const policy_create *c);
/* The spec every entry of template t has, or NULL when there is no template t. */
const policy_create *sd_pool_template(sd_daemon *d, unsigned t);
/* Entries of template t (ready: running; starting). */
void sd_pool_entries(sd_daemon *d, unsigned t, unsigned *ret_ready, unsigned *ret_starting);
/* images: true when a pool template names image `name` (core/images.c's delete check). */
bool sd_pool_uses_image(sd_daemon *d, const char *name);
