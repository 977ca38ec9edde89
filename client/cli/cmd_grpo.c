/* `sbx grpo`: run GRPO (episodes in sandboxes, a generation/training server) with a live progress
 * line and a summary, or `--preview` what a run will cost (`--measure N` times N real episodes). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <math.h>
#include <sbx_grpo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct grpo_cli {
    sbx_grpo_opts o;
    int preview, json;
    unsigned measure;
    double step_seconds, sandbox_hour_usd;
    unsigned sandboxes;
    int tty;
    double last_print;
} grpo_cli;

static void usage(FILE *f) {
    fputs("usage: sbx grpo --tasks FILE [options]\n"
          "       sbx grpo --preview [--measure N --tasks FILE] [options]\n"
          "run:\n"
          "  --tasks FILE            task set, or verl dataset rows (JSONL, docs/GRPO.md)\n"
          "  --reward-fn FILE        verl rows: a Python file with compute_score(data_source,\n"
          "                          solution_str, ground_truth, extra_info) (built-in by\n"
          "                          data_source without it)\n"
          "  --reward-timeout S      verl rows: seconds per compute_score call (10)\n"
          "  --max-completion-tokens N  every task's max_tokens per completion\n"
          "  --split S               train (default), held_out or all\n"
          "  --trainer URL           generation + training server (http://127.0.0.1:8000)\n"
          "  --host ENDPOINTS        sandboxd socket or http://host:port, several comma-separated\n"
          "                          (sandboxes placed by free capacity; $SBX_HOST)\n"
          "  --out DIR               logs, summary.json, reward.svg (grpo-out)\n"
          "  --steps N               (10)     --tasks-per-step N (16)   --group-size N (8)\n"
          "  --max-inflight N        episodes at once (64)\n"
          "  --dr-grpo               advantage r - mean (no std division)\n"
          "  --no-train              generate and grade only\n"
          "  --temperature T (1.0)   --seed N (0)   --model NAME\n"
          "  --max-cost-usd X        stop cleanly once the run has spent X dollars\n"
          "  --gpu-hour-usd X        per GPU and hour, counted in the spend   --gpus N (1)\n"
          "  --trainer-retries N     per trainer request (3)\n"
          "  --fail-graders F        test hook: make a fraction F of graders crash\n"
          "  --json                  print the summary as JSON\n"
          "preview:\n"
          "  --preview               print GPU cost, sandbox cost, total and sandbox share\n"
          "  --step-seconds S (60)   --sandboxes N (tasks-per-step x group-size)\n"
          "  --sandbox-hour-usd X    (0.0179: 1 vCPU, 2 GiB)\n"
          "  --measure N             time N real episodes for the step time\n",
          f);
}

static void on_progress(void *ud, const sbx_grpo_progress *p) {
    grpo_cli *c = ud;
    double now = p->step_seconds + p->step * 1e6; /* monotone within a run */
    if (!p->step_finished && !c->tty && now - c->last_print < 2.0)
        return;
    c->last_print = now;
    fprintf(stderr,
            "%sstep %u/%u  episodes %zu/%zu (%zu in flight)  reward %.3f  pass %.0f%%  "
            "infra failures %zu  %.1fs  $%.5f%s",
            c->tty ? "\r\033[K" : "", p->step, p->steps, p->episodes_done, p->episodes_total,
            p->episodes_inflight, p->reward_mean, p->pass_rate * 100, p->infra_failures,
            p->step_seconds, p->cost_usd, c->tty && !p->step_finished ? "" : "\n");
    fflush(stderr);
}

