/* libsbx's synchronous sandbox API: create (placed across endpoints by free capacity, falling
 * back on 503 or a connection never made, never after the request may have been received), open,
 * inspect and status, fork, timeout, files, archives, exec (JSON or streamed NDJSON) and terminate;
 * the answer parsers the async API shares. */
#include "client/lib/internal.h"

#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool id_ok(const char *id) {
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", id[i]))
            return false;
    return true;
}

sbx_sandbox *sbxi_sandbox_new(sbx_client *client, const char *id, size_t ep) {
    sbx_sandbox *sb = calloc(1, sizeof(*sb));
    if (!sb || !(sb->id = strdup(id))) {
        free(sb);
        return NULL;
    }
    sb->client = client;
    sb->ep = sbxi_fleet_route(client, id, ep); /* a node may have redirected the create */
    return sb;
}

sbx_code sbxi_sandbox_from_body(sbx_client *client, size_t ep, const char *body, size_t len,
                                sbx_sandbox **ret, sbx_err *err) {
    json_t *j = json_loadb(body, len, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));
    sbx_code rc = SBX_OK;
    if (!id_ok(id))
        rc = sbxi_err_set(err, SBX_E_PROTOCOL, 201, "",
                          "sandboxd at %s answered create without "
                          "a valid id",
                          client->eps[ep].display);
    else if (!(*ret = sbxi_sandbox_new(client, id, ep)))
        rc = sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    json_decref(j);
    return rc;
}

sbx_code sbxi_sandboxes_from_body(sbx_client *client, size_t ep, const char *body, size_t len,
                                  sbx_sandbox ***ret, size_t *ret_n, sbx_err *err) {
    json_t *j = json_loadb(body, len, 0, NULL), *v;
    size_t n = json_array_size(j), i;
    sbx_sandbox **arr = calloc(n ? n : 1, sizeof(*arr));
    sbx_code rc = json_is_array(j) && n ? SBX_OK
                                        : sbxi_err_set(err, SBX_E_PROTOCOL, 201, "",
                                                       "sandboxd at %s answered fork without "
                                                       "an array of sandboxes",
                                                       client->eps[ep].display);
    if (!arr)
        rc = sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    json_array_foreach(j, i, v) {
        const char *id = json_string_value(json_object_get(v, "id"));
        if (rc != SBX_OK)
            break;
        if (!id_ok(id))
            rc = sbxi_err_set(err, SBX_E_PROTOCOL, 201, "", "fork answer %zu has no valid id", i);
        else if (!(arr[i] = sbxi_sandbox_new(client, id, ep)))
            rc = sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    }
    json_decref(j);
    if (rc != SBX_OK) {
        sbx_sandbox_array_free(arr, n);
        return rc;
    }
    *ret = arr;
    *ret_n = n;
    return SBX_OK;
}

sbx_code sbxi_status_parse(const char *body, size_t len, sbx_sandbox_status *ret, sbx_err *err) {
    json_t *j = json_loadb(body, len, 0, NULL), *end = json_object_get(j, "end");
    const char *state = json_string_value(json_object_get(j, "state"));
    json_t *cost = json_object_get(end, "cost_usd");
    if (!json_is_number(cost))
        cost = json_object_get(j, "cost_usd");
    sbx_sandbox_status st = {.cost_usd = json_number_value(cost)};
    if (state) {
        snprintf(st.state, sizeof(st.state), "%s", state);
        snprintf(st.end_reason, sizeof(st.end_reason), "%s",
                 json_string_value(json_object_get(end, "reason")) ?: "");
    }
    json_decref(j);
    if (!state)
        return sbxi_err_set(err, SBX_E_PROTOCOL, 200, "", "sandbox answer without a state");
    *ret = st;
    return SBX_OK;
}

/* Each endpoint's free slots (its GET /v1/info): SBX_OK, or SBX_E_INTERRUPTED when the client's
 * interrupt signal ended a request (sbx_client_set_interrupt_fd): no create is made then. */
