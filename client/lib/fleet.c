/* libsbx's fleet mode: etcd:// addresses, the node list read from etcd's v3 JSON gateway
 * (P/nodes/NAME records, docs/FLEET.md), placement by power of two choices over free slots
 * (first among the nodes whose published warm pools have a ready entry for the create),
 * routing by the node part of ids, skipping nodes that stop answering, and the typed error for a
 * sandbox whose node is gone. It reads etcd on its own easy handle (http.c) and never sends a
 * request through request.c: what does (sbx_client_nodes, sbx_node_drain, listing through a
 * node) is nodes.c, above it. */
#include "client/lib/internal.h"

#include "common/b64.h"
#include "common/poolshape.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sbxi_fleet {
    char **etcd; /* "http://host:2379" each */
    size_t n_etcd, cur;
    char *prefix;  /* "/sandboxd": no trailing '/' */
    json_t *nodes; /* the last node records read, in etcd's (name) order */
    bool etcd_ok;  /* whether the last read worked */
    uint64_t read_at_ms;
    uint64_t rng;
    CURL *easy;
};

bool sbxi_fleet_addr(const char *hosts) {
    return hosts && strncmp(hosts, "etcd://", 7) == 0;
}

void sbxi_fleet_free(sbxi_fleet *f) {
    if (!f)
        return;
    for (size_t i = 0; i < f->n_etcd; i++)
        free(f->etcd[i]);
    free(f->etcd);
    free(f->prefix);
    json_decref(f->nodes);
    if (f->easy)
        curl_easy_cleanup(f->easy);
    free(f);
}

/* "etcd://h1:2379,h2:2379/prefix" -> the gateway URLs and "/prefix" (default /sandboxd). */
static int fleet_parse(sbxi_fleet *f, const char *addr) {
    const char *hosts = addr + 7, *slash = strchr(hosts, '/');
    size_t hlen = slash ? (size_t)(slash - hosts) : strlen(hosts);
    const char *pre = slash && slash[1] ? slash : "/sandboxd";
    size_t plen = strlen(pre);
    while (plen > 1 && pre[plen - 1] == '/')
        plen--;
    f->prefix = strndup(pre, plen);
    for (const char *p = hosts; f->prefix && p < hosts + hlen;) {
        const char *end = memchr(p, ',', (size_t)(hosts + hlen - p));
        size_t n = end ? (size_t)(end - p) : (size_t)(hosts + hlen - p);
        char **ne = n ? realloc(f->etcd, (f->n_etcd + 1) * sizeof(*ne)) : f->etcd;
        if (!ne)
            return -1;
        f->etcd = ne;
        if (n && asprintf(&f->etcd[f->n_etcd++], "http://%.*s", (int)n, p) < 0)
            return f->n_etcd--, -1;
        p += n + 1;
    }
    return f->prefix ? 0 : -1;
}

/* POST one v3 gateway call ("/v3/kv/range", ...) to the first etcd that answers. */
static sbx_code etcd_call(sbxi_fleet *f, const char *path, const char *body, json_t **ret,
                          sbx_err *err) {
    if (!f->easy && !(f->easy = curl_easy_init()))
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "cannot create a libcurl handle");
    struct curl_slist *hdrs = sbxi_headers("application/json", NULL, NULL, NULL);
    if (!hdrs)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbx_code rc = SBX_E_CONNECT;
    for (size_t k = 0; k < f->n_etcd && rc != SBX_OK; k++) {
        size_t i = (f->cur + k) % f->n_etcd;
        _cleanup_free_ char *url = NULL;
        if (asprintf(&url, "%s%s", f->etcd[i], path) < 0)
            break;
        sbxi_response r = {0};
        curl_easy_reset(f->easy);
        sbxi_easy_setup(f->easy, "POST", url, NULL, hdrs, body, strlen(body), &r);
        curl_easy_setopt(f->easy, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
        curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, 3000L);
        sbxi_response_finish(f->easy, curl_easy_perform(f->easy), &r);
        if (r.curl_code == CURLE_OK && r.status == 200 &&
            (*ret = json_loadb(r.body, r.len, 0, NULL)))
            rc = SBX_OK, f->cur = i;
        else if (r.curl_code == CURLE_OK)
            rc = sbxi_err_set(err, SBX_E_PROTOCOL, r.status, "",
                              "etcd at %s answered %s with HTTP %ld", f->etcd[i], path, r.status);
        else
            rc = sbxi_err_set(err, SBX_E_CONNECT, 0, "", "cannot reach etcd at %s: %s", f->etcd[i],
                              r.curl_error);
        free(r.body);
    }
    curl_slist_free_all(hdrs);
    return rc;
}

