/* Egress policy: parsing and validating the create request's `network` value, prefix helpers,
 * and the list of ranges that are denied whatever the policy says. */
#include "policy/egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Never reachable, even when an allow-list names them. */
static const char *const always_denied[] = {
    "169.254.0.0/16",     /* link-local: AWS/GCP/Azure/OpenStack/DO metadata, ECS 169.254.170.2 */
    "100.100.100.200/32", /* Alibaba metadata */
    "168.63.129.16/32",   /* Azure WireServer */
    "192.0.0.192/32",     /* Oracle metadata */
    "127.0.0.0/8",        /* loopback */
    "0.0.0.0/8",          /* "this network" */
    "fd00:ec2::254/128",  /* AWS metadata over IPv6 */
    "fe80::/10",          /* link-local */
    "::1/128",            /* loopback */
    "::/128",             /* unspecified */
};

int policy_cidr_parse(const char *s, policy_cidr *ret) {
    char buf[INET6_ADDRSTRLEN + 8];
    if (!s || strlen(s) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, s);
    char *slash = strchr(buf, '/');
    if (slash)
        *slash++ = 0;
    policy_cidr c = {0};
    if (inet_pton(AF_INET, buf, c.addr) == 1)
        c.family = AF_INET, c.len = 32;
    else if (inet_pton(AF_INET6, buf, c.addr) == 1)
        c.family = AF_INET6, c.len = 128;
    else
        return -EINVAL;
    if (slash) {
        char *end;
        if (!isdigit((unsigned char)*slash))
            return -EINVAL;
        unsigned long n = strtoul(slash, &end, 10);
        if (*end || n > c.len)
            return -EINVAL;
        c.len = (uint8_t)n;
    }
    /* Canonical form: host bits cleared. */
    for (unsigned i = c.len; i < (c.family == AF_INET ? 32u : 128u); i++)
        c.addr[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
    *ret = c;
    return 0;
}

void policy_cidr_format_addr(const policy_cidr *c, char *buf, size_t len) {
    if (!inet_ntop(c->family, c->addr, buf, (socklen_t)len) && len)
        buf[0] = 0;
}

void policy_cidr_format(const policy_cidr *c, char *buf, size_t len) {
    char a[INET6_ADDRSTRLEN];
    policy_cidr_format_addr(c, a, sizeof(a));
    snprintf(buf, len, "%s/%u", a, c->len);
}

bool policy_cidr_contains(const policy_cidr *outer, const policy_cidr *inner) {
    if (outer->family != inner->family || outer->len > inner->len)
        return false;
    for (unsigned i = 0; i < outer->len; i++) {
        unsigned bit = 0x80u >> (i % 8);
        if ((outer->addr[i / 8] & bit) != (inner->addr[i / 8] & bit))
            return false;
    }
    return true;
}

bool policy_egress_always_denied(const policy_cidr *c) {
    for (size_t i = 0; i < sizeof(always_denied) / sizeof(always_denied[0]); i++) {
        policy_cidr d;
        if (policy_cidr_parse(always_denied[i], &d) == 0 && policy_cidr_contains(&d, c))
            return true;
    }
    return false;
}

const char *policy_egress_mode_to_string(policy_egress_mode m) {
    switch (m) {
    case POLICY_EGRESS_OPEN:
        return "open";
    case POLICY_EGRESS_ALLOW:
        return "allow";
    default:
        return "none";
    }
}

void policy_egress_free(policy_egress *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n_entries; i++) {
        free(p->entries[i].text);
        free(p->entries[i].host);
    }
    free(p->entries);
    free(p);
}

/* RFC 1123 host name: labels of [A-Za-z0-9-], not starting or ending with '-', <= 63 chars;
 * at least one letter somewhere so that it cannot be mistaken for a malformed address. */
