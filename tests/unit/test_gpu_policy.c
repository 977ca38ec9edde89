/* Unit tests of the "gpus" create field (policy/gpu.c, through policy_limits_parse_create) and
 * the GPU-hour price (policy/price.c). */
#include "policy/gpu.h"
#include "policy/limits.h"
#include "policy/price.h"
#include "tests/lib/test.h"

#include <math.h>

static const policy_host host = {.cpus = 4, .memory_bytes = 8ull << 30};

static int parse(const char *body, policy_create *c, error_rec *err) {
    json_t *j = json_loads(body, 0, NULL);
    CHECK(j);
    int r = policy_limits_parse_create(j, NULL, &host, c, err);
    json_decref(j);
    return r;
}

TEST(gpus_count_and_uuids) {
    policy_create c = {0};
    error_rec err = {0};
    CHECK_OK(parse("{}", &c, &err));
    CHECK_EQ(c.gpus, 0);
    CHECK(!c.gpu_uuids);
    json_t *j = policy_create_to_json(&c);
    CHECK(!json_object_get(j, "gpus")); /* a CPU sandbox's record is as before */
    json_decref(j);
    policy_create_done(&c);
    CHECK_OK(parse("{\"gpus\":2}", &c, &err));
    CHECK_EQ(c.gpus, 2);
    CHECK(!c.gpu_uuids);
    policy_create_done(&c);
    CHECK_OK(parse("{\"gpus\":[\"GPU-a\",\"GPU-b-1\"]}", &c, &err));
    CHECK_EQ(c.gpus, 2);
    CHECK_STREQ(json_string_value(json_array_get(c.gpu_uuids, 1)), "GPU-b-1");
    /* the record round-trips (a restart claims the same GPUs) */
    j = policy_create_to_json(&c);
    policy_create back = {0};
    CHECK_OK(policy_limits_parse_create(j, NULL, &host, &back, &err));
    CHECK_EQ(back.gpus, 2);
    CHECK(json_equal(back.gpu_uuids, c.gpu_uuids));
    json_decref(j);
    policy_create_done(&back);
    policy_create_done(&c);
}

TEST(gpus_bad_values_name_the_field) {
    static const char *const bad[] = {
        "{\"gpus\":-1}",        "{\"gpus\":65}",
        "{\"gpus\":\"1\"}",     "{\"gpus\":1.5}",
        "{\"gpus\":[]}",        "{\"gpus\":[1]}",
        "{\"gpus\":[\"a b\"]}", "{\"gpus\":true}",
        "{\"gpus\":{}}",        "{\"gpus\":[\"x\",\"x\"]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        policy_create c = {0};
        error_rec err = {0};
        CHECK_MSG(parse(bad[i], &c, &err) == -EINVAL, "accepted %s", bad[i]);
        CHECK_MSG(strncmp(err.message, "gpus", 4) == 0, "%s: %s", bad[i], err.message);
    }
}

TEST(gpu_hour_price) {
    policy_price p = policy_price_default();
    CHECK(fabs(p.gpu_hour_usd - 2.0) < 1e-12);
    CHECK(fabs(policy_price_gpu_per_hour(&p, 3) - 6.0) < 1e-12);
    CHECK(policy_price_gpu_per_hour(&p, 0) == 0);
}
