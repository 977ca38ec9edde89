/* Routing: method + path -> handler, authentication on TCP, and the checks every request
 * shares (unknown ids are 404, wrong methods 405, shutting down is 503, a query parameter the
 * endpoint does not take is 400). */
#include "sandboxd/api/api.h"
#include "sandboxd/api/sandboxfusion.h"

#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/registry.h"

#include "common/macro.h"

#include <string.h>
#include <strings.h>

static bool is(sd_request *req, const char *m) {
    return strcmp(req->method, m) == 0;
}

static void not_allowed(sd_request *req) {
    sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s", req->method,
                   req->path);
}

/* The query parameters each endpoint takes (docs/API.md); any other is a 400 naming it, never
 * ignored (a list filter or a flag that does nothing would mislead). A "*" is one path segment
 * (an id). Endpoints not listed take none; a path listed here lists every method it has (those
 * without parameters too), so that only a wrong method is left to the router's 405. Not
 * checked: a sandbox port's requests (their query is the sandbox server's) and SandboxFusion's
 * endpoints (its own server's behaviour). */
static const struct {
    const char *method, *path, *keys[3];
} query_rules[] = {
    {"GET", "/v1/sandboxes", {"label"}},
    {"POST", "/v1/sandboxes", {"placed"}}, /* a create another node sent here (api/fleet.c) */
    {"GET", "/v1/sandboxes/*/files", {"path"}},
    {"PUT", "/v1/sandboxes/*/files", {"path", "mode"}},
    {"GET", "/v1/sandboxes/*/checkpoint", {"key"}},
    {"GET", "/v1/sandboxes/*/processes/*", {"tail"}},
    {"DELETE", "/v1/sandboxes/*/processes/*", {NULL}},
    {"GET", "/v1/sandboxes/*/processes/*/attach", {"stdin", "replay"}},
    {"POST", "/v1/images", {"name", "setuid"}},
    {"GET", "/v1/images", {NULL}},
};

/* path (one trailing '/' aside) against pattern, segment by segment, "*" matching one segment;
 * prefix: pattern need only match path's first segments. */
static bool path_matches(const char *pattern, const char *path, bool prefix) {
    while (*pattern) {
        size_t pn = strcspn(pattern, "/"), n = strcspn(path, "/");
        if (pn == 1 && *pattern == '*' ? n == 0 : (pn != n || strncmp(pattern, path, n) != 0))
            return false;
        pattern += pn, path += n;
        if (!*pattern)
            break;
        if (*pattern != *path)
            return false;
        if (*pattern)
            pattern++, path++;
    }
    return prefix || !*path || strcmp(path, "/") == 0;
}

/* A request to a sandbox's port (api/ports.c), as opposed to its port list (".../ports" or
 * ".../ports/"): its query, body and encoding are the sandbox server's. */
static bool port_request(const char *path) {
    return path_matches("/v1/sandboxes/*/ports/*", path, true);
}

/* False (answered 400) when the request has a query parameter its endpoint does not take, one
 * without a value, or one twice (api/query.c). Checked
 * before routing, so a path that is not an endpoint gets the 400 before its 404; a method that
 * is wrong for a path some rule names is left to the router's 405. */
static bool query_ok(sd_request *req) {
    if (port_request(req->path) || sd_sf_path(req->path))
        return true;
    const char *const *keys = NULL;
    bool other_method = false;
    for (size_t i = 0; i < ARRAY_SIZE(query_rules) && !keys; i++)
        if (path_matches(query_rules[i].path, req->path, false)) {
            if (is(req, query_rules[i].method))
                keys = query_rules[i].keys;
            else
                other_method = true;
        }
    if (!keys && other_method)
        return true;
    const char *why,
        *bad = sd_req_query_bad(req, keys, keys ? ARRAY_SIZE(query_rules[0].keys) : 0, &why);
    if (!bad)
        return true;
    sd_reply_error(req, 400, "invalid_argument", "%.64s: %s", bad, why);
    return false;
}

/* False (answered 415) when the body comes with a Content-Encoding other than identity: no
 * endpoint decodes one, and a gzip body would be stored or parsed as it came. A sandbox port's
 * requests are its server's business. */
