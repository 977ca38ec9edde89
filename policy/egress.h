/* Egress policy as data: the create request's `network` value parsed into a mode plus an
 * allow-list, and pure generators that turn it (and a few host facts) into nftables JSON
 * documents for libnftables. No privileges, no I/O: the daemon (sandboxd/net*.c) resolves host
 * names, applies the documents and reads the counters. docs/NETWORK.md explains the rule set. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_EGRESS_MAX_ENTRIES 256
#define POLICY_EGRESS_MAX_ADDRS 16 /* resolved addresses kept per host-name entry */
#define POLICY_EGRESS_MAX_DNS 4

typedef enum policy_egress_mode {
    POLICY_EGRESS_NONE,  /* loopback only: no veth, no rules */
    POLICY_EGRESS_OPEN,  /* everything public, minus the always-denied and private ranges */
    POLICY_EGRESS_ALLOW, /* only what the allow-list names */
} policy_egress_mode;

/* An IPv4 or IPv6 prefix. */
typedef struct policy_cidr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    uint8_t len;
} policy_cidr;

typedef struct policy_egress_entry {
    char *text;       /* as the user wrote it, for messages and inspect */
    char *host;       /* host name, or NULL when the entry is an address / CIDR */
    policy_cidr cidr; /* when host == NULL */
    uint16_t port;    /* 0: every port */
    /* Addresses of `host`, filled by policy_egress_set_resolved (the daemon's getaddrinfo). */
    policy_cidr addrs[POLICY_EGRESS_MAX_ADDRS];
    size_t n_addrs;
} policy_egress_entry;

typedef struct policy_egress {
    policy_egress_mode mode;
    policy_egress_entry *entries;
    size_t n_entries;
} policy_egress;

/* Validate and parse `network`: NULL / JSON null / "none" | "open" | {"allow":[...]}
 * (also {"mode":"none"|"open"} and {"mode":"allow","allow":[...]}, the shape inspect prints).
 * Entries: "1.2.3.4", "10.1.0.0/16", "1.2.3.4:443", "10.0.0.0/8:53", "2001:db8::/32",
 * "[2001:db8::1]:443", "example.com", "example.com:443". Errors name the offending entry
 * ("network.allow[2]: ..."), including entries that lie inside an always-denied range. */
int policy_egress_parse(json_t *network_field, policy_egress **ret, error_rec *err);
void policy_egress_free(policy_egress *p);
/* Deep copy (resolved addresses included); NULL on allocation failure. */
policy_egress *policy_egress_dup(const policy_egress *p);
static inline void policy_egress_freep(policy_egress **p) {
    policy_egress_free(*p);
}
const char *policy_egress_mode_to_string(policy_egress_mode m);
/* {"mode":"none"} / {"mode":"open"} / {"mode":"allow","allow":[texts]}; round-trips
 * through policy_egress_parse (resolved addresses are not part of it). */
json_t *policy_egress_to_json(const policy_egress *p);
/* Record the addresses a host-name entry resolved to (at most POLICY_EGRESS_MAX_ADDRS kept).
 * Always-denied addresses are dropped here, so a name cannot smuggle in a metadata address. */
int policy_egress_set_resolved(policy_egress *p, size_t idx, const policy_cidr *addrs, size_t n);

/* Prefix helpers. */
int policy_cidr_parse(const char *s, policy_cidr *ret); /* "a.b.c.d[/n]" or "v6[/n]" */
void policy_cidr_format(const policy_cidr *c, char *buf, size_t len);      /* "a.b.c.d/n" */
void policy_cidr_format_addr(const policy_cidr *c, char *buf, size_t len); /* address only */
bool policy_cidr_contains(const policy_cidr *outer, const policy_cidr *inner);
/* True when c lies entirely inside a range that is denied whatever the policy says
 * (link-local, cloud metadata, loopback). */
bool policy_egress_always_denied(const policy_cidr *c);

/* ---- nftables documents (policy/egress_nft.c) ----
 * One table in the daemon's netns (default `inet sandboxd`): base chains hooked at forward,
 * input and nat postrouting, an `iifname -> verdict` map dispatching to one chain per
 * sandbox, shared sets of always-denied / private ranges. Inside each sandbox's netns a second
 * table (`inet sandboxd_guard`) repeats the filter on the output hook. */

typedef struct policy_egress_host {
    const char *table;    /* "sandboxd" */
    const char *ifprefix; /* "sbx": sandbox host-side interfaces are <ifprefix>* */
    policy_cidr pool4;    /* sandbox address pools: never reachable from another sandbox */
    policy_cidr pool6;    /* family 0: IPv6 disabled */
    const char *uplink;   /* masquerade only out of this interface; NULL: any non-sandbox one */
    policy_cidr dns[POLICY_EGRESS_MAX_DNS]; /* resolvers reachable on port 53 in `open` mode */
    size_t n_dns;
    unsigned last_denied_size;    /* entries kept in each "last denied" set (e.g. 32) */
    unsigned last_denied_timeout; /* seconds an entry stays there (e.g. 3600) */
} policy_egress_host;

/* What one networked sandbox looks like from the rule generator's point of view. */
typedef struct policy_egress_sandbox {
    const char *ifname; /* host-side veth name, also the chain name */
    policy_cidr addr4;  /* the sandbox's own addresses (/32, /128): anti-spoofing */
    policy_cidr addr6;  /* family 0 when none */
} policy_egress_sandbox;

/* The base table, replacing any previous one atomically (add + delete + add in one batch). */
json_t *policy_egress_nft_base(const policy_egress_host *h);
/* Objects of one sandbox: its chains, counter, "last denied" sets and its map element. */
json_t *policy_egress_nft_sandbox_add(const policy_egress_host *h, const policy_egress_sandbox *s,
                                      const policy_egress *pol);
/* Removal of the same objects. Apply only when the sandbox's chain exists: the add document
 * is one transaction, so then all of them exist. */
json_t *policy_egress_nft_sandbox_del(const policy_egress_host *h, const policy_egress_sandbox *s);
/* The guard table loaded inside the sandbox's own netns (output hook, device `eth0`). */
json_t *policy_egress_nft_guard(const policy_egress_host *h, const policy_egress_sandbox *s,
                                const policy_egress *pol);
/* Names of a sandbox's counter and "last denied" sets (family 4 or 6), for listing them. */
void policy_egress_nft_counter_name(const policy_egress_sandbox *s, char *buf, size_t len);
void policy_egress_nft_last_set_name(const policy_egress_sandbox *s, int v, char *buf, size_t len);
#define POLICY_EGRESS_GUARD_TABLE "sandboxd_guard"
#define POLICY_EGRESS_GUARD_IFNAME "eth0"
