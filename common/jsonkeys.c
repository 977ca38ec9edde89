/* The unknown-field check shared by every body parser (see jsonkeys.h). */
#include "common/jsonkeys.h"

#include <stdbool.h>
#include <string.h>

static bool known(const char *key, const char *const *allowed) {
    for (size_t i = 0; allowed[i]; i++)
        if (strcmp(key, allowed[i]) == 0)
            return true;
    return false;
}

const char *jsonkeys_other(json_t *obj, const char *const *allowed) {
    const char *key;
    json_t *v;
    if (!json_is_object(obj))
        return NULL;
    json_object_foreach(obj, key, v) {
        if (!known(key, allowed))
            return key;
    }
    return NULL;
}

int jsonkeys_check(json_t *obj, const char *const *allowed, const char *where, error_rec *err) {
    const char *key = jsonkeys_other(obj, allowed);
    if (key)
        return error_set(err, -EINVAL,
                         "%s%s%.64s: unknown field (this daemon does not implement it)",
                         where ? where : "", where ? "." : "", key);
    return 0;
}