/* {"key": b64(prefix + "/nodes/"), "range_end": b64(prefix + "/nodes0")}: every node record. */
static sbx_code read_nodes(sbxi_fleet *f, json_t **ret, sbx_err *err) {
    _cleanup_free_ char *key = NULL, *end = NULL;
    if (asprintf(&key, "%s/nodes/", f->prefix) < 0 || asprintf(&end, "%s/nodes0", f->prefix) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    _cleanup_free_ char *k64 = b64_encode(key, strlen(key)), *e64 = b64_encode(end, strlen(end));
    json_t *req = json_pack("{ss ss}", "key", k64 ? k64 : "", "range_end", e64 ? e64 : "");
    _cleanup_free_ char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body || !k64 || !e64)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    json_t *ans = NULL;
    sbx_code rc = etcd_call(f, "/v3/kv/range", body, &ans, err);
    if (rc != SBX_OK)
        return rc;
    json_t *nodes = json_array(), *kv;
    size_t i;
    json_array_foreach(json_object_get(ans, "kvs"), i, kv) {
        const char *v = json_string_value(json_object_get(kv, "value"));
        unsigned char *raw = NULL;
        size_t n = 0;
        if (!v || b64_decode(v, strlen(v), &raw, &n) < 0)
            continue;
        json_t *rec = json_loadb((const char *)raw, n, 0, NULL);
        free(raw);
        if (json_is_string(json_object_get(rec, "name")) &&
            json_is_string(json_object_get(rec, "url")))
            json_array_append(nodes, rec);
        json_decref(rec);
    }
    json_decref(ans);
    if (!nodes)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    *ret = nodes;
    return SBX_OK;
}

size_t sbxi_fleet_ep_by_node(const sbx_client *c, const char *name, size_t len) {
    for (size_t i = 0; i < c->n_eps; i++)
        if (c->eps[i].node && strlen(c->eps[i].node) == len &&
            memcmp(c->eps[i].node, name, len) == 0)
            return i;
    return SIZE_MAX;
}

/* Point ep at url (a node that re-registered may have moved). */
static int ep_set_url(sbxi_endpoint *ep, const char *name, const char *url) {
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    if (ep->base_url && strlen(ep->base_url) == n && strncmp(ep->base_url, url, n) == 0)
        return 0;
    char *base = strndup(url, n), *disp = NULL;
    if (!base || asprintf(&disp, "%s (node %s)", base, name) < 0) {
        free(base);
        return -1;
    }
    free(ep->base_url);
    free(ep->display);
    ep->base_url = base;
    ep->display = disp;
    return 0;
}

/* Merge a node list into the endpoints: new nodes appended, vanished ones marked gone. */
static int merge_nodes(sbx_client *c, json_t *nodes) {
    uint64_t now = now_mono_ms();
    for (size_t i = 0; i < c->n_eps; i++)
        c->eps[i].gone = true;
    json_t *rec;
    size_t i;
    json_array_foreach(nodes, i, rec) {
        const char *name = json_string_value(json_object_get(rec, "name"));
        const char *url = json_string_value(json_object_get(rec, "url"));
        size_t ep = sbxi_fleet_ep_by_node(c, name, strlen(name));
        if (ep == SIZE_MAX) {
            sbxi_endpoint *ne = realloc(c->eps, (c->n_eps + 1) * sizeof(*ne));
            if (!ne)
                return -1;
            c->eps = ne;
            ep = c->n_eps;
            memset(&ne[ep], 0, sizeof(*ne));
            if (!(ne[ep].node = strdup(name)))
                return -1;
            c->n_eps++;
        }
        sbxi_endpoint *e = &c->eps[ep];
        if (ep_set_url(e, name, url) < 0)
            return -1;
        json_t *fr = json_object_get(rec, "free");
        json_decref(e->pools);
        json_decref(e->defaults);
        e->pools = json_deep_copy(json_object_get(rec, "pools")); /* pool_first counts it down */
        e->defaults = json_incref(json_object_get(rec, "defaults"));
        e->gone = false;
        e->draining = json_is_true(json_object_get(rec, "draining"));
        e->free_slots = e->draining ? 0 : json_is_integer(fr) ? (long)json_integer_value(fr) : -1;
        e->gpus_free = sbxi_gpus_free(rec);
        e->info_at_ms = now;
    }
    return 0;
}

