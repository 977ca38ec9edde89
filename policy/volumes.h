/* Named volumes (docs/API.md "Volumes"): the body of POST /v1/volumes and the create's
 * "volumes" field, parsed strictly. Pure: no I/O, no state. Errors name the field. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define POLICY_VOLUME_NAME_MAX 63
#define POLICY_VOLUMES_MAX 16 /* volumes of one sandbox */
#define POLICY_VOLUME_PATH_MAX 255
#define POLICY_VOLUME_MIN_SIZE (16ull << 20)
#define POLICY_VOLUME_MAX_SIZE (1ull << 40)
#define POLICY_VOLUME_DEFAULT_SIZE (1ull << 30)

/* The keys of a POST /v1/volumes body (parsed by policy/limits.h policy_limits_parse_volume)
 * and of one create "volumes" entry. */
extern const char *const policy_volume_keys[];
extern const char *const policy_volume_mount_keys[];

/* [a-z0-9][a-z0-9_-]{0,62} */
bool policy_volume_name_ok(const char *s);
/* -EINVAL: "FIELD: must be a volume name: ..." */
int policy_volume_bad_name(const char *field, error_rec *err);
/* A create's "volumes": absent/null/[] (none: *ret NULL) or an array of at most
 * POLICY_VOLUMES_MAX {"name", "path", "read_only" (default false)}: each name once, each path
 * absolute, normal (no ".", "..", "//", trailing "/"), printable ASCII without spaces, not a
 * system directory (/, /proc, /dev, /sys, /etc, /usr, /bin, ...), not /workspace or /tmp
 * themselves, and no path inside another. *ret: the normalized array (read_only always set). */
int policy_volumes_parse(json_t *v, json_t **ret, error_rec *err);
