/* libsbx's fleet calls that go through the request path (request.c): sbx_client_nodes (etcd's
 * view in fleet mode, else a node's GET /v1/fleet), sbx_node_drain (the named node first, then
 * any other that answers) and listing every node's sandboxes through the one node a client was
 * given. Above fleet.c (the etcd view and routing) and request.c. */
#include "client/lib/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sbx_code sbxi_fleet_list_via_node(sbx_client *c, const char *path, json_t *all, sbx_err *err) {
    sbxi_response r = {0};
    sbx_err e;
    sbx_code rc = sbxi_request(c, 0, "GET", "/v1/fleet", NULL, NULL, NULL, NULL, 0, &r, &e);
    json_t *fl = rc == SBX_OK ? json_loadb(r.body, r.len, 0, NULL) : NULL, *rec;
    free(r.body);
    if (!json_is_array(json_object_get(fl, "nodes"))) {
        json_decref(fl);
        if (rc == SBX_OK || rc == SBX_E_NOT_FOUND) /* not in a fleet */
            return SBX_E_NOT_FOUND;
        if (err)
            *err = e;
        return rc;
    }
    size_t i;
    rc = SBX_OK;
    json_array_foreach(json_object_get(fl, "nodes"), i, rec) {
        const char *url = json_string_value(json_object_get(rec, "url"));
        sbxi_endpoint ep = {
            .display = (char *)url, .base_url = (char *)url, .free_slots = -1, .gpus_free = -1};
        if (!url)
            continue;
        sbxi_response lr = {0};
        sbx_code lrc = sbxi_request_ep(c, &ep, "GET", path, NULL, NULL, NULL, NULL, 0, &lr, err);
        json_t *arr = lrc == SBX_OK ? json_loadb(lr.body, lr.len, 0, NULL) : NULL;
        free(lr.body);
        if (json_is_array(arr))
            json_array_extend(all, arr);
        else if (lrc != SBX_OK && lrc != SBX_E_CONNECT) /* one that does not answer lists nothing */
            rc = lrc;
        json_decref(arr);
        if (rc != SBX_OK)
            break;
    }
    json_decref(fl);
    return rc;
}

sbx_code sbx_client_nodes(sbx_client *c, char **ret_json, sbx_err *err) {
    if (!c || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret_json is NULL");
    json_t *j = NULL;
    if (c->fleet) {
        sbxi_fleet_refresh(c, true, NULL); /* unreachable: the last view, marked so */
        j = sbxi_fleet_nodes_json(c->fleet);
    } else {
        sbxi_response r = {0};
        sbx_code rc = sbxi_request(c, 0, "GET", "/v1/fleet", NULL, NULL, NULL, NULL, 0, &r, err);
        if (rc == SBX_OK)
            j = json_loadb(r.body, r.len, 0, NULL); /* not inside json_is_object(): a macro */
        if (rc == SBX_OK && !json_is_object(j))
            rc = sbxi_err_set(err, SBX_E_PROTOCOL, r.status, "",
                              "%s sent invalid JSON for /v1/fleet", c->eps[0].display);
        free(r.body);
        if (rc != SBX_OK) {
            json_decref(j);
            return rc;
        }
    }
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    *ret_json = s;
    return SBX_OK;
}

sbx_code sbx_node_drain(sbx_client *c, const char *name, int drain, sbx_err *err) {
    size_t n = name ? strlen(name) : 0;
    if (!c || n == 0 || n > 40 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "bad node name \"%s\"", name ? name : "");
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "/v1/fleet/nodes/%s/%s", name, drain ? "drain" : "undrain") < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    /* the named node first, then any other that answers: each writes P/drain/NAME */
    size_t first = c->fleet ? sbxi_fleet_ep_by_node(c, name, n) : SIZE_MAX;
    sbx_code rc = SBX_E_CONNECT;
    sbxi_err_set(err, rc, 0, "", "no node of the fleet answers");
    for (size_t k = 0; k <= c->n_eps && rc != SBX_OK; k++) {
        size_t ep = k == 0 ? first : k - 1;
        if (ep == SIZE_MAX || (k > 0 && ep == first) || (c->fleet && c->eps[ep].gone))
            continue;
        sbxi_response r = {0};
        rc = sbxi_request(c, ep, "POST", path, "application/json", NULL, NULL, "{}", 2, &r, err);
        free(r.body);
        if (rc != SBX_OK && rc != SBX_E_CONNECT && rc != SBX_E_NODE_UNAVAILABLE)
            break;
    }
    return rc;
}
