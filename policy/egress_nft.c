/* Egress policy -> nftables JSON (the libnftables JSON schema, `man libnftables-json`).
 * Pure functions: the same inputs give the same bytes, pinned by tests/golden/test_egress.c. */
#include "policy/egress.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Private and special ranges: denied unless an allow-list entry names them. */
static const char *const private4[] = {
    "10.0.0.0/8",     "100.64.0.0/10", "172.16.0.0/12", "192.0.0.0/24",
    "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4",   "240.0.0.0/4",
};
static const char *const private6[] = {"fc00::/7", "ff00::/8", "::ffff:0.0.0.0/96", "100::/64"};
/* The IPv4/IPv6 halves of policy_egress_always_denied's list. */
static const char *const hard4[] = {"0.0.0.0/8",     "127.0.0.0/8",     "169.254.0.0/16",
                                    "168.63.129.16", "100.100.100.200", "192.0.0.192"};
static const char *const hard6[] = {"::/128", "::1/128", "fe80::/10", "fd00:ec2::254"};

/* ---- small expression builders ---- */

static json_t *cidr_json(const policy_cidr *c) {
    char a[INET6_ADDRSTRLEN];
    policy_cidr_format_addr(c, a, sizeof(a));
    if (c->len == (c->family == AF_INET ? 32 : 128))
        return json_string(a);
    return json_pack("{s:{s:s,s:i}}", "prefix", "addr", a, "len", (int)c->len);
}

static json_t *cidr_str_json(const char *s) {
    policy_cidr c;
    if (policy_cidr_parse(s, &c) < 0)
        return json_null(); /* only our own constant tables reach here */
    return cidr_json(&c);
}

static json_t *payload(const char *proto, const char *field) {
    return json_pack("{s:{s:s,s:s}}", "payload", "protocol", proto, "field", field);
}
static json_t *meta(const char *key) {
    return json_pack("{s:{s:s}}", "meta", "key", key);
}
static json_t *match(const char *op, json_t *left, json_t *right) {
    return json_pack("{s:{s:s,s:o,s:o}}", "match", "op", op, "left", left, "right", right);
}
static json_t *verdict_goto(const char *chain) {
    return json_pack("{s:{s:s}}", "goto", "target", chain);
}
static json_t *verdict(const char *v) {
    return json_pack("{s:n}", v);
}
static json_t *daddr(int family) {
    return payload(family == AF_INET ? "ip" : "ip6", "daddr");
}
static json_t *tcp_udp_port(uint16_t port, json_t *rule) {
    json_array_append_new(
        rule, match("==", meta("l4proto"), json_pack("{s:[s,s]}", "set", "tcp", "udp")));
    json_array_append_new(rule, match("==", payload("th", "dport"), json_integer(port)));
    return rule;
}

/* {"add": {"rule": {family, table, chain, expr}}} */
static json_t *rule(const char *table, const char *chain, json_t *expr) {
    return json_pack("{s:{s:{s:s,s:s,s:s,s:o}}}", "add", "rule", "family", "inet", "table", table,
                     "chain", chain, "expr", expr);
}
static json_t *obj(const char *verb, const char *kind, json_t *body) {
    return json_pack("{s:{s:o}}", verb, kind, body);
}
static json_t *chain_body(const char *table, const char *name) {
    return json_pack("{s:s,s:s,s:s}", "family", "inet", "table", table, "name", name);
}
static json_t *base_chain(const char *table, const char *name, const char *type, const char *hook,
                          int prio) {
    json_t *c = chain_body(table, name);
    json_object_set_new(c, "type", json_string(type));
    json_object_set_new(c, "hook", json_string(hook));
    json_object_set_new(c, "prio", json_integer(prio));
    json_object_set_new(c, "policy", json_string("accept"));
    return obj("add", "chain", c);
}

static json_t *interval_set(const char *table, const char *name, int family,
                            const char *const *elems, size_t n, const policy_cidr *extra) {
    json_t *e = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(e, cidr_str_json(elems[i]));
    if (extra && extra->family == family)
        json_array_append_new(e, cidr_json(extra));
    json_t *s = chain_body(table, name);
    json_object_set_new(s, "type", json_string(family == AF_INET ? "ipv4_addr" : "ipv6_addr"));
    json_object_set_new(s, "flags", json_pack("[s]", "interval"));
    json_object_set_new(s, "auto-merge", json_true());
    json_object_set_new(s, "elem", e);
    return obj("add", "set", s);
}