/* A number, or null when it is not finite (no step scored) */
static json_t *num_or_null(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

/* The summary as one JSON line (jansson: strings escaped, no nan/inf). */
static void print_json(const sbx_grpo_summary *s) {
    json_t *o = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "stop_reason",
        s->stop_reason, "steps", (json_int_t)s->steps_done, "episodes", (json_int_t)s->episodes,
        "scored", (json_int_t)s->scored, "infrastructure_failures", (json_int_t)s->infra_failures,
        "trained", (json_int_t)s->trained, "first_reward_mean", num_or_null(s->first_reward_mean),
        "last_reward_mean", num_or_null(s->last_reward_mean), "pass_rate",
        num_or_null(s->pass_rate), "cost_usd", num_or_null(s->cost_usd), "sandbox_cost_usd",
        num_or_null(s->sandbox_cost_usd), "gpu_cost_usd", num_or_null(s->gpu_cost_usd), "seconds",
        num_or_null(s->seconds), "svg", s->svg_path);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text)
        printf("%s\n", text);
    else
        fprintf(stderr, "sbx grpo: cannot print the summary as JSON\n");
    free(text);
    json_decref(o);
}

static void print_summary(const grpo_cli *c, const sbx_grpo_summary *s) {
    if (c->json && s->warning[0])
        fprintf(stderr, "sbx grpo: warning: %s\n", s->warning);
    if (c->json) {
        print_json(s);
        return;
    }
    printf("GRPO run %s: %s\n", s->stop_reason, s->message);
    printf("  episodes: %zu (%zu scored, %zu infrastructure failures), %zu sent to the trainer\n",
           s->episodes, s->scored, s->infra_failures, s->trained);
    char first[32] = "none", last[32] = "none"; /* nothing scored: JSON's null */
    if (isfinite(s->first_reward_mean))
        snprintf(first, sizeof(first), "%.3f", s->first_reward_mean);
    if (isfinite(s->last_reward_mean))
        snprintf(last, sizeof(last), "%.3f", s->last_reward_mean);
    printf("  reward: first step %s -> last step %s; pass rate %.1f%%; policy version %llu\n",
           first, last, s->pass_rate * 100, s->policy_version);
    printf("  cost: $%.6f (sandboxes $%.6f, GPU $%.6f); %.1f s, %.1f s per step, %.2f s per "
           "episode\n",
           s->cost_usd, s->sandbox_cost_usd, s->gpu_cost_usd, s->seconds, s->mean_step_seconds,
           s->mean_episode_seconds);
    printf("  reward curve: %s\n", s->svg_path);
    if (s->warning[0])
        printf("  warning: %s\n", s->warning);
}

/* A number flag's value in [lo, hi]: a decimal integer for F_UINT/F_ULL (no fraction, exponent or
 * sign), else a finite decimal number. */
static int parse_num(const char *s, bool integer, double lo, double hi, double *ret,
                     unsigned long long *ret_int, const char *flag) {
    unsigned long long u = 0;
    double v = 0;
    bool ok = integer ? cli_parse_uint(s, (unsigned long long)hi, &u) == 0 && (double)u >= lo
                      : cli_parse_number(s, &v) == 0 && v >= lo && v <= hi;
    if (!ok) {
        fprintf(stderr, "sbx grpo: %s: bad value \"%s\"\n", flag, s);
        return -1;
    }
    *ret = v;
    *ret_int = u;
    return 0;
}

#define GRPO_MAX_FLAGS 32

/* One row per flag: where its value goes and, for numbers, the accepted range. */
typedef enum { F_STR, F_ON, F_UINT, F_ULL, F_DBL, F_HELP } flag_kind;
typedef struct grpo_flag {
    const char *name;
    flag_kind kind;
    void *dst;
    double lo, hi;
} grpo_flag;

