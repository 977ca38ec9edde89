/* The "gpus" field of a create body: a count of whole GPUs or a list of GPU uuids (which GPUs
 * to give). Pure: no I/O, no state. Errors start with "gpus". */
#pragma once

#include "common/error.h"

#include <jansson.h>

#define POLICY_MAX_GPUS 64
#define POLICY_GPU_UUID_MAX 95

/* v: NULL/null/0 (no GPU), an integer in [0, 64], or a non-empty array of distinct uuid strings
 * ([A-Za-z0-9-]{1,95}). ret_count: how many; ret_uuids: a copy of the array, or NULL for a count.
 */
int policy_gpu_parse(json_t *v, unsigned *ret_count, json_t **ret_uuids, error_rec *err);
/* True when s is a well-formed GPU uuid (also used for the daemon's inventory). */
int policy_gpu_uuid_ok(const char *s);
