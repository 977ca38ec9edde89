/* Unit tests of GPU placement over a node's view of the fleet (sd_fleet_pick_gpus,
 * fleet/gpu.c), on a view set by hand: only nodes with enough free GPUs are chosen, and each
 * pick is counted against its node until the next read. */
#include "sandboxd/core/context.h"
#include "sandboxd/fleet/internal.h"
#include "tests/lib/test.h"

#include <string.h>

static sd_fleet fleet;
static sd_daemon daemon_;

static sd_daemon *view(const char *nodes_json) {
    json_decref(fleet.nodes);
    fleet = (sd_fleet){.d = &daemon_};
    daemon_ = (sd_daemon){.fleet = &fleet};
    daemon_.cfg.node_name = "b";
    fleet.nodes = json_loads(nodes_json, 0, NULL);
    CHECK(fleet.nodes);
    return &daemon_;
}

static const char *picked(sd_daemon *d, unsigned n) {
    const char *url = sd_fleet_pick_gpus(d, n);
    return url ? url + strlen("http://") : "";
}

#define NODE(name, free_slots, draining, gpus_free)                                                \
    "\"" name "\":{\"name\":\"" name "\",\"url\":\"http://" name "\",\"free\":" #free_slots        \
    ",\"draining\":" #draining ",\"gpus\":{\"total\":8,\"free\":" #gpus_free "}}"

TEST(gpu_create_goes_to_a_node_with_free_gpus) {
    /* a has slots but no GPU, c has 2 free, d is drained with 8, b (this node) is not picked */
    for (int round = 0; round < 20; round++) {
        sd_daemon *d = view("{" NODE("a", 9, false, 0) "," NODE("b", 9, false, 8) "," NODE(
            "c", 1, false, 2) "," NODE("d", 9, true, 8) "}");
        CHECK_STREQ(picked(d, 1), "c");
    }
    sd_daemon *d = view("{" NODE("a", 9, false, 1) "," NODE("c", 9, false, 2) "}");
    CHECK_STREQ(picked(d, 2), "c"); /* only c has two */
    CHECK_STREQ(picked(d, 2), "");  /* counted: c has none left in this view */
    CHECK_STREQ(picked(d, 1), "a");
    CHECK_STREQ(picked(d, 1), "");
    CHECK_STREQ(picked(d, 0), ""); /* no GPU asked: not this placement */
}

TEST(gpu_pick_prefers_more_free_gpus) {
    for (int round = 0; round < 30; round++) {
        sd_daemon *d = view("{" NODE("a", 9, false, 1) "," NODE("c", 9, false, 4) "}");
        CHECK_STREQ(picked(d, 1), "c");
    }
    /* a node without slots is never chosen, GPUs or not */
    sd_daemon *d = view("{" NODE("a", 0, false, 4) "}");
    CHECK_STREQ(picked(d, 1), "");
    json_decref(fleet.nodes);
    fleet.nodes = NULL;
}