static size_t grpo_flags(grpo_cli *c, grpo_flag *f) {
    const grpo_flag t[] = {
        {"tasks", F_STR, &c->o.tasks_path, 0, 0},
        {"split", F_STR, &c->o.split, 0, 0},
        {"reward-fn", F_STR, &c->o.reward_fn, 0, 0},
        {"reward-timeout", F_DBL, &c->o.reward_timeout_s, 0.001, 3600},
        {"max-completion-tokens", F_UINT, &c->o.max_completion_tokens, 1, 1 << 20},
        {"trainer", F_STR, &c->o.trainer_url, 0, 0},
        {"host", F_STR, &c->o.sandboxd, 0, 0},
        {"out", F_STR, &c->o.out_dir, 0, 0},
        {"model", F_STR, &c->o.model, 0, 0},
        {"dr-grpo", F_ON, &c->o.dr_grpo, 0, 0},
        {"no-train", F_ON, &c->o.no_train, 0, 0},
        {"json", F_ON, &c->json, 0, 0},
        {"preview", F_ON, &c->preview, 0, 0},
        {"steps", F_UINT, &c->o.steps, 1, 1e6},
        {"tasks-per-step", F_UINT, &c->o.tasks_per_step, 1, 1e5},
        {"group-size", F_UINT, &c->o.group_size, 1, 1024},
        {"max-inflight", F_UINT, &c->o.max_inflight, 1, 1e5},
        {"temperature", F_DBL, &c->o.temperature, 0, 100},
        {"seed", F_ULL, &c->o.seed, 0, 1e18},
        {"max-cost-usd", F_DBL, &c->o.max_cost_usd, 0, 1e9},
        {"gpu-hour-usd", F_DBL, &c->o.gpu_hour_usd, 0, 1e6},
        {"gpus", F_UINT, &c->o.gpus, 1, 1e5},
        {"trainer-retries", F_UINT, &c->o.trainer_retries, 0, 100},
        {"fail-graders", F_DBL, &c->o.fail_graders, 0, 1},
        {"step-seconds", F_DBL, &c->step_seconds, 0, 1e7},
        {"sandboxes", F_UINT, &c->sandboxes, 0, 1e7},
        {"sandbox-hour-usd", F_DBL, &c->sandbox_hour_usd, 0, 1e6},
        {"measure", F_UINT, &c->measure, 1, 1e5},
        {"help", F_HELP, NULL, 0, 0},
    };
    _Static_assert(sizeof(t) / sizeof(t[0]) <= GRPO_MAX_FLAGS, "grow GRPO_MAX_FLAGS");
    memcpy(f, t, sizeof(t));
    return sizeof(t) / sizeof(t[0]);
}

/* Store one flag's value. Returns 0, 1 for --help, or -1 after printing what is wrong. */
static int apply_flag(const grpo_flag *f, const char *arg) {
    char name[40];
    snprintf(name, sizeof(name), "--%s", f->name);
    double v = 0;
    unsigned long long u = 0;
    if (f->kind >= F_UINT && f->kind <= F_DBL &&
        parse_num(arg, f->kind != F_DBL, f->lo, f->hi, &v, &u, name) < 0)
        return -1;
    switch (f->kind) {
    case F_STR:
        *(const char **)f->dst = arg;
        break;
    case F_ON:
        *(int *)f->dst = 1;
        break;
    case F_UINT:
        *(unsigned *)f->dst = (unsigned)u; /* every F_UINT's hi fits an unsigned */
        break;
    case F_ULL:
        *(unsigned long long *)f->dst = u;
        break;
    case F_DBL:
        *(double *)f->dst = v;
        break;
    case F_HELP:
        return 1;
    }
    return 0;
}

