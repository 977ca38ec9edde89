/* One GRPO episode as a state machine on the run's loop: tokenize the prompt, create the agent's
 * sandbox and run the task's setup, then turns of generate -> detokenize -> execute -> tokenize,
 * then hand the workspace (a tar) to a fresh grading sandbox holding the hidden tests, score it
 * by the grader's exit status, and release both sandboxes (their cost comes from the end record).
 * Sandboxes through libsbx's async API, the trainer through grpo_trainer_request. */
#include "client/grpo/runner.h"
#include "client/grpo/envserver.h"
#include "client/lib/internal.h"

#include "common/macro.h"
#include "common/timeutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

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
    S_ENV, /* a server environment's request (envserver.c) */
};

static void ep_generate(grpo_episode *ep);
static void ep_grade(grpo_episode *ep);
static void ep_grader_files_next(grpo_episode *ep);
static void ep_release_next(grpo_episode *ep);

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
    free(ep->env_state);
    free(ep->solution);
    json_decref(ep->req_body);
    sbx_sandbox_free(ep->agent); /* only when the run tore down early: else released */
    sbx_sandbox_free(ep->grader);
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
    ep->run->episode_done(ep->run, ep); /* run.c's, registered at the start */
}

/* Release the sandboxes still alive, then finish. */
static void ep_cleanup(grpo_episode *ep) {
    ep_release_next(ep);
}

static void ep_set_message(grpo_episode *ep, const char *fmt, va_list ap) {
    vsnprintf(ep->message, sizeof(ep->message), fmt, ap);
    grpo_text_for_log(ep->message);
}

/* The platform failed (docs/GRPO.md "Failure attribution"): infrastructure_failure, excluded
 * and counted. Releases what the episode holds. */