static bool encoding_ok(sd_request *req) {
    const char *e = sd_req_header(req, "Content-Encoding");
    if (!e || strcasecmp(e, "identity") == 0 || port_request(req->path))
        return true;
    sd_reply_error(req, 415, "unsupported_media_type",
                   "Content-Encoding %.32s: not implemented (send the body as it is)", e);
    return false;
}

/* False (answered 400) when a GET or DELETE comes with fields in its body: none of them takes
 * any, and one ignored would mislead ("keep_files" on a DELETE). Not checked, as for the query:
 * a sandbox port's requests and SandboxFusion's endpoints. */
static bool body_ok(sd_request *req) {
    if (req->body_len == 0 || (!is(req, "GET") && !is(req, "DELETE")) || port_request(req->path) ||
        sd_sf_path(req->path))
        return true;
    return sd_req_no_fields(req);
}

static void sandbox_route(sd_daemon *d, sd_request *req, const char *rest) {
    char id[64];
    size_t n = strcspn(rest, "/");
    if (n == 0 || n >= sizeof(id)) {
        sd_reply_error(req, 404, "not_found", "no such sandbox");
        return;
    }
    memcpy(id, rest, n);
    id[n] = 0;
    const char *sub = rest + n;
    sd_sandbox *sb = sd_registry_find(d, id);
    if (!sb && sd_api_take_in_flight(id)) { /* coming here from another node (api/checkpoints.c) */
        req->retry_after = SD_RETRY_AFTER_S;
        sd_reply_error(req, 503, "moving", "sandbox %s is moving to this node", id);
        return;
    }
    if (!sb && sd_api_fleet_route(d, req, id)) /* fleet: another node's sandbox */
        return;
    if (sb && sb->state == SD_ENDED && sb->end_reason == END_MOVED && sb->move_to[0]) {
        sd_api_fleet_forward(d, req, id, sb->move_to); /* it lives on that node now */
        return;
    }
    if (!sb || sb->hidden) {
        sd_reply_error(req, 404, "not_found", "sandbox %s not found", id);
        return;
    }
    if (sb->state != SD_ENDED)
        sd_sandbox_touch(sb);
    if (!*sub || strcmp(sub, "/") == 0) {
        if (is(req, "GET"))
            sd_api_get(d, req, sb);
        else if (is(req, "DELETE"))
            sd_api_delete(d, req, sb);
        else
            not_allowed(req);
    } else if (strcmp(sub, "/timeout") == 0) {
        is(req, "POST") ? sd_api_timeout(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/pause") == 0) {
        is(req, "POST") ? sd_api_pause(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/resume") == 0) {
        is(req, "POST") ? sd_api_resume(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/checkpoint") == 0) {
        is(req, "GET") ? sd_api_checkpoint_get(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/fork") == 0) {
        is(req, "POST") ? sd_api_fork(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/commit") == 0) {
        is(req, "POST") ? sd_api_commit(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/exec") == 0) {
        is(req, "POST") ? sd_api_exec(d, req, sb) : not_allowed(req);
    } else if (strcmp(sub, "/exec/attach") == 0) {
        is(req, "GET") ? sd_api_exec_attach(d, req, sb) : not_allowed(req);
    } else if (strncmp(sub, "/processes/", 11) == 0 && strlen(sub) > 18 &&
               strcmp(sub + strlen(sub) - 7, "/attach") == 0) {
        is(req, "GET") ? sd_api_process_attach(d, req, sb, sub + 11) : not_allowed(req);
    } else if (strncmp(sub, "/processes", 10) == 0 && (!sub[10] || sub[10] == '/')) {
        sd_api_processes_route(d, req, sb, sub + 10);
    } else if (strncmp(sub, "/ports", 6) == 0 && (!sub[6] || sub[6] == '/')) {
        sd_api_ports_route(d, req, sb, sub + 6); /* inbound ports: api/ports.c */
    } else if (strcmp(sub, "/files") == 0) {
        if (is(req, "GET"))
            sd_api_files_get(d, req, sb);
        else if (is(req, "PUT"))
            sd_api_files_put(d, req, sb);
        else
            not_allowed(req);
    } else {
        sd_reply_error(req, 404, "not_found", "no such endpoint: %s", req->path);
    }
}

static void lease_route(sd_daemon *d, sd_request *req, const char *rest) {
    char id[64];
    size_t n = strcspn(rest, "/");
    if (n == 0 || n >= sizeof(id)) {
        sd_reply_error(req, 404, "not_found", "no such lease");
        return;
    }
    memcpy(id, rest, n);
    id[n] = 0;
    const char *sub = rest + n;
    if (sd_api_fleet_route(d, req, id)) /* fleet: another node's lease */
        return;
    if (!*sub)
        is(req, "DELETE") ? sd_api_lease_delete(d, req, id) : not_allowed(req);
    else if (strcmp(sub, "/renew") == 0)
        is(req, "POST") ? sd_api_lease_renew(d, req, id) : not_allowed(req);
    else
        sd_reply_error(req, 404, "not_found", "no such endpoint: %s", req->path);
}

void sd_api_dispatch(sd_daemon *d, sd_request *req) {
    const char *p = req->path;
    if (req->sandboxfusion) { /* a listener without a token: nothing but these endpoints */
        if (!sd_sf_path(p))
            sd_reply_error(req, 404, "not_found",
                           "only /run_code, /run_jupyter and /v1/ping "
                           "are served on this socket");
        else if (d->shutting_down)
            sd_reply_error(req, 503, "shutting_down", "the daemon is shutting down");
        else if (encoding_ok(req))
            sd_api_sandboxfusion(d, req);
        return;
    }
    if (req->unauthorized) { /* (answered before the body already: api/http.c) */
        sd_reply_error(req, 401, "unauthorized", "a valid bearer token is required");
        return;
    }
    if (d->shutting_down) {
        sd_reply_error(req, 503, "shutting_down", "the daemon is shutting down");
        return;
    }
    if (!query_ok(req) || !encoding_ok(req) || !body_ok(req))
        return;
    if (strcmp(p, "/healthz") == 0)
        is(req, "GET") ? sd_api_healthz(d, req) : not_allowed(req);
    else if (strcmp(p, "/metrics") == 0)
        is(req, "GET") ? sd_api_metrics(d, req) : not_allowed(req);
    else if (strcmp(p, "/v1/info") == 0)
        is(req, "GET") ? sd_api_info(d, req) : not_allowed(req);
    else if (strcmp(p, "/v1/sandboxes") == 0 || strcmp(p, "/v1/sandboxes/") == 0) {
        if (is(req, "POST"))
            sd_api_create(d, req);
        else if (is(req, "GET"))
            sd_api_list(d, req);
        else
            not_allowed(req);
    } else if (strncmp(p, "/v1/sandboxes/", 14) == 0)
        sandbox_route(d, req, p + 14);
    else if (strcmp(p, "/v1/images") == 0) /* images: api/images.c */
        is(req, "POST")  ? sd_api_images_import(d, req)
        : is(req, "GET") ? sd_api_images_list(d, req)
                         : not_allowed(req);
    else if (strncmp(p, "/v1/images/", 11) == 0)
        sd_api_images_route(d, req, p + 11);
    else if (strcmp(p, "/v1/volumes") == 0 || strncmp(p, "/v1/volumes/", 12) == 0)
        sd_api_volumes(d, req, p + 11);         /* volumes: api/volumes.c */
    else if (strcmp(p, "/v1/checkpoints") == 0) /* a sandbox moving here: api/checkpoints.c */
        is(req, "POST") ? sd_api_checkpoints_take(d, req) : not_allowed(req);
    else if (strcmp(p, "/v1/leases") == 0)
        is(req, "POST") ? sd_api_lease_create(d, req) : not_allowed(req);
    else if (strncmp(p, "/v1/leases/", 11) == 0)
        lease_route(d, req, p + 11);
    else if (strcmp(p, "/v1/fleet") == 0 || strncmp(p, "/v1/fleet/", 10) == 0)
        sd_api_fleet(d, req, p + 9); /* fleet: api/fleet.c */
    else if (sd_sf_path(p))
        sd_api_sandboxfusion(d, req);
    else
        sd_reply_error(req, 404, "not_found", "no such endpoint: %s", p);
}
