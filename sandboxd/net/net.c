/* Sandbox networking: configuration and address pools, the host table, per-sandbox setup,
 * teardown, restore after a daemon restart, and what inspect / metrics show. */
#include "sandboxd/net/internal.h"

#include "common/fdutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define DEFAULT_POOL4 "10.200.0.0/16"
#define DEFAULT_POOL6 "fd5b:d0c0:5b00::/48"

/* ---- configuration ---- */

static int config_pools(sd_net *n, const sd_net_config *cfg, error_rec *err) {
    const char *p4 = cfg->pool4 ? cfg->pool4 : DEFAULT_POOL4;
    const char *p6 = cfg->pool6 ? cfg->pool6 : DEFAULT_POOL6;
    if (policy_cidr_parse(p4, &n->host.pool4) < 0 || n->host.pool4.family != AF_INET ||
        n->host.pool4.len > 29 || n->host.pool4.len < 8)
        return error_set(err, -EINVAL, "net: pool4 \"%s\" must be an IPv4 prefix /8../29", p4);
    if (*p6 && (policy_cidr_parse(p6, &n->host.pool6) < 0 || n->host.pool6.family != AF_INET6 ||
                n->host.pool6.len > 48))
        return error_set(err, -EINVAL,
                         "net: pool6 \"%s\" must be an IPv6 prefix of /48 or "
                         "shorter (or \"\")",
                         p6);
    n->n_slots = 1u << (30 - n->host.pool4.len);
    if (n->host.pool6.family && n->n_slots > 65536)
        n->n_slots = 65536;
    n->slots = calloc(n->n_slots, 1);
    return n->slots ? 0 : error_set(err, -ENOMEM, "out of memory");
}

