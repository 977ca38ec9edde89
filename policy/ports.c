/* Inbound ports: parsing and the small set operations on a create's port list. */
#include "policy/ports.h"

#include "policy/limits.h"

int policy_parse_port(json_t *v, const char *field, uint16_t *ret, error_rec *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535)
        return error_set(err, -EINVAL, "%s: must be an integer 1..65535", field);
    *ret = (uint16_t)json_integer_value(v);
    return 0;
}

bool policy_ports_has(const uint16_t *ports, unsigned n, uint16_t port) {
    for (unsigned i = 0; i < n; i++)
        if (ports[i] == port)
            return true;
    return false;
}

int policy_ports_add(uint16_t *ports, unsigned *n, uint16_t port) {
    if (policy_ports_has(ports, *n, port))
        return 0;
    if (*n >= POLICY_PORTS_MAX)
        return -ENOSPC;
    ports[(*n)++] = port;
    return 0;
}

int policy_parse_ports(json_t *v, uint16_t *ports, unsigned *ret_n, error_rec *err) {
    uint16_t tmp[POLICY_PORTS_MAX];
    unsigned n = 0;
    if (v && !json_is_null(v)) {
        if (!json_is_array(v))
            return error_set(err, -EINVAL, "ports: must be an array of integers 1..65535");
        if (json_array_size(v) > POLICY_PORTS_MAX)
            return error_set(err, -EINVAL, "ports: at most %d ports", POLICY_PORTS_MAX);
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            uint16_t p;
            if (policy_parse_port(e, "ports", &p, err) < 0)
                return -EINVAL;
            if (policy_ports_has(tmp, n, p))
                return error_set(err, -EINVAL, "ports: %u is listed twice", p);
            tmp[n++] = p;
        }
    }
    for (unsigned i = 0; i < n; i++)
        ports[i] = tmp[i];
    *ret_n = n;
    return 0;
}

json_t *policy_ports_json(const uint16_t *ports, unsigned n) {
    json_t *a = json_array();
    for (unsigned i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ports[i]));
    return a;
}
