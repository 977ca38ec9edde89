/* A small blocking client of etcd's v3 JSON gateway (libcurl + jansson): keys, prefix ranges
 * and leases. Used only by the fleet thread (fleet/thread.c), never on the event loop. Keys and
 * values are plain strings here; base64 is the gateway's business. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdint.h>

typedef struct etcd_client etcd_client;

/* endpoints: "http://h:2379[,http://h2:2379...]"; tried in order, the next one on failure. */
int etcd_new(const char *endpoints, etcd_client **ret, error_rec *err);
void etcd_free(etcd_client *c);

/* Errors: -EHOSTUNREACH (no endpoint answered), -ENOENT (the lease or key does not exist),
 * -EPROTO (an answer that is not the gateway's), -ENOMEM. */
int etcd_put(etcd_client *c, const char *key, const char *value, int64_t lease, error_rec *err);
/* Every key under prefix as {"key": "value"} (prefix included in the keys). */
int etcd_get_prefix(etcd_client *c, const char *prefix, json_t **ret, error_rec *err);
/* One key's value (malloc'ed); -ENOENT when absent. */
int etcd_get(etcd_client *c, const char *key, char **ret, error_rec *err);
int etcd_delete(etcd_client *c, const char *key, error_rec *err);
int etcd_lease_grant(etcd_client *c, unsigned ttl_s, int64_t *ret_id, error_rec *err);
/* -ENOENT when the lease has expired (or never was). */
int etcd_lease_keepalive(etcd_client *c, int64_t id, error_rec *err);
int etcd_lease_revoke(etcd_client *c, int64_t id, error_rec *err);