/* Returns 0, 1 when --help was printed, or -1 on a usage error (printed). */
static int parse_args(grpo_cli *c, int argc, char **argv) {
    grpo_flag flags[GRPO_MAX_FLAGS];
    struct option opts[GRPO_MAX_FLAGS + 1];
    size_t n = grpo_flags(c, flags);
    for (size_t i = 0; i < n; i++)
        opts[i] = (struct option){flags[i].name, flags[i].kind != F_ON && flags[i].kind != F_HELP,
                                  NULL, 256 + (int)i};
    opts[n] = (struct option){0};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        int r = ch == 'h'                        ? 1
                : ch >= 256 && ch < 256 + (int)n ? apply_flag(&flags[ch - 256], optarg)
                                                 : -2;
        if (r == 1) {
            usage(stdout);
            return 1;
        }
        if (r == -2)
            return cli_bad_option("grpo", ch, ":h", argv), -1;
        if (r < 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "sbx grpo: unexpected argument \"%s\"\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* --measure: run N real episodes (one step, no training) and time them. */
static int measure(grpo_cli *c) {
    sbx_grpo_opts o = c->o;
    char out[1024];
    snprintf(out, sizeof(out), "%s/measure", c->o.out_dir);
    o.out_dir = out;
    o.steps = 1;
    o.tasks_per_step = c->measure;
    o.group_size = 1;
    o.no_train = 1;
    o.on_progress = NULL;
    sbx_grpo_summary s;
    sbx_err err;
    if (sbx_grpo_run(&o, &s, &err) != SBX_OK) {
        fprintf(stderr, "sbx grpo: --measure: %s\n", err.message);
        return -1;
    }
    size_t per_step = (size_t)c->o.tasks_per_step * c->o.group_size;
    double waves_run = ceil((double)c->measure / c->o.max_inflight);
    double waves_step = ceil((double)per_step / c->o.max_inflight);
    c->step_seconds = s.mean_step_seconds * waves_step / waves_run;
    printf("measured: %u episodes in %.2f s (%.2f s per episode, $%.7f of sandbox time per "
           "episode) -> step time %.2f s for %zu episodes at %u in flight\n",
           c->measure, s.mean_step_seconds, s.mean_episode_seconds,
           s.episodes ? s.sandbox_cost_usd / (double)s.episodes : 0, c->step_seconds, per_step,
           c->o.max_inflight);
    return 0;
}

static int preview(grpo_cli *c) {
    if (c->measure && (!c->o.tasks_path || measure(c) < 0))
        return c->o.tasks_path ? 1 : (fprintf(stderr, "sbx grpo: --measure needs --tasks\n"), 2);
    sbx_grpo_preview p = {
        .steps = c->o.steps,
        .step_seconds = c->step_seconds,
        .gpus = c->o.gpus,
        .gpu_hour_usd = c->o.gpu_hour_usd,
        .sandboxes = c->sandboxes ? c->sandboxes : c->o.tasks_per_step * c->o.group_size,
        .sandbox_hour_usd = c->sandbox_hour_usd,
    };
    sbx_grpo_preview_compute(&p);
    printf("cost preview: %u steps x %.2f s = %.2f h\n", p.steps, p.step_seconds,
           p.steps * p.step_seconds / 3600.0);
    printf("  GPU:       %u x $%.4f/h          = $%.4f\n", p.gpus, p.gpu_hour_usd, p.gpu_usd);
    printf("  sandboxes: %u x $%.4f/h          = $%.4f\n", p.sandboxes, p.sandbox_hour_usd,
           p.sandbox_usd);
    printf("  total:     $%.4f  (sandbox share %.1f%%)\n", p.total_usd, p.sandbox_share * 100);
    return 0;
}

int cmd_grpo(int argc, char **argv) {
    grpo_cli c = {.step_seconds = 60, .sandbox_hour_usd = 0.0179};
    sbx_grpo_opts_init(&c.o);
    c.o.handle_signals = 1;
    c.o.sandboxd = cli_opts.host; /* sbx --host / --json before the command */
    c.json = cli_opts.json;
    int pr = parse_args(&c, argc, argv);
    if (pr != 0)
        return pr < 0 ? 2 : 0;
    if (c.preview)
        return preview(&c);
    if (!c.o.tasks_path) {
        fprintf(stderr, "sbx grpo: --tasks FILE is required (see --help)\n");
        return 2;
    }
    c.tty = isatty(STDERR_FILENO);
    c.o.on_progress = on_progress;
    c.o.userdata = &c;
    sbx_grpo_summary s;
    memset(&s, 0, sizeof(s));
    sbx_err err;
    sbx_code code = sbx_grpo_run(&c.o, &s, &err);
    if (s.steps_done || s.episodes)
        print_summary(&c, &s);
    if (code != SBX_OK) {
        fprintf(stderr, "sbx grpo: error: %s\n", err.message);
        return 1;
    }
    return 0;
}