sbx_code sbxi_fleet_refresh(sbx_client *c, bool force, sbx_err *err) {
    sbxi_fleet *f = c->fleet;
    uint64_t now = now_mono_ms();
    if (!f || (!force && f->read_at_ms && now - f->read_at_ms < SBXI_FLEET_REFRESH_MS))
        return SBX_OK;
    f->read_at_ms = now;
    json_t *nodes = NULL;
    sbx_code rc = read_nodes(f, &nodes, err);
    f->etcd_ok = rc == SBX_OK;
    if (rc != SBX_OK)
        return rc; /* the last view stays: nodes keep serving their own sandboxes */
    json_decref(f->nodes);
    f->nodes = nodes;
    if (merge_nodes(c, nodes) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return SBX_OK;
}

bool sbxi_fleet_stale(const sbx_client *c) {
    return !c->fleet || now_mono_ms() - c->fleet->read_at_ms >= SBXI_FLEET_REFRESH_MS;
}

sbx_code sbxi_fleet_open(sbx_client *c, const char *addr, sbx_err *err) {
    sbxi_fleet *f = calloc(1, sizeof(*f));
    if (!f)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    c->fleet = f;
    f->rng = now_mono_us() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)f;
    if (fleet_parse(f, addr) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    if (f->n_etcd == 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "",
                            "bad fleet address \"%s\": use etcd://host:2379[,host:2379]/prefix",
                            addr);
    sbx_code rc = sbxi_fleet_refresh(c, true, err);
    if (rc == SBX_OK && c->n_eps == 0)
        rc = sbxi_err_set(err, SBX_E_UNAVAILABLE, 0, "",
                          "no sandboxd node is registered under %s/nodes/ in etcd at %s", f->prefix,
                          f->etcd[f->cur]);
    return rc;
}

/* ---- routing ---- */
size_t sbxi_fleet_route(sbx_client *c, const char *id, size_t fallback) {
    const char *dot = id ? strchr(id, '.') : NULL;
    if (!c->fleet || !dot || !dot[1])
        return fallback;
    size_t ep = sbxi_fleet_ep_by_node(c, dot + 1, strlen(dot + 1));
    if (ep == SIZE_MAX && sbxi_fleet_refresh(c, false, NULL) == SBX_OK)
        ep = sbxi_fleet_ep_by_node(c, dot + 1, strlen(dot + 1));
    return ep == SIZE_MAX ? fallback : ep;
}

bool sbxi_ep_usable(const sbx_client *c, size_t ep) {
    return !c->eps[ep].gone && c->eps[ep].down_until_ms <= now_mono_ms();
}

size_t sbxi_first_ep(const sbx_client *c) {
    for (size_t i = 0; c->fleet && i < c->n_eps; i++)
        if (sbxi_ep_usable(c, i))
            return i;
    return 0;
}

static sbx_code node_gone(const sbx_client *c, size_t ep, sbx_err *err) {
    return sbxi_err_set(err, SBX_E_NODE_UNAVAILABLE, 0, "node_unavailable",
                        "node %s left the fleet (its registration in etcd expired): its sandboxes "
                        "are gone",
                        c->eps[ep].node ? c->eps[ep].node : c->eps[ep].display);
}

sbx_code sbxi_fleet_check(sbx_client *c, size_t ep, sbx_err *err) {
    if (!c->fleet || !c->eps[ep].gone)
        return SBX_OK;
    sbxi_fleet_refresh(c, false, NULL);
    return c->eps[ep].gone ? node_gone(c, ep, err) : SBX_OK;
}

sbx_code sbxi_fleet_failed(sbx_client *c, size_t ep, sbx_code rc, sbx_err *err) {
    if (!c->fleet || rc != SBX_E_CONNECT)
        return rc;
    c->eps[ep].down_until_ms = now_mono_ms() + SBXI_FLEET_DOWN_MS;
    c->eps[ep].free_slots = -1;
    sbxi_fleet_refresh(c, false, NULL); /* may move c->eps */
    const sbxi_endpoint *e = &c->eps[ep];
    if (e->gone)
        return node_gone(c, ep, err);
    char why[400] = "";
    if (err)
        snprintf(why, sizeof(why), "%s", err->message);
    return sbxi_err_set(err, SBX_E_NODE_UNAVAILABLE, 0, "node_unavailable",
                        "node %s is not answering: %s", e->node ? e->node : e->display, why);
}

/* ---- placement: power of two choices over the published free slots ---- */
static uint64_t rnd(sbxi_fleet *f) {
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    return f->rng;
}

/* The pool of endpoint e that serves shape with the most ready entries (NULL: none). */
static json_t *ready_pool(const sbxi_endpoint *e, json_t *shape, json_int_t *ret_ready) {
    return poolshape_best(e->pools, e->defaults, shape, ret_ready);
}

static bool pooled(const sbx_client *c, size_t ep, json_t *shape) {
    return c->eps[ep].free_slots > 0 && ready_pool(&c->eps[ep], shape, NULL);
}

/* The position in order of the k-th (from 0) node with a ready pool entry for shape. */
static size_t nth_pooled(const sbx_client *c, const size_t *order, size_t n, json_t *shape,
                         size_t k) {
    for (size_t i = 0; i < n; i++)
        if (pooled(c, order[i], shape) && k-- == 0)
            return i;
    return 0;
}

/* Among the first n of order (usable, with room), the nodes with a ready pool entry for the
 * create: two at random, the one with more ready entries (then more free slots) moves to the
 * front and its published count goes down by one (optimistic, as free slots). */
static void pool_first(sbx_client *c, const char *body, size_t *order, size_t n) {
    json_t *b = body ? json_loads(body, 0, NULL) : NULL, *shape = poolshape_from_body(b);
    json_decref(b);
    size_t m = 0;
    for (size_t i = 0; shape && i < n; i++)
        m += pooled(c, order[i], shape);
    if (m > 0) {
        size_t a = nth_pooled(c, order, n, shape, rnd(c->fleet) % m);
        size_t bb = nth_pooled(c, order, n, shape, rnd(c->fleet) % m);
        const sbxi_endpoint *ea = &c->eps[order[a]], *eb = &c->eps[order[bb]];
        json_int_t ra, rb, rt;
        ready_pool(ea, shape, &ra), ready_pool(eb, shape, &rb);
        size_t pick = rb > ra || (rb == ra && eb->free_slots > ea->free_slots) ? bb : a;
        size_t t = order[pick];
        json_t *p = ready_pool(&c->eps[t], shape, &rt);
        json_object_set_new(p, "ready", json_integer(rt - 1));
        memmove(order + 1, order, pick * sizeof(*order));
        order[0] = t;
    }
    json_decref(shape);
}

static size_t fleet_order(sbx_client *c, const char *body, size_t *order) {
    size_t n = 0;
    for (size_t i = 0; i < c->n_eps; i++)
        if (sbxi_ep_usable(c, i) && !c->eps[i].draining)
            order[n++] = i;
    for (size_t i = 1; i < n; i++) /* most free first: the fallback order after the pick */
        for (size_t j = i; j > 0 && c->eps[order[j]].free_slots > c->eps[order[j - 1]].free_slots;
             j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    size_t with_free = 0;
    while (with_free < n && c->eps[order[with_free]].free_slots > 0)
        with_free++;
    if (with_free >= 2) { /* two at random among those with room; the freer goes first */
        size_t a = rnd(c->fleet) % with_free, b = rnd(c->fleet) % (with_free - 1);
        b += b >= a;
        size_t pick = c->eps[order[b]].free_slots > c->eps[order[a]].free_slots ? b : a;
        size_t t = order[pick];
        memmove(order + 1, order, pick * sizeof(*order));
        order[0] = t;
    }
    pool_first(c, body, order, n);
    sbxi_gpu_first(c, body, order, n);
    return n;
}

size_t sbxi_placement_order(sbx_client *c, const char *body, size_t *order) {
    if (c->fleet)
        return fleet_order(c, body, order);
    for (size_t i = 0; i < c->n_eps; i++)
        order[i] = i;
    for (size_t i = 1; i < c->n_eps; i++) /* insertion sort: stable, and n is tiny */
        for (size_t j = i; j > 0 && c->eps[order[j]].free_slots > c->eps[order[j - 1]].free_slots;
             j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    sbxi_gpu_first(c, body, order, c->n_eps);
    return c->n_eps;
}

/* ---- the node list as sbx_client_nodes shows it (nodes.c) ---- */
json_t *sbxi_fleet_nodes_json(const sbxi_fleet *f) {
    json_t *arr = json_array(), *rec;
    size_t i;
    double now = (double)now_real_ms() / 1000.0;
    json_array_foreach(f->nodes, i, rec) {
        json_t *r = json_deep_copy(rec);
        json_t *hb = json_object_get(rec, "heartbeat");
        if (json_is_number(hb))
            json_object_set_new(r, "heartbeat_age_s", json_real(now - json_number_value(hb)));
        json_object_set_new(
            r, "state",
            json_string(json_is_true(json_object_get(rec, "draining")) ? "draining" : "ready"));
        json_array_append_new(arr, r);
    }
    return json_pack("{ss ss so}", "prefix", f->prefix, "etcd", f->etcd_ok ? "ok" : "unreachable",
                     "nodes", arr);
}