/* The four shared sets: deny4/deny6 (always denied + the sandbox pools), private4/private6. */
static void add_range_sets(json_t *cmds, const char *table, const policy_egress_host *h) {
    json_array_append_new(cmds, interval_set(table, "deny4", AF_INET, hard4,
                                             sizeof(hard4) / sizeof(*hard4), &h->pool4));
    json_array_append_new(cmds, interval_set(table, "deny6", AF_INET6, hard6,
                                             sizeof(hard6) / sizeof(*hard6), &h->pool6));
    json_array_append_new(cmds, interval_set(table, "private4", AF_INET, private4,
                                             sizeof(private4) / sizeof(*private4), NULL));
    json_array_append_new(cmds, interval_set(table, "private6", AF_INET6, private6,
                                             sizeof(private6) / sizeof(*private6), NULL));
}

/* ---- the per-sandbox filter chain, shared by the host table and the guard table ---- */

static void deny_chain_name(const char *chain, char *buf, size_t len) {
    snprintf(buf, len, "%s_deny", chain);
}

void policy_egress_nft_counter_name(const policy_egress_sandbox *s, char *buf, size_t len) {
    snprintf(buf, len, "%s_denied", s->ifname);
}

void policy_egress_nft_last_set_name(const policy_egress_sandbox *s, int v, char *buf, size_t len) {
    snprintf(buf, len, "%s_last%d", s->ifname, v);
}

static void add_allow_rule(json_t *cmds, const char *table, const char *chain, const policy_cidr *c,
                           uint16_t port) {
    json_t *e = json_array();
    if (port)
        tcp_udp_port(port, e);
    json_array_append_new(e, match("==", daddr(c->family), cidr_json(c)));
    json_array_append_new(e, verdict("accept"));
    json_array_append_new(cmds, rule(table, chain, e));
}

static void add_allow_rules(json_t *cmds, const char *table, const char *chain,
                            const policy_egress_host *h, const policy_egress *pol) {
    if (pol->mode == POLICY_EGRESS_OPEN)
        for (size_t i = 0; i < h->n_dns; i++)
            add_allow_rule(cmds, table, chain, &h->dns[i], 53);
    if (pol->mode != POLICY_EGRESS_ALLOW)
        return;
    for (size_t i = 0; i < pol->n_entries; i++) {
        const policy_egress_entry *en = &pol->entries[i];
        if (!en->host)
            add_allow_rule(cmds, table, chain, &en->cidr, en->port);
        for (size_t j = 0; en->host && j < en->n_addrs; j++)
            add_allow_rule(cmds, table, chain, &en->addrs[j], en->port);
    }
}

/* Source checks, host side only: the sandbox may send only from its own addresses. */
static void add_antispoof(json_t *cmds, const char *table, const policy_egress_sandbox *s) {
    const char *c = s->ifname;
    if (s->addr4.family == AF_INET)
        json_array_append_new(
            cmds, rule(table, c,
                       json_pack("[o,o]", match("!=", payload("ip", "saddr"), cidr_json(&s->addr4)),
                                 verdict("drop"))));
    if (s->addr6.family == AF_INET6)
        json_array_append_new(
            cmds,
            rule(table, c,
                 json_pack("[o,o]", match("!=", payload("ip6", "saddr"), cidr_json(&s->addr6)),
                           verdict("drop"))));
}

/* Host side only: whatever the host would deliver to itself goes to deny. Not only its own
 * addresses (local): broadcasts (255.255.255.255, an interface's directed broadcast), multicast
 * and IPv6 anycast are delivered locally too, to every socket bound to the wildcard address. On
 * the forward hook no routed destination has these types. ND was accepted above. */
static void add_host_deny(json_t *cmds, const char *table, const char *chain) {
    char deny[64];
    deny_chain_name(chain, deny, sizeof(deny));
    json_t *fib = json_pack("{s:{s:s,s:[s]}}", "fib", "result", "type", "flags", "daddr");
    json_t *types = json_pack("{s:[s,s,s,s]}", "set", "local", "broadcast", "multicast", "anycast");
    json_array_append_new(
        cmds, rule(table, chain, json_pack("[o,o]", match("==", fib, types), verdict_goto(deny))));
}

