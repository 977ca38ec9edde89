/* The create's "entrypoint" field, parsed strictly (policy/entrypoint.h). */
#include "policy/entrypoint.h"

#include <errno.h>
#include <string.h>

static int check_argv(json_t *a, const char *what, error_rec *err) {
    if (!json_is_array(a) || json_array_size(a) == 0 ||
        json_array_size(a) > POLICY_ENTRYPOINT_ARGV_MAX)
        return error_set(err, -EINVAL,
                         "entrypoint: %s must be true or a non-empty array of at most %d strings",
                         what, POLICY_ENTRYPOINT_ARGV_MAX);
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        if (!json_is_string(e) || memchr(json_string_value(e), 0, json_string_length(e)))
            return error_set(err, -EINVAL, "entrypoint[%zu]: must be a string without NUL", i);
    }
    if (json_string_length(json_array_get(a, 0)) == 0)
        return error_set(err, -EINVAL, "entrypoint[0]: must not be empty");
    return 0;
}

int policy_entrypoint_parse(json_t *v, const char *image, json_t *image_ep, json_t *image_cmd,
                            json_t **ret_argv, error_rec *err) {
    if (!v || json_is_null(v) || json_is_false(v)) {
        *ret_argv = NULL;
        return 0;
    }
    if (!json_is_true(v)) {
        int r = check_argv(v, "it", err);
        if (r < 0)
            return r;
        *ret_argv = json_deep_copy(v);
        return *ret_argv ? 0 : error_set(err, -ENOMEM, "out of memory");
    }
    json_t *a = json_array();
    if (!a)
        return error_set(err, -ENOMEM, "out of memory");
    if (json_is_array(image_ep))
        json_array_extend(a, image_ep);
    if (json_is_array(image_cmd))
        json_array_extend(a, image_cmd);
    if (json_array_size(a) == 0) {
        json_decref(a);
        return error_set(err, -EINVAL,
                         "entrypoint: image %s has no Entrypoint or Cmd (give an argv array)",
                         image ? image : "host");
    }
    int r = check_argv(a, "the image's", err);
    if (r < 0) {
        json_decref(a);
        return r;
    }
    *ret_argv = a;
    return 0;
}
