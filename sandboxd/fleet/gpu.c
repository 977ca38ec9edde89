/* GPU placement in a fleet (docs/FLEET.md "GPUs"): a create asking for N GPUs goes to a node
 * whose record shows at least N free GPUs ("gpus":{"total","free"}), power of two choices by
 * free GPUs, and the pick is counted against that node in this node's view until the next read,
 * as sd_fleet_pick does for slots. */
#include "sandboxd/fleet/internal.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static json_int_t gpus_free(json_t *v) {
    return json_integer_value(json_object_get(json_object_get(v, "gpus"), "free"));
}

const char *sd_fleet_pick_gpus(sd_daemon *d, unsigned n) {
    sd_fleet *f = d->fleet;
    if (!f || !n)
        return NULL;
    json_t *c = json_array(), *v;
    const char *name;
    json_object_foreach(f->nodes, name, v) {
        if (strcmp(name, d->cfg.node_name) != 0 && !json_is_true(json_object_get(v, "draining")) &&
            json_integer_value(json_object_get(v, "free")) > 0 && gpus_free(v) >= (json_int_t)n &&
            json_is_string(json_object_get(v, "url")))
            json_array_append(c, v);
    }
    size_t k = json_array_size(c);
    if (!k) {
        json_decref(c);
        return NULL;
    }
    uint32_t rnd[2] = {0, 0};
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd[0] = (uint32_t)now_mono_us(), rnd[1] = rnd[0] >> 7;
    size_t i = rnd[0] % k, j = k > 1 ? (i + 1 + rnd[1] % (k - 1)) % k : i; /* two distinct */
    json_t *a = json_array_get(c, i), *b = json_array_get(c, j);
    json_t *best = gpus_free(b) > gpus_free(a) ? b : a;
    json_t *g = json_object_get(best, "gpus");
    json_object_set_new(g, "free", json_integer(gpus_free(best) - (json_int_t)n));
    json_object_set_new(best, "free",
                        json_integer(json_integer_value(json_object_get(best, "free")) - 1));
    snprintf(f->url_buf, sizeof(f->url_buf), "%s", json_string_value(json_object_get(best, "url")));
    json_decref(c);
    return f->url_buf;
}