static bool hostname_valid(const char *h, size_t n) {
    if (n == 0 || n > 253)
        return false;
    size_t label = 0;
    bool alpha = false;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c == '.') {
            if (label == 0 || h[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)c) && c != '-')
            return false;
        if (c == '-' && label == 0)
            return false;
        alpha |= isalpha((unsigned char)c) != 0;
        if (++label > 63)
            return false;
    }
    return alpha && h[n - 1] != '-';
}

static int parse_port(const char *s, uint16_t *ret) {
    if (!*s || strlen(s) > 5)
        return -EINVAL;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
    unsigned long v = strtoul(s, NULL, 10);
    if (v == 0 || v > 65535)
        return -ERANGE;
    *ret = (uint16_t)v;
    return 0;
}

/* Split "target[:port]" where an IPv6 target with a port is written "[v6]:port" or "v6/n:port"
 * is ambiguous, so IPv6 + port needs the brackets. */
static int split_port(const char *s, char *target, size_t len, uint16_t *port) {
    const char *colon = NULL;
    *port = 0;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || (close[1] != 0 && close[1] != ':'))
            return -EINVAL;
        if ((size_t)(close - s - 1) >= len)
            return -EINVAL;
        memcpy(target, s + 1, (size_t)(close - s - 1));
        target[close - s - 1] = 0;
        return close[1] == ':' ? parse_port(close + 2, port) : 0;
    }
    const char *first = strchr(s, ':');
    if (first && strchr(first + 1, ':') == NULL)
        colon = first; /* exactly one ':' : host:port or v4:port */
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n >= len)
        return -EINVAL;
    memcpy(target, s, n);
    target[n] = 0;
    return colon ? parse_port(colon + 1, port) : 0;
}

static int parse_entry(const char *s, size_t idx, policy_egress_entry *e, error_rec *err) {
    char target[300];
    int r = split_port(s, target, sizeof(target), &e->port);
    if (r == -ERANGE)
        return error_set(err, -EINVAL, "network.allow[%zu]: \"%s\": port must be 1..65535", idx, s);
    if (r < 0)
        return error_set(err, -EINVAL,
                         "network.allow[%zu]: \"%s\" is not an address, CIDR, host:port or "
                         "host name",
                         idx, s);
    if (policy_cidr_parse(target, &e->cidr) == 0) {
        if (policy_egress_always_denied(&e->cidr))
            return error_set(err, -EINVAL,
                             "network.allow[%zu]: \"%s\" is always denied (link-local, cloud "
                             "metadata or loopback)",
                             idx, s);
    } else if (hostname_valid(target, strlen(target)) && !strchr(target, '/')) {
        e->host = strdup(target);
        if (!e->host)
            return error_set(err, -ENOMEM, "out of memory");
        for (char *p = e->host; *p; p++)
            *p = (char)tolower((unsigned char)*p);
    } else {
        return error_set(err, -EINVAL,
                         "network.allow[%zu]: \"%s\" is not an address, CIDR, host:port or "
                         "host name",
                         idx, s);
    }
    e->text = strdup(s);
    return e->text ? 0 : error_set(err, -ENOMEM, "out of memory");
}

