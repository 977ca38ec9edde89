/* One etcd watch stream over the v3 JSON gateway (POST /v3/watch, answered by a long-lived
 * stream of JSON objects, one per line), driven by libcurl's multi interface so that the
 * thread that owns it can wait on it with a timeout and be woken from another thread. Used by
 * the fleet's watch thread only (fleet/watch.c), never on the event loop. */
#pragma once

#include "common/error.h"
#include "sandboxd/fleet/etcd.h"

typedef struct etcd_stream etcd_stream;
/* Each answer's "result" object (a WatchResponse: header, created, canceled, compact_revision,
 * events), borrowed for the call. */
typedef void (*etcd_stream_cb)(void *ud, json_t *result);

int etcd_stream_new(etcd_stream **ret, error_rec *err);
void etcd_stream_free(etcd_stream *s);
/* Open a watch of every key under prefix from start_rev (> 0) on endpoint i of c (etcd_endpoint:
 * 0 is the one that answered last); a stream already open is closed first. */
int etcd_stream_open(etcd_stream *s, const etcd_client *c, unsigned i, const char *prefix,
                     int64_t start_rev, etcd_stream_cb cb, void *ud, error_rec *err);
/* Wait up to ms for answers (or a wakeup), handing each to cb. 1: the stream is open (or none
 * is: the wait was a sleep), -EHOSTUNREACH: it broke, ended or never connected, -EPROTO: etcd
 * answered with an error or something that is not the gateway's. The stream is closed after
 * an error. */
int etcd_stream_run(etcd_stream *s, int ms, error_rec *err);
void etcd_stream_close(etcd_stream *s);
bool etcd_stream_open_now(const etcd_stream *s);
/* Ends the current (or next) etcd_stream_run's wait early; any thread. */
void etcd_stream_wakeup(etcd_stream *s);
