/* Internals of sandboxd/net*.c: the sd_net and sd_net_sandbox records and the libnl /
 * libnftables helpers they share. Not for the rest of the daemon (use sandboxd/net/net.h). */
#pragma once

#include "sandboxd/net/net.h"

#include <stdint.h>

struct nl_sock;
struct nft_ctx;

struct sd_net {
    policy_egress_host host; /* table, prefix, pools, dns: the rule generator's host facts */
    char table[32];
    char ifprefix[8];
    char *uplink;
    bool guard;
    bool forwarding_on;
    uint8_t *slots; /* one byte per /30 (and /64): 1 = in use */
    uint32_t n_slots;
    struct nl_sock *nl;
    struct nft_ctx *nft;
};

struct sd_net_sandbox {
    sd_net *net;
    char *id;
    policy_egress *pol;
    char ifname[16];
    int slot;                           /* -1: none (mode none, or given back) */
    policy_cidr addr4, gw4, addr6, gw6; /* addresses with len 32/128; family 0 when unset */
    int nsfd;                           /* the sandbox's netns, -1 in mode none */
    bool torn_down;
};

/* ---- sandboxd/net/net.c ---- */
/* Take address slot `slot` (-1: the first free one) and fill s's addresses from it. */
int sd_net_slot_claim(sd_net *n, sd_net_sandbox *s, int slot);
/* The slot a host-side IPv4 address belongs to, or -ERANGE. */
int sd_net_slot_of(const sd_net *n, const policy_cidr *gw4);
int sd_net_forwarding_on(sd_net *n, error_rec *err);
void sd_net_ifname_of(const sd_net *n, const char *id, char buf[16]);

/* ---- libnl (sandboxd/net/link.c); every function takes a socket of the netns to act in ---- */
int sd_net_nl_open(struct nl_sock **ret, error_rec *err);
void sd_net_nl_close(struct nl_sock *sk);
/* veth host_if <-> peer_if, the peer created directly inside the netns nsfd. */
int sd_net_link_veth(struct nl_sock *sk, const char *host_if, int nsfd, const char *peer_if,
                     error_rec *err);
int sd_net_link_delete(struct nl_sock *sk, const char *ifname); /* -ENODEV when absent */
int sd_net_link_up(struct nl_sock *sk, const char *ifname, error_rec *err);
/* Add addr/plen (IPv6 without duplicate address detection). */
int sd_net_link_addr(struct nl_sock *sk, const char *ifname, const policy_cidr *addr, unsigned plen,
                     error_rec *err);
int sd_net_link_default_route(struct nl_sock *sk, const char *ifname, const policy_cidr *gw,
                              error_rec *err);
/* First IPv4 address of ifname; -ENODEV / -ENOENT. */
int sd_net_link_addr4(struct nl_sock *sk, const char *ifname, policy_cidr *ret);
/* Names of veth links starting with prefix (NULL-terminated, free with sd_net_strv_free). */
int sd_net_link_list(struct nl_sock *sk, const char *prefix, char ***ret);
void sd_net_strv_free(char **v);

/* ---- libnftables (sandboxd/net/nft.c) ---- */
int sd_net_nft_new(struct nft_ctx **ret, error_rec *err);
void sd_net_nft_free(struct nft_ctx *ctx);
/* Run one JSON document as one transaction. */
int sd_net_nft_apply(struct nft_ctx *ctx, json_t *doc, error_rec *err);
/* Run a listing command ("list counter inet t c") and parse its JSON output. */
int sd_net_nft_list(struct nft_ctx *ctx, const char *cmd, json_t **ret, error_rec *err);
/* Whether a sandbox's objects exist in table inet `table` (cheap: lists one small set). */
bool sd_net_nft_exists(struct nft_ctx *ctx, const char *table, const policy_egress_sandbox *ps);
/* Add the counter and "last denied" elements of one table's copy of a sandbox's objects. */
int sd_net_nft_read_denied(struct nft_ctx *ctx, const char *table, const policy_egress_sandbox *ps,
                           uint64_t *count, json_t *last);

/* ---- inside a sandbox's netns (sandboxd/net/ns.c): a helper thread that setns()es ---- */
/* Configure the sandbox end: eth0 addresses, up, default routes, and the guard table. */
int sd_net_ns_configure(sd_net *n, const sd_net_sandbox *s, error_rec *err);
/* Read the guard table's counter and "last denied" sets. */
int sd_net_ns_read_denied(const sd_net_sandbox *s, uint64_t *count, json_t *last);
/* The generator's view of a sandbox. */
void sd_net_sandbox_facts(const sd_net_sandbox *s, policy_egress_sandbox *ret);
