/* The GRPO run (sbx_grpo_run): steps of concurrent episodes on one libuv loop, group statistics,
 * the training plane (GET /v1/state, POST /v1/train_step with retries), the cost cap, signals.
 * Sandboxes go through libsbx's async API (a host list, placement across daemons); the trainer
 * through libsbx's internal HTTP engine. */
#include "client/grpo/math.h"
#include "client/grpo/runner.h"
#include "client/grpo/verlset.h"
#include "client/lib/internal.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "common/timeutil.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define GRPO_MAX_GROUP 1024

static void run_next_step(grpo_run *run);
static void run_finish(grpo_run *run);

void sbx_grpo_opts_init(sbx_grpo_opts *o) {
    memset(o, 0, sizeof(*o));
    o->split = "train";
    o->out_dir = "grpo-out";
    o->trainer_url = "http://127.0.0.1:8000";
    o->steps = 10;
    o->tasks_per_step = 16;
    o->group_size = 8;
    o->max_inflight = 64;
    o->temperature = 1.0;
    o->gpus = 1;
    o->trainer_retries = 3;
    o->reward_timeout_s = 10;
}

/* ---- progress ---- */

static void step_stats(grpo_run *run, double *mean, double *pass, size_t *scored) {
    double sum = 0;
    size_t n = 0, passes = 0;
    for (size_t i = 0; i < run->n_eps; i++) {
        grpo_episode *ep = run->eps[i];
        if (ep->status == GRPO_EP_SCORED) {
            sum += ep->reward;
            passes += ep->reward >= 1.0;
            n++;
        }
    }
    *mean = n ? sum / (double)n : 0;
    *pass = n ? (double)passes / (double)n : 0;
    if (scored)
        *scored = n;
}

static void run_progress(grpo_run *run, bool finished) {
    if (!run->o.on_progress)
        return;
    sbx_grpo_progress p = {
        .step = run->step,
        .steps = run->o.steps,
        .episodes_done = run->done,
        .episodes_inflight = run->inflight,
        .episodes_total = run->n_eps,
        .infra_failures = run->infra,
        .step_seconds = (double)(now_mono_ms() - run->t_step_start) / 1000.0,
        .cost_usd = grpo_run_cost(run),
        .step_finished = finished,
    };
    step_stats(run, &p.reward_mean, &p.pass_rate, NULL);
    run->o.on_progress(run->o.userdata, &p);
}

/* ---- episodes ---- */

static void run_launch(grpo_run *run) {
    while (!run->fatal && !run->cost_stop && run->next_ep < run->n_eps &&
           run->inflight < run->o.max_inflight) {
        grpo_episode *ep = run->eps[run->next_ep++];
        run->inflight++;
        run->episodes++;
        grpo_episode_start(ep);
    }
    for (size_t i = 0; (run->fatal || run->cost_stop) && i < run->n_groups; i++)
        grpo_group_stop(run->groups[i]); /* their templates go now, their cost counted */
}

static void check_cost(grpo_run *run) {
    if (run->o.max_cost_usd > 0 && !run->cost_stop && grpo_run_cost(run) >= run->o.max_cost_usd)
        run->cost_stop = true;
}

static void run_train(grpo_run *run);

static void run_step_done(grpo_run *run) {
    /* Episodes never started (cost cap, fatal) count as aborted. */
    for (size_t i = run->next_ep; i < run->n_eps; i++)
        run->eps[i]->status = GRPO_EP_ABORTED;
    run_train(run);
}

void grpo_run_episode_done(grpo_run *run, grpo_episode *ep) {
    run->inflight--;
    run->done++;
    run->episode_seconds += (double)(ep->t_end - ep->t_start) / 1000.0;
    size_t ti = (size_t)(ep->task - run->ts->tasks);
    run->task_episodes[ti]++;
    if (ep->status == GRPO_EP_INFRA) {
        run->infra++;
        run->task_infra[ti]++;
    }
    check_cost(run);
    run_progress(run, false);
    run_launch(run);
    if (run->inflight == 0 && (run->next_ep == run->n_eps || run->fatal || run->cost_stop))
        run_step_done(run);
}

