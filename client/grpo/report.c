/* The run's outputs: a JSONL log per step (every episode), steps.jsonl (one line per step),
 * summary.json and reward.svg (the reward curve), and the summary handed back to the caller. */
#include "client/grpo/runner.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "common/macro.h"
#include "common/timeutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void out_path(const grpo_run *run, const char *name, char *path, size_t len) {
    snprintf(path, len, "%s/%s", run->o.out_dir, name);
}

/* An output file that could not be written (r: -errno) stops the run with a message naming it;
 * when the run already failed, its message says so too. Returns r. */
static int out_failed(grpo_run *run, const char *path, int r) {
    if (!run->fatal)
        return grpo_run_fail(run, r, "output_failed", "cannot write %s: %s", path, strerror(-r));
    size_t n = strlen(run->fatal_msg);
    snprintf(run->fatal_msg + n, sizeof(run->fatal_msg) - n, " (and cannot write %s: %s)", path,
             strerror(-r));
    return r;
}

/* fclose(f) after writes whose first failure was r (0: none): 0 or -errno. */
static int close_out(FILE *f, int r) {
    if (ferror(f) && r == 0)
        r = -EIO;
    if (fclose(f) != 0 && r == 0)
        r = errno ? -errno : -EIO;
    return r;
}

static int write_line(FILE *f, json_t *o) {
    _cleanup_free_ char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return -ENOMEM;
    if (fprintf(f, "%s\n", s) < 0)
        return errno ? -errno : -EIO;
    return 0;
}

/* Infrastructure failures per task (episodes[i], infra[i] for ts->tasks[i]): an object of the
 * tasks with at least one, {"id": {"episodes": n, "infrastructure_failures": k}} (all tasks that
 * ran with all_tasks), and the warnings for tasks with a high rate, appended to warnings. */
static json_t *infra_by_task(const grpo_run *run, const size_t *episodes, const size_t *infra,
                             bool all_tasks, json_t *warnings) {
    json_t *o = json_object();
    for (size_t i = 0; i < run->ts->n_tasks; i++) {
        if (!episodes[i] || (!infra[i] && !all_tasks))
            continue;
        json_object_set_new(o, run->ts->tasks[i].id,
                            json_pack("{s:I, s:I}", "episodes", (json_int_t)episodes[i],
                                      "infrastructure_failures", (json_int_t)infra[i]));
        double rate = (double)infra[i] / (double)episodes[i];
        if (infra[i] < GRPO_INFRA_WARN_MIN || rate < GRPO_INFRA_WARN_RATE)
            continue;
        char w[300];
        snprintf(w, sizeof(w),
                 "task \"%s\": %zu of %zu episodes (%.0f%%) were infrastructure failures "
                 "(the episodes' messages say why)",
                 run->ts->tasks[i].id, infra[i], episodes[i], rate * 100);
        json_array_append_new(warnings, json_string(w));
    }
    return o;
}

static json_t *step_infra(const grpo_run *run, json_t *warnings) {
    size_t n = run->ts->n_tasks;
    _cleanup_free_ size_t *eps = calloc(n ? n : 1, sizeof(size_t));
    _cleanup_free_ size_t *infra = calloc(n ? n : 1, sizeof(size_t));
    if (!eps || !infra)
        return NULL;
    for (size_t i = 0; i < run->next_ep && i < run->n_eps; i++) {
        const grpo_episode *ep = run->eps[i];
        if (ep->status == GRPO_EP_ABORTED)
            continue;
        size_t ti = (size_t)(ep->task - run->ts->tasks);
        eps[ti]++;
        infra[ti] += ep->status == GRPO_EP_INFRA;
    }
    return infra_by_task(run, eps, infra, false, warnings);
}

/* The step's episodes, one line each, into f. */
static int write_episodes(grpo_run *run, FILE *f) {
    int r = 0;
    for (size_t i = 0; i < run->n_eps && i < run->next_ep && r == 0; i++) /* started ones */
        r = write_line(f, grpo_episode_log(run->eps[i]));
    return r;
}

