/* POST /v1/sandboxes/{id}/exec: parse the command, run it as an exec session (core/exec.c),
 * and answer with one JSON result or, for Accept: application/x-ndjson, a live NDJSON stream
 * (start, stdout/stderr chunks, exit or error). Text that is not UTF-8 goes as base64. The JSON
 * answer is written piece by piece as the client takes it (api/exec_answer.c). */
#include "sandboxd/api/api.h"
#include "sandboxd/api/exec_answer.h"
#include "sandboxd/core/images.h"

#include "common/b64.h"
#include "common/jsonstr.h"
#include "common/macro.h"
#include "sandboxd/core/exec.h"

#include <stdio.h>
#include <string.h>

typedef struct api_exec {
    sd_request *req;
    sd_exec *e;
    bool stream, streaming;
    char carry[2][4]; /* a UTF-8 character split between two reads (streaming) */
    size_t carry_len[2];
} api_exec;

static const char *const stream_names[2] = {"stdout", "stderr"};

static void stream_json(api_exec *a, json_t *line) {
    char *s = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(line);
    if (s) {
        sd_stream_write(a->req, s, strlen(s));
        sd_stream_write(a->req, "\n", 1);
    }
    free(s);
}

static json_t *text_or_b64(const char *data, size_t len, const char **ret_suffix) {
    json_t *t = json_stringn(data ? data : "", len);
    *ret_suffix = "";
    if (t)
        return t;
    *ret_suffix = "_b64";
    char *b = b64_encode(data, len);
    t = json_string(b ? b : "");
    free(b);
    return t;
}

static void stream_output(api_exec *a, int which, const char *data, size_t len, bool flush) {
    char buf[65536 + 4];
    size_t n = a->carry_len[which];
    memcpy(buf, a->carry[which], n);
    size_t take = MIN(len, sizeof(buf) - n);
    memcpy(buf + n, data, take);
    n += take;
    size_t whole = flush ? n : jsonstr_utf8_whole_len(buf, n);
    a->carry_len[which] = n - whole;
    memcpy(a->carry[which], buf + whole, n - whole);
    if (whole == 0)
        return;
    const char *suffix;
    json_t *v = text_or_b64(buf, whole, &suffix);
    char key[16];
    snprintf(key, sizeof(key), "data%s", suffix);
    stream_json(a, json_pack("{s:s,s:o}", "type", stream_names[which], key, v));
}

static void api_exec_free(api_exec *a) {
    a->req->on_close = NULL;
    a->req->on_drain = NULL;
    free(a);
}

static void on_started(void *ud, json_t *pid) {
    api_exec *a = ud;
    if (!a->stream)
        return;
    a->streaming = true;
    sd_stream_begin(a->req, "application/x-ndjson");
    stream_json(a, json_pack("{s:s,s:O}", "type", "start", "pid", pid));
}

static bool on_output(void *ud, int which, const char *data, size_t len) {
    api_exec *a = ud;
    stream_output(a, which, data, len, false);
    return sd_stream_full(a->req);
}

static void on_exited(void *ud, const sd_exec_result *r) {
    api_exec *a = ud;
    json_t *res = sd_exec_result_json(r, r->bytes); /* a JSON answer adds the output */
    if (a->stream) {
        for (int i = 0; i < 2; i++)
            if (a->carry_len[i])
                stream_output(a, i, "", 0, true);
        json_object_set_new(res, "type", json_string("exit"));
        stream_json(a, res);
        sd_stream_end(a->req);
    } else {
        sd_api_exec_answer(a->req, a->e, r, res);
    }
    api_exec_free(a);
}

static void on_failed(void *ud, bool started, const error_rec *err) {
    api_exec *a = ud;
    if (a->streaming) {
        const char *code = err->code == -EBUSY    ? "conflict"
                           : err->code == -EINVAL ? "invalid_argument"
                                                  : "internal";
        stream_json(
            a, json_pack("{s:s,s:s,s:s}", "type", "error", "code", code, "message", err->message));
        sd_stream_end(a->req);
    } else {
        sd_api_exec_reply_error(a->req, err);
    }
    api_exec_free(a);
}

static const sd_exec_ops exec_ops = {
    .started = on_started, .output = on_output, .exited = on_exited, .failed = on_failed};

static void req_drained(sd_request *req, void *ud) {
    sd_exec_resume(((api_exec *)ud)->e);
}

static void req_gone(sd_request *req, void *ud) {
    api_exec *a = ud;
    sd_exec_forget(a->e); /* the command goes on; its output is discarded */
    api_exec_free(a);
}

int sd_api_exec_parse(sd_daemon *d, sd_sandbox *sb, json_t *body, policy_exec *pe,
                      policy_process *pp, error_rec *err) {
    policy_exec e = {0};
    int r = policy_limits_parse_exec(body, &e, err);
    if (r < 0)
        return r;
    if ((r = policy_process_parse(body, pp, err)) < 0 ||
        (e.as_grader && !sb->spec.grading &&
         (r = error_set(err, -EINVAL,
                        "user: \"grader\" exists only in a sandbox created with "
                        "\"profile\": \"grading\"")) < 0)) {
        policy_exec_done(&e);
        return r;
    }
    json_t *cwd = json_object_get(body, "cwd"); /* (null: not given, as policy's pick takes it) */
    const char *wd = cwd && !json_is_null(cwd) ? NULL : sd_images_workdir(d, sb->spec.image);
    if (wd && (wd = strdup(wd))) { /* images: the image's WorkingDir is the default */
        free(e.cwd);
        e.cwd = (char *)wd;
    }
    *pe = e;
    return 0;
}

void sd_api_exec(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    policy_exec pe = {0};
    policy_process pp = {0};
    error_rec err = {0};
    int r = sd_api_exec_parse(d, sb, body, &pe, &pp, &err);
    json_decref(body);
    if (r >= 0 && pp.background) {
        sd_api_exec_background(d, req, sb, &pe, &pp);
        policy_exec_done(&pe);
        return;
    }
    api_exec *a = r < 0 ? NULL : calloc(1, sizeof(*a));
    if (r >= 0 && !a)
        r = error_set(&err, -ENOMEM, "out of memory");
    if (a) {
        const char *accept = sd_req_header(req, "Accept");
        *a = (api_exec){.req = req, .stream = accept && strstr(accept, "application/x-ndjson")};
        sd_exec_opts o = {.tty = true, .rows = pp.rows, .cols = pp.cols, .term = pp.term};
        r = sd_exec_start_opts(sb, &pe, pp.tty ? &o : NULL, a->stream, &exec_ops, a, &a->e, &err);
    }
    policy_exec_done(&pe);
    if (r < 0) {
        free(a);
        sd_api_exec_reply_error(req, &err);
        return;
    }
    req->on_close = req_gone;
    req->close_ud = a;
    req->on_drain = req_drained;
    req->drain_ud = a;
}
