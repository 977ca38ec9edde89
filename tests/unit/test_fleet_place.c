/* Unit tests of a node's placement over its view of the fleet (sd_fleet_pick, docs/FLEET.md
 * "Placement: 307 for a create"), on a view set by hand: the two drawn are distinct, and each
 * pick is counted against its node (a free slot, a ready pool entry) until the next read; and
 * GPU placement (sd_fleet_pick_gpus, fleet/gpu.c): only nodes with enough free GPUs are chosen,
 * each pick counted against its node until the next read. */
#include "sandboxd/core/context.h"
#include "sandboxd/fleet/internal.h"
#include "tests/lib/test.h"

#include <string.h>

static sd_fleet fleet;
static sd_daemon daemon_;

/* This node is b; the view holds b itself and the records given (a JSON object). */
static sd_daemon *view(const char *nodes_json) {
    json_decref(fleet.nodes);
    fleet = (sd_fleet){.d = &daemon_};
    daemon_ = (sd_daemon){.fleet = &fleet};
    daemon_.cfg.node_name = "b";
    fleet.nodes = json_loads(nodes_json, 0, NULL);
    CHECK(fleet.nodes);
    return &daemon_;
}

/* The name of the node a URL from the view belongs to ("http://NAME"), or "" for NULL. */
static const char *picked(sd_daemon *d, json_t *shape, bool pooled_only) {
    const char *url = sd_fleet_pick(d, shape, pooled_only);
    return url ? url + strlen("http://") : "";
}

#define NODE(name, free_slots, draining, pools)                                                    \
    "\"" name "\":{\"name\":\"" name "\",\"url\":\"http://" name "\",\"free\":" #free_slots        \
    ",\"draining\":" #draining ",\"pools\":" pools ",\"defaults\":{\"image\":\"host\","            \
    "\"cpu\":1,\"memory\":536870912,\"disk\":1073741824,\"pids\":256,\"network\":\"none\","        \
    "\"profile\":\"default\"}}"

TEST(burst_spreads_as_slots_are_taken) {
    /* b (drained, say) sends on 4 creates before its next read: 2 to a, 2 to c, then none */
    sd_daemon *d = view("{" NODE("a", 2, false, "[]") "," NODE("b", 5, false, "[]") "," NODE(
        "c", 2, false, "[]") "," NODE("d", 9, true, "[]") "}");
    unsigned on_a = 0, on_c = 0;
    for (int i = 0; i < 4; i++) {
        const char *n = picked(d, NULL, false);
        on_a += strcmp(n, "a") == 0;
        on_c += strcmp(n, "c") == 0;
    }
    CHECK_EQ(on_a, 2u);
    CHECK_EQ(on_c, 2u);
    CHECK_STREQ(picked(d, NULL, false), ""); /* every slot it knows of is spent */
    json_t *a = json_object_get(fleet.nodes, "a");
    CHECK_EQ(json_integer_value(json_object_get(a, "free")), 0);
}

TEST(two_drawn_are_distinct) {
    /* of two nodes the freer always wins: a pair drawn with both on c would pick c */
    for (int round = 0; round < 50; round++) {
        sd_daemon *d = view("{" NODE("a", 3, false, "[]") "," NODE("c", 1, false, "[]") "}");
        CHECK_STREQ(picked(d, NULL, false), "a");
    }
}

TEST(pool_entries_are_spent) {
    /* a publishes a pool of the create's shape with 2 ready entries: two creates go there,
     * the third finds no ready entry left in this view (pooled_only: it stays here) */
    sd_daemon *d = view(
        "{" NODE("a", 6, false,
                 "[{\"name\":\"0\",\"image\":\"host\",\"cpu\":0.5,\"memory\":268435456,"
                 "\"disk\":1073741824,\"pids\":256,\"network\":\"none\",\"profile\":\"default\","
                 "\"ready\":2,\"size\":2}]") "," NODE("c", 8, false, "[]") "}");
    json_t *shape =
        json_pack("{s:s,s:f,s:I}", "image", "host", "cpu", 0.5, "memory", (json_int_t)268435456);
    CHECK(shape);
    CHECK_STREQ(picked(d, shape, true), "a");
    CHECK_STREQ(picked(d, shape, true), "a");
    CHECK_STREQ(picked(d, shape, true), "");
    /* without a ready entry anywhere, the freer node wins: c (8) over a (6 - 2) */
    CHECK_STREQ(picked(d, shape, false), "c");
    json_decref(shape);
    json_decref(fleet.nodes);
    fleet.nodes = NULL;
}

/* ---- GPUs ---- */

static const char *picked_gpus(sd_daemon *d, unsigned n) {
    const char *url = sd_fleet_pick_gpus(d, n);
    return url ? url + strlen("http://") : "";
}

#define GNODE(name, free_slots, draining, gpus_free)                                               \
    "\"" name "\":{\"name\":\"" name "\",\"url\":\"http://" name "\",\"free\":" #free_slots        \
    ",\"draining\":" #draining ",\"gpus\":{\"total\":8,\"free\":" #gpus_free "}}"

TEST(gpu_create_goes_to_a_node_with_free_gpus) {
    /* a has slots but no GPU, c has 2 free, d is drained with 8, b (this node) is not picked */
    for (int round = 0; round < 20; round++) {
        sd_daemon *d = view("{" GNODE("a", 9, false, 0) "," GNODE("b", 9, false, 8) "," GNODE(
            "c", 1, false, 2) "," GNODE("d", 9, true, 8) "}");
        CHECK_STREQ(picked_gpus(d, 1), "c");
    }
    sd_daemon *d = view("{" GNODE("a", 9, false, 1) "," GNODE("c", 9, false, 2) "}");
    CHECK_STREQ(picked_gpus(d, 2), "c"); /* only c has two */
    CHECK_STREQ(picked_gpus(d, 2), "");  /* counted: c has none left in this view */
    CHECK_STREQ(picked_gpus(d, 1), "a");
    CHECK_STREQ(picked_gpus(d, 1), "");
    CHECK_STREQ(picked_gpus(d, 0), ""); /* no GPU asked: not this placement */
}

TEST(gpu_pick_prefers_more_free_gpus) {
    for (int round = 0; round < 30; round++) {
        sd_daemon *d = view("{" GNODE("a", 9, false, 1) "," GNODE("c", 9, false, 4) "}");
        CHECK_STREQ(picked_gpus(d, 1), "c");
    }
    /* a node without slots is never chosen, GPUs or not */
    sd_daemon *d = view("{" GNODE("a", 0, false, 4) "}");
    CHECK_STREQ(picked_gpus(d, 1), "");
    json_decref(fleet.nodes);
    fleet.nodes = NULL;
}