/* Splitmix for failure injection: a deterministic fraction of graders crash. */
static double unit_hash(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) / 9007199254740992.0;
}

/* Detached first: a group freed may end the last template, and the run go on from there. */
static void run_free_groups(grpo_run *run) {
    grpo_group **gs = run->groups;
    size_t n = run->n_groups;
    run->groups = NULL;
    run->n_groups = 0;
    for (size_t i = 0; i < n; i++)
        grpo_group_free(gs[i]);
    free(gs);
}

static void run_free_episodes(grpo_run *run) {
    for (size_t i = 0; i < run->n_eps; i++)
        grpo_episode_free(run->eps[i]);
    free(run->eps);
    run->eps = NULL;
    run->n_eps = run->next_ep = run->done = run->inflight = 0;
    run_free_groups(run);
}

static void run_start_episodes(grpo_run *run) {
    size_t tasks = run->o.tasks_per_step, g = run->o.group_size;
    run->eps = calloc(tasks * g, sizeof(*run->eps));
    run->groups = calloc(tasks, sizeof(*run->groups));
    if (!run->eps || !run->groups) {
        grpo_run_fail(run, -ENOMEM, "internal", "out of memory");
        return run_finish(run);
    }
    for (size_t t = 0; t < tasks; t++) {
        const grpo_task *task = run->pool[run->next_task++ % run->n_pool];
        if (!(run->groups[run->n_groups++] = grpo_group_new(run, task, g))) {
            grpo_run_fail(run, -ENOMEM, "internal", "out of memory");
            return run_finish(run);
        }
        for (size_t i = 0; i < g; i++) {
            grpo_episode *ep = grpo_episode_new(run, task, t, i);
            if (!ep) {
                grpo_run_fail(run, -ENOMEM, "internal", "out of memory");
                return run_finish(run);
            }
            uint64_t key = run->o.seed * 1000003u + run->step * 7919u + t * 131u + i;
            ep->inject_failure = unit_hash(key) < run->o.fail_graders;
            run->eps[run->n_eps++] = ep;
        }
    }
    run->t_step_start = now_mono_ms();
    run_progress(run, false);
    run_launch(run);
}

/* ---- the training plane ---- */

static void on_state(void *ud, const sbxi_http_result *r);

static bool trainer_retry(grpo_run *run, const sbxi_http_result *r, uv_timer_cb cb) {
    if (run->fatal || !(r->status == 0 || r->status >= 500) ||
        run->train_attempts >= run->o.trainer_retries)
        return false;
    uint64_t delay = grpo_trainer_backoff_ms(run->train_attempts);
    run->train_attempts++;
    uv_timer_start(&run->timer, cb, delay, 0);
    return true;
}

static void trainer_error(grpo_run *run, const sbxi_http_result *r, const char *what) {
    char buf[300];
    grpo_run_fail(run, -EIO, "trainer_failed", "trainer %s%s failed after %u attempts: %s",
                  run->trainer_base, what, run->train_attempts + 1,
                  grpo_trainer_error(r, buf, sizeof(buf)));
}

/* One call of the training plane (GET /v1/state, POST /v1/train_step). */
static void step_call(grpo_run *run, const char *method, const char *path, json_t *body,
                      sbxi_http_cb cb) {
    run->step_request = true;
    int r = grpo_trainer_request(run, method, path, body, cb, run);
    if (r < 0) {
        grpo_run_fail(run, r, "internal", "cannot start a request");
        run_finish(run);
    }
}

/* true: a 200 answer to act on. false: cancelled at the teardown, retried (retry runs later), or
 * the run stopped (a signal's cancel included). */