static void ep_infra(grpo_episode *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ep_infra(grpo_episode *ep, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ep_set_message(ep, fmt, ap);
    va_end(ap);
    ep->status = GRPO_EP_INFRA;
    ep->fault = "platform";
    ep_cleanup(ep);
}

/* The agent caused the failure: the episode is scored with the task's failure reward, like any
 * wrong answer, and the log says why. The caller releases the sandboxes. */
static void ep_agent_fault(grpo_episode *ep, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ep_agent_fault(grpo_episode *ep, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ep_set_message(ep, fmt, ap);
    va_end(ap);
    ep->status = GRPO_EP_SCORED;
    ep->reward = ep->task->failure_reward;
    ep->fault = "agent";
}

/* A request that could not start: why (libsbx's reason for a sandbox call, naming the option
 * that was wrong), else the errno. */
static void ep_submit_failed(grpo_episode *ep, int r, const char *why) {
    grpo_run_fail(ep->run, r, "internal", "task \"%s\": cannot start a request: %s", ep->task->id,
                  why && *why ? why : strerror(-r));
    ep_cleanup(ep);
}

/* ---- requests ---- */

static void ep_on_trainer(void *ud, const sbxi_http_result *r);
static void ep_start_create(grpo_episode *ep);

static void ep_send(grpo_episode *ep) {
    if (ep->state == S_CREATE || ep->state == S_G_CREATE)
        return ep_start_create(ep);
    if (ep->state == S_ENV)
        return ep->run->env_poll(ep);
    int r = grpo_trainer_request(ep->run, "POST", ep->req_path, json_incref(ep->req_body),
                                 ep_on_trainer, ep);
    if (r < 0)
        ep_submit_failed(ep, r, NULL);
}

/* A trainer POST, retried on transport errors and 5xx. */
static void ep_post(grpo_episode *ep, int state, const char *path, json_t *body) {
    ep->state = state;
    ep->attempts = 0;
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

void grpo_episode_hurry(grpo_episode *ep) {
    if (uv_is_active((uv_handle_t *)&ep->timer))
        uv_timer_start(&ep->timer, ep_on_timer, 0, 0);
}

/* true when the request will be retried (the caller returns); false: give up. The trainer gets
 * an exponential backoff, sandboxd (full while busy) a short jittered one. */
static bool ep_retry(grpo_episode *ep, unsigned max) {
    if (ep->attempts >= max || ep->run->fatal)
        return false;
    bool daemon = ep->state == S_CREATE || ep->state == S_G_CREATE;
    uint64_t delay = daemon ? 20u + (uint64_t)(rand() % 60) : grpo_trainer_backoff_ms(ep->attempts);
    ep->attempts++;
    uv_timer_start(&ep->timer, ep_on_timer, delay, 0);
    return true;
}

/* A trainer answer: the JSON on 2xx; NULL when retried or when the run failed. */
static json_t *ep_trainer_answer(grpo_episode *ep, const sbxi_http_result *r) {
    if (r->status / 100 == 2) {
        json_t *j = json_loadb(r->body, r->len, 0, NULL);
        if (j)
            return j;
        grpo_run_fail(ep->run, -EPROTO, "trainer_failed", "trainer %s%s: answer is not JSON",
                      ep->run->trainer_base, ep->req_path);
        ep_cleanup(ep);
        return NULL;
    }
    if ((r->status == 0 || r->status >= 500) && ep_retry(ep, ep->run->o.trainer_retries))
        return NULL;
    char buf[600];
    grpo_run_fail(ep->run, -EIO, "trainer_failed", "trainer %s%s failed after %u attempts: %s",
                  ep->run->trainer_base, ep->req_path, ep->attempts + 1,
                  grpo_trainer_error(r, buf, sizeof(buf)));
    ep_cleanup(ep);
    return NULL;
}

/* Whether a sandbox call's answer may be acted on: not while the run tears down (nothing to
 * do), nor once the run failed (the episode releases what it holds instead). */
static bool ep_live(grpo_episode *ep) {
    if (ep->run->closing)
        return false;
    if (!ep->run->fatal || ep->state == S_RELEASE || ep->state == S_RELEASE_COST)
        return true;
    ep_cleanup(ep);
    return false;
}

/* A sandbox call that succeeded: true. Else the episode is an infrastructure failure (or the
 * run failed when sandboxd cannot be reached at all). */
static bool ep_daemon_ok(grpo_episode *ep, const sbx_err *err, const char *what) {
    if (!err)
        return true;
    if (err->code == SBX_E_CONNECT) {
        grpo_run_fail(ep->run, -ECONNREFUSED, "daemon_unreachable", "%s: %s", what, err->message);
        ep_cleanup(ep);
    } else {
        ep_infra(ep, "%s: %s", what, err->message);
    }
    return false;
}

static void ep_call(grpo_episode *ep, int state, sbx_code rc) {
    ep->state = state;
    sbx_err e = {0};
    if (rc != SBX_OK) {
        sbx_async_submit_error(ep->run->sbx, &e); /* libsbx's reason, when it gave one */
        ep_submit_failed(ep, rc == SBX_E_NOMEM ? -ENOMEM : -EINVAL, e.message);
    }
}

/* ---- the agent's sandbox ---- */

static void ep_on_created(void *ud, sbx_sandbox *sb, const sbx_err *err);

static void ep_start_create(grpo_episode *ep) {
    grpo_create c;
    bool agent = ep->state != S_G_CREATE;
    grpo_episode_create_opts(ep, agent ? "agent" : "grader", &c);
    const char *env = agent && ep->task->env_server ? ep->task->env_server->create_json : NULL;
    ep_call(ep, ep->state, sbx_async_create_with(ep->run->sbx, &c.o, env, ep_on_created, ep));
}

static void ep_create(grpo_episode *ep) {
    ep->state = S_CREATE;
    if (ep->task->completion_answer) { /* a verl row: no environment, the completion is all */
        ep_lap(ep);
        return ep_generate(ep);
    }
    /* its group's template forks it; never a server environment (a fork has no processes) */
    if (!ep->task->env_server && ep->run->group_want && ep->run->group_want(ep))
        return;
    grpo_episode_create_cold(ep);
}

void grpo_episode_create_cold(grpo_episode *ep) {
    ep->state = S_CREATE;
    ep->attempts = 0;
    ep_start_create(ep);
}

static void ep_on_put(void *ud, const sbx_err *err);

static void ep_put_file(grpo_episode *ep, int state, sbx_sandbox *sb, const grpo_file *f) {
    ep_call(ep, state,
            sbx_async_write_file_mode(ep->run->sbx, sb, f->path, f->data, f->len, grpo_file_mode(f),
                                      ep_on_put, ep));
}

static void ep_on_exec(void *ud, const sbx_exec_result *res, const sbx_err *err);

/* cmd with /bin/sh -c, or argv (NULL-terminated) started directly when given. */
static void ep_exec_as(grpo_episode *ep, int state, sbx_sandbox *sb, const char *user,
                       const char *cmd, char *const *argv, const char *cwd, uint64_t timeout_ms) {
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    const char *sh[] = {cmd, NULL};
    o.argv = argv ? (const char *const *)argv : sh;
    o.shell = !argv;
    o.user = user;
    o.cwd = cwd;
    o.timeout_ms = timeout_ms;
    o.max_output = 64 * 1024;
    ep_call(ep, state, sbx_async_exec(ep->run->sbx, sb, &o, ep_on_exec, ep));
}

static void ep_exec(grpo_episode *ep, int state, sbx_sandbox *sb, const char *cmd, const char *cwd,
                    uint64_t timeout_ms) {
    ep_exec_as(ep, state, sb, NULL, cmd, NULL, cwd, timeout_ms);
}

/* Setup: files first, then commands, then the first turn. */
static void ep_setup_next(grpo_episode *ep) {
    const grpo_task *t = ep->task;
    size_t i = ep->setup_i++;
    if (i < t->n_setup_files) {
        ep_put_file(ep, S_SETUP_FILE, ep->agent, &t->setup_files[i]);
        return;
    }
    i -= t->n_setup_files;
    if (i < t->n_setup_commands) {
        ep_exec(ep, S_SETUP_CMD, ep->agent, t->setup_commands[i], "/workspace",
                t->command_timeout_ms);
        return;
    }
    ep_lap(ep);
    if (t->env_server) {
        ep->state = S_ENV;
        return ep->run->env_begin(ep); /* its port, then /reset, then ep_generate */
    }
    ep_generate(ep);
}

static void ep_on_created(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    grpo_episode *ep = ud;
    bool grader = ep->state == S_G_CREATE;
    if (sb) /* from now on released whatever happens */
        *(grader ? &ep->grader : &ep->agent) = sb;
    if (!ep_live(ep))
        return;
    if (err && err->code == SBX_E_UNAVAILABLE && ep_retry(ep, CREATE_RETRIES))
        return;
    if (!ep_daemon_ok(ep, err, grader ? "create grading sandbox" : "create sandbox"))
        return;
    if (grader && !ep->tar) /* a completion answer: nothing in the workspace */
        ep_grader_files_next(ep);
    else if (grader)
        ep_call(ep, S_G_WORKSPACE,
                sbx_async_put_archive(ep->run->sbx, ep->grader, "/workspace", ep->tar, ep->tar_len,
                                      ep_on_put, ep));
    else
        ep_setup_next(ep);
}

void grpo_episode_forked(grpo_episode *ep, sbx_sandbox *sb) {
    ep->agent = sb;
    ep->setup_i = ep->task->n_setup_files; /* written in the template; commands run here */
    ep_setup_next(ep);
}

static void on_setup_cmd(grpo_episode *ep, const sbx_exec_result *res) {
    if (res->exit_code != 0) {
        ep_infra(ep, "setup command %zu failed (exit %d)", ep->setup_i - ep->task->n_setup_files,
                 res->exit_code);
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
    ep_post(ep, S_GENERATE, "/v1/completions", b);
}

static void ep_on_archive(void *ud, const void *data, size_t len, const sbx_err *err);

static void ep_agent_done(grpo_episode *ep, const char *stop) {
    if (ep->task->env_server && !ep->env_state) { /* its /state first, for the grader */
        ep->state = S_ENV;
        return ep->run->env_finish(ep, stop);
    }
    ep->stop = stop;
    if (ep->task->completion_answer) { /* graded on its text: no sandbox to archive or release */
        if (!ep->solution && !(ep->solution = strdup("")))
            return ep_submit_failed(ep, -ENOMEM, NULL);
        return ep_release_next(ep);
    }
    ep_call(ep, S_ARCHIVE,
            sbx_async_get_archive(ep->run->sbx, ep->agent, "/workspace", ep_on_archive, ep));
}

static void on_generated(grpo_episode *ep, const sbxi_http_result *r) {
    json_t *j = ep_trainer_answer(ep, r);
    if (!j)
        return;
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *ids = json_object_get(c, "token_ids");
    json_t *lps = json_object_get(json_object_get(c, "logprobs"), "token_logprobs");
    if (!grpo_completion_check(ep->run, ids, lps, ep->task->max_completion_tokens)) {
        json_decref(j);
        return ep_cleanup(ep);
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
    ep_post(ep, S_DETOK, "/detokenize", detok);
}

static void on_detokenized(grpo_episode *ep, const sbxi_http_result *r) {
    json_t *j = ep_trainer_answer(ep, r);
    if (!j)
        return;
    const char *cmd = json_string_value(json_object_get(j, "prompt"));
    if (!cmd) {
        json_decref(j);
        grpo_run_fail(ep->run, -EPROTO, "trainer_failed",
                      "trainer %s/detokenize: answer lacks \"prompt\"", ep->run->trainer_base);
        return ep_cleanup(ep);
    }
    if (ep->task->completion_answer) { /* the text is the answer, not a command */
        ep->solution = strdup(cmd);
        json_array_append_new(ep->trace, json_pack("{s:s}", "completion", cmd));
        json_decref(j);
        ep->turn = 1;
        return ep_agent_done(ep, "max_turns");
    }
    if (grpo_text_blank(cmd)) {
        json_decref(j);
        ep_agent_done(ep, "policy_stopped");
        return;
    }
    json_array_append_new(ep->trace, json_pack("{s:s}", "command", cmd));
    if (ep->task->env_server) /* the command is the action (envserver.c) */
        ep->state = S_ENV, ep->run->env_step(ep, cmd);
    else
        ep_exec(ep, S_EXEC, ep->agent, cmd, "/workspace", ep->task->command_timeout_ms);
    json_decref(j);
}

static void observe(grpo_episode *ep, char *obs, bool turn);

static void on_executed(grpo_episode *ep, const sbx_exec_result *res) {
    char obs[GRPO_OBS_MAX + 64];
    size_t n = grpo_text_append(obs, 0, GRPO_OBS_MAX - 1, res->stdout_data, res->stdout_len);
    if (n == res->stdout_len) /* stderr after the whole of stdout, never after a cut */
        n = grpo_text_append(obs, n, GRPO_OBS_MAX - 1, res->stderr_data, res->stderr_len);
    obs[n] = 0;
    if (strcmp(res->reason, "command_timeout") == 0)
        strcat(obs, "\n[command timed out]\n");
    observe(ep, obs, true);
}

void grpo_episode_observe(grpo_episode *ep, const char *text, bool turn) {
    char obs[GRPO_OBS_MAX + 64];
    obs[grpo_text_append(obs, 0, GRPO_OBS_MAX - 1, text, strlen(text))] = 0;
    observe(ep, obs, turn);
}
/* What the policy sees next (a turn's output, or a server environment's first observation). */
static void observe(grpo_episode *ep, char *obs, bool turn) {
    ep->exec_ms += ep_lap(ep);
    grpo_text_for_log(obs); /* output that is not UTF-8 goes on as ASCII */
    if (turn) {
        ep->turn++;
        json_object_set_new(json_array_get(ep->trace, json_array_size(ep->trace) - 1), "output",
                            json_string(obs));
    }
    if (turn && ep->turn >= ep->task->max_turns) {
        ep_agent_done(ep, "max_turns");
        return;
    }
    if (grpo_text_blank(obs)) {
        ep_generate(ep);
        return;
    }
    ep_post(ep, S_TOKENIZE, "/tokenize",
            json_pack("{s:s, s:b}", "prompt", obs, "add_special_tokens", 0));
}

static bool take_tokens(grpo_episode *ep, json_t *j, grpo_ivec *dst, bool observation) {
    json_t *toks = json_object_get(j, "tokens");
    if (!grpo_tokenize_check(ep->run, toks)) {
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

static void on_tokenized(grpo_episode *ep, const sbxi_http_result *r, bool prompt) {
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

static void ep_on_archive(void *ud, const void *data, size_t len, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!ep_live(ep))
        return;
    if (err && err->code == SBX_E_TOO_LARGE) {
        ep_agent_fault(ep, "the workspace is too large to grade: %s", err->message);
        ep_cleanup(ep);
        return;
    }
    if (err) /* its programs may have ended the sandbox: the agent's fault */
        return grpo_episode_refused(ep, err, "get the workspace");
    error_rec e = {0};
    if (grpo_workspace_contain(data, len, &ep->tar, &ep->tar_len, &ep->dropped_symlinks, &e) < 0) {
        ep_infra(ep, "%s", e.message); /* the daemon's own tar: a platform fault */
        return;
    }
    ep_lap(ep);
    ep_release_next(ep); /* the agent's sandbox goes; then ep_grade */
}

static void ep_grade(grpo_episode *ep) {
    ep_lap(ep);
    ep->setup_i = 0;
    ep->state = S_G_CREATE;
    ep->attempts = 0;
    ep_start_create(ep);
}

/* The hidden tests, then the episode's own files (envserver's /state, a completion's answer, the
 * set's reward file) and the grading helper library beside them (a task's own file of the same
 * name wins), then the grader command. */
static void ep_grader_files_next(grpo_episode *ep) {
    const grpo_task *t = ep->task;
    grpo_file more[GRPO_EPISODE_FILES + GRPO_GRADELIB_FILES];
    size_t n = grpo_episode_extra_files(ep, more);
    n += grpo_gradelib_files(more + n, GRPO_GRADELIB_FILES);
    for (size_t i; (i = ep->setup_i++) < t->n_grader_files + n;) {
        bool own = i < t->n_grader_files;
        const grpo_file *f = own ? &t->grader_files[i] : &more[i - t->n_grader_files];
        if (own || !grpo_task_has_file(t, f->path))
            return ep_put_file(ep, S_G_FILE, ep->grader, f);
    }
    /* Failure injection (a test hook): the grader process crashes. */
    const char *cmd = ep->inject_failure ? "kill -SEGV $$" : t->grader_command;
    /* The grader: uid 1001, started by the sandbox's init as /bin/sh -c COMMAND (no process of
     * the agent's uid above it); its exit status is the verdict (docs/GRPO.md). Under
     * expected_output the command is the agent's own program and the verdict is the runner's
     * comparison: it runs as the agent (uid 1000) in /workspace, never as the grader. A
     * reward-rule grader never starts in /workspace: nothing there shadows its modules. */
    char *const *argv = ep->inject_failure ? NULL : t->grader_argv;
    if (t->reward_kind == GRPO_REWARD_EXPECTED_OUTPUT && !ep->inject_failure)
        ep_exec_as(ep, S_G_EXEC, ep->grader, NULL, cmd, argv, "/workspace", t->grader_timeout_ms);
    else
        ep_exec_as(ep, S_G_EXEC, ep->grader, "grader", cmd, argv, GRPO_GRADER_DIR,
                   t->grader_timeout_ms);
}

static void on_graded(grpo_episode *ep, const sbx_exec_result *res) {
    ep->grade_ms += ep_lap(ep);
    char msg[sizeof(ep->message)];
    double reward = 0;
    switch (grpo_verdict_of(ep->task, res, ep->inject_failure, &reward, msg, sizeof(msg))) {
    case GRPO_VERDICT_SCORED: /* with the grader's remark, if it made one */
        ep->status = GRPO_EP_SCORED;
        ep->reward = reward;
        snprintf(ep->message, sizeof(ep->message), "%s", msg);
        grpo_text_for_log(ep->message);
        break;
    case GRPO_VERDICT_AGENT:
        ep_agent_fault(ep, "%s", msg);
        break;
    case GRPO_VERDICT_PLATFORM:
        return ep_infra(ep, "%s", msg); /* releases the grading sandbox */
    }
    ep_release_next(ep);
}

/* ---- release: terminate, then the end record for the cost ---- */

static sbx_sandbox **releasing(grpo_episode *ep) {
    return ep->agent ? &ep->agent : &ep->grader;
}

static void ep_released(grpo_episode *ep) {
    sbx_sandbox **sb = releasing(ep);
    sbx_sandbox_free(*sb);
    *sb = NULL;
    ep_release_next(ep);
}

static void ep_on_terminated(void *ud, const sbx_err *err);

static void ep_release_next(grpo_episode *ep) {
    if (ep->agent || ep->grader) {
        ep->state = S_RELEASE;
        if (sbx_async_terminate(ep->run->sbx, *releasing(ep), ep_on_terminated, ep) != SBX_OK) {
            grpo_run_fail(ep->run, -ENOMEM, "internal", "cannot start a request");
            ep_released(ep); /* dropped: the daemon's timeouts end it */
        }
    } else if (ep->status == GRPO_EP_PENDING && !ep->run->fatal && (ep->tar || ep->solution)) {
        ep_grade(ep);
    } else {
        ep_finish(ep);
    }
}

static void ep_on_status(void *ud, const sbx_sandbox_status *st, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (ep->run->closing)
        return;
    double usd = st ? st->cost_usd : 0;
    ep->cost_usd += usd;
    ep->run->sandbox_cost += usd;
    ep_released(ep);
}

static void ep_on_terminated(void *ud, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (ep->run->closing)
        return;
    /* not found: already gone; node unavailable: gone with its node; nothing to release */
    if (err && err->code != SBX_E_NOT_FOUND && err->code != SBX_E_NODE_UNAVAILABLE)
        grpo_run_fail(ep->run, -EIO, "daemon_error", "cannot remove sandbox %s: %s",
                      sbx_sandbox_id(*releasing(ep)), err->message);
    if (err)
        return ep_released(ep);
    ep->state = S_RELEASE_COST;
    if (sbx_async_get_status(ep->run->sbx, *releasing(ep), ep_on_status, ep) != SBX_OK)
        ep_released(ep);
}

/* ---- dispatch ---- */

static void ep_on_trainer(void *ud, const sbxi_http_result *r) {
    grpo_episode *ep = ud;
    if (r->cancelled && ep->run->closing)
        return;
    if (ep->run->fatal) /* a signal's cancel too */
        return ep_cleanup(ep);
    switch (ep->state) {
    case S_PROMPT:
        return on_tokenized(ep, r, true);
    case S_GENERATE:
        return on_generated(ep, r);
    case S_DETOK:
        return on_detokenized(ep, r);
    case S_TOKENIZE:
        return on_tokenized(ep, r, false);
    }
}

static void ep_on_put(void *ud, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!ep_live(ep))
        return;
    switch (ep->state) {
    case S_SETUP_FILE:
        if (ep_daemon_ok(ep, err, "setup file"))
            ep_setup_next(ep);
        return;
    case S_G_WORKSPACE:
        if (grpo_workspace_refused(err)) {
            ep_agent_fault(ep, "the grading sandbox refused the workspace: %s", err->message);
            ep_cleanup(ep);
        } else if (ep_daemon_ok(ep, err, "put the workspace into the grading sandbox")) {
            ep_grader_files_next(ep);
        }
        return;
    case S_G_FILE:
        if (err && err->code == SBX_E_TOO_LARGE) { /* the workspace took the disk */
            ep_agent_fault(ep, "the workspace left no room for the hidden tests: %s", err->message);
            ep_cleanup(ep);
        } else if (ep_daemon_ok(ep, err, "put the hidden tests")) {
            ep_grader_files_next(ep);
        }
        return;
    }
}

/* A call on the agent's sandbox refused: the agent's fault when its own programs fill the
 * process limit (409 pids_limit) or ended the sandbox (oom_killed, pids_limit:
 * grpo_end_is_agents, asked after a 409 such as "not running"); else the platform's, with what
 * was refused (kept in ep->message while the end reason is asked). */
static void ep_on_gone(void *ud, const sbx_sandbox_status *st, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!ep_live(ep))
        return;
    char was[sizeof(ep->message)];
    snprintf(was, sizeof(was), "%s", ep->message);
    if (err)
        return ep_infra(ep, "%s; then: %s", was, err->message);
    if (!grpo_end_is_agents(st->end_reason))
        return ep_infra(ep, "%s (the sandbox is %s %s)", was, st->state, st->end_reason);
    ep_agent_fault(ep, "the agent's programs ended its sandbox (%s)", st->end_reason);
    ep_cleanup(ep);
}

void grpo_episode_refused(grpo_episode *ep, const sbx_err *err, const char *what) {
    if (strcmp(err->api_code, "pids_limit") == 0) {
        ep_agent_fault(ep, "the agent's processes fill its sandbox: %s", err->message);
        return ep_cleanup(ep);
    }
    if (err->code == SBX_E_CONFLICT && ep->agent) {
        snprintf(ep->message, sizeof(ep->message), "%s: %s", what, err->message);
        if (sbx_async_get_status(ep->run->sbx, ep->agent, ep_on_gone, ep) == SBX_OK)
            return;
    }
    ep_daemon_ok(ep, err, what);
}

static void ep_on_exec(void *ud, const sbx_exec_result *res, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!ep_live(ep))
        return;
    switch (ep->state) {
    case S_SETUP_CMD:
        if (ep_daemon_ok(ep, err, "setup command"))
            on_setup_cmd(ep, res);
        return;
    case S_EXEC:
        return err ? grpo_episode_refused(ep, err, "exec") : on_executed(ep, res);
    case S_G_EXEC:
        if (ep_daemon_ok(ep, err, "grader exec"))
            on_graded(ep, res);
        return;
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
    if (t->prompt_messages) /* vLLM's chat form: the model's chat template renders them */
        return ep_post(ep, S_PROMPT, "/tokenize",
                       json_pack("{s:O, s:b, s:b}", "messages", t->prompt_messages,
                                 "add_generation_prompt", 1, "add_special_tokens", 0));
    ep_post(ep, S_PROMPT, "/tokenize",
            json_pack("{s:s, s:b}", "prompt", t->prompt_text, "add_special_tokens", 0));
}

/* ---- for envserver.c ---- */

bool grpo_episode_live(grpo_episode *ep) {
    return ep_live(ep);
}
void grpo_episode_infra(grpo_episode *ep, const char *msg) {
    ep_infra(ep, "%s", msg);
}

void grpo_episode_later(grpo_episode *ep, uint64_t ms) {
    ep->state = S_ENV;
    uv_timer_start(&ep->timer, ep_on_timer, ms, 0);
}
void grpo_episode_agent_done(grpo_episode *ep, const char *stop) {
    ep_agent_done(ep, stop);
}