static sbx_code refresh_info(sbx_client *c, sbx_err *err) {
    if (c->fleet) {
        sbxi_fleet_refresh(c, false, NULL); /* the capacity every node publishes */
        return SBX_OK;
    }
    for (size_t i = 0; i < c->n_eps; i++) {
        sbxi_response r = {0};
        sbx_err e = {0};
        sbx_code rc = sbxi_request(c, i, "GET", "/v1/info", NULL, NULL, NULL, NULL, 0, &r, &e);
        if (rc == SBX_E_INTERRUPTED) { /* (its slots not recorded as unknown) */
            free(r.body);
            if (err)
                *err = e;
            return rc;
        }
        sbxi_info_record(c, i, r.body, r.len, rc == SBX_OK);
        free(r.body);
    }
    return SBX_OK;
}

/* Try endpoints in placement order; remember the last error, preferring "full" over others. */
sbx_code sbx_sandbox_create(sbx_client *c, const sbx_create_opts *opts, sbx_sandbox **ret,
                            sbx_err *err) {
    return sbx_sandbox_create_with(c, opts, NULL, ret, err);
}

sbx_code sbx_sandbox_create_with(sbx_client *c, const sbx_create_opts *opts, const char *extra_json,
                                 sbx_sandbox **ret, sbx_err *err) {
    if (!c || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret is NULL");
    _cleanup_free_ char *body = sbxi_create_body_with(opts, extra_json, err);
    if (!body)
        return err ? err->code : SBX_E_INVALID;
    if (opts && !sbxi_header_safe(opts->idempotency_key))
        return sbxi_err_set(err, SBX_E_INVALID, 0, "",
                            "the idempotency key has control characters");
    _cleanup_free_ char *idem = NULL;
    if (opts && opts->idempotency_key &&
        asprintf(&idem, "Idempotency-Key: %s", opts->idempotency_key) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbx_code irc;
    if ((c->n_eps > 1 || c->fleet) && sbxi_info_stale(c, now_mono_ms()) &&
        (irc = refresh_info(c, err)) != SBX_OK)
        return irc;
    _cleanup_free_ size_t *order = calloc(c->n_eps, sizeof(size_t));
    if (!order)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    size_t n_order = sbxi_placement_order(c, body, order);
    sbx_err last = {0};
    if (n_order == 0)
        sbxi_err_set(&last, SBX_E_UNAVAILABLE, 0, "no_node",
                     "no node of the fleet takes new sandboxes (all drained or not answering)");
    for (size_t k = 0; k < n_order; k++) {
        size_t ep = order[k];
        sbxi_response r = {0};
        sbx_err e;
        sbxi_create_next next = SBXI_CREATE_AGAIN;
        sbx_code rc = SBX_OK;
        for (bool retried = false; next == SBXI_CREATE_AGAIN; retried = true) {
            rc = sbxi_request(c, ep, "POST", "/v1/sandboxes", "application/json", NULL, idem, body,
                              strlen(body), &r, &e);
            next = rc == SBX_OK ? SBXI_CREATE_FAIL
                                : sbxi_create_failed(&c->eps[ep], &r, rc, idem, retried, &e);
        }
        if (rc == SBX_OK) {
            rc = sbxi_sandbox_from_body(c, ep, r.body, r.len, ret, err);
            if (rc == SBX_OK && c->eps[ep].free_slots > 0)
                c->eps[ep].free_slots--;
            free(r.body);
            return rc;
        }
        free(r.body);
        if (sbxi_gpu_unavailable(rc, &e) && k + 1 < n_order) { /* GPUs: the next may have some */
            c->eps[ep].gpus_free = 0;
            continue;
        }
        if (next == SBXI_CREATE_FAIL) {
            if (err)
                *err = e;
            return e.code;
        }
        c->eps[ep].free_slots = rc == SBX_E_UNAVAILABLE ? 0 : -1;
        if (rc == SBX_E_NODE_UNAVAILABLE)
            e.code = SBX_E_CONNECT; /* no sandbox was lost: the node could not be reached */
        if (last.code != SBX_E_UNAVAILABLE)
            last = e;
    }
    if ((c->n_eps > 1 || c->fleet) && last.code == SBX_E_UNAVAILABLE)
        return sbxi_err_set(err, last.code, last.http_status, last.api_code,
                            "every endpoint is full or unreachable (last: %.400s)", last.message);
    if (err)
        *err = last;
    return last.code;
}

sbx_code sbx_sandbox_open(sbx_client *c, const char *id, sbx_sandbox **ret, sbx_err *err) {
    if (!c || !ret || !id_ok(id))
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "bad sandbox id \"%s\"", id ? id : "");
    char path[200];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    sbx_err last = {0};
    size_t routed = sbxi_fleet_route(c, id, SIZE_MAX);
    if (c->fleet && strchr(id, '.') && routed == SIZE_MAX)
        return sbxi_err_set(err, SBX_E_NODE_UNAVAILABLE, 0, "node_unavailable",
                            "node %s of sandbox %s is not in the fleet", strchr(id, '.') + 1, id);
    for (size_t ep = 0; ep < c->n_eps; ep++) {
        if (routed != SIZE_MAX && ep != routed)
            continue;
        if (c->fleet && routed == SIZE_MAX && !sbxi_ep_usable(c, ep))
            continue;
        sbxi_response r = {0};
        sbx_err e;
        sbx_code rc = sbxi_request(c, ep, "GET", path, NULL, NULL, NULL, NULL, 0, &r, &e);
        free(r.body);
        if (rc == SBX_OK) {
            *ret = sbxi_sandbox_new(c, id, ep);
            return *ret ? SBX_OK : sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
        }
        if (rc == SBX_E_INTERRUPTED) { /* Ctrl-C (sbx_client_set_interrupt_fd): no other asked */
            if (err)
                *err = e;
            return rc;
        }
        if (rc != SBX_E_NOT_FOUND || last.code == SBX_OK)
            last = e;
    }
    if (last.code == SBX_E_NOT_FOUND)
        return sbxi_err_set(err, SBX_E_NOT_FOUND, last.http_status, last.api_code,
                            "no such sandbox: %s", id);
    if (err)
        *err = last;
    return last.code;
}

sbx_code sbx_sandbox_open_lazy(sbx_client *c, const char *id, sbx_sandbox **ret, sbx_err *err) {
    if (!c || !ret || !id_ok(id))
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "bad sandbox id \"%s\"", id ? id : "");
    size_t ep = c->n_eps == 1 && !c->fleet ? 0 : SIZE_MAX;
    if (c->fleet && strchr(id, '.'))
        ep = sbxi_fleet_route(c, id, SIZE_MAX);
    if (ep != SIZE_MAX && c->fleet && !sbxi_ep_usable(c, ep))
        ep = SIZE_MAX;
    if (ep == SIZE_MAX) /* unknown: ask (and get its errors, node_unavailable included) */
        return sbx_sandbox_open(c, id, ret, err);
    *ret = sbxi_sandbox_new(c, id, ep);
    return *ret ? SBX_OK : sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
}

