/* A small blocking client of etcd's v3 JSON gateway (libcurl + jansson): keys, prefix ranges
 * and leases. Used only by the fleet thread (fleet/thread.c), never on the event loop. Keys and
 * values are plain strings here; base64 is the gateway's business. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct etcd_client etcd_client;

#define ETCD_TIMEOUT_MS 3000 /* a call's tries wait this long each, unless set otherwise */

/* endpoints: "http://h:2379[,http://h2:2379...]"; tried in order, the next one on failure. A
 * try that fails on a connection kept from a call before is made again on a new one. */
int etcd_new(const char *endpoints, etcd_client **ret, error_rec *err);
void etcd_free(etcd_client *c);
/* How long each try of a call waits for its answer (connecting: 1 s at most of it). */
void etcd_set_timeout(etcd_client *c, unsigned ms);
/* How many calls were answered on a new connection after failing on a kept one. */
unsigned etcd_redone(const etcd_client *c);

/* Errors: -EHOSTUNREACH (no endpoint answered), -ENOENT (the lease or key does not exist),
 * -EPROTO (an answer that is not the gateway's), -ENOMEM. */
/* ret_rev (may be NULL): the store's revision the answer was taken at (its header's). */
int etcd_put(etcd_client *c, const char *key, const char *value, int64_t lease, int64_t *ret_rev,
             error_rec *err);
/* Every key under prefix as {"key": "value"} (prefix included in the keys). */
int etcd_get_prefix(etcd_client *c, const char *prefix, json_t **ret, int64_t *ret_rev,
                    error_rec *err);
/* One key's value (malloc'ed); -ENOENT when absent. */
int etcd_get(etcd_client *c, const char *key, char **ret, int64_t *ret_rev, error_rec *err);
int etcd_delete(etcd_client *c, const char *key, int64_t *ret_rev, error_rec *err);
int etcd_lease_grant(etcd_client *c, unsigned ttl_s, int64_t *ret_id, error_rec *err);
/* -ENOENT when the lease has expired (or never was). */
int etcd_lease_keepalive(etcd_client *c, int64_t id, error_rec *err);
int etcd_lease_revoke(etcd_client *c, int64_t id, error_rec *err);

/* For the watch stream (fleet/etcd_watch.c): the endpoints, the one that answered last first;
 * {"key","range_end"} of every key under prefix (base64); an int64 the gateway wrote (a string
 * or a number); and one event's kv ({"key","value"} in base64) applied to {"key": "value"}:
 * set, or removed when deleted. */
unsigned etcd_endpoints(const etcd_client *c);
const char *etcd_endpoint(const etcd_client *c, unsigned i);
json_t *etcd_prefix_json(const char *prefix);
int64_t etcd_int64(json_t *v);
int etcd_kv_apply(json_t *kvs, json_t *kv, bool deleted);
