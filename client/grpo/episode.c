/* One GRPO episode as a state machine on the run's loop: tokenize the prompt, create the agent's
 * sandbox and run the task's setup, then turns of generate -> detokenize -> execute -> tokenize,
 * then hand the workspace (a tar) to a fresh grading sandbox holding the hidden tests, score it
 * by the grader's exit status, and release both sandboxes (their cost comes from the end record).
 */
#include "client/grpo/runner.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define OBS_MAX 4096
/* sandboxd answers 503 while it is full or starting many sandboxes at once: retry soon, with
 * jitter, for about a minute before calling it an infrastructure failure. */
#define CREATE_RETRIES 1000

enum {
    S_PROMPT,
    S_CREATE,
    S_SETUP_FILE,
    S_SETUP_CMD,
    S_GENERATE,
    S_DETOK,
    S_EXEC,
    S_TOKENIZE,
    S_ARCHIVE,
    S_G_CREATE,
    S_G_WORKSPACE,
    S_G_FILE,
    S_G_EXEC,
    S_RELEASE,
    S_RELEASE_COST,
    S_DONE,
};

static void ep_on_resp(void *ud, const grpo_http_resp *r);
static void ep_generate(grpo_episode *ep);
static void ep_grade(grpo_episode *ep);
static void ep_release_next(grpo_episode *ep);

