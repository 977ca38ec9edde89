/* libsbx clients: endpoint lists (SBX_HOST parsing), the bearer token, GET /v1/info and
 * /v1/sandboxes across endpoints, placement by free capacity, leases, and the units helpers. */
#include "client/lib/internal.h"

#include "common/timeutil.h"
#include "common/units.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *strndup_trim(const char *s, size_t n) {
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return strndup(s, n);
}

static sbx_code endpoint_init(sbxi_endpoint *ep, const char *s, sbx_err *err) {
    memset(ep, 0, sizeof(*ep));
    ep->free_slots = -1;
    ep->gpus_free = -1;
    const char *path = NULL;
    char *url = NULL;
    if (strncmp(s, "unix://", 7) == 0)
        path = s + 7;
    else if (strncmp(s, "unix:", 5) == 0)
        path = s + 5;
    else if (s[0] == '/' || s[0] == '.')
        path = s;
    else if (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0)
        url = strdup(s);
    else if (strncmp(s, "tcp://", 6) == 0) {
        if (asprintf(&url, "http://%s", s + 6) < 0)
            url = NULL;
    } else if (strchr(s, ':') && !strchr(s, '/')) {
        if (asprintf(&url, "http://%s", s) < 0)
            url = NULL;
    } else
        return sbxi_err_set(err, SBX_E_INVALID, 0, "",
                            "bad endpoint \"%s\": use unix:/path/to.sock, a socket path or "
                            "http://host:port",
                            s);
    if (path) {
        if (!*path)
            return sbxi_err_set(err, SBX_E_INVALID, 0, "", "bad endpoint \"%s\": empty path", s);
        ep->unix_path = strdup(path);
        ep->display = strdup(path);
        ep->base_url = strdup("http://localhost");
        ep->is_default = strcmp(path, SBX_DEFAULT_SOCKET) == 0;
    } else {
        if (!url)
            return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
        size_t n = strlen(url);
        while (n > 0 && url[n - 1] == '/')
            url[--n] = 0;
        ep->base_url = url;
        ep->display = strdup(url);
    }
    if (!ep->base_url || !ep->display || (path && !ep->unix_path))
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return SBX_OK;
}

void sbxi_endpoints_free(sbxi_endpoint *eps, size_t n) {
    for (size_t i = 0; eps && i < n; i++) {
        free(eps[i].display);
        free(eps[i].base_url);
        free(eps[i].unix_path);
        free(eps[i].node);
        json_decref(eps[i].pools);
        json_decref(eps[i].defaults);
    }
    free(eps);
}

sbx_code sbxi_hosts_parse(const char *hosts, sbxi_endpoint **ret, size_t *ret_n, sbx_err *err) {
    sbxi_endpoint *eps = NULL;
    size_t n = 0;
    sbx_code rc = SBX_OK;
    for (const char *p = hosts ? hosts : ""; rc == SBX_OK;) {
        const char *comma = strchrnul(p, ',');
        _cleanup_free_ char *item = strndup_trim(p, (size_t)(comma - p));
        if (!item)
            rc = sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
        else if (*item) {
            sbxi_endpoint *ne = realloc(eps, (n + 1) * sizeof(*eps));
            if (!ne)
                rc = sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
            else {
                eps = ne;
                rc = endpoint_init(&eps[n], item, err);
                n++; /* freed below on failure: endpoint_init zeroes before allocating */
            }
        }
        if (!*comma)
            break;
        p = comma + 1;
    }
    if (rc == SBX_OK && n == 0)
        rc = sbxi_err_set(err, SBX_E_INVALID, 0, "", "no endpoint given in \"%s\"",
                          hosts ? hosts : "");
    if (rc != SBX_OK) {
        sbxi_endpoints_free(eps, n);
        return rc;
    }
    *ret = eps;
    *ret_n = n;
    return SBX_OK;
}

sbx_code sbx_client_new(const char *hosts, sbx_client **ret, sbx_err *err) {
    if (!ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "ret is NULL");
    if (!hosts || !*hosts)
        hosts = getenv("SBX_HOST");
    if (!hosts || !*hosts)
        hosts = SBX_DEFAULT_SOCKET;
    sbx_client *c = calloc(1, sizeof(*c));
    if (!c)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    c->ufd = -1;
    c->intr_fd = -1;
    sbx_code rc = sbxi_fleet_addr(hosts) ? sbxi_fleet_open(c, hosts, err)
                                         : sbxi_hosts_parse(hosts, &c->eps, &c->n_eps, err);
    if (rc == SBX_OK && (rc = sbx_client_set_token(c, NULL)) != SBX_OK)
        sbxi_err_set(err, rc, 0, "", "%s",
                     rc == SBX_E_NOMEM ? "out of memory" : "$SBX_TOKEN has control characters");
    if (rc != SBX_OK) {
        sbx_client_free(c);
        return rc;
    }
    *ret = c;
    return SBX_OK;
}