const char *sbx_sandbox_id(const sbx_sandbox *sb) {
    return sb ? sb->id : NULL;
}

void sbx_sandbox_free(sbx_sandbox *sb) {
    if (!sb)
        return;
    free(sb->id);
    free(sb);
}

void sbx_sandbox_array_free(sbx_sandbox **array, size_t count) {
    for (size_t i = 0; array && i < count; i++)
        sbx_sandbox_free(array[i]);
    free(array);
}

/* One request about a sandbox; the body is handed out (NUL-terminated) when ret is set. */
static sbx_code sb_request(sbx_sandbox *sb, const char *method, const char *path, const char *ctype,
                           const void *body, size_t len, char **ret, size_t *ret_len,
                           char *ret_ctype, size_t ctype_len, sbx_err *err) {
    if (!sb)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox is NULL");
    sbxi_response r = {0};
    sbx_code rc =
        sbxi_request(sb->client, sb->ep, method, path, ctype, "*/*", NULL, body, len, &r, err);
    if (rc == SBX_OK && ret) {
        *ret = TAKE_PTR(r.body);
        if (ret_len)
            *ret_len = r.len;
        if (ret_ctype)
            snprintf(ret_ctype, ctype_len, "%s", r.content_type);
    }
    free(r.body);
    return rc;
}

