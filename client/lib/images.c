/* libsbx: the image store of a node (POST/GET/DELETE /v1/images). An import streams the
 * archive from a descriptor: it is never held in memory. With several endpoints these calls
 * talk to the first one. */
#include "client/lib/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t read_fd(char *buf, size_t size, size_t n, void *ud) {
    int fd = *(int *)ud;
    for (;;) {
        ssize_t r = read(fd, buf, size * n);
        if (r >= 0)
            return (size_t)r;
        if (errno != EINTR)
            return CURL_READFUNC_ABORT;
    }
}

static sbx_code take_body(sbxi_response *r, char **ret_json, sbx_err *err) {
    if (ret_json)
        *ret_json = TAKE_PTR(r->body);
    free(r->body);
    return SBX_OK;
}

static sbx_code finish_import(sbx_client *c, sbxi_response *r, char **ret_json, sbx_err *err) {
    sbx_code code = sbxi_err_from_response(&c->eps[0], r, err);
    if (code != SBX_OK) {
        free(r->body);
        return code;
    }
    return take_body(r, ret_json, err);
}

static char *image_path(const char *name) {
    char *esc = curl_easy_escape(NULL, name, 0), *p = NULL;
    if (esc && asprintf(&p, "/v1/images/%s", esc) < 0)
        p = NULL;
    curl_free(esc);
    return p;
}

sbx_code sbx_image_import(sbx_client *c, const char *name, int fd, unsigned flags, char **ret_json,
                          sbx_err *err) {
    if (!c || !name || fd < 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client, name or fd is missing");
    char *esc = curl_easy_escape(NULL, name, 0), *path = NULL;
    if (!esc || asprintf(&path, "/v1/images?name=%s%s", esc,
                         flags & SBX_IMAGE_STRIP_SETUID ? "&setuid=strip" : "") < 0)
        path = NULL;
    curl_free(esc);
    _cleanup_free_ char *url = path ? sbxi_url(&c->eps[0], path) : NULL;
    struct curl_slist *hdrs = sbxi_api_headers(c, &c->eps[0], "application/x-tar", NULL, "Expect:");
    if (!url || !hdrs) {
        free(path);
        curl_slist_free_all(hdrs);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    }
    struct stat st;
    curl_off_t size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                          ? (curl_off_t)(st.st_size - lseek(fd, 0, SEEK_CUR))
                          : -1; /* a pipe: chunked */
    sbxi_response r = {0};
    sbxi_response_reset(&r);
    if (c->eps[0].unix_path) { /* no libcurl for the local socket (unixhttp.c) */
        sbxi_unix_request(c, 0, "POST", path, hdrs, NULL, 0, fd, size, &r);
        free(path);
        curl_slist_free_all(hdrs);
        return finish_import(c, &r, ret_json, err);
    }
    free(path);
    if (!c->easy && !(c->easy = curl_easy_init())) {
        curl_slist_free_all(hdrs);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "cannot create a libcurl handle");
    }
    curl_easy_reset(c->easy);
    sbxi_easy_setup(c->easy, "POST", url, c->eps[0].unix_path, hdrs, NULL, 0, &r);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(c->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(c->easy, CURLOPT_READFUNCTION, read_fd);
    curl_easy_setopt(c->easy, CURLOPT_READDATA, &fd);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, size);
    CURLcode rc = sbxi_easy_perform(c, &r);
    sbxi_response_finish(c->easy, rc, &r);
    curl_slist_free_all(hdrs);
    return finish_import(c, &r, ret_json, err);
}

sbx_code sbx_image_list(sbx_client *c, char **ret_json, sbx_err *err) {
    if (!c || !ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret_json is NULL");
    sbxi_response r = {0};
    sbx_code code = sbxi_request(c, 0, "GET", "/v1/images", NULL, NULL, NULL, NULL, 0, &r, err);
    if (code != SBX_OK) {
        free(r.body);
        return code;
    }
    return take_body(&r, ret_json, err);
}

static sbx_code one(sbx_client *c, const char *method, const char *name, char **ret_json,
                    sbx_err *err) {
    if (!c || !name)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or name is NULL");
    _cleanup_free_ char *path = image_path(name);
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response r = {0};
    sbx_code code = sbxi_request(c, 0, method, path, NULL, NULL, NULL, NULL, 0, &r, err);
    if (code != SBX_OK) {
        free(r.body);
        return code;
    }
    return take_body(&r, ret_json, err);
}

sbx_code sbx_image_inspect(sbx_client *c, const char *name, char **ret_json, sbx_err *err) {
    if (!ret_json)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "ret_json is NULL");
    return one(c, "GET", name, ret_json, err);
}

sbx_code sbx_image_remove(sbx_client *c, const char *name, sbx_err *err) {
    return one(c, "DELETE", name, NULL, err);
}
