/* libFuzzer target: the API request parsers (policy/limits.h). The first input byte picks the
 * parser (create with and without operator defaults, exec, timeout, lease, size, duration), the
 * rest is JSON. Invariant checked beyond "no crash": a create that parses serializes
 * (policy_create_to_json) to a body that parses again to the same limits. */
#include "policy/limits.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const policy_host host = {.cpus = 8, .memory_bytes = 16ull << 30};

static void check_create(json_t *body, json_t *defaults) {
    policy_create c = {0};
    error_rec err = {0};
    if (policy_limits_parse_create(body, defaults, &host, &c, &err) < 0) {
        if (err.message[0] == '\0')
            abort(); /* every rejection names its field */
        return;
    }
    json_t *again = policy_create_to_json(&c);
    if (!again)
        abort();
    policy_create c2 = {0};
    if (policy_limits_parse_create(again, NULL, &host, &c2, &err) < 0)
        abort(); /* the daemon persists this form and must read it back after a restart */
    if (c2.memory != c.memory || c2.disk != c.disk || c2.pids != c.pids ||
        c2.timeout_ms != c.timeout_ms || c2.idle_timeout_ms != c.idle_timeout_ms ||
        c2.net_mode != c.net_mode)
        abort();
    json_decref(again);
    policy_create_done(&c2);
    policy_create_done(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536)
        return 0;
    json_t *j =
        json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!j)
        return 0;
    error_rec err = {0};
    uint64_t u = 0;
    switch (data[0] % 7) {
    case 0:
        check_create(j, NULL);
        break;
    case 1: {
        json_t *defaults =
            json_pack("{s:f,s:s,s:s}", "cpu", 0.5, "memory", "512Mi", "idle_timeout", "2m");
        if (json_is_object(j)) {
            check_create(j, defaults);
            check_create(defaults, j); /* hostile operator defaults */
        }
        json_decref(defaults);
        break;
    }
    case 2: {
        policy_exec e = {0};
        if (policy_limits_parse_exec(j, &e, &err) == 0) {
            if (!json_is_array(e.argv) || json_array_size(e.argv) == 0 ||
                e.max_output > POLICY_MAX_OUTPUT)
                abort();
            policy_exec_done(&e);
        }
        break;
    }
    case 3:
        if (policy_limits_parse_timeout(j, &u, &err) == 0 &&
            (u < 1000 || u > POLICY_MAX_DURATION_MS))
            abort();
        break;
    case 4:
        if (policy_limits_parse_lease(j, &u, &err) == 0 && (u < 1000 || u > POLICY_MAX_DURATION_MS))
            abort();
        break;
    case 5:
        (void)policy_parse_size(j, "size", &u, &err);
        break;
    case 6:
        (void)policy_parse_duration(j, "duration", &u, &err);
        break;
    }
    json_decref(j);
    return 0;
}
