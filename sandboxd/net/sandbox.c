/* One sandbox's network: setup (veth, addresses, routes, guard table, host chain and map
 * element), teardown, re-adoption after a daemon restart, and its inspect / metrics view. */
#include "sandboxd/net/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

static sd_net_sandbox *sandbox_new(sd_net *n, const char *id, const policy_egress *pol) {
    sd_net_sandbox *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->net = n;
    s->slot = -1;
    s->nsfd = -1;
    s->id = strdup(id);
    s->pol = policy_egress_dup(pol);
    if (!s->id || !s->pol) {
        sd_net_sandbox_free(s);
        return NULL;
    }
    sd_net_ifname_of(n, id, s->ifname);
    return s;
}

void sd_net_sandbox_free(sd_net_sandbox *s) {
    if (!s)
        return;
    safe_close(s->nsfd);
    policy_egress_free(s->pol);
    free(s->id);
    free(s);
}

static int open_netns(pid_t pid, int *ret, error_rec *err) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open %s", path);
    struct stat theirs, ours; /* never plumb into the daemon's own namespace */
    if (fstat(fd, &theirs) < 0 || stat("/proc/self/ns/net", &ours) < 0 ||
        (theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino)) {
        safe_close(fd);
        return error_set(err, -EINVAL, "pid %d shares the daemon's network namespace", (int)pid);
    }
    *ret = fd;
    return 0;
}

static int host_rules(sd_net *n, sd_net_sandbox *s, error_rec *err) {
    policy_egress_sandbox ps;
    sd_net_sandbox_facts(s, &ps);
    json_t *doc = policy_egress_nft_sandbox_add(&n->host, &ps, s->pol);
    int r = sd_net_nft_apply(n->nft, doc, err);
    json_decref(doc);
    return r < 0 ? error_prefix(err, "host chain %s", s->ifname) : 0;
}

/* veth, host-side addresses, the sandbox end (helper thread), then the host rules: the map
 * element is the last thing added, and sandbox interfaces without one are rejected. */
static int plumb(sd_net *n, sd_net_sandbox *s, error_rec *err) {
    /* EEXIST is an error, never a replacement: the name may belong to a live sandbox (a hash
     * collision). Leftovers of a crash are removed by sd_net_restore. */
    int r = sd_net_link_veth(n->nl, s->ifname, s->nsfd, POLICY_EGRESS_GUARD_IFNAME, err);
    if (r >= 0)
        r = sd_net_link_addr(n->nl, s->ifname, &s->gw4, 30, err);
    if (r >= 0 && s->gw6.family)
        r = sd_net_link_addr(n->nl, s->ifname, &s->gw6, 64, err);
    if (r >= 0)
        r = sd_net_link_up(n->nl, s->ifname, err);
    if (r >= 0)
        r = sd_net_ns_configure(n, s, err);
    if (r >= 0)
        r = host_rules(n, s, err);
    return r;
}

int sd_net_sandbox_setup(sd_net *n, const char *sandbox_id, pid_t init_pid,
                         const policy_egress *pol, sd_net_sandbox **ret, error_rec *err) {
    return sd_net_sandbox_setup_at(n, sandbox_id, init_pid, pol, -1, ret, err);
}

int sd_net_sandbox_slot(const sd_net_sandbox *s) {
    return s ? s->slot : -1;
}