/* The filter: neighbour discovery, always-denied, the allow-list, private ranges, the mode. */
static void add_filter(json_t *cmds, const char *table, const char *chain, bool host,
                       const policy_egress_host *h, const policy_egress_sandbox *s,
                       const policy_egress *pol) {
    char deny[64];
    deny_chain_name(chain, deny, sizeof(deny));
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o,o]", match("==", payload("ip6", "hoplimit"), json_integer(255)),
                             match("==", payload("icmpv6", "type"),
                                   json_pack("{s:[s,s]}", "set", "nd-neighbor-solicit",
                                             "nd-neighbor-advert")),
                             verdict("accept"))));
    /* Link-scope multicast (MLD, IGMP, router solicitations) never leaves the link: dropped
     * quietly rather than counted as a denied attempt. */
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o]", match("==", daddr(AF_INET6), cidr_str_json("ff02::/16")),
                             verdict("drop"))));
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o]", match("==", daddr(AF_INET), cidr_str_json("224.0.0.0/24")),
                             verdict("drop"))));
    if (host) {
        add_antispoof(cmds, table, s);
        add_host_deny(cmds, table, chain);
    }
    if (s->addr6.family != AF_INET6)
        json_array_append_new(
            cmds, rule(table, chain,
                       json_pack("[o,o]", match("==", meta("nfproto"), json_string("ipv6")),
                                 verdict_goto(deny))));
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o]", match("==", daddr(AF_INET), json_string("@deny4")),
                             verdict_goto(deny))));
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o]", match("==", daddr(AF_INET6), json_string("@deny6")),
                             verdict_goto(deny))));
    add_allow_rules(cmds, table, chain, h, pol);
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o]", match("==", daddr(AF_INET), json_string("@private4")),
                             verdict_goto(deny))));
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o,o]", match("==", daddr(AF_INET6), json_string("@private6")),
                             verdict_goto(deny))));
    json_array_append_new(
        cmds, rule(table, chain,
                   json_pack("[o]", pol->mode == POLICY_EGRESS_OPEN ? verdict("accept")
                                                                    : verdict_goto(deny))));
}

static json_t *last_set(const char *table, const char *name, int v, const policy_egress_host *h) {
    json_t *s = chain_body(table, name);
    json_object_set_new(
        s, "type",
        json_pack("[s,s,s]", v == 4 ? "ipv4_addr" : "ipv6_addr", "inet_proto", "inet_service"));
    json_object_set_new(s, "size", json_integer(h->last_denied_size ? h->last_denied_size : 32));
    json_object_set_new(s, "flags", json_pack("[s]", "timeout"));
    json_object_set_new(s, "timeout",
                        json_integer(h->last_denied_timeout ? h->last_denied_timeout : 3600));
    return obj("add", "set", s);
}

/* The denied counter: a set keyed by nfproto ("ipv4", "ipv6") whose elements carry counters.
 * Unlike a named counter object it can be listed without libnftables fetching every rule of
 * the table (listing a counter object costs O(sandboxes); a set, O(1)). */
static json_t *counter_set(const char *table, const char *name) {
    json_t *s = chain_body(table, name);
    json_object_set_new(s, "type", json_string("nf_proto"));
    json_object_set_new(s, "size", json_integer(2));
    json_object_set_new(s, "stmt", json_pack("[{s:n}]", "counter"));
    return obj("add", "set", s);
}

/* The deny chain: remember the destination (its own rule: a full set must not skip the
 * reject), count, then reject so that the connection fails at once. */
