/* SandboxFusion-compatible endpoints: POST /run_code, POST /run_jupyter, GET /v1/ping, with
 * SandboxFusion's request and response fields, so trainers that speak it (verl, skyrl-agent,
 * tinker-cookbook) switch by URL. Here: the request's method and checks (api/sf_request.c), the
 * refusals answered at once, and a job queued for the others (api/sf_job.c runs it: a fresh
 * sandbox, its files and code, compile and run, fetch_files, then the sandbox is ended). */
#include "sandboxd/api/sandboxfusion.h"

#include "sandboxd/api/sf_answer.h"
#include "sandboxd/api/sf_job.h"
#include "sandboxd/api/sf_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sd_sf_path(const char *path) {
    return strcmp(path, "/run_code") == 0 || strcmp(path, "/run_jupyter") == 0 ||
           strcmp(path, "/v1/ping") == 0;
}

/* The request's checks: true when they answered it (400 or 422; SandboxError for a language
 * this node does not run), else *ret_lang is /run_code's language (NULL for /run_jupyter). */
static bool check_request(sd_daemon *d, sd_request *req, json_t *body, bool jupyter,
                          const sf_lang **ret_lang) {
    const char *refusal = NULL, *missing;
    const sf_lang *lang = NULL;
    error_rec err = {0};
    if (sd_sf_check_known(body, jupyter, &err) < 0) {
        sd_reply_error_rec(req, &err);
        return true;
    }
    const char *bad = json_is_object(body) ? sd_sf_check_common(body, d->host.memory_bytes)
                                           : "the body must be a JSON object";
    if (!bad)
        bad = jupyter ? sd_sf_check_jupyter(body) : sd_sf_check_run_code(body, &refusal, &lang);
    if (bad) {
        sd_reply_error(req, 422, "invalid_argument", "%s", bad);
        return true;
    }
    char msg[256];
    if (refusal) {
        sd_reply_json(req, 200, sd_sf_answer_refused(refusal));
        return true;
    }
    if ((missing = sd_sf_missing_program(d, jupyter ? sd_sf_lang_python() : lang))) {
        snprintf(msg, sizeof(msg), "language %s is not available on this node: the image has no %s",
                 jupyter ? "python3 (jupyter)" : lang->name, missing);
        sd_reply_json(req, 200, sd_sf_answer_refused(msg));
        return true;
    }
    *ret_lang = lang;
    return false;
}

void sd_api_sandboxfusion(sd_daemon *d, sd_request *req) {
    bool jupyter = strcmp(req->path, "/run_jupyter") == 0;
    if (strcmp(req->path, "/v1/ping") == 0) {
        if (strcmp(req->method, "GET") != 0)
            sd_reply_error(req, 405, "method_not_allowed", "use GET on /v1/ping");
        else
            sd_reply_data(req, 200, "application/json", strdup("\"pong\""), 6);
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        sd_reply_error(req, 405, "method_not_allowed", "use POST on %s", req->path);
        return;
    }
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    const sf_lang *lang = NULL;
    if (!check_request(d, req, body, jupyter, &lang) &&
        sd_sf_job_submit(d, req, body, jupyter, lang) < 0)
        sd_reply_error(req, 500, "internal", "out of memory");
    json_decref(body);
}

int sd_sf_init(sd_daemon *d, error_rec *err) {
    return sd_sf_job_init(d, err);
}

void sd_sf_done(sd_daemon *d) {
    sd_sf_job_done(d);
}