int sd_net_sandbox_setup_at(sd_net *n, const char *sandbox_id, pid_t init_pid,
                            const policy_egress *pol, int prefer, sd_net_sandbox **ret,
                            error_rec *err) {
    sd_net_sandbox *s = sandbox_new(n, sandbox_id, pol);
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    if (pol->mode == POLICY_EGRESS_NONE) {
        *ret = s;
        return 0;
    }
    int r = sd_net_forwarding_on(n, err);
    if (r >= 0 && (prefer < 0 || (r = sd_net_slot_claim(n, s, prefer)) == -EADDRINUSE))
        r = sd_net_slot_claim(n, s, -1);
    if (r == -ENOSPC)
        error_set(err, r, "net: address pool exhausted");
    if (r >= 0)
        r = open_netns(init_pid, &s->nsfd, err);
    if (r >= 0)
        r = plumb(n, s, err);
    if (r < 0) {
        if (err)
            error_prefix(err, "network setup");
        sd_net_sandbox_teardown(n, s);
        sd_net_sandbox_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

int sd_net_sandbox_teardown(sd_net *n, sd_net_sandbox *s) {
    if (!s || s->torn_down || s->pol->mode == POLICY_EGRESS_NONE)
        return 0;
    policy_egress_sandbox ps;
    sd_net_sandbox_facts(s, &ps);
    int r = 0;
    if (sd_net_nft_exists(n->nft, n->table, &ps)) {
        json_t *doc = policy_egress_nft_sandbox_del(&n->host, &ps);
        r = sd_net_nft_apply(n->nft, doc, NULL);
        json_decref(doc);
    }
    int q = sd_net_link_delete(n->nl, s->ifname);
    if (q < 0 && q != -ENODEV && r >= 0)
        r = q;
    if (s->slot >= 0 && (uint32_t)s->slot < n->n_slots)
        n->slots[s->slot] = 0;
    s->slot = -1;
    s->nsfd = safe_close(s->nsfd);
    s->torn_down = true;
    return r;
}

int sd_net_sandbox_denied(const sd_net_sandbox *s, uint64_t *ret) {
    uint64_t count = 0;
    if (s->pol->mode == POLICY_EGRESS_NONE || s->torn_down) {
        *ret = 0;
        return 0;
    }
    policy_egress_sandbox ps;
    sd_net_sandbox_facts(s, &ps);
    int r = sd_net_nft_read_denied(s->net->nft, s->net->table, &ps, &count, NULL);
    if (r >= 0 && s->net->guard)
        r = sd_net_ns_read_denied(s, &count, NULL);
    if (r >= 0)
        *ret = count;
    return r;
}

static int by_expiry_desc(const void *a, const void *b) {
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "expires_in"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "expires_in"));
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Newest first: an entry's expiry is refreshed on every hit, so the largest is the latest. */
static json_t *sorted(json_t *last) {
    size_t n = json_array_size(last);
    json_t **v = calloc(n ? n : 1, sizeof(*v)), *out = json_array();
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_array_get(last, i);
    if (v)
        qsort(v, n, sizeof(*v), by_expiry_desc);
    for (size_t i = 0; v && i < n; i++)
        json_array_append(out, v[i]);
    free(v);
    return out;
}

static void add_addr(json_t *o, const char *key, const policy_cidr *c) {
    char ip[64];
    if (!c->family)
        return;
    policy_cidr_format_addr(c, ip, sizeof(ip));
    json_object_set_new(o, key, json_string(ip));
}

json_t *sd_net_sandbox_to_json(const sd_net_sandbox *s) {
    json_t *o = policy_egress_to_json(s->pol);
    if (s->pol->mode == POLICY_EGRESS_NONE || s->torn_down)
        return o;
    json_object_set_new(o, "interface", json_string(s->ifname));
    add_addr(o, "ipv4", &s->addr4);
    add_addr(o, "gateway4", &s->gw4);
    add_addr(o, "ipv6", &s->addr6);
    add_addr(o, "gateway6", &s->gw6);
    uint64_t count = 0;
    json_t *last = json_array();
    policy_egress_sandbox ps;
    sd_net_sandbox_facts(s, &ps);
    int r = sd_net_nft_read_denied(s->net->nft, s->net->table, &ps, &count, last);
    if (r >= 0 && s->net->guard)
        r = sd_net_ns_read_denied(s, &count, last);
    json_object_set_new(o, "denied", r >= 0 ? json_integer((json_int_t)count) : json_null());
    json_object_set_new(o, "last_denied", sorted(last));
    json_decref(last);
    return o;
}

/* ---- restore ---- */

/* Re-adopt one sandbox: its veth exists -> claim the slot its address says and re-add the
 * host rules; otherwise plumb it from scratch. */
static int restore_one(sd_net *n, const sd_net_restore_entry *e, sd_net_sandbox **ret,
                       error_rec *err) {
    if (e->pol->mode == POLICY_EGRESS_NONE)
        return sd_net_sandbox_setup(n, e->sandbox_id, e->init_pid, e->pol, ret, err);
    sd_net_sandbox *s = sandbox_new(n, e->sandbox_id, e->pol);
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    policy_cidr gw4;
    int r = sd_net_link_addr4(n->nl, s->ifname, &gw4);
    if (r < 0) {
        sd_net_sandbox_free(s);
        return sd_net_sandbox_setup(n, e->sandbox_id, e->init_pid, e->pol, ret, err);
    }
    int slot = sd_net_slot_of(n, &gw4);
    if (slot < 0 || (uint32_t)slot >= n->n_slots || n->slots[slot]) {
        /* the pool changed since (or the slot is taken): plumb it again from scratch */
        sd_net_link_delete(n->nl, s->ifname);
        sd_net_sandbox_free(s);
        return sd_net_sandbox_setup(n, e->sandbox_id, e->init_pid, e->pol, ret, err);
    }
    r = sd_net_forwarding_on(n, err);
    if (r >= 0)
        r = sd_net_slot_claim(n, s, slot);
    if (r >= 0)
        r = open_netns(e->init_pid, &s->nsfd, err);
    if (r >= 0)
        r = host_rules(n, s, err);
    if (r < 0) {
        error_prefix(err, "restore %s", e->sandbox_id);
        sd_net_sandbox_teardown(n, s);
        sd_net_sandbox_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

static bool is_live(char **live, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (live[i] && strcmp(live[i], name) == 0)
            return true;
    return false;
}

int sd_net_restore(sd_net *n, const sd_net_restore_entry *entries, size_t n_entries,
                   sd_net_sandbox **ret, error_rec *err) {
    int first = 0;
    char **live = calloc(n_entries ? n_entries : 1, sizeof(*live)), **links = NULL;
    if (!live)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n_entries; i++) {
        error_rec e1 = {0};
        ret[i] = NULL;
        int r = restore_one(n, &entries[i], &ret[i], &e1);
        if (r < 0 && first == 0) {
            first = r;
            if (err)
                *err = e1;
        }
        if (r >= 0 && ret[i]->nsfd >= 0)
            live[i] = ret[i]->ifname;
    }
    if (sd_net_link_list(n->nl, n->ifprefix, &links) >= 0)
        for (size_t i = 0; links[i]; i++)
            if (!is_live(live, n_entries, links[i]))
                sd_net_link_delete(n->nl, links[i]);
    sd_net_strv_free(links);
    free(live);
    return first;
}