static void add_deny(json_t *cmds, const char *table, const char *chain,
                     const policy_egress_host *h, const policy_egress_sandbox *s) {
    char deny[64], cnt[64], l4[64], l6[64];
    deny_chain_name(chain, deny, sizeof(deny));
    policy_egress_nft_counter_name(s, cnt, sizeof(cnt));
    policy_egress_nft_last_set_name(s, 4, l4, sizeof(l4));
    policy_egress_nft_last_set_name(s, 6, l6, sizeof(l6));
    json_array_append_new(cmds, obj("add", "chain", chain_body(table, deny)));
    json_array_append_new(cmds, counter_set(table, cnt));
    json_array_append_new(cmds, last_set(table, l4, 4, h));
    json_array_append_new(cmds, last_set(table, l6, 6, h));
    for (int v = 4; v <= 6; v += 2) {
        json_t *key = json_pack("{s:[o,o,o]}", "concat", daddr(v == 4 ? AF_INET : AF_INET6),
                                meta("l4proto"), payload("th", "dport"));
        char ref[70];
        snprintf(ref, sizeof(ref), "@%s", v == 4 ? l4 : l6);
        json_array_append_new(cmds, rule(table, deny,
                                         json_pack("[{s:{s:s,s:o,s:s}}]", "set", "op", "update",
                                                   "elem", key, "set", ref)));
    }
    char cref[70];
    snprintf(cref, sizeof(cref), "@%s", cnt);
    json_array_append_new(cmds, rule(table, deny,
                                     json_pack("[{s:{s:s,s:o,s:s}}]", "set", "op", "update", "elem",
                                               meta("nfproto"), "set", cref)));
    json_array_append_new(
        cmds, rule(table, deny,
                   json_pack("[o,{s:{s:s}}]", match("==", meta("l4proto"), json_string("tcp")),
                             "reject", "type", "tcp reset")));
    json_array_append_new(cmds, rule(table, deny,
                                     json_pack("[{s:{s:s,s:s}}]", "reject", "type", "icmpx", "expr",
                                               "admin-prohibited")));
}

static json_t *doc(json_t *cmds) {
    return json_pack("{s:o}", "nftables", cmds);
}

/* ---- host table ---- */

static json_t *iface_match(const char *key, const char *op, const char *prefix) {
    char pat[32];
    snprintf(pat, sizeof(pat), "%s*", prefix);
    return match(op, meta(key), json_string(pat));
}

static json_t *reject_admin(void) {
    return json_pack("{s:{s:s,s:s}}", "reject", "type", "icmpx", "expr", "admin-prohibited");
}

static void add_base_filter(json_t *cmds, const policy_egress_host *h) {
    const char *t = h->table;
    json_t *vmap = json_pack("{s:{s:o,s:s}}", "vmap", "key", meta("iifname"), "data", "@ifmap");
    json_array_append_new(cmds, base_chain(t, "forward", "filter", "forward", 0));
    json_array_append_new(cmds, base_chain(t, "input", "filter", "input", 0));
    json_array_append_new(cmds,
                          rule(t, "forward",
                               json_pack("[o,o]",
                                         match("in", json_pack("{s:{s:s}}", "ct", "key", "state"),
                                               json_pack("[s,s]", "established", "related")),
                                         verdict("accept"))));
    json_array_append_new(cmds, rule(t, "forward", json_pack("[O]", vmap)));
    /* Fail closed: a sandbox interface without a map element (mid-restore) gets nothing. */
    json_array_append_new(
        cmds, rule(t, "forward",
                   json_pack("[o,o]", iface_match("iifname", "==", h->ifprefix), reject_admin())));
    json_array_append_new(
        cmds, rule(t, "forward",
                   json_pack("[o,o]", iface_match("oifname", "==", h->ifprefix), reject_admin())));
    json_array_append_new(cmds, rule(t, "input", json_pack("[o]", vmap)));
    json_array_append_new(
        cmds, rule(t, "input",
                   json_pack("[o,o]", iface_match("iifname", "==", h->ifprefix), reject_admin())));
}

static void add_base_nat(json_t *cmds, const policy_egress_host *h) {
    const char *t = h->table;
    json_array_append_new(cmds, base_chain(t, "postrouting", "nat", "postrouting", 100));
    const policy_cidr *pools[] = {&h->pool4, &h->pool6};
    for (size_t i = 0; i < 2; i++) {
        if (!pools[i]->family)
            continue;
        json_t *out = h->uplink ? match("==", meta("oifname"), json_string(h->uplink))
                                : iface_match("oifname", "!=", h->ifprefix);
        json_t *src = match("==", payload(pools[i]->family == AF_INET ? "ip" : "ip6", "saddr"),
                            cidr_json(pools[i]));
        json_array_append_new(
            cmds, rule(t, "postrouting", json_pack("[o,o,{s:n}]", src, out, "masquerade")));
    }
}