/* The step's line for steps.jsonl */
static json_t *step_line(grpo_run *run) {
    size_t scored = 0, infra = 0, aborted = 0, trained = 0;
    double sum = 0;
    for (size_t i = 0; i < run->n_eps && i < run->next_ep; i++) {
        grpo_episode *ep = run->eps[i];
        scored += ep->status == GRPO_EP_SCORED;
        infra += ep->status == GRPO_EP_INFRA;
        aborted += ep->status == GRPO_EP_ABORTED;
        trained += ep->trained;
        if (ep->status == GRPO_EP_SCORED)
            sum += ep->reward;
    }
    json_t *warnings = json_array();
    json_t *by_task = step_infra(run, warnings);
    json_t *line = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:f, s:f, s:I}", "step", (json_int_t)run->step,
        "episodes", (json_int_t)run->next_ep, "scored", (json_int_t)scored,
        "infrastructure_failures", (json_int_t)infra, "aborted", (json_int_t)aborted, "trained",
        (json_int_t)trained, "reward_mean", scored ? json_real(sum / (double)scored) : json_null(),
        "seconds", (double)(now_mono_ms() - run->t_step_start) / 1000.0, "cost_usd",
        grpo_run_cost(run), "policy_version", (json_int_t)run->policy_version);
    if (line) {
        json_object_set_new(line, "infrastructure_failures_by_task", by_task ?: json_object());
        json_object_set_new(line, "warnings", warnings);
    } else {
        json_decref(by_task);
        json_decref(warnings);
    }
    return line;
}

/* A failure stops the run (out_failed) and is returned. */
int grpo_report_step(grpo_run *run) {
    char name[64], path[1024];
    snprintf(name, sizeof(name), "step-%04u.jsonl", run->step);
    out_path(run, name, path, sizeof(path));
    FILE *f = fopen(path, "we");
    if (!f)
        return out_failed(run, path, -errno);
    int r = close_out(f, write_episodes(run, f));
    if (r < 0)
        return out_failed(run, path, r);
    out_path(run, "steps.jsonl", path, sizeof(path));
    if (!(f = fopen(path, "ae")))
        return out_failed(run, path, -errno);
    r = close_out(f, write_line(f, step_line(run)));
    return r < 0 ? out_failed(run, path, r) : 0;
}

/* The reward curve: mean reward per step, 0..1 (or the observed range), as an SVG polyline. */
static int write_svg(grpo_run *run, const char *path) {
    const grpo_dvec *r = &run->step_reward;
    double lo = 0, hi = 1;
    for (size_t i = 0; i < r->n; i++)
        if (!isnan(r->v[i]))
            lo = MIN(lo, r->v[i]), hi = MAX(hi, r->v[i]);
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    const double W = 640, H = 360, L = 60, R = 20, T = 40, B = 50;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
            "height=\"100%%\" fill=\"white\"/>\n",
            W, H);
    fprintf(f,
            "<text x=\"%g\" y=\"24\" font-size=\"15\">GRPO reward (%s@%s, %zu episodes)</text>\n",
            L, run->ts->name, run->ts->version, run->episodes);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, H - B,
            W - R, H - B);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, T, L,
            H - B);
    for (int k = 0; k <= 4; k++) {
        double v = lo + (hi - lo) * k / 4.0, y = H - B - (H - T - B) * k / 4.0;
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.2f</text>\n", L - 6, y + 4, v);
        fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", L, y, W - R,
                y);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2,
            H - 12);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    size_t n = r->n;
    for (size_t i = 0; i < n; i++) {
        if (isnan(r->v[i]))
            continue;
        double x = L + (W - L - R) * (n > 1 ? (double)i / (double)(n - 1) : 0.5);
        double y = H - B - (H - T - B) * (r->v[i] - lo) / (hi - lo);
        fprintf(f, "%.1f,%.1f ", x, y);
    }
    fprintf(f, "\"/>\n");
    for (size_t i = 0; i < n; i++) {
        double x = L + (W - L - R) * (n > 1 ? (double)i / (double)(n - 1) : 0.5);
        if (n <= 20 || i % (n / 10) == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%zu</text>\n", x,
                    H - B + 16, i + 1);
    }
    fprintf(f, "</svg>\n");
    return close_out(f, 0);
}

static void summary_reason(const grpo_run *run, sbx_grpo_summary *s);

static void fill_summary(grpo_run *run, sbx_grpo_summary *s) {
    s->steps_done = (unsigned)run->step_reward.n;
    s->episodes = run->episodes;
    s->scored = run->scored;
    s->infra_failures = run->infra;
    s->trained = run->trained;
    s->first_reward_mean = run->step_reward.n ? run->step_reward.v[0] : NAN;
    s->last_reward_mean = run->step_reward.n ? run->step_reward.v[run->step_reward.n - 1] : NAN;
    s->pass_rate = run->scored ? (double)run->passes / (double)run->scored : 0;
    s->sandbox_cost_usd = run->sandbox_cost;
    s->cost_usd = grpo_run_cost(run);
    s->gpu_cost_usd = s->cost_usd - s->sandbox_cost_usd;
    s->seconds = (double)(now_mono_ms() - run->t_run_start) / 1000.0;
    double tot = 0;
    for (size_t i = 0; i < run->step_seconds.n; i++)
        tot += run->step_seconds.v[i];
    s->mean_step_seconds = run->step_seconds.n ? tot / (double)run->step_seconds.n : 0;
    s->mean_episode_seconds = run->episodes ? run->episode_seconds / (double)run->episodes : 0;
    s->policy_version = run->policy_version;
    summary_reason(run, s);
}