static int parse_allow(json_t *allow, policy_egress *p, error_rec *err) {
    if (!json_is_array(allow))
        return error_set(err, -EINVAL, "network.allow: must be an array of strings");
    size_t n = json_array_size(allow);
    if (n > POLICY_EGRESS_MAX_ENTRIES)
        return error_set(err, -EINVAL, "network.allow: at most %d entries",
                         POLICY_EGRESS_MAX_ENTRIES);
    p->entries = calloc(n ? n : 1, sizeof(*p->entries));
    if (!p->entries)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(allow, i);
        if (!json_is_string(v))
            return error_set(err, -EINVAL, "network.allow[%zu]: must be a string", i);
        int r = parse_entry(json_string_value(v), i, &p->entries[i], err);
        p->n_entries = i + 1; /* so that free releases what this entry got */
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_mode(const char *s, policy_egress_mode *ret) {
    if (strcmp(s, "none") == 0)
        *ret = POLICY_EGRESS_NONE;
    else if (strcmp(s, "open") == 0)
        *ret = POLICY_EGRESS_OPEN;
    else if (strcmp(s, "allow") == 0)
        *ret = POLICY_EGRESS_ALLOW;
    else
        return -EINVAL;
    return 0;
}

static int parse_object(json_t *o, policy_egress *p, error_rec *err) {
    json_t *mode = json_object_get(o, "mode"), *allow = json_object_get(o, "allow");
    if (mode && (!json_is_string(mode) || parse_mode(json_string_value(mode), &p->mode) < 0))
        return error_set(err, -EINVAL, "network.mode: must be \"none\", \"open\" or \"allow\"");
    if (!mode && !allow)
        return error_set(err, -EINVAL, "network: an object needs \"allow\" (or \"mode\")");
    if (!mode)
        p->mode = POLICY_EGRESS_ALLOW;
    if (p->mode != POLICY_EGRESS_ALLOW && allow)
        return error_set(err, -EINVAL, "network.allow: only valid with mode \"allow\"");
    if (p->mode == POLICY_EGRESS_ALLOW && !allow)
        return error_set(err, -EINVAL, "network.allow: required with mode \"allow\"");
    return allow ? parse_allow(allow, p, err) : 0;
}

int policy_egress_parse(json_t *network_field, policy_egress **ret, error_rec *err) {
    policy_egress *p = calloc(1, sizeof(*p));
    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    int r = 0;
    if (!network_field || json_is_null(network_field))
        p->mode = POLICY_EGRESS_NONE;
    else if (json_is_string(network_field)) {
        const char *s = json_string_value(network_field);
        if (strcmp(s, "allow") == 0 || parse_mode(s, &p->mode) < 0)
            r = error_set(err, -EINVAL,
                          "network: must be \"none\", \"open\" or {\"allow\":[...]}, got \"%.64s\"",
                          s);
    } else if (json_is_object(network_field))
        r = parse_object(network_field, p, err);
    else
        r = error_set(err, -EINVAL, "network: must be \"none\", \"open\" or {\"allow\":[...]}");
    if (r < 0) {
        policy_egress_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

json_t *policy_egress_to_json(const policy_egress *p) {
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(policy_egress_mode_to_string(p->mode)));
    if (p->mode == POLICY_EGRESS_ALLOW) {
        json_t *a = json_array();
        for (size_t i = 0; i < p->n_entries; i++)
            json_array_append_new(a, json_string(p->entries[i].text));
        json_object_set_new(o, "allow", a);
    }
    return o;
}

int policy_egress_set_resolved(policy_egress *p, size_t idx, const policy_cidr *addrs, size_t n) {
    if (idx >= p->n_entries || !p->entries[idx].host)
        return -EINVAL;
    policy_egress_entry *e = &p->entries[idx];
    e->n_addrs = 0;
    for (size_t i = 0; i < n && e->n_addrs < POLICY_EGRESS_MAX_ADDRS; i++) {
        if (policy_egress_always_denied(&addrs[i]))
            continue;
        bool dup = false;
        for (size_t j = 0; j < e->n_addrs; j++)
            dup |= memcmp(&e->addrs[j], &addrs[i], sizeof(addrs[i])) == 0;
        if (!dup)
            e->addrs[e->n_addrs++] = addrs[i];
    }
    return 0;
}

policy_egress *policy_egress_dup(const policy_egress *p) {
    policy_egress *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->mode = p->mode;
    d->entries = calloc(p->n_entries ? p->n_entries : 1, sizeof(*d->entries));
    if (!d->entries) {
        free(d);
        return NULL;
    }
    for (size_t i = 0; i < p->n_entries; i++) {
        d->entries[i] = p->entries[i];
        d->entries[i].text = strdup(p->entries[i].text);
        d->entries[i].host = p->entries[i].host ? strdup(p->entries[i].host) : NULL;
        d->n_entries = i + 1;
        if (!d->entries[i].text || (p->entries[i].host && !d->entries[i].host)) {
            policy_egress_free(d);
            return NULL;
        }
    }
    return d;
}
