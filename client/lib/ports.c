/* Inbound ports (docs/API.md "Ports"): sbx_sandbox_port_url opens a port of a sandbox
 * (POST .../ports, idempotent) and names the daemon's URL that proxies HTTP to it. */
#include "client/lib/internal.h"

#include "common/macro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sbx_code sbx_sandbox_port_url(sbx_sandbox *sb, unsigned port, char **ret_url, sbx_err *err) {
    if (!sb || !ret_url || port < 1 || port > 65535)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "",
                            "sandbox or ret_url is NULL, or port is not 1..65535");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/ports");
    char body[32];
    snprintf(body, sizeof(body), "{\"port\":%u}", port);
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(sb->client, sb->ep, "POST", path, "application/json", NULL, NULL,
                               body, strlen(body), &r, err);
    json_t *j = rc == SBX_OK ? json_loadb(r.body, r.len, 0, NULL) : NULL;
    free(r.body);
    if (rc != SBX_OK)
        return rc;
    const char *url = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        if (json_integer_value(json_object_get(e, "port")) == (json_int_t)port)
            url = json_string_value(json_object_get(e, "url"));
    }
    /* the handle's node (the owner: fleet routing sends a request on a node to it anyway) */
    char *s = NULL;
    int n = url ? asprintf(&s, "%s%s", sb->client->eps[sb->ep].base_url, url) : 0;
    json_decref(j);
    if (!url)
        return sbxi_err_set(err, SBX_E_PROTOCOL, 0, "", "the daemon did not list the port");
    if (n < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    *ret_url = s;
    return SBX_OK;
}
