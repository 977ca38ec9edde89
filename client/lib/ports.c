/* Inbound ports (docs/API.md "Ports"): sbx_sandbox_port_url opens a port of a sandbox
 * (POST .../ports, idempotent) and names the daemon's URL that proxies HTTP to it;
 * sbx_sandbox_port_request and _wait go through that proxy (_wait's probes within its timeout:
 * the proxy itself waits up to 30 s for a server that accepts but does not answer). */
#include "client/lib/internal.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The daemon's own answers on a port path (docs/API.md "Ports"), not the server's: its port_*
 * codes, and the sandbox-level refusals, whose messages start with what they name. */
bool sbxi_port_refusal(const sbx_err *e) {
    const char *c = e->api_code, *m = e->message;
    return strncmp(c, "port_", 5) == 0 || strcmp(c, "sandbox_not_running") == 0 ||
           strcmp(c, "unauthorized") == 0 || strcmp(c, "node_unavailable") == 0 ||
           (strcmp(c, "not_found") == 0 && strncmp(m, "sandbox ", 8) == 0) ||
           (strcmp(c, "invalid_argument") == 0 &&
            (strncmp(m, "port", 4) == 0 || strncmp(m, "Upgrade", 7) == 0));
}

sbx_code sbx_sandbox_port_request(sbx_sandbox *sb, unsigned port, const char *method,
                                  const char *path, const char *content_type, const void *body,
                                  size_t len, long *ret_status, char **ret_body, size_t *ret_len,
                                  sbx_err *err) {
    if (!sb || !method || !path || !ret_status || !ret_body || port < 1 || port > 65535)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "",
                            "sandbox, method, path or a ret_ is NULL, or port is not 1..65535");
    char sub[48];
    snprintf(sub, sizeof(sub), "/ports/%u/", port);
    _cleanup_free_ char *base = sbxi_sandbox_path(sb, sub), *full = NULL;
    if (!base || asprintf(&full, "%s%s", base, path[0] == '/' ? path + 1 : path) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_err e = {0};
    sbx_code rc = sbxi_request(sb->client, sb->ep, method, full, body ? content_type : NULL, NULL,
                               NULL, body, body ? len : 0, &r, &e);
    if (rc != SBX_OK && (r.status == 0 || sbxi_port_refusal(&e))) {
        free(r.body);
        if (err)
            *err = e;
        return rc;
    }
    *ret_status = r.status;
    *ret_body = r.body ? r.body : strdup("");
    if (ret_len)
        *ret_len = r.body ? r.len : 0;
    return *ret_body ? SBX_OK : sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
}

/* The shortest time a probe is given, even when the wait's time is (nearly) up. */
#define PROBE_MIN_MS 100

/* One GET / through the proxy, answered (any status) within the time left before end. */
static sbx_code port_probe(sbx_sandbox *sb, unsigned port, uint64_t end, sbx_err *e) {
    uint64_t now = now_mono_ms(), left = end > now ? end - now : 0;
    if (!sb)
        return sbxi_err_set(e, SBX_E_INVALID, 0, "", "sandbox is NULL");
    long st = 0;
    char *b = NULL;
    sb->client->timeout_ms = left > PROBE_MIN_MS ? left : PROBE_MIN_MS;
    sbx_code rc = sbx_sandbox_port_request(sb, port, "GET", "", NULL, NULL, 0, &st, &b, NULL, e);
    sb->client->timeout_ms = 0;
    free(b);
    return rc;
}

sbx_code sbx_sandbox_port_wait(sbx_sandbox *sb, unsigned port, uint64_t timeout_ms, sbx_err *err) {
    uint64_t end = now_mono_ms() + timeout_ms;
    sbx_err e = {0};
    for (;;) {
        sbx_code rc = port_probe(sb, port, end, &e);
        if (rc == SBX_OK)
            return SBX_OK;
        bool later = strcmp(e.api_code, "port_unreachable") == 0 ||
                     strcmp(e.api_code, "port_timeout") == 0 ||
                     strcmp(e.api_code, "request_timeout") == 0 ||
                     strcmp(e.api_code, "sandbox_not_running") == 0;
        if (!later) {
            if (err)
                *err = e;
            return rc;
        }
        if (now_mono_ms() >= end)
            return sbxi_err_set(err, SBX_E_CONFLICT, 0, "port_wait_timeout",
                                "port %u of sandbox %s did not answer within %.1f s (last: %s)",
                                port, sb->id, timeout_ms / 1000.0, e.message);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
