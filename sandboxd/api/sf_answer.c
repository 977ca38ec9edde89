/* SandboxFusion's answers (sf_answer.h): the response object of each endpoint and what goes into
 * it, a refusal, a platform fault, a command's result object (its output as lossy UTF-8
 * strings), a fetched file as base64. Calls nothing above it. */
#include "sandboxd/api/sf_answer.h"

#include "common/b64.h"
#include "common/end_reason.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *sd_sf_answer_new(bool jupyter) {
    json_t *r = json_pack("{s:s,s:s,s:n,s:n,s:n,s:{}}", "status", "Success", "message", "",
                          "compile_result", "run_result", "executor_pod_name", "files");
    if (r && jupyter) {
        json_object_del(r, "compile_result");
        json_object_del(r, "run_result");
        json_object_set_new(r, "driver", json_null());
        json_object_set_new(r, "cells", json_array());
    }
    return r;
}

json_t *sd_sf_answer_refused(const char *msg) {
    json_t *r = sd_sf_answer_new(false);
    sd_sf_answer_fault(r, msg);
    return r;
}

void sd_sf_answer_fault(json_t *resp, const char *msg) {
    json_object_set_new(resp, "status", json_string("SandboxError"));
    json_object_set_new(resp, "message", json_string(msg));
}

void sd_sf_answer_file(json_t *resp, const char *path, const char *data, size_t len) {
    char *b = b64_encode(data ? data : "", len);
    json_object_set_new(json_object_get(resp, "files"), path, json_string(b ? b : ""));
    free(b);
}

/* A JSON string of bytes that may not be UTF-8: invalid bytes become U+FFFD. */
static json_t *lossy_string(const char *s, size_t n) {
    json_t *j = json_stringn(s ? s : "", s ? n : 0);
    if (j)
        return j;
    char *out = malloc(n * 3 + 1);
    if (!out)
        return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        json_t *probe = len && i + len <= n ? json_stringn(s + i, len) : NULL;
        if (probe) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
            json_decref(probe);
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    j = json_stringn(out, o);
    free(out);
    return j ? j : json_string("");
}

json_t *sd_sf_command_result(const sd_exec_result *r, bool *ret_ok) {
    const char *status = "Finished";
    int sig = json_is_integer(r->signal) ? (int)json_integer_value(r->signal) : 0;
    int code = json_is_integer(r->exit_code) ? (int)json_integer_value(r->exit_code) : -1;
    json_t *rc;
    if (r->reason == END_COMMAND_TIMEOUT) {
        status = "TimeLimitExceeded";
        rc = json_null();
    } else if (sig) {
        rc = json_integer(-sig);
    } else {
        rc = json_integer(code);
    }
    json_t *res =
        json_pack("{s:s,s:f,s:o,s:o,s:o}", "status", status, "execution_time", r->duration,
                  "return_code", rc, "stdout", lossy_string(r->data[0], r->len[0]), "stderr",
                  lossy_string(r->data[1], r->len[1]));
    if (r->reason == END_OOM_KILLED) {
        json_t *err = json_object_get(res, "stderr");
        char *s;
        if (asprintf(&s, "%sKilled: out of memory (memory_limit_MB)\n", json_string_value(err)) >=
            0) {
            json_object_set_new(res, "stderr", json_string(s));
            free(s);
        }
    }
    *ret_ok = r->reason == END_EXITED && code == 0;
    return res;
}

/* A command that could not start for a reason of its own (the core's -EINVAL: its program
 * missing or not executable, its file not writable): the result a shell in front of it gave,
 * 127 or 126 and the reason on stderr, so the request is Failed, not SandboxError. */
json_t *sd_sf_start_failure_result(const error_rec *err) {
    char line[sizeof(err->message) + 8];
    snprintf(line, sizeof(line), "sh: %s\n", err->message);
    return json_pack("{s:s,s:f,s:i,s:s,s:s}", "status", "Finished", "execution_time", 0.0,
                     "return_code", strstr(err->message, strerror(ENOENT)) ? 127 : 126, "stdout",
                     "", "stderr", line);
}
