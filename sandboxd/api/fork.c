/* POST /v1/sandboxes/{id}/fork {"count":N, ...create fields that override the source's}:
 * 201 with the array of the new sandboxes' objects once all have started, or the error
 * (the engine: core/fork.c). */
#include "sandboxd/api/api.h"

#include "sandboxd/core/fork.h"

static void req_gone(sd_request *req, void *ud) {
    sd_fork_forget(ud); /* the forks go on; nobody waits for the answer */
}

static void fork_done(void *ud, sd_sandbox **sbs, unsigned n, const error_rec *err) {
    sd_request *req = ud;
    req->on_close = NULL;
    if (err) {
        sd_reply_error_rec(req, err);
        return;
    }
    json_t *arr = json_array();
    for (unsigned i = 0; i < n; i++)
        json_array_append_new(arr, sd_api_sandbox_json(sbs[i]));
    sd_reply_json(req, 201, arr);
}

void sd_api_fork(sd_daemon *d, sd_request *req, sd_sandbox *src) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    json_t *cnt = json_object_get(body, "count");
    error_rec err = {0};
    sd_fork *f;
    if (!json_is_object(body)) {
        sd_reply_error(req, 400, "invalid_argument", "the body must be a JSON object");
    } else if (!json_is_integer(cnt) || json_integer_value(cnt) < 1 ||
               json_integer_value(cnt) > SD_FORK_MAX) {
        sd_reply_error(req, 400, "invalid_argument", "count: must be an integer in [1, %d]",
                       SD_FORK_MAX);
    } else if (sd_fork_start(src, body, (unsigned)json_integer_value(cnt), fork_done, req, &f,
                             &err) < 0) {
        sd_reply_error_rec(req, &err);
    } else {
        req->on_close = req_gone;
        req->close_ud = f;
    }
    json_decref(body);
}
