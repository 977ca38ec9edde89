/* Unknown fields: every JSON body and configuration object names the keys it reads, and a key
 * outside that list is refused, never ignored (docs/API.md, "Unknown fields"). */
#pragma once

#include "common/error.h"

#include <jansson.h>

/* -EINVAL naming the first key of `obj` not in `allowed` (NULL-terminated): "KEY: unknown
 * field ..." or, with `where`, "WHERE.KEY: unknown field ...". 0 when every key is known or
 * `obj` is not an object (its type is the field parser's business). */
int jsonkeys_check(json_t *obj, const char *const *allowed, const char *where, error_rec *err);
/* The first key of `obj` not in `allowed` (NULL-terminated), or NULL (also when `obj` is not an
 * object). */
const char *jsonkeys_other(json_t *obj, const char *const *allowed);