int grpo_ivec_push(grpo_ivec *a, int x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int *nv = realloc(a->v, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        a->v = nv, a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

int grpo_dvec_push(grpo_dvec *a, double x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        double *nv = realloc(a->v, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        a->v = nv, a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

grpo_episode *grpo_episode_new(grpo_run *run, const grpo_task *t, size_t group, size_t index) {
    grpo_episode *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    ep->run = run;
    ep->task = t;
    ep->group = group;
    ep->index = index;
    ep->trace = json_array();
    uv_timer_init(run->loop, &ep->timer);
    ep->timer.data = ep;
    return ep;
}

static void ep_closed(uv_handle_t *h) {
    grpo_episode *ep = h->data;
    free(ep->prompt.v);
    free(ep->completion.v);
    free(ep->mask.v);
    free(ep->logprobs.v);
    json_decref(ep->trace);
    free(ep->tar);
    json_decref(ep->req_body);
    free(ep);
}

void grpo_episode_free(grpo_episode *ep) {
    if (!ep)
        return;
    uv_timer_stop(&ep->timer);
    uv_close((uv_handle_t *)&ep->timer, ep_closed);
}

static uint64_t ep_lap(grpo_episode *ep) {
    uint64_t now = now_mono_ms(), d = now - ep->t_mark;
    ep->t_mark = now;
    return d;
}

static void ep_finish(grpo_episode *ep) {
    ep->state = S_DONE;
    ep->t_end = now_mono_ms();
    if (ep->status == GRPO_EP_PENDING)
        ep->status = GRPO_EP_ABORTED;
    grpo_run_episode_done(ep->run, ep);
}

/* Release the sandboxes still alive, then finish. */
static void ep_cleanup(grpo_episode *ep) {
    ep_release_next(ep);
}

static void ep_infra(grpo_episode *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ep_infra(grpo_episode *ep, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ep->message, sizeof(ep->message), fmt, ap);
    va_end(ap);
    ep->status = GRPO_EP_INFRA;
    ep_cleanup(ep);
}

static void ep_submit_failed(grpo_episode *ep, int r) {
    grpo_run_fail(ep->run, r, "internal", "cannot start a request: %s", strerror(-r));
    ep_cleanup(ep);
}

/* ---- requests ---- */

static void ep_daemon(grpo_episode *ep, int state, const char *method, const char *path,
                      json_t *body, uint64_t timeout_ms) {
    ep->state = state;
    int r = grpo_daemon_request(ep->run, method, path, body, timeout_ms, ep_on_resp, ep);
    if (r < 0)
        ep_submit_failed(ep, r);
}

static void ep_daemon_raw(grpo_episode *ep, int state, const char *path, const char *ctype,
                          const void *data, size_t len) {
    ep->state = state;
    int r = grpo_daemon_request_raw(ep->run, "PUT", path, ctype, data, len, ep_on_resp, ep);
    if (r < 0)
        ep_submit_failed(ep, r);
}

static void ep_send(grpo_episode *ep) {
    json_t *body = json_incref(ep->req_body);
    int r = ep->req_daemon
                ? grpo_daemon_request(ep->run, "POST", ep->req_path, body, 60000, ep_on_resp, ep)
                : grpo_trainer_request(ep->run, "POST", ep->req_path, body, ep_on_resp, ep);
    if (r < 0)
        ep_submit_failed(ep, r);
}

/* A POST that is retried on transport errors and 5xx (trainer) or 503 (daemon create). */
static void ep_post(grpo_episode *ep, int state, bool daemon, const char *path, json_t *body) {
    ep->state = state;
    ep->attempts = 0;
    ep->req_daemon = daemon;
    snprintf(ep->req_path, sizeof(ep->req_path), "%s", path);
    json_decref(ep->req_body);
    ep->req_body = body;
    ep_send(ep);
}

static void ep_on_timer(uv_timer_t *t) {
    grpo_episode *ep = t->data;
    if (ep->run->fatal)
        ep_cleanup(ep);
    else
        ep_send(ep);
}

/* true when the request will be retried (the caller returns); false: give up. The trainer gets
 * an exponential backoff, sandboxd (503 while busy) a short jittered one. */
static bool ep_retry(grpo_episode *ep, unsigned max) {
    if (ep->attempts >= max || ep->run->fatal)
        return false;
    uint64_t delay = ep->req_daemon ? 20u + (uint64_t)(rand() % 60) : 250u << MIN(ep->attempts, 4u);
    ep->attempts++;
    uv_timer_start(&ep->timer, ep_on_timer, delay, 0);
    return true;
}

static json_t *resp_json(const grpo_http_resp *r) {
    return json_loadb(r->body, r->len, 0, NULL);
}

static const char *resp_error(const grpo_http_resp *r, char *buf, size_t len) {
    if (r->transport_error)
        return r->error;
    json_t *j = resp_json(r);
    const char *m = json_string_value(json_object_get(j, "message"));
    if (!m)
        m = json_string_value(json_object_get(j, "detail"));
    snprintf(buf, len, "HTTP %ld%s%s", r->status, m ? ": " : "", m ? m : "");
    json_decref(j);
    return buf;
}

/* A trainer answer: the JSON on 2xx; NULL when retried or when the run failed. */
static json_t *ep_trainer_answer(grpo_episode *ep, const grpo_http_resp *r) {
    if (!r->transport_error && r->status / 100 == 2) {
        json_t *j = resp_json(r);
        if (j)
            return j;
        grpo_run_fail(ep->run, -EPROTO, "trainer_failed", "trainer %s%s: answer is not JSON",
                      ep->run->trainer_base, ep->req_path);
        ep_cleanup(ep);
        return NULL;
    }
    if ((r->transport_error || r->status >= 500) && ep_retry(ep, ep->run->o.trainer_retries))
        return NULL;
    char buf[600];
    grpo_run_fail(ep->run, -EIO, "trainer_failed", "trainer %s%s failed after %u attempts: %s",
                  ep->run->trainer_base, ep->req_path, ep->attempts + 1,
                  resp_error(r, buf, sizeof(buf)));
    ep_cleanup(ep);
    return NULL;
}

/* A daemon answer with the expected status: true. Else the episode is an infrastructure
 * failure (or the run failed when the daemon cannot be reached at all). */
static bool ep_daemon_ok(grpo_episode *ep, const grpo_http_resp *r, long want, const char *what) {
    if (!r->transport_error && r->status == want)
        return true;
    char buf[600];
    if (r->transport_error) {
        grpo_run_fail(ep->run, -ECONNREFUSED, "daemon_unreachable", "sandboxd %s: %s: %s",
                      ep->run->sock[0] ? ep->run->sock : ep->run->daemon_base, what, r->error);
        ep_cleanup(ep);
    } else {
        ep_infra(ep, "%s: %s", what, resp_error(r, buf, sizeof(buf)));
    }
    return false;
}

/* ---- the agent's sandbox ---- */

static json_t *labels(const grpo_episode *ep, const char *role) {
    return json_pack("{s:s, s:s, s:s}", "grpo_run", ep->run->run_id, "grpo_role", role, "grpo_task",
                     ep->task->id);
}

static json_t *create_body(const grpo_episode *ep, bool grader) {
    json_t *b = json_deep_copy(ep->task->limits);
    if (!json_object_get(b, "timeout"))
        json_object_set_new(b, "timeout", json_string("15m"));
    if (!json_object_get(b, "idle_timeout"))
        json_object_set_new(b, "idle_timeout", json_string("5m"));
    if (ep->task->image)
        json_object_set_new(b, "image", json_string(ep->task->image));
    if (!grader && ep->task->network)
        json_object_set(b, "network", ep->task->network);
    else
        json_object_set_new(b, "network", json_string("none"));
    json_object_set_new(b, "labels", labels(ep, grader ? "grader" : "agent"));
    return b;
}

static void ep_create(grpo_episode *ep) {
    ep->state = S_CREATE;
    if (grpo_group_want(ep)) /* its group's template forks it (group.c) */
        return;
    ep_post(ep, S_CREATE, true, "/v1/sandboxes", create_body(ep, false));
}

json_t *grpo_episode_create_body(const grpo_episode *ep) {
    json_t *b = create_body(ep, false);
    json_object_set_new(b, "labels", labels(ep, "template"));
    return b;
}

void grpo_episode_create_cold(grpo_episode *ep) {
    ep_post(ep, S_CREATE, true, "/v1/sandboxes", create_body(ep, false));
}

/* Percent-encode a path for a query string (unreserved characters and '/' stay). */
static char *path_escape(const char *s) {
    char *out = malloc(strlen(s) * 3 + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = 0;
    return out;
}

static void ep_put_file(grpo_episode *ep, int state, const char *id, const grpo_file *f) {
    char path[1024];
    _cleanup_free_ char *esc = path_escape(f->path);
    bool exe = f->len > 2 && f->data[0] == '#' && f->data[1] == '!';
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=%s%s", id, esc ? esc : "",
             exe ? "&mode=0755" : "");
    ep_daemon_raw(ep, state, path, "application/octet-stream", f->data, f->len);
}

static json_t *exec_body(const char *cmd, const char *cwd, uint64_t timeout_ms) {
    return json_pack("{s:[s], s:b, s:s, s:f, s:s}", "argv", cmd, "shell", 1, "cwd", cwd, "timeout",
                     (double)timeout_ms / 1000.0, "max_output", "64Ki");
}

static void ep_exec(grpo_episode *ep, int state, const char *id, const char *cmd, const char *cwd,
                    uint64_t timeout_ms) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
    ep_daemon(ep, state, "POST", path, exec_body(cmd, cwd, timeout_ms), timeout_ms + 30000);
}

/* Setup: files first, then commands, then the first turn. */
static void ep_setup_next(grpo_episode *ep) {
    const grpo_task *t = ep->task;
    size_t i = ep->setup_i++;
    if (i < t->n_setup_files) {
        ep_put_file(ep, S_SETUP_FILE, ep->agent_id, &t->setup_files[i]);
        return;
    }
    i -= t->n_setup_files;
    if (i < t->n_setup_commands) {
        ep_exec(ep, S_SETUP_CMD, ep->agent_id, t->setup_commands[i], "/workspace",
                t->command_timeout_ms);
        return;
    }
    ep_lap(ep);
    ep_generate(ep);
}

static void on_created(grpo_episode *ep, const grpo_http_resp *r, bool grader) {
    if (!r->transport_error && r->status == 503 && ep_retry(ep, CREATE_RETRIES))
        return;
    if (!ep_daemon_ok(ep, r, 201, grader ? "create grading sandbox" : "create sandbox"))
        return;
    json_t *j = resp_json(r);
    const char *id = json_string_value(json_object_get(j, "id"));
    if (!id || strlen(id) >= sizeof(ep->agent_id)) {
        json_decref(j);
        ep_infra(ep, "create sandbox: no id in the answer");
        return;
    }
    snprintf(grader ? ep->grader_id : ep->agent_id, sizeof(ep->agent_id), "%s", id);
    *(grader ? &ep->grader_live : &ep->agent_live) = true;
    json_decref(j);
    if (grader) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/workspace", ep->grader_id);
        ep_daemon_raw(ep, S_G_WORKSPACE, path, "application/x-tar", ep->tar, ep->tar_len);
    } else {
        ep_setup_next(ep);
    }
}

void grpo_episode_forked(grpo_episode *ep, const char *id) {
    snprintf(ep->agent_id, sizeof(ep->agent_id), "%s", id);
    ep->agent_live = true;
    ep->setup_i = ep->task->n_setup_files; /* written in the template; commands run here */
    ep_setup_next(ep);
}

char *grpo_file_put_path(const char *id, const grpo_file *f) {
    _cleanup_free_ char *esc = path_escape(f->path);
    bool exe = f->len > 2 && f->data[0] == '#' && f->data[1] == '!';
    char *out = NULL;
    if (!esc ||
        asprintf(&out, "/v1/sandboxes/%s/files?path=%s%s", id, esc, exe ? "&mode=0755" : "") < 0)
        return NULL;
    return out;
}

static void on_setup_cmd(grpo_episode *ep, const grpo_http_resp *r) {
    if (!ep_daemon_ok(ep, r, 200, "setup command"))
        return;
    json_t *j = resp_json(r);
    json_t *code = json_object_get(j, "exit_code");
    long long c = json_is_integer(code) ? json_integer_value(code) : -1;
    json_decref(j);
    if (c != 0) {
        ep_infra(ep, "setup command %zu failed (exit %lld)", ep->setup_i - ep->task->n_setup_files,
                 c);
        return;
    }
    ep_setup_next(ep);
}

/* ---- turns ---- */

static void ep_generate(grpo_episode *ep) {
    json_t *ids = json_array();
    for (size_t i = 0; i < ep->prompt.n; i++)
        json_array_append_new(ids, json_integer(ep->prompt.v[i]));
    for (size_t i = 0; i < ep->completion.n; i++)
        json_array_append_new(ids, json_integer(ep->completion.v[i]));
    json_t *b = json_pack("{s:o, s:i, s:f, s:i, s:b}", "prompt", ids, "max_tokens",
                          (json_int_t)ep->task->max_completion_tokens, "temperature",
                          ep->run->o.temperature, "logprobs", 0, "return_token_ids", 1);
    if (ep->run->o.model)
        json_object_set_new(b, "model", json_string(ep->run->o.model));
    ep_post(ep, S_GENERATE, false, "/v1/completions", b);
}

static void ep_agent_done(grpo_episode *ep, const char *stop) {
    ep->stop = stop;
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/workspace", ep->agent_id);
    ep_daemon(ep, S_ARCHIVE, "GET", path, NULL, 120000);
}

static void on_generated(grpo_episode *ep, const grpo_http_resp *r) {
    json_t *j = ep_trainer_answer(ep, r);
    if (!j)
        return;
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *ids = json_object_get(c, "token_ids");
    json_t *lps = json_object_get(json_object_get(c, "logprobs"), "token_logprobs");
    if (!json_is_array(ids) || !json_is_array(lps) ||
        json_array_size(ids) != json_array_size(lps)) {
        json_decref(j);
        grpo_run_fail(ep->run, -EPROTO, "trainer_failed",
                      "trainer %s/v1/completions: answer "
                      "lacks choices[0].token_ids / logprobs.token_logprobs of equal length",
                      ep->run->trainer_base);
        ep_cleanup(ep);
        return;
    }
    size_t n = json_array_size(ids);
    json_t *detok = json_pack("{s:O}", "tokens", ids);
    for (size_t i = 0; i < n; i++) {
        grpo_ivec_push(&ep->completion, (int)json_integer_value(json_array_get(ids, i)));
        grpo_ivec_push(&ep->mask, 1);
        grpo_dvec_push(&ep->logprobs, json_number_value(json_array_get(lps, i)));
    }
    json_decref(j);
    ep->gen_ms += ep_lap(ep);
    if (n == 0) {
        json_decref(detok);
        ep_agent_done(ep, "policy_stopped");
        return;
    }
    ep_post(ep, S_DETOK, false, "/detokenize", detok);
}

static bool blank(const char *s) {
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r')
            return false;
    return true;
}

static void on_detokenized(grpo_episode *ep, const grpo_http_resp *r) {
    json_t *j = ep_trainer_answer(ep, r);
    if (!j)
        return;
    const char *cmd = json_string_value(json_object_get(j, "prompt"));
    if (blank(cmd)) {
        json_decref(j);
        ep_agent_done(ep, "policy_stopped");
        return;
    }
    json_array_append_new(ep->trace, json_pack("{s:s}", "command", cmd));
    ep_exec(ep, S_EXEC, ep->agent_id, cmd, "/workspace", ep->task->command_timeout_ms);
    json_decref(j);
}

static void on_executed(grpo_episode *ep, const grpo_http_resp *r) {
    if (!ep_daemon_ok(ep, r, 200, "exec"))
        return;
    ep->exec_ms += ep_lap(ep);
    ep->turn++;
    json_t *j = resp_json(r);
    char obs[OBS_MAX + 64];
    snprintf(obs, OBS_MAX, "%s%s", json_string_value(json_object_get(j, "stdout")) ?: "",
             json_string_value(json_object_get(j, "stderr")) ?: "");
    if (strcmp(json_string_value(json_object_get(j, "reason")) ?: "", "command_timeout") == 0)
        strcat(obs, "\n[command timed out]\n");
    json_object_set_new(json_array_get(ep->trace, json_array_size(ep->trace) - 1), "output",
                        json_string(obs));
    json_decref(j);
    if (ep->turn >= ep->task->max_turns) {
        ep_agent_done(ep, "max_turns");
        return;
    }
    if (blank(obs)) {
        ep_generate(ep);
        return;
    }
    ep_post(ep, S_TOKENIZE, false, "/tokenize",
            json_pack("{s:s, s:b}", "prompt", obs, "add_special_tokens", 0));
}

static bool take_tokens(grpo_episode *ep, json_t *j, grpo_ivec *dst, bool observation) {
    json_t *toks = json_object_get(j, "tokens");
    if (!json_is_array(toks)) {
        grpo_run_fail(ep->run, -EPROTO, "trainer_failed",
                      "trainer %s/tokenize: answer lacks \"tokens\"", ep->run->trainer_base);
        ep_cleanup(ep);
        return false;
    }
    for (size_t i = 0; i < json_array_size(toks); i++) {
        grpo_ivec_push(dst, (int)json_integer_value(json_array_get(toks, i)));
        if (observation) {
            grpo_ivec_push(&ep->mask, 0);
            grpo_dvec_push(&ep->logprobs, 0);
        }
    }
    return true;
}

static void on_tokenized(grpo_episode *ep, const grpo_http_resp *r, bool prompt) {
    json_t *j = ep_trainer_answer(ep, r);
    if (!j)
        return;
    bool ok = take_tokens(ep, j, prompt ? &ep->prompt : &ep->completion, !prompt);
    json_decref(j);
    if (!ok)
        return;
    if (prompt)
        ep_create(ep);
    else
        ep_generate(ep);
}

/* ---- grading ---- */

static void on_archive(grpo_episode *ep, const grpo_http_resp *r) {
    if (!ep_daemon_ok(ep, r, 200, "get the workspace"))
        return;
    ep->tar = malloc(r->len ? r->len : 1);
    if (!ep->tar) {
        ep_infra(ep, "out of memory for the workspace");
        return;
    }
    memcpy(ep->tar, r->body, r->len);
    ep->tar_len = r->len;
    ep_lap(ep);
    ep_release_next(ep); /* the agent's sandbox goes; then ep_grade */
}

static void ep_grade(grpo_episode *ep) {
    ep_lap(ep);
    ep->setup_i = 0;
    ep_post(ep, S_G_CREATE, true, "/v1/sandboxes", create_body(ep, true));
}

static void ep_grader_files_next(grpo_episode *ep) {
    const grpo_task *t = ep->task;
    size_t i = ep->setup_i++;
    if (i < t->n_grader_files) {
        ep_put_file(ep, S_G_FILE, ep->grader_id, &t->grader_files[i]);
        return;
    }
    /* Failure injection (a test hook): the grader process crashes. */
    const char *cmd = ep->inject_failure ? "kill -SEGV $$" : t->grader_command;
    ep_exec(ep, S_G_EXEC, ep->grader_id, cmd, t->n_grader_files ? GRPO_GRADER_DIR : "/workspace",
            t->grader_timeout_ms);
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

static void on_graded(grpo_episode *ep, const grpo_http_resp *r) {
    if (!ep_daemon_ok(ep, r, 200, "grader exec"))
        return;
    ep->grade_ms += ep_lap(ep);
    json_t *j = resp_json(r);
    const char *reason = json_string_value(json_object_get(j, "reason")) ?: "?";
    json_t *code = json_object_get(j, "exit_code");
    int c = json_is_integer(code) ? (int)json_integer_value(code) : -1;
    const grpo_task *t = ep->task;
    if (strcmp(reason, "exited") != 0) {
        snprintf(ep->message, sizeof(ep->message), "grader failed: %s (signal %lld)", reason,
                 (long long)json_integer_value(json_object_get(j, "signal")));
        ep->status = GRPO_EP_INFRA;
    } else if (t->reward_kind == GRPO_REWARD_EXPECTED_OUTPUT) {
        _cleanup_free_ char *out = strdup(json_string_value(json_object_get(j, "stdout")) ?: "");
        _cleanup_free_ char *want = strdup(t->expected_output);
        ep->reward = out && want && strcmp(trim(out), trim(want)) == 0 ? 1.0 : 0.0;
        ep->status = GRPO_EP_SCORED;
    } else if (grpo_task_exit_reward(t, c, &ep->reward)) {
        ep->status = GRPO_EP_SCORED;
    } else {
        snprintf(ep->message, sizeof(ep->message), "grader failed: exit code %d: %.160s", c,
                 json_string_value(json_object_get(j, "stderr")) ?: "");
        ep->status = GRPO_EP_INFRA;
    }
    json_decref(j);
    ep_release_next(ep);
}

/* ---- release: DELETE, then GET the end record for the cost ---- */

static const char *releasing_id(grpo_episode *ep) {
    return ep->agent_live ? ep->agent_id : ep->grader_id;
}

static void ep_release_next(grpo_episode *ep) {
    if (ep->agent_live || ep->grader_live) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", releasing_id(ep));
        ep_daemon(ep, S_RELEASE, "DELETE", path, NULL, 60000);
    } else if (ep->status == GRPO_EP_PENDING && !ep->run->fatal && ep->tar) {
        ep_grade(ep);
    } else {
        ep_finish(ep);
    }
}

static void on_released(grpo_episode *ep, const grpo_http_resp *r, bool cost) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", releasing_id(ep));
    if (!cost) {
        if (!r->transport_error && r->status == 404) { /* already gone: nothing to release */
            *(ep->agent_live ? &ep->agent_live : &ep->grader_live) = false;
            ep_release_next(ep);
            return;
        }
        if (r->transport_error || r->status / 100 != 2) {
            char buf[600];
            grpo_run_fail(ep->run, -EIO, "daemon_error", "cannot remove sandbox %s: %s",
                          releasing_id(ep), resp_error(r, buf, sizeof(buf)));
            *(ep->agent_live ? &ep->agent_live : &ep->grader_live) = false;
            ep_release_next(ep);
            return;
        }
        ep_daemon(ep, S_RELEASE_COST, "GET", path, NULL, 30000);
        return;
    }
    json_t *j = r->transport_error ? NULL : resp_json(r);
    json_t *end = json_object_get(j, "end");
    json_t *c = json_object_get(end, "cost_usd");
    if (!json_is_number(c))
        c = json_object_get(j, "cost_usd");
    double usd = json_is_number(c) ? json_number_value(c) : 0;
    ep->cost_usd += usd;
    ep->run->sandbox_cost += usd;
    json_decref(j);
    *(ep->agent_live ? &ep->agent_live : &ep->grader_live) = false;
    ep_release_next(ep);
}

/* ---- dispatch ---- */

static void ep_on_resp(void *ud, const grpo_http_resp *r) {
    grpo_episode *ep = ud;
    bool releasing = ep->state == S_RELEASE || ep->state == S_RELEASE_COST;
    if (ep->run->fatal && !releasing) {
        /* A create that succeeded still has to be released. */
        if ((ep->state == S_CREATE || ep->state == S_G_CREATE) && !r->transport_error &&
            r->status == 201) {
            json_t *j = resp_json(r);
            const char *id = json_string_value(json_object_get(j, "id"));
            if (id && strlen(id) < sizeof(ep->agent_id)) {
                bool g = ep->state == S_G_CREATE;
                snprintf(g ? ep->grader_id : ep->agent_id, sizeof(ep->agent_id), "%s", id);
                *(g ? &ep->grader_live : &ep->agent_live) = true;
            }
            json_decref(j);
        }
        ep_cleanup(ep);
        return;
    }
    switch (ep->state) {
    case S_PROMPT:
        return on_tokenized(ep, r, true);
    case S_CREATE:
        return on_created(ep, r, false);
    case S_SETUP_FILE:
        if (ep_daemon_ok(ep, r, 204, "setup file"))
            ep_setup_next(ep);
        return;
    case S_SETUP_CMD:
        return on_setup_cmd(ep, r);
    case S_GENERATE:
        return on_generated(ep, r);
    case S_DETOK:
        return on_detokenized(ep, r);
    case S_EXEC:
        return on_executed(ep, r);
    case S_TOKENIZE:
        return on_tokenized(ep, r, false);
    case S_ARCHIVE:
        return on_archive(ep, r);
    case S_G_CREATE:
        return on_created(ep, r, true);
    case S_G_WORKSPACE:
        if (ep_daemon_ok(ep, r, 204, "put the workspace into the grading sandbox"))
            ep_grader_files_next(ep);
        return;
    case S_G_FILE:
        if (ep_daemon_ok(ep, r, 204, "put the hidden tests"))
            ep_grader_files_next(ep);
        return;
    case S_G_EXEC:
        return on_graded(ep, r);
    case S_RELEASE:
        return on_released(ep, r, false);
    case S_RELEASE_COST:
        return on_released(ep, r, true);
    }
}

void grpo_episode_start(grpo_episode *ep) {
    ep->t_start = ep->t_mark = now_mono_ms();
    ep->policy_version = ep->run->policy_version;
    const grpo_task *t = ep->task;
    if (t->prompt_ids) {
        for (size_t i = 0; i < t->n_prompt_ids; i++)
            grpo_ivec_push(&ep->prompt, t->prompt_ids[i]);
        ep_create(ep);
        return;
    }
    ep_post(ep, S_PROMPT, false, "/tokenize",
            json_pack("{s:s, s:b}", "prompt", t->prompt_text, "add_special_tokens", 0));
}

static json_t *ids_json(const int *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* The episode as the trainer gets it (only scored episodes of training groups). */
json_t *grpo_episode_train_json(const grpo_episode *ep) {
    json_t *lp = json_array();
    for (size_t i = 0; i < ep->logprobs.n; i++)
        json_array_append_new(lp, json_real(ep->logprobs.v[i]));
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:f, s:f, s:I}", "task_id", ep->task->id,
                     "prompt_ids", ids_json(ep->prompt.v, ep->prompt.n), "completion_ids",
                     ids_json(ep->completion.v, ep->completion.n), "loss_mask",
                     ids_json(ep->mask.v, ep->mask.n), "sampling_logprobs", lp, "reward",
                     ep->reward, "advantage", ep->advantage, "policy_version",
                     (json_int_t)ep->policy_version);
}

