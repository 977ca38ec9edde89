/* The task file's "env_server" field (client/grpo/envserver.h): parsed strictly, every error
 * naming the field. */
#include "client/grpo/envserver.h"

#include "common/jsonkeys.h"
#include "common/units.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const env_keys[] = {"port", "entrypoint", "wait", NULL};

static int parse_wait(json_t *v, uint64_t *ret, error_rec *err) {
    char buf[64];
    if (!v) {
        *ret = 30000;
        return 0;
    }
    if (json_is_number(v))
        snprintf(buf, sizeof(buf), "%.17g", json_number_value(v));
    else if (json_is_string(v))
        snprintf(buf, sizeof(buf), "%s", json_string_value(v));
    else
        buf[0] = 0;
    if (!*buf || units_parse_duration(buf, ret) < 0 || *ret == 0 || *ret > 600000)
        return error_set(err, -EINVAL, "env_server.wait: a duration up to 10m");
    return 0;
}

/* A non-empty array of non-empty strings */
static bool argv_ok(json_t *a) {
    if (!json_is_array(a) || json_array_size(a) == 0)
        return false;
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x) {
        if (!json_is_string(x) || json_string_length(x) == 0)
            return false;
    }
    return true;
}

int grpo_env_server_parse(json_t *v, grpo_env_server **ret, error_rec *err) {
    *ret = NULL;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return error_set(err, -EINVAL, "env_server: must be an object");
    int r = jsonkeys_check(v, env_keys, "env_server", err);
    if (r < 0)
        return r;
    json_t *p = json_object_get(v, "port"), *e = json_object_get(v, "entrypoint");
    if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535)
        return error_set(err, -EINVAL, "env_server.port: must be an integer 1..65535");
    if (e && !json_is_true(e) && !argv_ok(e))
        return error_set(err, -EINVAL,
                         "env_server.entrypoint: true or an argv array (non-empty strings)");
    grpo_env_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->port = (unsigned)json_integer_value(p);
    s->image_entrypoint = !e || json_is_true(e);
    if ((r = parse_wait(json_object_get(v, "wait"), &s->wait_ms, err)) < 0) {
        free(s);
        return r;
    }
    json_t *c = json_pack("{s:[i],s:O}", "ports", (int)s->port, "entrypoint", e ? e : json_true());
    s->create_json = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    if (!s->create_json) {
        free(s);
        return -ENOMEM;
    }
    *ret = s;
    return 0;
}

int grpo_env_server_check_image(const grpo_env_server *s, const char *image, error_rec *err) {
    if (!s || !s->image_entrypoint || (image && strcmp(image, "host") != 0))
        return 0;
    return error_set(err, -EINVAL,
                     "env_server.entrypoint: true starts the image's Entrypoint and Cmd, which the "
                     "host image has not: give the task an \"image\" that has them, or an argv");
}

void grpo_env_server_free(grpo_env_server *s) {
    if (!s)
        return;
    free(s->create_json);
    free(s);
}