static bool step_answer(grpo_run *run, const sbxi_http_result *r, uv_timer_cb retry,
                        const char *what) {
    if (r->cancelled && run->closing)
        return false;
    run->step_request = false;
    if (!run->fatal && r->status == 200)
        return true;
    if (!run->fatal && trainer_retry(run, r, retry))
        return false;
    if (!run->fatal)
        trainer_error(run, r, what);
    run_finish(run);
    return false;
}

/* The answer's integer "policy_version" into run->policy_version; false (the run failed:
 * trainer_failed) when it has none. */
static bool take_policy_version(grpo_run *run, const sbxi_http_result *r, const char *path) {
    json_t *j = json_loadb(r->body, r->len, 0, NULL);
    json_t *v = json_object_get(j, "policy_version");
    bool ok = json_is_integer(v);
    if (ok)
        run->policy_version = (unsigned long long)json_integer_value(v);
    else
        grpo_run_fail(run, -EPROTO, "trainer_failed",
                      "trainer %s%s: answer lacks an integer \"policy_version\"", run->trainer_base,
                      path);
    json_decref(j);
    return ok;
}

static void get_state(uv_timer_t *t) {
    step_call(t->data, "GET", "/v1/state", NULL, on_state);
}

static void on_state(void *ud, const sbxi_http_result *r) {
    grpo_run *run = ud;
    if (!step_answer(run, r, get_state, "/v1/state"))
        return;
    if (!take_policy_version(run, r, "/v1/state"))
        return run_finish(run);
    run_start_episodes(run);
}

static void run_next_step(grpo_run *run) {
    run_free_episodes(run);
    run->step_waits = run->templates > 0 && !run->finished;
    if (run->step_waits)
        return; /* the templates' cost first: run_templates_gone */
    check_cost(run);
    if (run->fatal || run->cost_stop || run->step >= run->o.steps)
        return run_finish(run);
    run->step++;
    run->train_attempts = 0;
    get_state(&run->timer);
}

/* Group statistics: advantages for training groups; infrastructure failures excluded. */
static json_t *run_score_groups(grpo_run *run) {
    json_t *groups = json_array();
    size_t g = run->o.group_size;
    for (size_t start = 0; start + g <= run->n_eps; start += g) {
        double r[GRPO_MAX_GROUP], adv[GRPO_MAX_GROUP];
        bool valid[GRPO_MAX_GROUP];
        for (size_t i = 0; i < g; i++) {
            r[i] = run->eps[start + i]->reward;
            valid[i] = run->eps[start + i]->status == GRPO_EP_SCORED;
        }
        grpo_group_stats st = grpo_group_advantages(r, valid, g, run->o.dr_grpo, adv);
        json_t *eps = json_array();
        for (size_t i = 0; i < g; i++) {
            grpo_episode *ep = run->eps[start + i];
            ep->advantage = adv[i];
            if (!st.trains || !valid[i] || run->o.no_train)
                continue;
            ep->in_batch = true;
            json_array_append_new(eps, grpo_episode_train_json(ep));
        }
        if (!json_array_size(eps)) {
            json_decref(eps);
            continue;
        }
        json_t *grp = json_pack("{s:s, s:f, s:f, s:o}", "task_id", run->eps[start]->task->id,
                                "reward_mean", st.mean, "reward_std", st.std, "episodes", eps);
        if (!grp || json_array_append_new(groups, grp) < 0)
            grpo_run_fail(run, -ENOMEM, "internal", "cannot build the training batch");
    }
    return groups;
}

static void on_trained(void *ud, const sbxi_http_result *r);

static void post_train(uv_timer_t *t) {
    grpo_run *run = t->data;
    step_call(run, "POST", "/v1/train_step", json_incref(run->train_body), on_trained);
}

/* The step's log and its line in steps.jsonl; trained only what the trainer took (a 200). */
static void run_step_report(grpo_run *run, bool trained) {
    for (size_t i = 0; trained && i < run->n_eps; i++)
        if (run->eps[i]->in_batch) {
            run->eps[i]->trained = true;
            run->trained++;
        }
    json_decref(run->train_body);
    run->train_body = NULL;
    grpo_report_step(run);
}

