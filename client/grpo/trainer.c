/* The trainer's HTTP for the run and its episodes: one JSON request through libsbx's internal
 * HTTP engine, and its failure as one line. Calls no other file of the folder. */
#include "client/grpo/runner.h"
#include "client/lib/internal.h"

#include "common/macro.h"

#include <stdio.h>
#include <string.h>

int grpo_trainer_request(grpo_run *run, const char *method, const char *path, json_t *body,
                         sbxi_http_cb cb, void *ud) {
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    char url[1024];
    if ((body && !text) || snprintf(url, sizeof(url), "%s%s", run->trainer_base, path) < 0)
        return -ENOMEM;
    sbxi_http_opts opts = {
        .content_type = text ? "application/json" : NULL,
        .timeout_ms = 300000,
        .connect_timeout_ms = 5000,
    };
    return sbxi_http_async_request_ex(run->trainer, method, url, NULL, text,
                                      text ? strlen(text) : 0, &opts, cb, ud);
}

const char *grpo_trainer_error(const sbxi_http_result *r, char *buf, size_t len) {
    if (r->status == 0)
        return r->error && *r->error ? r->error : "no answer";
    json_t *j = json_loadb(r->body, r->len, 0, NULL);
    const char *m = json_string_value(json_object_get(j, "message"));
    if (!m)
        m = json_string_value(json_object_get(j, "detail"));
    snprintf(buf, len, "HTTP %ld%s%s", r->status, m ? ": " : "", m ? m : "");
    json_decref(j);
    return buf;
}
