/* POST /v1/sandboxes/{id}/pause and .../resume (sbx_sandbox_pause, sbx_sandbox_resume,
 * sbx_sandbox_resume_on; docs/API.md "Pause and resume"), and the two calls a node makes to
 * another when a paused sandbox moves (sbx_checkpoint_pull, sbx_sandbox_checkpoint_download).
 * The async forms (sbx_async_pause, sbx_async_resume) are in async.c. */
#include "client/lib/internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static sbx_code move(sbx_sandbox *sb, const char *what, const char *body, char **ret_json,
                     sbx_err *err) {
    if (!sb)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox is NULL");
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, what);
    if (!path || !body)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(sb->client, sb->ep, "POST", path, "application/json",
                               "application/json", NULL, body, strlen(body), &r, err);
    if (rc == SBX_OK && ret_json)
        *ret_json = TAKE_PTR(r.body);
    free(r.body);
    return rc;
}

sbx_code sbx_sandbox_pause(sbx_sandbox *sb, char **ret_json, sbx_err *err) {
    return move(sb, "/pause", "{}", ret_json, err);
}

sbx_code sbx_sandbox_resume(sbx_sandbox *sb, char **ret_json, sbx_err *err) {
    return move(sb, "/resume", "{}", ret_json, err);
}

sbx_code sbx_sandbox_resume_on(sbx_sandbox *sb, const char *node, char **ret_json, sbx_err *err) {
    if (!node)
        return sbx_sandbox_resume(sb, ret_json, err);
    json_t *j = json_pack("{s:s}", "node", node);
    _cleanup_free_ char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return move(sb, "/resume", body, ret_json, err);
}

sbx_code sbx_checkpoint_pull(sbx_client *c, const char *id, const char *from, const char *key,
                             char **ret_json, sbx_err *err) {
    if (!c || !id || !from || !key)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client, id, from or key is NULL");
    json_t *j = json_pack("{s:s,s:s,s:s}", "id", id, "from", from, "key", key);
    _cleanup_free_ char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code rc = sbxi_request(c, sbxi_first_ep(c), "POST", "/v1/checkpoints", "application/json",
                               "application/json", NULL, body, strlen(body), &r, err);
    if (rc == SBX_OK && ret_json)
        *ret_json = TAKE_PTR(r.body);
    free(r.body);
    return rc;
}

typedef struct to_fd {
    int fd;
    int error; /* the first failed write's errno */
} to_fd;

static void write_chunk(void *ud, const char *data, size_t len) {
    to_fd *t = ud;
    while (len && !t->error) {
        ssize_t n = write(t->fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            t->error = errno;
        else
            data += n, len -= (size_t)n;
    }
}

sbx_code sbx_sandbox_checkpoint_download(sbx_sandbox *sb, const char *key, int fd, sbx_err *err) {
    if (!sb || !key || fd < 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "sandbox, key or fd is missing");
    _cleanup_free_ char *esc = sbxi_escape(key), *sub = NULL;
    if (!esc || asprintf(&sub, "/checkpoint?key=%s", esc) < 0)
        sub = NULL;
    _cleanup_free_ char *path = sub ? sbxi_sandbox_path(sb, sub) : NULL;
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    to_fd t = {.fd = fd};
    sbxi_response r = {.on_chunk = write_chunk, .chunk_ud = &t};
    sbx_code rc = sbxi_request(sb->client, sb->ep, "GET", path, NULL, "application/x-tar", NULL,
                               NULL, 0, &r, err);
    free(r.body);
    if (rc == SBX_OK && t.error)
        return sbxi_err_set(err, SBX_E_IO, 0, "", "writing the checkpoint: %s", strerror(t.error));
    return rc;
}
