/* POST /v1/sandboxes/{id}/pause and .../resume (sbx_sandbox_pause, sbx_sandbox_resume; docs/API.md
 * "Pause and resume"). The async forms (sbx_async_pause, sbx_async_resume) are in async.c. */
#include "client/lib/internal.h"

#include <string.h>

static sbx_code move(sbx_sandbox *sb, const char *what, char **ret_json, sbx_err *err) {
    if (!sb)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox is NULL");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, what);
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(sb->client, sb->ep, "POST", path, "application/json",
                               "application/json", NULL, "{}", 2, &r, err);
    if (rc == SBX_OK && ret_json)
        *ret_json = TAKE_PTR(r.body);
    free(r.body);
    return rc;
}

sbx_code sbx_sandbox_pause(sbx_sandbox *sb, char **ret_json, sbx_err *err) {
    return move(sb, "/pause", ret_json, err);
}

sbx_code sbx_sandbox_resume(sbx_sandbox *sb, char **ret_json, sbx_err *err) {
    return move(sb, "/resume", ret_json, err);
}