static const char *status_name(grpo_ep_status s) {
    switch (s) {
    case GRPO_EP_SCORED:
        return "scored";
    case GRPO_EP_INFRA:
        return "infrastructure_failure";
    case GRPO_EP_ABORTED:
        return "aborted";
    default:
        return "pending";
    }
}

json_t *grpo_episode_log(const grpo_episode *ep) {
    bool scored = ep->status == GRPO_EP_SCORED;
    json_t *o = json_pack(
        "{s:I, s:s, s:I, s:I, s:s, s:o, s:o, s:b, s:I, s:s?, s:I, s:{s:f, s:f, s:f, s:f}, "
        "s:f, s:I, s:O}",
        "step", (json_int_t)ep->run->step, "task", ep->task->id, "group", (json_int_t)ep->group,
        "index", (json_int_t)ep->index, "status", status_name(ep->status), "reward",
        scored ? json_real(ep->reward) : json_null(), "advantage",
        scored ? json_real(ep->advantage) : json_null(), "trained", ep->trained, "turns",
        (json_int_t)ep->turn, "stop", ep->stop, "completion_tokens", (json_int_t)ep->completion.n,
        "durations", "total", (double)(ep->t_end - ep->t_start) / 1000.0, "generate",
        (double)ep->gen_ms / 1000.0, "execute", (double)ep->exec_ms / 1000.0, "grade",
        (double)ep->grade_ms / 1000.0, "cost_usd", ep->cost_usd, "policy_version",
        (json_int_t)ep->policy_version, "trace", ep->trace);
    if (o && ep->message[0])
        json_object_set_new(o, "message", json_string(ep->message));
    return o;
}