/* stop_reason and message (again after a late failure: summary.json's own) */
static void summary_reason(const grpo_run *run, sbx_grpo_summary *s) {
    const char *reason = run->fatal       ? run->fatal_reason
                         : run->cost_stop ? "max_cost_usd"
                                          : "completed";
    snprintf(s->stop_reason, sizeof(s->stop_reason), "%s", reason);
    if (run->fatal)
        snprintf(s->message, sizeof(s->message), "%s", run->fatal_msg);
    else if (run->cost_stop)
        snprintf(s->message, sizeof(s->message), "stopped at the cost cap: $%.6f >= $%.6f",
                 s->cost_usd, run->o.max_cost_usd);
    else
        snprintf(s->message, sizeof(s->message), "completed %u steps", s->steps_done);
}

static json_t *num_or_null(double v) {
    return isnan(v) ? json_null() : json_real(v);
}

/* The warnings as one line for sbx_grpo_summary.warning ("" when none). */
static void join_warnings(json_t *warnings, char *buf, size_t len) {
    size_t i, at = 0;
    json_t *w;
    buf[0] = 0;
    json_array_foreach(warnings, i, w) {
        int n = snprintf(buf + at, len - at, "%s%s", at ? "; " : "", json_string_value(w));
        if (n < 0 || (size_t)n >= len - at)
            break;
        at += (size_t)n;
    }
}

/* summary.json: a temporary file renamed over it (a reader never sees half of one). */
static int write_summary(grpo_run *run, json_t *o) {
    char path[1024];
    out_path(run, "summary.json", path, sizeof(path));
    _cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    size_t n = text ? strlen(text) : 0;
    char *line = text ? realloc(text, n + 2) : NULL;
    if (line) {
        text = line;
        memcpy(text + n, "\n", 2);
    }
    int r = line ? file_replace_nosync(path, text, n + 1, 0644) : -ENOMEM;
    return r < 0 ? out_failed(run, path, r) : 0;
}

/* summary.json's object (NULL: out of memory); its warnings joined into s->warning. */
static json_t *summary_json(grpo_run *run, sbx_grpo_summary *s) {
    json_t *curve = json_array();
    for (size_t i = 0; i < run->step_reward.n; i++)
        json_array_append_new(curve, num_or_null(run->step_reward.v[i]));
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:f, s:o, s:f, s:f, s:f, s:f, "
        "s:f, s:f, s:I, s:s}",
        "run_id", run->run_id, "task_set", run->ts->name, "version", run->ts->version,
        "stop_reason", s->stop_reason, "steps", (json_int_t)s->steps_done, "episodes",
        (json_int_t)s->episodes, "scored", (json_int_t)s->scored, "infrastructure_failures",
        (json_int_t)s->infra_failures, "trained", (json_int_t)s->trained, "first_reward_mean",
        num_or_null(s->first_reward_mean), "last_reward_mean", num_or_null(s->last_reward_mean),
        "pass_rate", s->pass_rate, "reward_curve", curve, "sandbox_cost_usd", s->sandbox_cost_usd,
        "gpu_cost_usd", s->gpu_cost_usd, "cost_usd", s->cost_usd, "seconds", s->seconds,
        "mean_step_seconds", s->mean_step_seconds, "mean_episode_seconds", s->mean_episode_seconds,
        "policy_version", (json_int_t)s->policy_version, "message", s->message);
    json_t *warnings = json_array();
    json_t *tasks = infra_by_task(run, run->task_episodes, run->task_infra, true, warnings);
    if (o) {
        json_object_set_new(o, "tasks", tasks);
        json_object_set_new(o, "warnings", warnings);
    } else {
        json_decref(tasks);
    }
    join_warnings(o ? warnings : NULL, s->warning, sizeof(s->warning));
    if (!o)
        json_decref(warnings);
    return o;
}

/* The reward curve and summary.json; a failure stops the run (out_failed, the summary handed
 * back says so) and is returned. */
int grpo_report_finish(grpo_run *run) {
    sbx_grpo_summary *s = run->sum;
    snprintf(s->svg_path, sizeof(s->svg_path), "%s/reward.svg", run->o.out_dir);
    int r = write_svg(run, s->svg_path);
    if (r < 0)
        out_failed(run, s->svg_path, r);
    fill_summary(run, s);
    json_t *o = summary_json(run, s);
    int rs = write_summary(run, o);
    json_decref(o);
    summary_reason(run, s); /* summary.json's own failure */
    return r < 0 ? r : rs;
}
