/* Leases: a client holds a lease and renews it; sandboxes created under it are terminated when
 * it expires or is deleted (so a crashed trainer does not leave sandboxes running). */
#pragma once

#include "sandboxd/core/context.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sd_lease {
    struct sd_lease *next;
    char id[64];
    uint64_t ttl_ms, expires_ms;
    bool remote;         /* another fleet node's lease (no expiry here: fleet/ ends it) */
    uint64_t adopted_ms; /* remote: now_mono_ms() when adopted (0: restored) */
} sd_lease;

/* -EDQUOT (create, renew, adopt) when its record cannot be saved (a full or read-only state
 * directory): nothing changes (a renew keeps the lease's expiry). */
int sd_lease_create(sd_daemon *d, uint64_t ttl_ms, sd_lease **ret, error_rec *err);
/* -ENOENT when there is no lease id. */
int sd_lease_renew(sd_daemon *d, const char *id, sd_lease **ret, error_rec *err);
int sd_lease_delete(sd_daemon *d, const char *id, error_rec *err);
bool sd_lease_exists(sd_daemon *d, const char *id);
/* Another fleet node's lease id, known to exist in etcd: sandboxes here may name it. */
int sd_lease_adopt(sd_daemon *d, const char *id, error_rec *err);
/* End lease id (if there is one) and its sandboxes, saying why. */
void sd_lease_end_id(sd_daemon *d, const char *id, const char *why);
/* From the timer: end the leases past their expiry (and their sandboxes). */
void sd_leases_expire(sd_daemon *d);
/* At start-up: read the leases back from the state directory. */
void sd_leases_restore(sd_daemon *d);
