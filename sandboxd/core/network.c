/* The core's side of networking (core/network.h): config, create-time validation and name
 * resolution, spec fields, setup when the shim reports, teardown at the end, inspect, the
 * denied counter, and re-adoption after a restart. */
#include "sandboxd/core/network.h"

#include "sandboxd/net/net.h"

#include <stdio.h>
#include <string.h>

static const char *str(json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

int sd_network_init(sd_daemon *d, error_rec *err) {
    json_t *c = d->cfg.network;
    if (!json_is_true(json_object_get(c, "enabled")))
        return 0;
    const char *dns[POLICY_EGRESS_MAX_DNS + 1] = {0};
    json_t *arr = json_object_get(c, "dns"), *v;
    size_t i;
    json_array_foreach(arr, i, v) {
        if (i < POLICY_EGRESS_MAX_DNS)
            dns[i] = json_string_value(v);
    }
    sd_net_config cfg = {.table = str(c, "table"),
                         .ifprefix = str(c, "ifprefix"),
                         .pool4 = str(c, "pool4"),
                         .pool6 = str(c, "pool6"),
                         .uplink = str(c, "uplink"),
                         .dns = dns,
                         .no_guard = json_is_false(json_object_get(c, "guard"))};
    if (sd_net_init(&d->net, &cfg, err) < 0)
        return error_prefix(err, "config network");
    log_info("networking enabled table=inet/%s", cfg.table ? cfg.table : "sandboxd");
    return 0;
}

static json_t *network_value(const policy_create *c) {
    if (c->net_mode == POLICY_NET_ALLOW)
        return json_pack("{s:O}", "allow", c->net_allow);
    return json_string(c->net_mode == POLICY_NET_OPEN ? "open" : "none");
}

int sd_network_check(sd_daemon *d, const policy_create *c, policy_egress **ret, error_rec *err) {
    policy_egress *p = NULL;
    json_t *v = network_value(c);
    int r = policy_egress_parse(v, &p, err);
    json_decref(v);
    if (r < 0)
        return r;
    if (p->mode == POLICY_EGRESS_NONE) {
        policy_egress_free(p);
        *ret = NULL;
        return 0;
    }
    if (!d->net)
        r = error_set(err, -EINVAL, "network: egress is not enabled on this node (only \"none\")");
    else
        r = sd_net_resolve(d->net, p, err);
    if (r < 0) {
        policy_egress_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

int sd_network_spec(sd_sandbox *sb, shim_spec *spec, error_rec *err) {
    bool on = sb->egress && sb->egress->mode != POLICY_EGRESS_NONE;
    spec->net_mode = on ? SHIM_NET_VETH : SHIM_NET_NONE;
    if (!on)
        return 0;
    json_t *hosts = sd_net_etc_hosts(sb->egress), *dns = sd_net_dns(sb->d->net, sb->egress);
    int r = shim_spec_set_hosts(spec, hosts, err);
    if (r >= 0)
        r = shim_spec_set_dns(spec, dns, err);
    json_decref(hosts);
    json_decref(dns);
    return r;
}

int sd_network_setup(sd_sandbox *sb, error_rec *err) {
    if (sb->net || sb->spec.net_mode == POLICY_NET_NONE)
        return 0;
    if (!sb->d->net)
        return error_set(err, -EINVAL, "network: egress is not enabled on this node");
    int r = sb->egress ? 0 : sd_network_check(sb->d, &sb->spec, &sb->egress, err); /* (a move) */
    if (r < 0 || !sb->egress)
        return r;
    return sd_net_sandbox_setup_at(sb->d->net, sb->id, sb->init_pid, sb->egress, sb->net_slot,
                                   &sb->net, err);
}

void sd_network_teardown(sd_sandbox *sb) {
    if (sb->net && sb->d->net && sd_net_sandbox_teardown(sb->d->net, sb->net) < 0)
        log_warn("network teardown incomplete sandbox=%s", sb->id);
}

void sd_network_release(sd_sandbox *sb) {
    if (sb->net)
        sb->net_slot = sd_net_sandbox_slot(sb->net);
    sd_network_teardown(sb);
    sd_net_sandbox_free(sb->net);
    sb->net = NULL;
}

void sd_network_free(sd_sandbox *sb) {
    sd_net_sandbox_free(sb->net);
    sb->net = NULL;
    policy_egress_free(sb->egress);
    sb->egress = NULL;
}

json_t *sd_network_json(const sd_sandbox *sb) {
    if (sb->net && sb->state != SD_ENDED)
        return sd_net_sandbox_to_json(sb->net);
    if (sb->egress)
        return policy_egress_to_json(sb->egress);
    json_t *v = network_value(&sb->spec), *o = NULL;
    policy_egress *p = NULL;
    if (policy_egress_parse(v, &p, NULL) == 0)
        o = policy_egress_to_json(p);
    policy_egress_free(p);
    json_decref(v);
    return o ? o : json_pack("{s:s}", "mode", "none");
}

int sd_network_denied(const sd_sandbox *sb, uint64_t *ret) {
    if (!sb->net || sb->state != SD_RUNNING)
        return -ENOENT;
    return sd_net_sandbox_denied(sb->net, ret);
}

void sd_network_attach(sd_sandbox *sb, policy_egress *eg) {
    policy_egress_free(sb->egress);
    sb->egress = eg;
}

/* Running networked sandboxes get their policy back from their record (or from their spec,
 * resolved again, for a record without the addresses), then sd_net_restore re-adds their
 * rules and drops unclaimed veths. */
void sd_network_restore(sd_daemon *d, void (*lost)(sd_sandbox *sb, const char *why)) {
    if (!d->net)
        return;
    size_t n = 0, k = 0, nbad = 0;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        n++;
    sd_net_restore_entry *e = calloc(n ? n : 1, sizeof(*e));
    sd_sandbox **who = calloc(n ? n : 1, sizeof(*who)), **bad = calloc(n ? n : 1, sizeof(*bad));
    sd_net_sandbox **got = calloc(n ? n : 1, sizeof(*got));
    char(*why)[ERROR_MSG_MAX] = calloc(n ? n : 1, sizeof(*why));
    bool ok = e && who && bad && got && why;
    for (sd_sandbox *sb = d->sandboxes; ok && sb; sb = sb->next) {
        error_rec err = {0};
        /* pausing or resuming: its network went at the pause, and comes back once its shim
         * answers (core/checkpoint.c); a veth of it is dropped here as unclaimed */
        if (sb->state != SD_RUNNING || sb->spec.net_mode == POLICY_NET_NONE || sb->pausing ||
            sb->resuming)
            continue;
        if (!sb->egress && sd_network_check(d, &sb->spec, &sb->egress, &err) < 0) {
            snprintf(why[nbad], sizeof(why[nbad]), "%s", err.message);
            bad[nbad++] = sb;
            continue;
        }
        e[k] = (sd_net_restore_entry){sb->id, sb->init_pid, sb->egress};
        who[k++] = sb;
    }
    error_rec err = {0};
    if (ok && sd_net_restore(d->net, e, k, got, &err) < 0)
        log_warn("network restore incomplete: %s", err.message);
    for (size_t i = 0; ok && i < k; i++) {
        who[i]->net = got[i];
        if (!got[i])
            lost(who[i], NULL);
    }
    for (size_t i = 0; ok && i < nbad; i++)
        lost(bad[i], why[i]);
    free(e);
    free(who);
    free(bad);
    free(got);
    free(why);
}

json_t *sd_network_resolved_json(const sd_sandbox *sb) {
    const policy_egress *p = sb->egress;
    bool names = false;
    for (size_t i = 0; p && p->mode == POLICY_EGRESS_ALLOW && i < p->n_entries; i++)
        names |= p->entries[i].host != NULL;
    if (!names)
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->n_entries; i++) {
        json_t *addrs = json_array();
        for (size_t j = 0; addrs && j < p->entries[i].n_addrs; j++) {
            char ip[64];
            policy_cidr_format_addr(&p->entries[i].addrs[j], ip, sizeof(ip));
            json_array_append_new(addrs, json_string(ip));
        }
        json_array_append_new(a, addrs);
    }
    return a;
}

/* Entry i's resolved addresses from the record's list v; false when they do not fit. */
static bool load_entry(policy_egress *p, size_t i, json_t *v) {
    policy_cidr addrs[POLICY_EGRESS_MAX_ADDRS];
    size_t n = json_array_size(v);
    if (!json_is_array(v) || (p->entries[i].host == NULL) != (n == 0) ||
        n > POLICY_EGRESS_MAX_ADDRS)
        return false;
    for (size_t j = 0; j < n; j++) {
        policy_cidr *c = &addrs[j];
        if (policy_cidr_parse(json_string_value(json_array_get(v, j)), c) < 0 ||
            c->len != (c->family == AF_INET ? 32 : 128))
            return false;
    }
    return !p->entries[i].host ||
           (policy_egress_set_resolved(p, i, addrs, n) == 0 && p->entries[i].n_addrs > 0);
}

void sd_network_load(sd_sandbox *sb, json_t *resolved) {
    policy_egress *p = NULL;
    json_t *v = network_value(&sb->spec);
    int r = resolved ? policy_egress_parse(v, &p, NULL) : -ENOENT;
    json_decref(v);
    if (r < 0)
        return;
    bool fits = p->mode == POLICY_EGRESS_ALLOW && json_array_size(resolved) == p->n_entries;
    for (size_t i = 0; fits && i < p->n_entries; i++)
        fits = load_entry(p, i, json_array_get(resolved, i));
    if (!fits) {
        policy_egress_free(p);
        return;
    }
    sd_network_attach(sb, p);
}