static void on_trained(void *ud, const sbxi_http_result *r) {
    grpo_run *run = ud;
    if (!step_answer(run, r, post_train, "/v1/train_step"))
        return;
    if (!take_policy_version(run, r, "/v1/train_step"))
        return run_finish(run);
    run_step_report(run, true);
    run_next_step(run);
}

static void run_train(grpo_run *run) {
    json_t *groups = run_score_groups(run);
    double mean, pass;
    size_t scored;
    step_stats(run, &mean, &pass, &scored);
    for (size_t i = 0; i < run->n_eps; i++)
        if (run->eps[i]->status == GRPO_EP_SCORED) {
            run->scored++;
            run->passes += run->eps[i]->reward >= 1.0;
        }
    if (!run->fatal) {
        grpo_dvec_push(&run->step_reward, scored ? mean : NAN);
        grpo_dvec_push(&run->step_seconds, (double)(now_mono_ms() - run->t_step_start) / 1000.0);
    }
    run_progress(run, true);
    if (run->fatal || json_array_size(groups) == 0) {
        json_decref(groups);
        run_step_report(run, false);
        return run->fatal ? run_finish(run) : run_next_step(run);
    }
    /* the step's log waits for the trainer's answer (run_step_report, or run_finish) */
    run->train_body = json_pack("{s:I, s:I, s:o}", "step", (json_int_t)run->step, "policy_version",
                                (json_int_t)run->policy_version, "groups", groups);
    if (!run->train_body) {
        grpo_run_fail(run, -ENOMEM, "internal", "out of memory");
        run_step_report(run, false);
        return run_finish(run);
    }
    run->train_attempts = 0;
    post_train(&run->timer);
}

/* ---- start and end ---- */

static void run_report(grpo_run *run) {
    if (run->reported)
        return;
    run->reported = true;
    grpo_report_finish(run);
    uv_stop(run->loop);
}

/* The summary once every template's cost is in: the groups go first (their templates with
 * them), and run_templates_gone reports when the last one went. */
static void run_finish(grpo_run *run) {
    if (run->finished)
        return;
    run->finished = true;
    if (run->train_body) /* the step's training failed: its log says so */
        run_step_report(run, false);
    run_free_groups(run);
    if (run->templates == 0)
        run_report(run);
}

static void run_templates_gone(grpo_run *run) {
    if (run->closing)
        return;
    if (run->finished)
        return run_report(run);
    if (run->step_waits)
        run_next_step(run);
}

/* The first signal stops the run: the episodes' retries and polls, and the trainer's requests in
 * flight (their callbacks, cancelled, see the run failed), end now, so every episode releases
 * its sandboxes at once. Stopped, the handlers leave the default action to a second signal. */
