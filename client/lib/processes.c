/* libsbx's background commands: plain requests on a sandbox's process table (start in the
 * background, list, get with an output tail, signal, kill). */
#include "client/lib/process.h"

#include <stdio.h>
/* "All of it": the most a process keeps per stream (docs/API.md). */
#define SBXI_LOG_TAIL_ALL (64ull << 20)
#include <stdlib.h>
#include <string.h>

static sbx_code call(sbx_sandbox *sb, const char *method, const char *path, const char *body,
                     char **ret_json, sbx_err *err) {
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(sb->client, sb->ep, method, path, body ? "application/json" : NULL,
                               NULL, NULL, body, body ? strlen(body) : 0, &r, err);
    if (rc == SBX_OK && ret_json) {
        *ret_json = r.body;
        r.body = NULL;
    }
    free(r.body);
    return rc;
}

sbx_code sbx_sandbox_process_start(sbx_sandbox *sb, const sbx_exec_opts *exec,
                                   const sbx_process_opts *popts, long *ret_pid, char **ret_json,
                                   sbx_err *err) {
    if (!sb || !exec)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox or exec options missing");
    sbx_err local, *e = err ? err : &local; /* err may be NULL */
    _cleanup_free_ char *body = sbxi_process_body(exec, popts, true, false, e);
    if (!body)
        return e->code;
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/exec");
    char *json = NULL;
    sbx_code rc = call(sb, "POST", path, body, &json, err);
    if (rc != SBX_OK)
        return rc;
    json_t *o = json_loads(json, 0, NULL);
    json_t *pid = json_object_get(o, "pid");
    if (!json_is_integer(pid)) {
        json_decref(o);
        free(json);
        return sbxi_err_set(err, SBX_E_PROTOCOL, 201, "",
                            "background start answer without a pid (is the daemon too old?)");
    }
    if (ret_pid)
        *ret_pid = (long)json_integer_value(pid);
    json_decref(o);
    if (ret_json)
        *ret_json = json;
    else
        free(json);
    return SBX_OK;
}

sbx_code sbx_sandbox_process_list(sbx_sandbox *sb, char **ret_json, sbx_err *err) {
    if (!sb || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox or ret_json missing");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/processes");
    return call(sb, "GET", path, NULL, ret_json, err);
}

sbx_code sbx_sandbox_process_get(sbx_sandbox *sb, long pid, uint64_t tail, char **ret_json,
                                 sbx_err *err) {
    if (!sb || !ret_json || pid <= 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, pid or ret_json missing");
    char q[48] = "";
    if (tail)
        snprintf(q, sizeof(q), "?tail=%llu", (unsigned long long)tail);
    _cleanup_free_ char *path = sbxi_process_path(sb, pid, q);
    return call(sb, "GET", path, NULL, ret_json, err);
}

sbx_code sbx_sandbox_process_signal(sbx_sandbox *sb, long pid, const char *sig, sbx_err *err) {
    if (!sb || pid <= 0 || !sig || !*sig)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, pid or signal missing");
    json_t *o = json_pack("{ss}", "signal", sig);
    _cleanup_free_ char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "bad signal name");
    _cleanup_free_ char *path = sbxi_process_path(sb, pid, "/signal");
    return call(sb, "POST", path, body, NULL, err);
}

sbx_code sbx_sandbox_process_kill(sbx_sandbox *sb, long pid, sbx_err *err) {
    if (!sb || pid <= 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox or pid missing");
    _cleanup_free_ char *path = sbxi_process_path(sb, pid, "");
    return call(sb, "DELETE", path, NULL, NULL, err);
}

sbx_code sbx_sandbox_process_logs(sbx_sandbox *sb, long pid, uint64_t tail, sbx_exec_result *ret,
                                  sbx_err *err) {
    if (!ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "ret is NULL");
    _cleanup_free_ char *json = NULL;
    sbx_code rc = sbx_sandbox_process_get(sb, pid, tail ? tail : SBXI_LOG_TAIL_ALL, &json, err);
    if (rc != SBX_OK)
        return rc;
    json_t *o = json_loads(json, 0, NULL);
    sbx_exec_result r = {0};
    const char *state = json_string_value(json_object_get(o, "state"));
    bool running = state && strcmp(state, "running") == 0;
    if (!json_is_object(o) || !state)
        rc = sbxi_err_set(err, SBX_E_PROTOCOL, 200, "", "the process answer is not an object");
    else if (!running && json_object_get(o, "reason"))
        rc = sbxi_exec_status_fill(o, &r, err);
    if (rc == SBX_OK && (sbxi_take_data(o, "stdout", &r.stdout_data, &r.stdout_len) < 0 ||
                         sbxi_take_data(o, "stderr", &r.stderr_data, &r.stderr_len) < 0))
        rc = sbxi_err_set(err, SBX_E_PROTOCOL, 200, "", "the process answer has bad output data");
    json_decref(o);
    if (rc != SBX_OK) {
        sbx_exec_result_free(&r);
        return rc;
    }
    if (running)
        r.reason[0] = 0;
    *ret = r;
    return SBX_OK;
}
