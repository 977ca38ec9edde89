/* Pool shapes of creates and their match with published warm pools (common/poolshape.h). */
#include "common/poolshape.h"

#include "common/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const FIELDS[] = {"image", "cpu",     "memory",  "disk",
                                     "pids",  "network", "profile", "isolation"};

static json_t *image_of(json_t *v) { /* "NAME" is "NAME:latest", as the daemon names it */
    const char *s = json_string_value(v);
    if (!s || !*s)
        return NULL;
    if (strcmp(s, "host") == 0 || strchr(s, ':'))
        return json_string(s);
    char buf[300];
    if ((size_t)snprintf(buf, sizeof(buf), "%s:latest", s) >= sizeof(buf))
        return NULL;
    return json_string(buf);
}

static json_t *bytes_of(json_t *v) {
    uint64_t b = 0;
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return json_integer(json_integer_value(v));
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 9e18 &&
        json_real_value(v) == floor(json_real_value(v)))
        return json_integer((json_int_t)json_real_value(v));
    if (json_is_string(v) && units_parse_size(json_string_value(v), &b) == 0 && b < (1ull << 62))
        return json_integer((json_int_t)b);
    return NULL;
}

static json_t *network_of(json_t *v) {
    const char *s = json_string_value(v);
    return s && (strcmp(s, "none") == 0 || strcmp(s, "open") == 0) ? json_string(s) : NULL;
}

static json_t *profile_of(json_t *v) {
    const char *s = json_string_value(v);
    if (json_is_null(v) || (s && strcmp(s, "default") == 0))
        return json_string("default");
    return s && strcmp(s, "grading") == 0 ? json_string(s) : NULL;
}

static json_t *isolation_of(json_t *v) {
    const char *s = json_string_value(v);
    if (json_is_null(v) || (s && strcmp(s, "native") == 0))
        return json_string("native");
    return s && strcmp(s, "gvisor") == 0 ? json_string(s) : NULL;
}

static json_t *field_of(const char *f, json_t *v) {
    if (strcmp(f, "image") == 0)
        return image_of(v);
    if (strcmp(f, "memory") == 0 || strcmp(f, "disk") == 0)
        return bytes_of(v);
    if (strcmp(f, "network") == 0)
        return network_of(v);
    if (strcmp(f, "profile") == 0)
        return profile_of(v);
    if (strcmp(f, "isolation") == 0)
        return isolation_of(v);
    if (strcmp(f, "cpu") == 0)
        return json_is_number(v) ? json_real(json_number_value(v)) : NULL;
    return json_is_integer(v) ? json_integer(json_integer_value(v)) : NULL; /* pids */
}

json_t *poolshape_from_body(json_t *body) {
    json_t *shape = json_is_object(body) ? json_object() : NULL;
    for (size_t i = 0; shape && i < sizeof(FIELDS) / sizeof(FIELDS[0]); i++) {
        json_t *v = json_object_get(body, FIELDS[i]);
        if (!v)
            continue;
        json_t *canon = field_of(FIELDS[i], v);
        if (!canon || json_object_set_new(shape, FIELDS[i], canon) < 0) {
            json_decref(shape);
            return NULL;
        }
    }
    return shape;
}

static bool same(json_t *a, json_t *b) {
    if (json_is_string(a) && json_is_string(b))
        return strcmp(json_string_value(a), json_string_value(b)) == 0;
    return json_is_number(a) && json_is_number(b) && json_number_value(a) == json_number_value(b);
}

bool poolshape_match(json_t *shape, json_t *defaults, json_t *pool) {
    if (!json_is_object(shape) || !json_is_object(pool))
        return false;
    json_t *native = json_string("native"); /* a record without "isolation" (older node) */
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof(FIELDS) / sizeof(FIELDS[0]); i++) {
        bool iso = strcmp(FIELDS[i], "isolation") == 0;
        json_t *want = json_object_get(shape, FIELDS[i]), *have = json_object_get(pool, FIELDS[i]);
        if (!want)
            want = json_object_get(defaults, FIELDS[i]) ?: (iso ? native : NULL);
        ok = want && same(want, have ?: (iso ? native : NULL));
    }
    json_decref(native);
    if (!ok)
        return false;
    return true;
}

json_t *poolshape_best(json_t *pools, json_t *defaults, json_t *shape, json_int_t *ret_ready) {
    json_t *p, *best = NULL;
    json_int_t most = 0;
    size_t i;
    json_array_foreach(pools, i, p) {
        json_int_t ready = json_integer_value(json_object_get(p, "ready"));
        if (ready > most && poolshape_match(shape, defaults, p))
            best = p, most = ready;
    }
    if (ret_ready)
        *ret_ready = most;
    return best;
}
