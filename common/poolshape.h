/* A create's pool shape (docs/FLEET.md, "Warm pools steer placement"): the fields that decide
 * whether a warm pool can serve a create (image, cpu, memory, disk, pids, network, profile,
 * isolation) in the forms node records publish, and whether a shape matches a published pool.
 * Shared by the daemon's placement (sandboxd/fleet/) and libsbx's (client/lib/fleet.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* The shape of a create body: the shape fields it sets, as published (image "NAME:TAG" or
 * "host", cpu a number, memory and disk integer bytes, pids an integer, network "none" or
 * "open", profile "default" or "grading", isolation "native" or "gvisor"). NULL when no pool can
 * serve it (a network allow-list, a value that is not valid) or out of memory. */
json_t *poolshape_from_body(json_t *body);

/* Whether a create of shape (its fields left out take the node's published defaults, an
 * object with every shape field) is served by published pool (an object with every shape
 * field). */
bool poolshape_match(json_t *shape, json_t *defaults, json_t *pool);

/* Of published pools (an array), the one that serves shape with the most ready entries (more
 * than 0), borrowed from pools; NULL when none does. ret_ready (may be NULL): its count, or 0. */
json_t *poolshape_best(json_t *pools, json_t *defaults, json_t *shape, json_int_t *ret_ready);
