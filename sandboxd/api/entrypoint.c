/* A create's "entrypoint" (docs/API.md "Entrypoint"): resolved before the create (the image's
 * Entrypoint + Cmd, or the argv given), then started in the background once the sandbox runs,
 * like POST .../exec {"background":true}; the create's 201 comes after the start and names
 * its pid. A start that fails ends the sandbox and answers the error. */
#include "sandboxd/api/api.h"

#include "policy/entrypoint.h"
#include "sandboxd/core/images.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/process.h"
#include "sandboxd/core/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sd_api_entrypoint_parse(sd_daemon *d, json_t *body, const char *image, json_t **ret_argv,
                            error_rec *err) {
    json_t *v = json_object_get(body, "entrypoint");
    sd_image *im = v && json_is_true(v) && strcmp(image, "host") ? sd_images_find(d, image) : NULL;
    if (v && json_is_true(v) && strcmp(image, "host") && !im) {
        *ret_argv = NULL; /* an unknown image: the create answers 404 for it */
        return 0;
    }
    json_t *meta = im ? im->meta : NULL;
    return policy_entrypoint_parse(v, image, json_object_get(meta, "entrypoint"),
                                   json_object_get(meta, "cmd"), ret_argv, err);
}

typedef struct ep_start {
    sd_request *req; /* NULL once the client left */
    sd_daemon *d;
    sd_sandbox *sb;
    sd_watch *w;
    uv_timer_t later; /* a failed start ends the sandbox from the loop, not inside its news */
    char id[64], msg[400];
} ep_start;

static void ep_freed(uv_handle_t *h) {
    free(h->data);
}

static void ep_end_sandbox(uv_timer_t *t) {
    ep_start *s = t->data;
    sd_sandbox *sb = sd_registry_find(s->d, s->id);
    if (sb && sb->state != SD_ENDED)
        sd_sandbox_end(sb, END_TERMINATED, "%s", s->msg);
    uv_close((uv_handle_t *)t, ep_freed);
}

static void ep_started(void *ud, sd_process *p) {
    ep_start *s = ud;
    if (s->req) {
        s->req->on_close = NULL;
        json_t *j = sd_api_sandbox_json(s->sb);
        if (j)
            json_object_set_new(j, "entrypoint",
                                json_pack("{s:i,s:O}", "pid", p->pid, "argv", p->argv));
        sd_reply_json(s->req, 201, j);
    }
    sd_watch_leave(s->w); /* it goes on without an attachment */
    free(s);
}

static bool ep_output(void *ud, int which, const char *data, size_t len) {
    return false;
}

static void ep_ended(void *ud, json_t *exit, const error_rec *err) {
    ep_start *s = ud; /* it failed to start */
    snprintf(s->msg, sizeof(s->msg), "its entrypoint did not start: %s",
             err ? err->message : "it ended before it started");
    if (s->req) {
        s->req->on_close = NULL;
        sd_reply_error(s->req, 400, "entrypoint_failed", "sandbox %s: %s", s->sb->id, s->msg);
    }
    snprintf(s->id, sizeof(s->id), "%s", s->sb->id);
    uv_timer_init(s->d->loop, &s->later);
    s->later.data = s;
    uv_timer_start(&s->later, ep_end_sandbox, 0, 0);
}

static const sd_watch_ops ep_ops = {.started = ep_started, .output = ep_output, .ended = ep_ended};

static void ep_gone(sd_request *req, void *ud) {
    ((ep_start *)ud)->req = NULL; /* the start goes on */
}

void sd_api_entrypoint_start(sd_daemon *d, sd_request *req, sd_sandbox *sb, json_t *argv) {
    json_t *body = json_pack("{s:o,s:b}", "argv", argv, "background", 1);
    policy_exec pe = {0};
    policy_process pp = {0};
    error_rec err = {0};
    ep_start *s = body ? calloc(1, sizeof(*s)) : NULL;
    int r = !s ? error_set(&err, -ENOMEM, "out of memory")
               : sd_api_exec_parse(d, sb, body, &pe, &pp, &err);
    json_decref(body);
    if (s)
        *s = (ep_start){.d = d, .sb = sb};
    if (r >= 0) {
        s->req = req;
        r = sd_process_start(sb, &pe, &pp, &ep_ops, s, &s->w, &err);
    }
    policy_exec_done(&pe);
    if (r < 0 && s) {
        s->req = req; /* answered, and the sandbox ended from the loop, as for a failed start */
        ep_ended(s, NULL, &err);
        return;
    }
    if (r < 0) { /* out of memory */
        if (req)
            sd_reply_error(req, 500, "internal", "sandbox %s: out of memory", sb->id);
        sd_sandbox_end(sb, END_TERMINATED, "its entrypoint did not start: out of memory");
        return;
    }
    if (req) {
        req->on_close = ep_gone;
        req->close_ud = s;
    }
}
