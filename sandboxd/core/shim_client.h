/* The daemon's side of one shim connection (common/shimproto.h over <dir>/shim.sock): requests
 * with replies matched by seq, events pushed to the owner, loss of the connection reported once.
 * Driven by a uv_poll on the loop. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

typedef struct sd_shim sd_shim;

/* reply is NULL when the connection was lost before the answer came. Received fds (rare) are
 * closed after the callback unless it takes them (sets them to -1). */
typedef void (*sd_shim_reply_fn)(void *ud, json_t *reply);
typedef struct sd_shim_ops {
    void (*event)(void *ud, json_t *ev); /* exit, oom, dead */
    void (*lost)(void *ud);              /* peer closed or protocol broken; called once */
} sd_shim_ops;

int sd_shim_connect(uv_loop_t *loop, const char *sock_path, const sd_shim_ops *ops, void *ud,
                    sd_shim **ret, error_rec *err);
/* Send {type, ...fields} (fields stolen, may be NULL) with fds (not closed here). */
int sd_shim_request(sd_shim *s, const char *type, json_t *fields, const int *fds, size_t n_fds,
                    sd_shim_reply_fn cb, void *ud);
/* Inside a reply callback: take the first descriptor that came with the reply (-1: none). */
int sd_shim_take_fd(sd_shim *s);
/* Forget the callbacks registered with ud (its owner is going away). */
void sd_shim_cancel(sd_shim *s, void *ud);
/* Close the connection; pending callbacks are called with NULL. Accepts NULL. */
void sd_shim_close(sd_shim *s);
