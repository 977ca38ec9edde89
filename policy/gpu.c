/* The "gpus" create field (see gpu.h). */
#include "policy/gpu.h"

#include <string.h>

int policy_gpu_uuid_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= POLICY_GPU_UUID_MAX &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == n;
}

int policy_gpu_parse(json_t *v, unsigned *ret_count, json_t **ret_uuids, error_rec *err) {
    if (!v || json_is_null(v)) {
        *ret_count = 0;
        *ret_uuids = NULL;
        return 0;
    }
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > POLICY_MAX_GPUS)
            return error_set(err, -EINVAL, "gpus: must be a number of GPUs in [0, %d]",
                             POLICY_MAX_GPUS);
        *ret_count = (unsigned)n;
        *ret_uuids = NULL;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > POLICY_MAX_GPUS)
        return error_set(err, -EINVAL,
                         "gpus: must be a number of GPUs or a non-empty list of at most %d GPU "
                         "uuids",
                         POLICY_MAX_GPUS);
    size_t i, k;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e) || !policy_gpu_uuid_ok(json_string_value(e)))
            return error_set(err, -EINVAL, "gpus[%zu]: must be a GPU uuid string ([A-Za-z0-9-_])",
                             i);
        for (k = 0; k < i; k++)
            if (strcmp(json_string_value(json_array_get(v, k)), json_string_value(e)) == 0)
                return error_set(err, -EINVAL, "gpus[%zu]: %s is named twice", i,
                                 json_string_value(e));
    }
    json_t *copy = json_deep_copy(v);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    *ret_count = (unsigned)json_array_size(v);
    *ret_uuids = copy;
    return 0;
}
