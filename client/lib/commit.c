/* POST /v1/sandboxes/{id}/commit (sbx_sandbox_commit): a running sandbox's files become a new
 * image in its node's store. The async form (sbx_async_commit) is in async.c. */
#include "client/lib/internal.h"

#include <stdio.h>
#include <string.h>

char *sbxi_commit_body(const char *name, unsigned flags) {
    json_t *o = name && *name ? json_pack("{s:s}", "name", name) : NULL;
    if (o && (flags & SBX_IMAGE_STRIP_SETUID))
        json_object_set_new(o, "setuid", json_string("strip"));
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return body;
}

sbx_code sbx_sandbox_commit(sbx_sandbox *sb, const char *name, unsigned flags, char **ret_json,
                            sbx_err *err) {
    if (!sb || !name || !*name)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox or name is NULL");
    _cleanup_free_ char *body = sbxi_commit_body(name, flags);
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/commit");
    if (!body || !path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(sb->client, sb->ep, "POST", path, "application/json",
                               "application/json", NULL, body, strlen(body), &r, err);
    if (rc == SBX_OK && ret_json)
        *ret_json = TAKE_PTR(r.body);
    free(r.body);
    return rc;
}
