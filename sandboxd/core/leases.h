/* Leases: a client holds a lease and renews it; sandboxes created under it are terminated when
 * it expires or is deleted (so a crashed trainer does not leave sandboxes running). */
#pragma once

#include "sandboxd/core/context.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sd_lease {
    struct sd_lease *next;
    char id[24];
    uint64_t ttl_ms, expires_ms;
} sd_lease;

int sd_lease_create(sd_daemon *d, uint64_t ttl_ms, sd_lease **ret, error_rec *err);
/* -ENOENT when there is no lease id. */
int sd_lease_renew(sd_daemon *d, const char *id, sd_lease **ret, error_rec *err);
int sd_lease_delete(sd_daemon *d, const char *id, error_rec *err);
bool sd_lease_exists(sd_daemon *d, const char *id);
/* From the timer: end the leases past their expiry (and their sandboxes). */
void sd_leases_expire(sd_daemon *d);
/* At start-up: read the leases back from the state directory. */
void sd_leases_restore(sd_daemon *d);