static int config_names(sd_net *n, const sd_net_config *cfg, error_rec *err) {
    const char *t = cfg->table ? cfg->table : "sandboxd";
    const char *p = cfg->ifprefix ? cfg->ifprefix : "sbx";
    if (!*t || strlen(t) >= sizeof(n->table) ||
        strspn(t, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(t))
        return error_set(err, -EINVAL, "net: table name \"%s\" must be [a-z0-9_]{1,31}", t);
    if (!*p || strlen(p) > 3 || strspn(p, "abcdefghijklmnopqrstuvwxyz") != strlen(p))
        return error_set(err, -EINVAL, "net: interface prefix \"%s\" must be 1-3 letters", p);
    strcpy(n->table, t);
    strcpy(n->ifprefix, p);
    n->host.table = n->table;
    n->host.ifprefix = n->ifprefix;
    if (cfg->uplink && !(n->uplink = strdup(cfg->uplink)))
        return error_set(err, -ENOMEM, "out of memory");
    n->host.uplink = n->uplink;
    for (size_t i = 0; cfg->dns && cfg->dns[i]; i++) {
        if (i >= POLICY_EGRESS_MAX_DNS || policy_cidr_parse(cfg->dns[i], &n->host.dns[i]) < 0 ||
            n->host.dns[i].len != (n->host.dns[i].family == AF_INET ? 32 : 128))
            return error_set(err, -EINVAL, "net: dns[%zu] must be an address (at most %d)", i,
                             POLICY_EGRESS_MAX_DNS);
        n->host.n_dns = i + 1;
    }
    n->host.last_denied_size = 32;
    n->host.last_denied_timeout = 3600;
    n->guard = !cfg->no_guard;
    return 0;
}

int sd_net_init(sd_net **ret, const sd_net_config *cfg, error_rec *err) {
    static const sd_net_config defaults = {0};
    sd_net *n = calloc(1, sizeof(*n));
    if (!n)
        return error_set(err, -ENOMEM, "out of memory");
    if (!cfg)
        cfg = &defaults;
    int r = config_names(n, cfg, err);
    if (r >= 0)
        r = config_pools(n, cfg, err);
    if (r >= 0)
        r = sd_net_nl_open(&n->nl, err);
    if (r >= 0)
        r = sd_net_nft_new(&n->nft, err);
    if (r >= 0) {
        json_t *doc = policy_egress_nft_base(&n->host);
        r = sd_net_nft_apply(n->nft, doc, err);
        json_decref(doc);
        if (r < 0)
            error_prefix(err, "net: table inet %s", n->table);
    }
    if (r < 0) {
        sd_net_free(n);
        return r;
    }
    *ret = n;
    return 0;
}

void sd_net_free(sd_net *n) {
    if (!n)
        return;
    sd_net_nft_free(n->nft);
    sd_net_nl_close(n->nl);
    free(n->slots);
    free(n->uplink);
    free(n);
}

int sd_net_destroy_table(sd_net *n, error_rec *err) {
    char **links = NULL;
    if (sd_net_link_list(n->nl, n->ifprefix, &links) >= 0)
        for (size_t i = 0; links[i]; i++)
            sd_net_link_delete(n->nl, links[i]);
    sd_net_strv_free(links);
    json_t *doc =
        json_pack("{s:[{s:{s:{s:s,s:s}}},{s:{s:{s:s,s:s}}}]}", "nftables", "add", "table", "family",
                  "inet", "name", n->table, "delete", "table", "family", "inet", "name", n->table);
    int r = sd_net_nft_apply(n->nft, doc, err);
    json_decref(doc);
    return r;
}

/* ---- forwarding: switched on (in the daemon's netns only) by the first networked sandbox */

int sd_net_forwarding_on(sd_net *n, error_rec *err) {
    if (n->forwarding_on)
        return 0;
    int r = file_write_str("/proc/sys/net/ipv4/ip_forward", "1");
    if (r >= 0 && n->host.pool6.family)
        r = file_write_str("/proc/sys/net/ipv6/conf/all/forwarding", "1");
    if (r < 0)
        return error_set_errno(err, r, "net: enabling IP forwarding");
    n->forwarding_on = true;
    return 0;
}

/* ---- address slots: slot i is the i-th /30 of pool4 and the i-th /64 of pool6 ---- */

static void slot_addrs(const sd_net *n, uint32_t slot, sd_net_sandbox *s) {
    uint32_t base;
    memcpy(&base, n->host.pool4.addr, 4);
    uint32_t host = ntohl(base) + slot * 4 + 1, sbx = host + 1;
    s->gw4 = (policy_cidr){.family = AF_INET, .len = 32};
    s->addr4 = s->gw4;
    host = htonl(host), sbx = htonl(sbx);
    memcpy(s->gw4.addr, &host, 4);
    memcpy(s->addr4.addr, &sbx, 4);
    if (!n->host.pool6.family)
        return;
    s->gw6 = n->host.pool6;
    s->gw6.len = 128;
    s->gw6.addr[6] = (uint8_t)(slot >> 8), s->gw6.addr[7] = (uint8_t)slot;
    s->addr6 = s->gw6;
    s->gw6.addr[15] = 1;
    s->addr6.addr[15] = 2;
}

int sd_net_slot_claim(sd_net *n, sd_net_sandbox *s, int slot) {
    if (slot < 0)
        for (uint32_t i = 0; i < n->n_slots && slot < 0; i++)
            if (!n->slots[i])
                slot = (int)i;
    if (slot < 0)
        return -ENOSPC;
    if ((uint32_t)slot >= n->n_slots || n->slots[slot])
        return -EADDRINUSE;
    n->slots[slot] = 1;
    s->slot = slot;
    slot_addrs(n, (uint32_t)slot, s);
    return 0;
}

/* The slot a host-side gateway address belongs to, or -ERANGE. */
int sd_net_slot_of(const sd_net *n, const policy_cidr *gw4) {
    if (!policy_cidr_contains(&n->host.pool4, gw4))
        return -ERANGE;
    uint32_t base, a;
    memcpy(&base, n->host.pool4.addr, 4);
    memcpy(&a, gw4->addr, 4);
    uint32_t off = ntohl(a) - ntohl(base);
    if (off % 4 != 1 || off / 4 >= n->n_slots)
        return -ERANGE;
    return (int)(off / 4);
}

/* ---- names ---- */

void sd_net_sandbox_facts(const sd_net_sandbox *s, policy_egress_sandbox *ret) {
    *ret = (policy_egress_sandbox){.ifname = s->ifname, .addr4 = s->addr4, .addr6 = s->addr6};
}

/* <prefix> + 12 hex digits of FNV-1a-64(id): at most 15 characters, stable across restarts. */
void sd_net_ifname_of(const sd_net *n, const char *id, char buf[16]) {
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    snprintf(buf, 16, "%s%012llx", n->ifprefix, (unsigned long long)(h & 0xffffffffffffull));
}

const char *sd_net_sandbox_ifname(const sd_net_sandbox *s) {
    return s && s->nsfd >= 0 ? s->ifname : NULL;
}

/* ---- name resolution and the spec's /etc files ---- */

int sd_net_resolve(sd_net *n, policy_egress *pol, error_rec *err) {
    for (size_t i = 0; pol->mode == POLICY_EGRESS_ALLOW && i < pol->n_entries; i++) {
        policy_egress_entry *e = &pol->entries[i];
        if (!e->host)
            continue;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        int r = getaddrinfo(e->host, NULL, &hints, &res);
        if (r != 0)
            return error_set(err, -EHOSTUNREACH, "network.allow[%zu]: cannot resolve \"%s\": %s", i,
                             e->host, gai_strerror(r));
        policy_cidr addrs[POLICY_EGRESS_MAX_ADDRS];
        size_t k = 0;
        for (struct addrinfo *a = res; a && k < POLICY_EGRESS_MAX_ADDRS; a = a->ai_next) {
            policy_cidr c = {.family = a->ai_family};
            if (a->ai_family == AF_INET) {
                memcpy(c.addr, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4), c.len = 32;
            } else if (a->ai_family == AF_INET6 && n->host.pool6.family) {
                memcpy(c.addr, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16), c.len = 128;
            } else
                continue;
            addrs[k++] = c;
        }
        freeaddrinfo(res);
        policy_egress_set_resolved(pol, i, addrs, k);
        if (e->n_addrs == 0)
            return error_set(err, -EHOSTUNREACH,
                             "network.allow[%zu]: \"%s\" resolves only to denied addresses", i,
                             e->host);
    }
    return 0;
}

json_t *sd_net_etc_hosts(const policy_egress *pol) {
    json_t *a = json_array();
    for (size_t i = 0; pol && i < pol->n_entries; i++)
        for (size_t j = 0; pol->entries[i].host && j < pol->entries[i].n_addrs; j++) {
            char ip[INET6_ADDRSTRLEN];
            policy_cidr_format_addr(&pol->entries[i].addrs[j], ip, sizeof(ip));
            json_array_append_new(a, json_pack("[s,s]", ip, pol->entries[i].host));
        }
    return a;
}

json_t *sd_net_dns(const sd_net *n, const policy_egress *pol) {
    json_t *a = json_array();
    for (size_t i = 0; pol && pol->mode == POLICY_EGRESS_OPEN && i < n->host.n_dns; i++) {
        char ip[INET6_ADDRSTRLEN];
        policy_cidr_format_addr(&n->host.dns[i], ip, sizeof(ip));
        json_array_append_new(a, json_string(ip));
    }
    return a;
}
