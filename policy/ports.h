/* Inbound ports of a sandbox (docs/API.md "Ports"): the create's "ports" and the body of
 * POST .../ports, parsed strictly. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* A port: an integer 1..65535; bad -> -EINVAL naming field. */
int policy_parse_port(json_t *v, const char *field, uint16_t *ret, error_rec *err);
/* "ports": absent/null (none) or an array of at most POLICY_PORTS_MAX distinct ports. */
int policy_parse_ports(json_t *v, uint16_t *ports, unsigned *ret_n, error_rec *err);
/* [p, ...] */
json_t *policy_ports_json(const uint16_t *ports, unsigned n);
/* Add port to the set (a port already there is fine): 0, or -ENOSPC when full. */
int policy_ports_add(uint16_t *ports, unsigned *n, uint16_t port);
bool policy_ports_has(const uint16_t *ports, unsigned n, uint16_t port);
