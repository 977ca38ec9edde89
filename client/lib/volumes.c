/* libsbx: named volumes of a node (POST/GET/DELETE /v1/volumes, docs/API.md "Volumes"). With
 * several endpoints these talk to the first one; the async forms are in async.c and share the
 * bodies and paths made here. */
#include "client/lib/internal.h"

#include <stdio.h>
#include <string.h>

char *sbxi_volume_body(const char *name, uint64_t size) {
    json_t *o = name ? json_pack("{s:s}", "name", name) : NULL;
    if (o && size)
        json_object_set_new(o, "size", json_integer((json_int_t)size));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *sbxi_volume_path(const char *name) {
    size_t n = name ? strlen(name) : 0;
    char *p = NULL;
    if (n == 0 || n > 255 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n ||
        asprintf(&p, "/v1/volumes/%s", name) < 0)
        return NULL; /* a name no volume has, unescaped in a path (no libcurl for escaping) */
    return p;
}

static sbx_code call(sbx_client *c, const char *method, const char *path, const char *body,
                     char **ret_json, sbx_err *err) {
    if (!path)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "not a volume name (or out of memory)");
    sbxi_response r = {0};
    sbx_code code = sbxi_request(c, 0, method, path, body ? "application/json" : NULL, NULL, NULL,
                                 body, body ? strlen(body) : 0, &r, err);
    if (code == SBX_OK && ret_json)
        *ret_json = TAKE_PTR(r.body);
    free(r.body);
    return code;
}

sbx_code sbx_volume_create(sbx_client *c, const char *name, uint64_t size, char **ret_json,
                           sbx_err *err) {
    if (!c || !name)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or name is NULL");
    _cleanup_free_ char *body = sbxi_volume_body(name, size);
    if (!body)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return call(c, "POST", "/v1/volumes", body, ret_json, err);
}

sbx_code sbx_volume_list(sbx_client *c, char **ret_json, sbx_err *err) {
    if (!c || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret_json is NULL");
    return call(c, "GET", "/v1/volumes", NULL, ret_json, err);
}

sbx_code sbx_volume_inspect(sbx_client *c, const char *name, char **ret_json, sbx_err *err) {
    if (!c || !name || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client, name or ret_json is NULL");
    _cleanup_free_ char *path = sbxi_volume_path(name);
    return call(c, "GET", path, NULL, ret_json, err);
}

sbx_code sbx_volume_remove(sbx_client *c, const char *name, sbx_err *err) {
    if (!c || !name)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or name is NULL");
    _cleanup_free_ char *path = sbxi_volume_path(name);
    return call(c, "DELETE", path, NULL, NULL, err);
}