char *sbxi_sandbox_path(const sbx_sandbox *sb, const char *suffix) {
    char *s;
    return asprintf(&s, "/v1/sandboxes/%s%s", sb->id, suffix) < 0 ? NULL : s;
}

sbx_code sbx_sandbox_inspect(sbx_sandbox *sb, char **ret_json, sbx_err *err) {
    if (!sb || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox or ret_json is NULL");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "");
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return sb_request(sb, "GET", path, NULL, NULL, 0, ret_json, NULL, NULL, 0, err);
}

sbx_code sbx_sandbox_get_status(sbx_sandbox *sb, sbx_sandbox_status *ret, sbx_err *err) {
    if (!ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "ret is NULL");
    _cleanup_free_ char *json = NULL;
    sbx_code rc = sbx_sandbox_inspect(sb, &json, err);
    return rc == SBX_OK ? sbxi_status_parse(json, strlen(json), ret, err) : rc;
}

sbx_code sbx_sandbox_fork(sbx_sandbox *sb, const sbx_fork_opts *opts, sbx_sandbox ***ret_array,
                          size_t *ret_count, sbx_err *err) {
    return sbx_sandbox_fork_with(sb, opts, NULL, ret_array, ret_count, err);
}

sbx_code sbx_sandbox_fork_with(sbx_sandbox *sb, const sbx_fork_opts *opts, const char *extra_json,
                               sbx_sandbox ***ret_array, size_t *ret_count, sbx_err *err) {
    if (!sb || !ret_array || !ret_count)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, ret_array or ret_count is NULL");
    _cleanup_free_ char *body = sbxi_fork_body_with(opts, extra_json, err);
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/fork");
    if (!body)
        return err ? err->code : SBX_E_INVALID;
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    _cleanup_free_ char *answer = NULL;
    size_t len = 0;
    sbx_code rc = sb_request(sb, "POST", path, "application/json", body, strlen(body), &answer,
                             &len, NULL, 0, err);
    if (rc != SBX_OK)
        return rc;
    return sbxi_sandboxes_from_body(sb->client, sb->ep, answer, len, ret_array, ret_count, err);
}

sbx_code sbx_sandbox_set_timeout(sbx_sandbox *sb, uint64_t timeout_ms, sbx_err *err) {
    if (!sb || timeout_ms == 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox is NULL or timeout is 0");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/timeout");
    char body[64];
    snprintf(body, sizeof(body), "{\"timeout\":%.3f}", (double)timeout_ms / 1000.0);
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return sb_request(sb, "POST", path, "application/json", body, strlen(body), NULL, NULL, NULL, 0,
                      err);
}

static sbx_code put_files(sbx_sandbox *sb, const char *path, const char *ctype, const void *data,
                          size_t len, unsigned mode, sbx_err *err) {
    if (!sb || !path || (!data && len) || mode > 0777)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, path, data or mode missing");
    _cleanup_free_ char *p = sbxi_files_path(sb->id, path, mode);
    if (!p)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return sb_request(sb, "PUT", p, ctype, data ? data : "", len, NULL, NULL, NULL, 0, err);
}

/* GET .../files; want says which kind of answer the caller asked for: GET_FILE, GET_TAR, or
 * GET_ANY (either, and *ret_is_tar says which came). */
enum get_want { GET_FILE, GET_TAR, GET_ANY };
static sbx_code get_files(sbx_sandbox *sb, const char *path, enum get_want want, void **ret,
                          size_t *ret_len, bool *ret_is_tar, sbx_err *err) {
    if (!sb || !path || !ret || !ret_len)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, path or ret missing");
    _cleanup_free_ char *p = sbxi_files_path(sb->id, path, 0);
    if (!p)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    char *data = NULL, ctype[96] = "";
    size_t len = 0;
    sbx_code rc = sb_request(sb, "GET", p, NULL, NULL, 0, &data, &len, ctype, sizeof(ctype), err);
    if (rc != SBX_OK)
        return rc;
    bool is_tar = strncmp(ctype, "application/x-tar", 17) == 0;
    if (want != GET_ANY && is_tar != (want == GET_TAR)) {
        free(data);
        return sbxi_err_set(err, SBX_E_INVALID, 200, is_tar ? "is_a_directory" : "not_a_directory",
                            "%s in sandbox %s is %s", path, sb->id,
                            is_tar ? "a directory" : "not a directory");
    }
    *ret = data;
    *ret_len = len;
    if (ret_is_tar)
        *ret_is_tar = is_tar;
    return SBX_OK;
}

sbx_code sbx_sandbox_write_file(sbx_sandbox *sb, const char *path, const void *data, size_t len,
                                sbx_err *err) {
    return put_files(sb, path, "application/octet-stream", data, len, 0, err);
}

sbx_code sbx_sandbox_write_file_mode(sbx_sandbox *sb, const char *path, const void *data,
                                     size_t len, unsigned mode, sbx_err *err) {
    return put_files(sb, path, "application/octet-stream", data, len, mode, err);
}

sbx_code sbx_sandbox_read_file(sbx_sandbox *sb, const char *path, void **ret, size_t *ret_len,
                               sbx_err *err) {
    return get_files(sb, path, GET_FILE, ret, ret_len, NULL, err);
}

sbx_code sbx_sandbox_put_archive(sbx_sandbox *sb, const char *path, const void *tar, size_t len,
                                 sbx_err *err) {
    return put_files(sb, path, "application/x-tar", tar, len, 0, err);
}

sbx_code sbx_sandbox_get_archive(sbx_sandbox *sb, const char *path, void **ret, size_t *ret_len,
                                 sbx_err *err) {
    return get_files(sb, path, GET_TAR, ret, ret_len, NULL, err);
}

sbx_code sbx_sandbox_read_path(sbx_sandbox *sb, const char *path, void **ret, size_t *ret_len,
                               int *ret_is_archive, sbx_err *err) {
    bool is_tar = false;
    if (!ret_is_archive)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "ret_is_archive is NULL");
    sbx_code rc = get_files(sb, path, GET_ANY, ret, ret_len, &is_tar, err);
    if (rc == SBX_OK)
        *ret_is_archive = is_tar;
    return rc;
}