void sbx_client_free(sbx_client *c) {
    if (!c)
        return;
    if (c->multi) /* (its kept-alive connections; c->easy is never left in it) */
        curl_multi_cleanup(c->multi);
    if (c->easy)
        curl_easy_cleanup(c->easy);
    if (c->ufd >= 0)
        close(c->ufd);
    sbxi_endpoints_free(c->eps, c->n_eps);
    sbxi_fleet_free(c->fleet);
    free(c->token);
    free(c);
}

bool sbxi_header_safe(const char *s) {
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

sbx_code sbx_client_set_token(sbx_client *c, const char *token) {
    if (!c)
        return SBX_E_INVALID;
    if (!token)
        token = getenv("SBX_TOKEN");
    if (!sbxi_header_safe(token))
        return SBX_E_INVALID;
    char *t = NULL;
    if (token && *token && !(t = strdup(token)))
        return SBX_E_NOMEM;
    free(c->token);
    c->token = t;
    return SBX_OK;
}

void sbx_client_set_interrupt_fd(sbx_client *c, int fd, int signo) {
    if (!c)
        return;
    c->intr_fd = fd < 0 ? -1 : fd;
    c->intr_signo = signo;
}

/* ---- placement ---- */
bool sbxi_info_stale(const sbx_client *c, uint64_t now_ms) {
    if (c->fleet)
        return sbxi_fleet_stale(c);
    for (size_t i = 0; i < c->n_eps; i++)
        if (c->eps[i].info_at_ms == 0 || now_ms - c->eps[i].info_at_ms > SBXI_INFO_TTL_MS)
            return true;
    return false;
}

void sbxi_info_record(sbx_client *c, size_t ep, const char *body, size_t len, bool ok) {
    long slots = -1, gpus = -1;
    if (ok) {
        json_t *j = json_loadb(body, len, 0, NULL);
        json_t *f = json_object_get(j, "free_slots");
        if (json_is_integer(f))
            slots = (long)json_integer_value(f);
        gpus = sbxi_gpus_free(j);
        json_decref(j);
    }
    c->eps[ep].free_slots = slots;
    c->eps[ep].gpus_free = gpus;
    c->eps[ep].info_at_ms = now_mono_ms();
}

/* ---- info and listing ---- */
static sbx_code get_json(sbx_client *c, size_t ep, const char *path, json_t **ret, sbx_err *err) {
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(c, ep, "GET", path, NULL, NULL, NULL, NULL, 0, &r, err);
    if (rc == SBX_OK) {
        *ret = json_loadb(r.body, r.len, 0, NULL);
        if (!*ret)
            rc = sbxi_err_set(err, SBX_E_PROTOCOL, r.status, "",
                              "sandboxd at %s sent invalid JSON for %s", c->eps[ep].display, path);
    }
    free(r.body);
    return rc;
}

static sbx_code dump(json_t *j, char **ret, sbx_err *err) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    *ret = s;
    return SBX_OK;
}

/* GET /v1/info of endpoint ep: a JSON object, else an error. */
static sbx_code get_info(sbx_client *c, size_t ep, json_t **ret, sbx_err *err) {
    json_t *j = NULL;
    sbx_code rc = get_json(c, ep, "/v1/info", &j, err);
    if (rc == SBX_OK && !json_is_object(j)) {
        json_decref(j);
        return sbxi_err_set(err, SBX_E_PROTOCOL, 200, "",
                            "sandboxd at %s sent JSON that is not an object for /v1/info",
                            c->eps[ep].display);
    }
    if (rc == SBX_OK)
        *ret = j;
    return rc;
}

