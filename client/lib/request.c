/* libsbx's synchronous request to one of the client's endpoints: in fleet mode refused for a
 * node etcd no longer lists (fleet.c), over the Unix socket without libcurl (unixhttp.c) or
 * through libcurl (http.c), and a connection failure turned into node_unavailable. Above
 * fleet.c, unixhttp.c and http.c; the sync API's files call it. */
#include "client/lib/internal.h"

sbx_code sbxi_request(sbx_client *c, size_t ep, const char *method, const char *path,
                      const char *content_type, const char *accept, const char *extra_header,
                      const void *body, size_t len, sbxi_response *resp, sbx_err *err) {
    sbx_code frc = sbxi_fleet_check(c, ep, err);
    if (frc != SBX_OK)
        return frc;
    const sbxi_endpoint *e = &c->eps[ep];
    if (e->unix_path) { /* no libcurl for the local socket (unixhttp.c) */
        struct curl_slist *hdrs = sbxi_api_headers(c, e, content_type, accept, extra_header);
        if (!hdrs)
            return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
        sbxi_response_reset(resp);
        sbxi_unix_request(c, ep, method, path, hdrs, body, len, -1, 0, resp);
        curl_slist_free_all(hdrs);
        return sbxi_err_from_response(e, resp, err);
    }
    sbx_code code = sbxi_request_ep(c, e, method, path, content_type, accept, extra_header, body,
                                    len, resp, err);
    if (code == SBX_OK && c->fleet)
        c->eps[ep].down_until_ms = 0; /* it answers again */
    if (resp->timed_out)
        return code; /* the caller's own time limit ran out, not a node that is down */
    return sbxi_fleet_failed(c, ep, code, err);
}
