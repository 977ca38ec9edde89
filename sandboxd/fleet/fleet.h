/* The fleet layer (docs/FLEET.md): membership, capacity and drains in etcd, the node list,
 * where an id lives, placement, and leases across nodes. Beside the core and below the API:
 * it reads the core's tables and calls core/leases.h; the API calls it. All etcd calls run on
 * one fleet thread (fleet/thread.c); these functions run on the loop and never wait on etcd.
 * Without --fleet-etcd every function is a cheap no-op (sd_fleet_on is false). */
#pragma once

#include "sandboxd/core/context.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

int sd_fleet_init(sd_daemon *d, error_rec *err);
/* At shutdown: the thread revokes the node's etcd lease (it leaves the fleet) and ends. */
void sd_fleet_stop(sd_daemon *d);
bool sd_fleet_on(const sd_daemon *d);

typedef enum {
    SD_FLEET_SELF,    /* this node's id (or an id without a node part) */
    SD_FLEET_LIVE,    /* another node in the current node list: *ret_url is its advertise URL */
    SD_FLEET_GONE,    /* another node that was a member (P/members/), not in the list now */
    SD_FLEET_UNKNOWN, /* a node never seen */
} sd_fleet_where;

/* Where the sandbox or lease id lives. *ret_url stays valid until the next loop callback. */
sd_fleet_where sd_fleet_locate(sd_daemon *d, const char *id, const char **ret_url);
/* The advertise URL of node name when it is another live node of the fleet, else NULL (valid
 * until the next loop callback). */
const char *sd_fleet_node_url(sd_daemon *d, const char *name);
/* The name of the live node whose URL is url (a pick's), or NULL. */
const char *sd_fleet_node_of_url(sd_daemon *d, const char *url);
/* This node is drained (P/drain/NAME). */
bool sd_fleet_draining(sd_daemon *d);
/* This node has no free slot (every one taken by a sandbox that is not a warm pool entry). */
bool sd_fleet_full(sd_daemon *d);
/* Power of two choices over the other live nodes with free slots, not draining: the URL of the
 * better one, or NULL. When some publish a warm pool with ready entries that serves shape (a
 * create's pool shape, common/poolshape.h; may be NULL), the two are drawn among those only
 * and the one with more ready entries wins; else (unless pooled_only) among all of them, and
 * the one with more free slots wins. The pick is counted against that node in this node's view
 * (a free slot, a ready entry) until the next read of the fleet. */
const char *sd_fleet_pick(sd_daemon *d, json_t *shape, bool pooled_only);
/* GPUs (fleet/gpu.c): the URL of another live node with at least n free GPUs, or NULL. */
const char *sd_fleet_pick_gpus(sd_daemon *d, unsigned n);
/* GET /v1/fleet's body. */
json_t *sd_fleet_view(sd_daemon *d);

/* Asynchronous etcd operations: cb runs on the loop with r (0, -ENOENT, -EHOSTUNREACH, ...) and
 * a value (a lookup's) or NULL. ud identifies the caller for sd_fleet_cancel. */
typedef void (*sd_fleet_cb)(sd_daemon *d, void *ud, int r, const char *value);
/* Drain (on) or undrain NAME: put or delete P/drain/NAME. */
int sd_fleet_drain(sd_daemon *d, const char *name, bool on, sd_fleet_cb cb, void *ud);
/* A lease made here: P/leases/ID on an etcd lease of the lease's TTL. */
int sd_fleet_lease_publish(sd_daemon *d, const char *id, uint64_t ttl_ms, sd_fleet_cb cb, void *ud);
/* A lease made here was renewed: keep its etcd lease alive (published again if it expired). */
void sd_fleet_lease_renewed(sd_daemon *d, const char *id, uint64_t ttl_ms);
/* Read P/leases/ID (a lease of another node named by a create): cb's r -ENOENT when absent. */
int sd_fleet_lease_lookup(sd_daemon *d, const char *id, sd_fleet_cb cb, void *ud);
/* The caller ud went away: its pending operations finish without calling back. */
void sd_fleet_cancel(sd_daemon *d, void *ud);