json_t *policy_egress_nft_base(const policy_egress_host *h) {
    json_t *cmds = json_array();
    json_t *tb = json_pack("{s:s,s:s}", "family", "inet", "name", h->table);
    json_array_append_new(cmds, obj("add", "table", json_deep_copy(tb)));
    json_array_append_new(cmds, obj("delete", "table", json_deep_copy(tb)));
    json_array_append_new(cmds, obj("add", "table", tb));
    add_range_sets(cmds, h->table, h);
    json_t *map = chain_body(h->table, "ifmap");
    json_object_set_new(map, "type", json_string("ifname"));
    json_object_set_new(map, "map", json_string("verdict"));
    json_array_append_new(cmds, obj("add", "map", map));
    add_base_filter(cmds, h);
    add_base_nat(cmds, h);
    return doc(cmds);
}

static json_t *map_elem(const policy_egress_host *h, const policy_egress_sandbox *s,
                        const char *verb) {
    json_t *m = json_pack("{s:s,s:s,s:s}", "family", "inet", "table", h->table, "name", "ifmap");
    json_object_set_new(m, "elem",
                        json_pack("[[s,{s:{s:s}}]]", s->ifname, "goto", "target", s->ifname));
    return obj(verb, "element", m);
}

json_t *policy_egress_nft_sandbox_add(const policy_egress_host *h, const policy_egress_sandbox *s,
                                      const policy_egress *pol) {
    json_t *cmds = json_array();
    json_array_append_new(cmds, obj("add", "chain", chain_body(h->table, s->ifname)));
    add_deny(cmds, h->table, s->ifname, h, s);
    add_filter(cmds, h->table, s->ifname, true, h, s, pol);
    json_array_append_new(cmds, map_elem(h, s, "add"));
    return doc(cmds);
}

/* Plain deletes: the add document is one transaction, so either every object exists or none
 * does; the caller checks that the chain exists first (sd_net_sandbox_teardown). */
json_t *policy_egress_nft_sandbox_del(const policy_egress_host *h, const policy_egress_sandbox *s) {
    json_t *cmds = json_array();
    char deny[64], cnt[64], l4[64], l6[64];
    deny_chain_name(s->ifname, deny, sizeof(deny));
    policy_egress_nft_counter_name(s, cnt, sizeof(cnt));
    policy_egress_nft_last_set_name(s, 4, l4, sizeof(l4));
    policy_egress_nft_last_set_name(s, 6, l6, sizeof(l6));
    json_array_append_new(cmds, map_elem(h, s, "delete"));
    const char *chains[] = {s->ifname, deny};
    for (size_t i = 0; i < 2; i++) {
        json_array_append_new(cmds, obj("flush", "chain", chain_body(h->table, chains[i])));
        json_array_append_new(cmds, obj("delete", "chain", chain_body(h->table, chains[i])));
    }
    json_array_append_new(cmds, obj("delete", "set", chain_body(h->table, l4)));
    json_array_append_new(cmds, obj("delete", "set", chain_body(h->table, l6)));
    json_array_append_new(cmds, obj("delete", "set", chain_body(h->table, cnt)));
    return doc(cmds);
}

json_t *policy_egress_nft_guard(const policy_egress_host *h, const policy_egress_sandbox *s,
                                const policy_egress *pol) {
    const char *t = POLICY_EGRESS_GUARD_TABLE;
    json_t *cmds = json_array();
    json_t *tb = json_pack("{s:s,s:s}", "family", "inet", "name", t);
    json_array_append_new(cmds, obj("add", "table", json_deep_copy(tb)));
    json_array_append_new(cmds, obj("delete", "table", json_deep_copy(tb)));
    json_array_append_new(cmds, obj("add", "table", tb));
    add_range_sets(cmds, t, h);
    json_array_append_new(cmds, base_chain(t, "output", "filter", "output", 0));
    json_array_append_new(cmds, obj("add", "chain", chain_body(t, s->ifname)));
    add_deny(cmds, t, s->ifname, h, s);
    json_array_append_new(cmds,
                          rule(t, "output",
                               json_pack("[o,o]", match("==", meta("oifname"), json_string("lo")),
                                         verdict("accept"))));
    json_array_append_new(cmds,
                          rule(t, "output",
                               json_pack("[o,o]",
                                         match("in", json_pack("{s:{s:s}}", "ct", "key", "state"),
                                               json_pack("[s,s]", "established", "related")),
                                         verdict("accept"))));
    json_array_append_new(cmds, rule(t, "output", json_pack("[o]", verdict_goto(s->ifname))));
    add_filter(cmds, t, s->ifname, false, h, s, pol);
    return doc(cmds);
}
