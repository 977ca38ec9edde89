/* libsbx errors: code names, HTTP status + API code -> sbx_code, libcurl failures -> messages
 * that say what to do (e.g. how to start the daemon when its socket is missing). */
#include "client/lib/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

const char *sbx_code_name(sbx_code code) {
    static const char *const names[] = {
        [SBX_OK] = "ok",
        [SBX_E_INVALID] = "invalid_argument",
        [SBX_E_NOT_FOUND] = "not_found",
        [SBX_E_CONFLICT] = "conflict",
        [SBX_E_TOO_LARGE] = "too_large",
        [SBX_E_UNAVAILABLE] = "unavailable",
        [SBX_E_CONNECT] = "connect_failed",
        [SBX_E_AUTH] = "unauthorized",
        [SBX_E_SERVER] = "server_error",
        [SBX_E_PROTOCOL] = "protocol_error",
        [SBX_E_NOMEM] = "out_of_memory",
        [SBX_E_IO] = "io_error",
        [SBX_E_NODE_UNAVAILABLE] = "node_unavailable",
        [SBX_E_INTERRUPTED] = "interrupted",
    };
    if ((unsigned)code < sizeof(names) / sizeof(names[0]) && names[code])
        return names[code];
    return "unknown";
}

sbx_code sbxi_err_set(sbx_err *err, sbx_code code, long http_status, const char *api_code,
                      const char *fmt, ...) {
    if (!err)
        return code;
    err->code = code;
    err->http_status = http_status;
    snprintf(err->api_code, sizeof(err->api_code), "%s", api_code ? api_code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return code;
}

/* The HTTP status the daemon answers each of its error codes with (docs/API.md), for an error
 * that comes without one: a {"type":"error"} line in a 200 stream. 500 for a code not listed. */
static long status_of_code(const char *api_code) {
    static const struct {
        const char *name;
        long status;
    } codes[] = {
        {"invalid_argument", 400},
        {"invalid_json", 400},
        {"invalid_image", 400},
        {"entrypoint_failed", 400},
        {"unauthorized", 401},
        {"not_found", 404},
        {"port_not_open", 404},
        {"method_not_allowed", 405},
        {"conflict", 409},
        {"pids_limit", 409},
        {"gpu_unavailable", 409},
        {"process_ended", 409},
        {"sandbox_not_running", 409},
        {"sandbox_ended", 409},
        {"checkpoint_unavailable", 409},
        {"too_large", 413},
        {"unsupported_media_type", 415},
        {"idempotency_key_reused", 422},
        {"too_many_requests", 429},
        {"node_full", 503},
        {"shutting_down", 503},
        {"node_unavailable", 503},
    };
    for (size_t i = 0; api_code && i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strcmp(api_code, codes[i].name) == 0)
            return codes[i].status;
    return 500;
}

/* A 4xx whose code says the request itself was bad (the caller's mistake, as a 400). */
static bool invalid_input_code(const char *api_code) {
    return api_code &&
           (strcmp(api_code, "invalid_argument") == 0 || strcmp(api_code, "invalid_json") == 0 ||
            strcmp(api_code, "idempotency_key_reused") == 0);
}

/* status 0: no HTTP status came with the error (a mid-stream error line); its code name gives
 * the class the JSON answer's status would. */
sbx_code sbxi_code_from_status(long status, const char *api_code) {
    if (status == 0)
        status = status_of_code(api_code);
    if (status >= 200 && status < 300)
        return SBX_OK;
    if (status >= 400 && status < 500 && invalid_input_code(api_code))
        return SBX_E_INVALID;
    if (api_code && strcmp(api_code, "node_unavailable") == 0)
        return SBX_E_NODE_UNAVAILABLE;
    if (api_code && (strcmp(api_code, "node_full") == 0 || strcmp(api_code, "shutting_down") == 0))
        return SBX_E_UNAVAILABLE;
    switch (status) {
    case 400:
    case 405:
    case 415:
    case 422:
        return SBX_E_INVALID;
    case 401:
    case 403:
        return SBX_E_AUTH;
    case 404:
        return SBX_E_NOT_FOUND;
    case 409:
        return SBX_E_CONFLICT;
    case 413:
        return SBX_E_TOO_LARGE;
    case 429:
    case 503:
        return SBX_E_UNAVAILABLE;
    default:
        return status >= 500 && status < 600 ? SBX_E_SERVER : SBX_E_PROTOCOL;
    }
}

static sbx_code err_from_api(const sbxi_response *r, sbx_err *err) {
    char api_code[64] = "", message[400] = "";
    json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
    if (json_is_object(j)) {
        const char *c = json_string_value(json_object_get(j, "code"));
        const char *m = json_string_value(json_object_get(j, "message"));
        snprintf(api_code, sizeof(api_code), "%s", c ? c : "");
        snprintf(message, sizeof(message), "%s", m ? m : "");
    }
    json_decref(j);
    if (!message[0]) {
        size_t n = r->len < 200 ? r->len : 200;
        snprintf(message, sizeof(message), "HTTP %ld%s%.*s", r->status, n ? ": " : "", (int)n,
                 r->body ? r->body : "");
        char *nl = strchr(message, '\n');
        if (nl)
            *nl = 0;
    }
    sbx_code code = sbxi_code_from_status(r->status, api_code);
    if (code == SBX_E_UNAVAILABLE && r->retry_after > 0 && strlen(message) + 32 < sizeof(message))
        snprintf(message + strlen(message), sizeof(message) - strlen(message),
                 " (retry after %lds)", r->retry_after);
    return sbxi_err_set(err, code, r->status, api_code, "%s", message);
}

static sbx_code err_connect(const sbxi_endpoint *ep, const sbxi_response *r, sbx_err *err) {
    const char *why = r->curl_error;
    if (ep->unix_path) {
        struct stat st;
        if (r->os_errno)
            why = strerror((int)r->os_errno);
        else if (stat(ep->unix_path, &st) < 0)
            why = strerror(errno);
    }
    if (ep->is_default)
        return sbxi_err_set(err, SBX_E_CONNECT, 0, "",
                            "cannot reach sandboxd at %s: %s — is it running? start it with "
                            "`sudo systemctl start sandboxd` or `sudo sandboxd`",
                            ep->display, why);
    if (ep->unix_path)
        return sbxi_err_set(err, SBX_E_CONNECT, 0, "",
                            "cannot reach sandboxd at %s: %s — is it running? start it with "
                            "`sudo sandboxd --socket %s`",
                            ep->display, why, ep->unix_path);
    return sbxi_err_set(err, SBX_E_CONNECT, 0, "",
                        "cannot reach sandboxd at %s: %s — is it running and listening there?",
                        ep->display, why);
}

sbx_code sbxi_err_from_response(const sbxi_endpoint *ep, const sbxi_response *r, sbx_err *err) {
    if (r->interrupted) /* sbx_client_set_interrupt_fd's signal */
        return sbxi_err_set(err, SBX_E_INTERRUPTED, 0, "interrupted",
                            "interrupted while waiting for sandboxd at %s", ep->display);
    if (r->timed_out) /* the client's own limit (sbx_client.timeout_ms) */
        return sbxi_err_set(err, SBX_E_CONNECT, r->status, "request_timeout",
                            "no whole answer from sandboxd at %s within the time given (%s)",
                            ep->display, r->curl_error);
    if (r->overflow)
        return sbxi_err_set(err, SBX_E_TOO_LARGE, r->status, "",
                            "the answer from %s is larger than %llu bytes", ep->display,
                            (unsigned long long)SBXI_MAX_RESPONSE);
    bool unreachable = r->curl_code == CURLE_COULDNT_CONNECT ||
                       r->curl_code == CURLE_COULDNT_RESOLVE_HOST ||
                       r->curl_code == CURLE_OPERATION_TIMEDOUT;
    if (unreachable && r->redirects > 0) /* a fleet member said where it is: that node is down */
        return sbxi_err_set(err, SBX_E_NODE_UNAVAILABLE, 0, "node_unavailable",
                            "the node that holds it (%.180s, where %s redirected) is not "
                            "answering: %s",
                            r->final_url, ep->display, r->curl_error);
    switch (r->curl_code) {
    case CURLE_OK:
        break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return err_connect(ep, r, err);
    case CURLE_OUT_OF_MEMORY:
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    case CURLE_OPERATION_TIMEDOUT:
        if (r->status == 0)
            return err_connect(ep, r, err);
        /* fall through */
    default:
        return sbxi_err_set(err, SBX_E_CONNECT, r->status, "",
                            "connection to sandboxd at %s failed: %s", ep->display,
                            r->curl_error[0] ? r->curl_error : curl_easy_strerror(r->curl_code));
    }
    if (r->status >= 200 && r->status < 300)
        return SBX_OK;
    return err_from_api(r, err);
}

/* Whether a request certainly never reached the daemon: none was made (a node gone from the
 * fleet), or no connection was: refused, a name not resolved, the connect timed out (without the
 * client's own time limit only the connect has one), the TLS handshake failed. Everything else
 * (a send or receive error, an empty or cut answer) may have come after the daemon read it. */
static bool request_unsent(const sbxi_response *r) {
    switch (r->curl_code) {
    case CURLE_OK:
        return r->status == 0;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
        return true;
    case CURLE_OPERATION_TIMEDOUT:
        return !r->timed_out && r->status == 0;
    default:
        return false;
    }
}

sbxi_create_next sbxi_create_failed(const sbxi_endpoint *ep, const sbxi_response *r, sbx_code rc,
                                    bool keyed, bool retried, sbx_err *e) {
    if (rc != SBX_E_UNAVAILABLE && rc != SBX_E_CONNECT && rc != SBX_E_NODE_UNAVAILABLE)
        return SBXI_CREATE_FAIL;
    if (!retried && (r->curl_code == CURLE_OK || request_unsent(r)))
        return SBXI_CREATE_NEXT; /* (after a lost answer, this endpoint may hold the sandbox) */
    if (keyed && !retried && !r->timed_out && r->redirects == 0)
        return SBXI_CREATE_AGAIN;
    char why[400];
    snprintf(why, sizeof(why), "%s", e->message);
    sbxi_err_set(e, SBX_E_CONNECT, e->http_status, e->api_code,
                 "%s (the create may have been made on %s: it was not sent to another endpoint)",
                 why, ep->display);
    return SBXI_CREATE_FAIL;
}
