/* Network plumbing for sandboxes: veth pairs (libnl-route-3), address pools, NAT and egress
 * rules (libnftables, JSON documents from policy/egress.h), per-sandbox denied counters.
 * Everything happens in the network namespace the daemon runs in, plus a short helper thread
 * that enters one sandbox's netns (setns) to configure its end. See docs/NETWORK.md.
 *
 * Call order for one sandbox: sd_net_resolve (before the shim starts: host names in the
 * allow-list become addresses, written into the spec's etc_hosts), sd_net_sandbox_setup once
 * the shim reports init_pid, sd_net_sandbox_teardown (idempotent), sd_net_sandbox_free.
 * Not thread-safe: one caller (the daemon's loop) at a time. */
#pragma once

#include "common/error.h"
#include "policy/egress.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sd_net sd_net;
typedef struct sd_net_sandbox sd_net_sandbox;

typedef struct sd_net_config {
    const char *table;      /* nft table (family inet) owned by sandboxd; default "sandboxd" */
    const char *ifprefix;   /* host-side veth names: <prefix><12 hex>; default "sbx" (<= 3) */
    const char *pool4;      /* IPv4 pool, one /30 per sandbox; default "10.200.0.0/16" */
    const char *pool6;      /* IPv6 pool (len <= 48), one /64 per sandbox; default
                               "fd5b:d0c0:5b00::/48"; "" disables IPv6 */
    const char *uplink;     /* masquerade only out of this interface; NULL: any other */
    const char *const *dns; /* NULL-terminated resolvers given to `open` sandboxes; NULL: none */
    bool no_guard;          /* skip the second rule layer inside the sandbox netns */
} sd_net_config;

/* Validate the config, replace the nft table atomically (base chains, sets, NAT; sandbox
 * interfaces without a map element are rejected: fail closed until sd_net_restore). */
int sd_net_init(sd_net **ret, const sd_net_config *cfg, error_rec *err);
/* Removes nothing from the kernel (sandboxes outlive a daemon restart); frees memory. */
void sd_net_free(sd_net *n);
/* Remove the table (and any sandbox veths) — for an orderly shutdown with no sandboxes left. */
int sd_net_destroy_table(sd_net *n, error_rec *err);

/* Resolve the allow-list's host names with getaddrinfo (in the daemon's netns). Unresolvable
 * names are an error naming the entry. */
int sd_net_resolve(sd_net *n, policy_egress *pol, error_rec *err);
/* The spec's "etc_hosts" ([[ip, name], ...] for resolved names) and "dns" ([ip, ...]: the
 * configured resolvers in `open` mode, none otherwise). */
json_t *sd_net_etc_hosts(const policy_egress *pol);
json_t *sd_net_dns(const sd_net *n, const policy_egress *pol);

/* Plumb one sandbox whose init runs as init_pid (its netns must already exist, with lo up).
 * Mode none: nothing is done and *ret describes a loopback-only sandbox. The policy is
 * copied. On failure everything made so far is undone. */
int sd_net_sandbox_setup(sd_net *n, const char *sandbox_id, pid_t init_pid,
                         const policy_egress *pol, sd_net_sandbox **ret, error_rec *err);
/* The same with address slot `prefer` when it is free (else any): a sandbox plumbed again
 * after a pause keeps its addresses where it can. */
int sd_net_sandbox_setup_at(sd_net *n, const char *sandbox_id, pid_t init_pid,
                            const policy_egress *pol, int prefer, sd_net_sandbox **ret,
                            error_rec *err);
/* The address slot s holds (-1: none). */
int sd_net_sandbox_slot(const sd_net_sandbox *s);
/* Remove chain, map element, counter, veth and give back the addresses. Idempotent; returns
 * the first error but always tries every step. */
int sd_net_sandbox_teardown(sd_net *n, sd_net_sandbox *s);
void sd_net_sandbox_free(sd_net_sandbox *s);
static inline void sd_net_sandbox_freep(sd_net_sandbox **s) {
    sd_net_sandbox_free(*s);
}

/* For inspect: {"mode", "allow"?, "interface", "ipv4", "gateway4", "ipv6", "gateway6",
 * "denied": N, "last_denied": [{"dst","proto","port"?,"expires_in"}...] newest first}. */
json_t *sd_net_sandbox_to_json(const sd_net_sandbox *s);
/* Denied packets so far (both rule layers); -errno when the counters cannot be read. */
int sd_net_sandbox_denied(const sd_net_sandbox *s, uint64_t *ret);
const char *sd_net_sandbox_ifname(const sd_net_sandbox *s); /* NULL in mode none */

/* After a daemon restart: the live networked sandboxes (mode != none) to re-adopt. Their
 * veths still exist (the netns lives as long as the sandbox init); their addresses are read
 * back from the kernel, their chains and map elements re-added; a missing veth is plumbed
 * anew. Veths with our prefix that belong to no listed sandbox are deleted. ret[i] gets
 * entry i's handle (NULL when that entry failed; the first failure is in err). */
typedef struct sd_net_restore_entry {
    const char *sandbox_id;
    pid_t init_pid;
    const policy_egress *pol;
} sd_net_restore_entry;
int sd_net_restore(sd_net *n, const sd_net_restore_entry *entries, size_t n_entries,
                   sd_net_sandbox **ret, error_rec *err);