static void on_signal(uv_signal_t *s, int signum) {
    grpo_run *run = s->data;
    uv_signal_stop(&run->sig_int);
    uv_signal_stop(&run->sig_term);
    grpo_run_fail(run, -EINTR, "interrupted", "interrupted by signal %d", signum);
    for (size_t i = 0; i < run->n_eps; i++)
        grpo_episode_hurry(run->eps[i]);
    sbxi_http_async_cancel(run->trainer);
    if (run->inflight == 0 && !run->step_request)
        run_finish(run);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static sbx_code run_pool(grpo_run *run, sbx_err *err) {
    const char *split = run->o.split ? run->o.split : "train";
    bool all = strcmp(split, "all") == 0, held = strcmp(split, "held_out") == 0;
    if (!all && !held && strcmp(split, "train") != 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "--split must be train, held_out or all");
    run->pool = calloc(run->ts->n_tasks, sizeof(*run->pool));
    if (!run->pool)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    for (size_t i = 0; i < run->ts->n_tasks; i++)
        if (all || run->ts->tasks[i].held_out == held)
            run->pool[run->n_pool++] = &run->ts->tasks[i];
    if (run->n_pool == 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "the %s split of %s@%s has no tasks", split,
                            run->ts->name, run->ts->version);
    uint64_t s = run->o.seed;
    for (size_t i = run->n_pool - 1; i > 0; i--) {
        size_t j = splitmix(&s) % (i + 1);
        const grpo_task *t = run->pool[i];
        run->pool[i] = run->pool[j];
        run->pool[j] = t;
    }
    return SBX_OK;
}

/* sandboxd through libsbx (a host list, placement by free capacity, the token), the trainer
 * through libsbx's HTTP engine. */
static sbx_code run_connect(grpo_run *run, sbx_err *err) {
    sbx_code c = sbx_client_new(run->o.sandboxd, &run->client, err);
    if (c != SBX_OK)
        return c;
    if (run->o.token && (c = sbx_client_set_token(run->client, run->o.token)) != SBX_OK)
        return sbxi_err_set(err, c, 0, "", "bad token (control characters?)");
    if ((c = sbx_async_new(run->client, run->loop, &run->sbx, err)) != SBX_OK)
        return c;
    snprintf(run->trainer_base, sizeof(run->trainer_base), "%s", run->o.trainer_url);
    size_t n = strlen(run->trainer_base);
    while (n && run->trainer_base[n - 1] == '/')
        run->trainer_base[--n] = 0;
    return SBX_OK;
}

static sbx_code run_check_opts(const sbx_grpo_opts *o, sbx_err *err) {
    const char *bad =
        !o->tasks_path                                         ? "a task set is required"
        : !o->trainer_url                                      ? "a trainer URL is required"
        : !o->out_dir                                          ? "an output directory is required"
        : o->steps == 0 || o->steps > 1000000                  ? "steps must be >= 1"
        : o->tasks_per_step == 0                               ? "tasks per step must be >= 1"
        : o->group_size == 0 || o->group_size > GRPO_MAX_GROUP ? "group size must be in [1, 1024]"
        : o->max_inflight == 0                                 ? "max inflight must be >= 1"
        : o->fail_graders < 0 || o->fail_graders > 1           ? "fail_graders must be in [0, 1]"
        : o->max_cost_usd < 0 || o->gpu_hour_usd < 0           ? "prices must be >= 0"
                                                               : NULL;
    return bad ? sbxi_err_set(err, SBX_E_INVALID, 0, "", "%s", bad) : SBX_OK;
}

static void on_release_timeout(uv_timer_t *t) {
    uv_stop(t->loop);
}

/* The groups' templates are released once the episodes are freed: let those calls finish (for
 * at most RELEASE_WAIT_MS, with the signals no longer keeping the loop alive), then cancel
 * whatever is left. */
#define RELEASE_WAIT_MS 60000
static void run_close_handles(grpo_run *run) {
    if (run->o.handle_signals) {
        uv_signal_stop(&run->sig_int);
        uv_signal_stop(&run->sig_term);
    }
    run_free_episodes(run);
    uv_timer_start(&run->timer, on_release_timeout, RELEASE_WAIT_MS, 0);
    uv_unref((uv_handle_t *)&run->timer); /* the releases keep the loop running, not the timer */
    uv_run(run->loop, UV_RUN_DEFAULT);
    uv_timer_stop(&run->timer);
    run->closing = true; /* what is still in flight is called back, cancelled, and returns */
    sbx_async_free(run->sbx);
    sbxi_http_async_free(run->trainer);
    uv_close((uv_handle_t *)&run->timer, NULL);
    if (run->o.handle_signals) {
        uv_close((uv_handle_t *)&run->sig_int, NULL);
        uv_close((uv_handle_t *)&run->sig_term, NULL);
    }
    uv_run(run->loop, UV_RUN_DEFAULT);
    sbx_client_free(run->client);
}

static sbx_code run_prepare(grpo_run *run, sbx_err *err) {
    error_rec e = {0};
    int r = grpo_verlset_load(run->o.tasks_path, run->o.reward_fn, run->o.reward_timeout_s,
                              &run->ts, &e);
    if (r < 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "%s", e.message);
    for (size_t i = 0; run->o.max_completion_tokens && i < run->ts->n_tasks; i++)
        run->ts->tasks[i].max_completion_tokens = run->o.max_completion_tokens;
    sbx_code c = run_pool(run, err);
    if (c != SBX_OK)
        return c;
    run->task_episodes = calloc(run->ts->n_tasks, sizeof(size_t));
    run->task_infra = calloc(run->ts->n_tasks, sizeof(size_t));
    if (!run->task_episodes || !run->task_infra)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    r = mkdir_p(run->o.out_dir, 0755);
    if (r < 0)
        return sbxi_err_set(err, SBX_E_IO, 0, "", "cannot create %s: %s", run->o.out_dir,
                            strerror(-r));
    if ((c = run_connect(run, err)) != SBX_OK)
        return c;
    snprintf(run->run_id, sizeof(run->run_id), "grpo-%llx-%x", (unsigned long long)now_real_ms(),
             (unsigned)getpid());
    return SBX_OK;
}

static sbx_code run_result(grpo_run *run, sbx_err *err) {
    if (!run->fatal)
        return SBX_OK;
    sbx_code c = strcmp(run->fatal_reason, "daemon_unreachable") == 0 ? SBX_E_CONNECT
                 : strcmp(run->fatal_reason, "trainer_failed") == 0   ? SBX_E_SERVER
                 : run->fatal == -ENOMEM                              ? SBX_E_NOMEM
                                                                      : SBX_E_IO;
    return sbxi_err_set(err, c, 0, "", "%s", run->fatal_msg);
}

sbx_code sbx_grpo_run(const sbx_grpo_opts *opts, sbx_grpo_summary *ret, sbx_err *err) {
    sbx_err local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof(*err));
    sbx_code c = run_check_opts(opts, err);
    if (c != SBX_OK)
        return c;
    sbx_grpo_summary sum = {0};
    /* the rooms below call up only through these (episode.c: a final status, its sandbox) */
    grpo_run run = {.o = *opts,
                    .sum = &sum,
                    .episode_done = grpo_run_episode_done,
                    .group_want = grpo_group_want,
                    .templates_gone = run_templates_gone,
                    .env_begin = grpo_env_begin,
                    .env_poll = grpo_env_poll,
                    .env_step = grpo_env_step,
                    .env_finish = grpo_env_finish};
    uv_loop_t loop;
    if (uv_loop_init(&loop) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "cannot set up the event loop");
    if (sbxi_http_async_new(&loop, &run.trainer) < 0) {
        uv_loop_close(&loop);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "cannot set up the event loop");
    }
    run.loop = &loop;
    uv_timer_init(&loop, &run.timer);
    run.timer.data = &run;
    if (opts->handle_signals) {
        uv_signal_init(&loop, &run.sig_int);
        uv_signal_init(&loop, &run.sig_term);
        run.sig_int.data = run.sig_term.data = &run;
        uv_signal_start(&run.sig_int, on_signal, SIGINT);
        uv_signal_start(&run.sig_term, on_signal, SIGTERM);
    }
    c = run_prepare(&run, err);
    if (c == SBX_OK) {
        run.t_run_start = now_mono_ms();
        run_next_step(&run);
        uv_run(&loop, UV_RUN_DEFAULT);
        c = run_result(&run, err);
        if (ret)
            *ret = sum;
    }
    run_close_handles(&run);
    uv_loop_close(&loop);
    grpo_taskset_free(run.ts);
    free(run.pool);
    free(run.task_episodes);
    free(run.task_infra);
    free(run.step_reward.v);
    free(run.step_seconds.v);
    json_decref(run.train_body);
    return c;
}
