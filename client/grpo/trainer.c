/* The trainer's HTTP for the run and its episodes: one JSON request through libsbx's internal
 * HTTP engine, its failure as one line, its retries' backoff, and the check of /tokenize's and
 * /v1/completions' answers (which stops the run through runstate.c's grpo_run_fail, the only
 * other file of the folder it calls). */
#include "client/grpo/runner.h"
#include "client/lib/internal.h"

#include "common/macro.h"

#include <math.h>
#include <stdint.h>
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

/* A token id the trainer sent: an integer in [0, INT32_MAX]. */
static bool token_id_ok(json_t *id) {
    return json_is_integer(id) && json_integer_value(id) >= 0 &&
           json_integer_value(id) <= INT32_MAX;
}

uint64_t grpo_trainer_backoff_ms(unsigned attempts) {
    return 250u << MIN(attempts, 4u);
}

/* What is wrong with a completion's token_ids and token_logprobs (NULL: nothing). */
static const char *completion_wrong(json_t *ids, json_t *lps, size_t max_tokens, char *buf,
                                    size_t len) {
    if (!json_is_array(ids) || !json_is_array(lps) || json_array_size(ids) != json_array_size(lps))
        return "lacks choices[0].token_ids / logprobs.token_logprobs of equal length";
    size_t n = json_array_size(ids);
    if (n > max_tokens) {
        snprintf(buf, len, "has %zu tokens, more than max_tokens (%zu)", n, max_tokens);
        return buf;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *id = json_array_get(ids, i), *lp = json_array_get(lps, i);
        if (!token_id_ok(id)) {
            snprintf(buf, len, "token_ids[%zu] is not an integer in [0, %d]", i, INT32_MAX);
            return buf;
        }
        if (!json_is_number(lp) || !isfinite(json_number_value(lp)) || json_number_value(lp) > 0) {
            snprintf(buf, len, "token_logprobs[%zu] is not a finite number <= 0", i);
            return buf;
        }
    }
    return NULL;
}

bool grpo_tokenize_check(grpo_run *run, json_t *toks) {
    char buf[96] = "lacks \"tokens\"";
    bool ok = json_is_array(toks);
    for (size_t i = 0; ok && i < json_array_size(toks); i++) {
        if (!token_id_ok(json_array_get(toks, i))) {
            snprintf(buf, sizeof(buf), "tokens[%zu] is not an integer in [0, %d]", i, INT32_MAX);
            ok = false;
        }
    }
    if (!ok)
        grpo_run_fail(run, -EPROTO, "trainer_failed", "trainer %s/tokenize: answer %s",
                      run->trainer_base, buf);
    return ok;
}

bool grpo_completion_check(grpo_run *run, json_t *ids, json_t *lps, size_t max_tokens) {
    char buf[128];
    const char *wrong = completion_wrong(ids, lps, max_tokens, buf, sizeof(buf));
    if (wrong)
        grpo_run_fail(run, -EPROTO, "trainer_failed", "trainer %s/v1/completions: answer %s",
                      run->trainer_base, wrong);
    return !wrong;
}