sbx_code sbx_client_info(sbx_client *c, char **ret_json, sbx_err *err) {
    if (!c || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret_json is NULL");
    if (c->n_eps == 1) {
        json_t *j = NULL;
        sbx_code rc = get_info(c, 0, &j, err);
        return rc == SBX_OK ? dump(j, ret_json, err) : rc;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < c->n_eps; i++) {
        json_t *j = NULL;
        sbx_err e = {0};
        if (c->fleet && c->eps[i].gone)
            continue;
        sbx_code rc = get_info(c, i, &j, &e);
        if (rc != SBX_OK) {
            json_decref(j);
            j = json_pack("{ss}", "error", e.message);
        }
        sbxi_info_record(c, i, "", 0, false);
        json_t *f = json_object_get(j, "free_slots");
        if (json_is_integer(f))
            c->eps[i].free_slots = (long)json_integer_value(f);
        json_object_set_new(j, "endpoint", json_string(c->eps[i].display));
        json_array_append_new(arr, j);
    }
    if (!arr)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return dump(arr, ret_json, err);
}

sbx_code sbx_client_list(sbx_client *c, const char *label_filter, char **ret_json, sbx_err *err) {
    if (!c || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret_json is NULL");
    _cleanup_free_ char *path = NULL;
    if (label_filter) {
        _cleanup_free_ char *esc = sbxi_escape(label_filter);
        int r = esc ? asprintf(&path, "/v1/sandboxes?label=%s", esc) : -1;
        if (r < 0)
            return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    }
    json_t *all = json_array();
    if (!all)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    if (!c->fleet && c->n_eps == 1 && !c->eps[0].unix_path) { /* a node of a fleet: all nodes */
        sbx_code rc = sbxi_fleet_list_via_node(c, path ? path : "/v1/sandboxes", all, err);
        if (rc == SBX_OK)
            return dump(all, ret_json, err);
        if (rc != SBX_E_NOT_FOUND) {
            json_decref(all);
            return rc;
        }
    }
    for (size_t i = 0; i < c->n_eps; i++) {
        json_t *j = NULL;
        if (c->fleet && !sbxi_ep_usable(c, i))
            continue;
        sbx_code rc = get_json(c, i, path ? path : "/v1/sandboxes", &j, err);
        if (c->fleet && (rc == SBX_E_NODE_UNAVAILABLE || rc == SBX_E_CONNECT))
            continue; /* a node that does not answer lists nothing: the rest of the fleet does */
        if (rc == SBX_OK && !json_is_array(j))
            rc = sbxi_err_set(err, SBX_E_PROTOCOL, 200, "", "sandboxd at %s: list is not an array",
                              c->eps[i].display);
        if (rc == SBX_OK)
            json_array_extend(all, j);
        json_decref(j);
        if (rc != SBX_OK) {
            json_decref(all);
            return rc;
        }
    }
    return dump(all, ret_json, err);
}

/* ---- leases (they live on the first endpoint; in a fleet, on the node their id names) ---- */
char *sbxi_lease_body(uint64_t ttl_ms) {
    char *s;
    return asprintf(&s, "{\"ttl\":%.3f}", (double)ttl_ms / 1000.0) < 0 ? NULL : s;
}

char *sbxi_lease_path(const char *lease_id, const char *suffix) {
    size_t n = lease_id ? strlen(lease_id) : 0;
    if (n == 0 || n > 128 ||
        strspn(lease_id, "abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != n)
        return NULL;
    char *s;
    return asprintf(&s, "/v1/leases/%s%s", lease_id, suffix) < 0 ? NULL : s;
}

sbx_code sbxi_lease_id_parse(const char *body, size_t len, char **ret, sbx_err *err) {
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    char *s = id ? strdup(id) : NULL;
    sbx_code rc = SBX_OK;
    if (s)
        *ret = s;
    else
        rc = sbxi_err_set(err, id ? SBX_E_NOMEM : SBX_E_PROTOCOL, 201, "",
                          "lease answer without an id");
    json_decref(j);
    return rc;
}

sbx_code sbx_lease_create(sbx_client *c, uint64_t ttl_ms, char **ret_lease_id, sbx_err *err) {
    if (!c || !ret_lease_id || ttl_ms == 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client, ttl or ret_lease_id missing");
    _cleanup_free_ char *body = sbxi_lease_body(ttl_ms);
    if (!body)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(c, sbxi_first_ep(c), "POST", "/v1/leases", "application/json", NULL,
                               NULL, body, strlen(body), &r, err);
    if (rc == SBX_OK)
        rc = sbxi_lease_id_parse(r.body, r.len, ret_lease_id, err);
    free(r.body);
    return rc;
}

/* POST .../renew or DELETE on a lease. */
static sbx_code lease_call(sbx_client *c, const char *lease_id, bool renew, sbx_err *err) {
    _cleanup_free_ char *path = sbxi_lease_path(lease_id, renew ? "/renew" : "");
    if (!c || !path)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "bad lease id");
    sbxi_response r = {0};
    size_t ep = sbxi_fleet_route(c, lease_id, sbxi_first_ep(c));
    sbx_code rc =
        renew ? sbxi_request(c, ep, "POST", path, "application/json", NULL, NULL, "{}", 2, &r, err)
              : sbxi_request(c, ep, "DELETE", path, NULL, NULL, NULL, NULL, 0, &r, err);
    free(r.body);
    return rc;
}

sbx_code sbx_lease_renew(sbx_client *c, const char *lease_id, sbx_err *err) {
    return lease_call(c, lease_id, true, err);
}

sbx_code sbx_lease_delete(sbx_client *c, const char *lease_id, sbx_err *err) {
    return lease_call(c, lease_id, false, err);
}

/* ---- units ---- */
sbx_code sbx_parse_size(const char *s, uint64_t *ret_bytes) {
    return s && ret_bytes && units_parse_size(s, ret_bytes) == 0 ? SBX_OK : SBX_E_INVALID;
}

sbx_code sbx_parse_duration(const char *s, uint64_t *ret_ms) {
    return s && ret_ms && units_parse_duration(s, ret_ms) == 0 ? SBX_OK : SBX_E_INVALID;
}