sbx_code sbx_sandbox_terminate(sbx_sandbox *sb, sbx_err *err) {
    if (!sb)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox is NULL");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "");
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return sb_request(sb, "DELETE", path, NULL, NULL, 0, NULL, NULL, NULL, 0, err);
}

sbx_code sbx_sandbox_exec(sbx_sandbox *sb, const sbx_exec_opts *opts, sbx_exec_result *ret,
                          sbx_err *err) {
    if (!sb || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox or ret is NULL");
    _cleanup_free_ char *body = sbxi_exec_body(opts, err);
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/exec");
    if (!body)
        return err ? err->code : SBX_E_INVALID;
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc;
    if (opts->on_output) {
        sbxi_exec_stream st;
        sbxi_exec_stream_init(&st, opts);
        r.on_chunk = sbxi_exec_stream_chunk;
        r.chunk_ud = &st;
        rc = sbxi_request(sb->client, sb->ep, "POST", path, "application/json",
                          "application/x-ndjson", NULL, body, strlen(body), &r, err);
        if (rc == SBX_OK)
            rc = sbxi_exec_stream_finish(&st, ret, err);
        sbxi_exec_stream_done(&st);
    } else {
        rc = sbxi_request(sb->client, sb->ep, "POST", path, "application/json", NULL, NULL, body,
                          strlen(body), &r, err);
        if (rc == SBX_OK)
            rc = sbxi_exec_result_parse(r.body, r.len, ret, err);
    }
    free(r.body);
    return rc;
}
