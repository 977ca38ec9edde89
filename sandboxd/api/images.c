/* The images resource: POST /v1/images?name=NAME (the body, an archive, was streamed to a temp
 * file by api/http.c), GET /v1/images, GET and DELETE /v1/images/{name}. The store is
 * core/images.c. */
#include "sandboxd/api/api.h"
#include "sandboxd/core/images.h"
#include "sandboxd/core/pool.h"
#include "policy/image_name.h"

#include <string.h>

static void reply_err(sd_request *req, int r, const error_rec *err) {
    static const struct {
        int code;
        unsigned status;
        const char *name;
    } map[] = {{-EINVAL, 400, "invalid_image"},
               {-ENOENT, 404, "not_found"},
               {-EEXIST, 409, "conflict"},
               {-EBUSY, 409, "conflict"},
               {-EAGAIN, 409, "conflict"},
               {-EFBIG, 413, "too_large"},
               {-ENOSPC, 507, "insufficient_storage"},
               {-EDQUOT, 507, "insufficient_storage"}};
    for (size_t i = 0; i < ARRAY_SIZE(map); i++)
        if (map[i].code == r) {
            sd_reply_error(req, map[i].status, map[i].name, "%s", err->message);
            return;
        }
    sd_reply_error(req, 500, "internal", "%s", err->message);
}

static void import_closed(sd_request *req, void *ud) {
    ((img_job *)ud)->ud = NULL; /* the client went away: the import finishes anyway */
}

static void import_done(void *ud, int r, const error_rec *err, sd_image *img) {
    sd_request *req = ud;
    if (!req)
        return;
    req->on_close = NULL;
    if (r < 0)
        reply_err(req, r, err);
    else
        sd_reply_json(req, 201, sd_images_to_json(img));
}

void sd_api_images_import(sd_daemon *d, sd_request *req) {
    const char *raw = sd_req_query(req, "name"), *setuid = sd_req_query(req, "setuid");
    char name[POLICY_IMAGE_NAME_MAX];
    error_rec err = {0};
    if (req->upload_err == -ENOSPC || req->upload_err == -EDQUOT) {
        sd_reply_error(req, 507, "insufficient_storage", "the disk filled up while uploading");
    } else if (req->upload_err || !req->upload_path) {
        sd_reply_error(req, 500, "internal", "cannot store the upload: %s",
                       strerror(-(req->upload_err ? req->upload_err : EIO)));
    } else if (!raw) {
        sd_reply_error(req, 400, "invalid_argument", "name: required (?name=NAME[:TAG])");
    } else if (policy_image_name(raw, "name", name, &err) < 0 || strcmp(name, "host") == 0) {
        sd_reply_error(req, 400, "invalid_argument", "%s",
                       err.code ? err.message : "name: \"host\" is reserved");
    } else if (setuid && strcmp(setuid, "strip") != 0 && strcmp(setuid, "refuse") != 0) {
        sd_reply_error(req, 400, "invalid_argument", "setuid: must be \"strip\" or \"refuse\"");
    } else if (req->body_len == 0) {
        sd_reply_error(req, 400, "invalid_image", "the body is empty: send the archive");
    } else {
        req->upload_fd = safe_close(req->upload_fd);
        img_job *j =
            sd_images_import(d, name, TAKE_PTR(req->upload_path),
                             setuid && strcmp(setuid, "strip") == 0, import_done, req, &err);
        if (!j && err.code == -EBUSY) {
            req->retry_after = 5;
            sd_reply_error(req, 429, "too_many_requests", "%s", err.message);
            return;
        }
        if (!j) {
            reply_err(req, err.code, &err);
            return;
        }
        req->on_close = import_closed;
        req->close_ud = j;
    }
}

void sd_api_images_list(sd_daemon *d, sd_request *req) {
    sd_reply_json(req, 200, sd_images_list_json(d));
}

void sd_api_images_route(sd_daemon *d, sd_request *req, const char *rest) {
    char name[POLICY_IMAGE_NAME_MAX];
    error_rec err = {0};
    if (policy_image_name(rest, "name", name, &err) < 0) {
        sd_reply_error(req, 404, "not_found", "no such image: %.200s", rest);
        return;
    }
    if (strcmp(req->method, "GET") == 0) {
        sd_image *im = sd_images_find(d, name);
        if (im)
            sd_reply_json(req, 200, sd_images_to_json(im));
        else
            sd_reply_error(req, 404, "not_found", "image %s not found", name);
    } else if (strcmp(req->method, "DELETE") == 0) {
        int r = sd_pool_uses_image(d, name)
                    ? error_set(&err, -EBUSY, "image %s is in use by a warm pool", name)
                    : sd_images_delete(d, name, &err);
        if (r < 0)
            reply_err(req, r, &err);
        else
            sd_reply_json(req, 204, NULL);
    } else {
        sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                       req->method, req->path);
    }
}
