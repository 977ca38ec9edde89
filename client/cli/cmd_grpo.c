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
          "  --tasks FILE            task set (JSONL, docs/GRPO.md)\n"
          "  --split S               train (default), held_out or all\n"
          "  --trainer URL           generation + training server (http://127.0.0.1:8000)\n"
          "  --host ENDPOINT         sandboxd socket or http://host:port ($SBX_HOST)\n"
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

static void print_summary(const grpo_cli *c, const sbx_grpo_summary *s) {
    if (c->json) {
        printf("{\"stop_reason\":\"%s\",\"steps\":%u,\"episodes\":%zu,\"scored\":%zu,"
               "\"infrastructure_failures\":%zu,\"trained\":%zu,\"first_reward_mean\":%.6f,"
               "\"last_reward_mean\":%.6f,\"pass_rate\":%.6f,\"cost_usd\":%.8f,"
               "\"sandbox_cost_usd\":%.8f,\"gpu_cost_usd\":%.8f,\"seconds\":%.3f,"
               "\"svg\":\"%s\"}\n",
               s->stop_reason, s->steps_done, s->episodes, s->scored, s->infra_failures, s->trained,
               isnan(s->first_reward_mean) ? 0 : s->first_reward_mean,
               isnan(s->last_reward_mean) ? 0 : s->last_reward_mean, s->pass_rate, s->cost_usd,
               s->sandbox_cost_usd, s->gpu_cost_usd, s->seconds, s->svg_path);
        return;
    }
    printf("GRPO run %s: %s\n", s->stop_reason, s->message);
    printf("  episodes: %zu (%zu scored, %zu infrastructure failures), %zu sent to the trainer\n",
           s->episodes, s->scored, s->infra_failures, s->trained);
    printf("  reward: first step %.3f -> last step %.3f; pass rate %.1f%%; policy version %llu\n",
           s->first_reward_mean, s->last_reward_mean, s->pass_rate * 100, s->policy_version);
    printf("  cost: $%.6f (sandboxes $%.6f, GPU $%.6f); %.1f s, %.1f s per step, %.2f s per "
           "episode\n",
           s->cost_usd, s->sandbox_cost_usd, s->gpu_cost_usd, s->seconds, s->mean_step_seconds,
           s->mean_episode_seconds);
    printf("  reward curve: %s\n", s->svg_path);
}

static int parse_num(const char *s, double lo, double hi, double *ret, const char *flag) {
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "sbx grpo: %s: bad value \"%s\"\n", flag, s);
        return -1;
    }
    *ret = v;
    return 0;
}

static int parse_args(grpo_cli *c, int argc, char **argv) {
    enum {
        O_TASKS = 256,
        O_SPLIT,
        O_TRAINER,
        O_HOST,
        O_OUT,
        O_STEPS,
        O_TPS,
        O_GROUP,
        O_INFL,
        O_DR,
        O_NOTRAIN,
        O_TEMP,
        O_SEED,
        O_MODEL,
        O_MAXC,
        O_GPUH,
        O_GPUS,
        O_RETR,
        O_FAIL,
        O_JSON,
        O_PREV,
        O_STEPS_S,
        O_SBX,
        O_SBXH,
        O_MEAS,
        O_HELP
    };
    static const struct option opts[] = {
        {"tasks", 1, 0, O_TASKS},
        {"split", 1, 0, O_SPLIT},
        {"trainer", 1, 0, O_TRAINER},
        {"host", 1, 0, O_HOST},
        {"out", 1, 0, O_OUT},
        {"steps", 1, 0, O_STEPS},
        {"tasks-per-step", 1, 0, O_TPS},
        {"group-size", 1, 0, O_GROUP},
        {"max-inflight", 1, 0, O_INFL},
        {"dr-grpo", 0, 0, O_DR},
        {"no-train", 0, 0, O_NOTRAIN},
        {"temperature", 1, 0, O_TEMP},
        {"seed", 1, 0, O_SEED},
        {"model", 1, 0, O_MODEL},
        {"max-cost-usd", 1, 0, O_MAXC},
        {"gpu-hour-usd", 1, 0, O_GPUH},
        {"gpus", 1, 0, O_GPUS},
        {"trainer-retries", 1, 0, O_RETR},
        {"fail-graders", 1, 0, O_FAIL},
        {"json", 0, 0, O_JSON},
        {"preview", 0, 0, O_PREV},
        {"step-seconds", 1, 0, O_STEPS_S},
        {"sandboxes", 1, 0, O_SBX},
        {"sandbox-hour-usd", 1, 0, O_SBXH},
        {"measure", 1, 0, O_MEAS},
        {"help", 0, 0, O_HELP},
        {0, 0, 0, 0},
    };
    int ch;
    double v;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        const char *flag = "--?";
        for (const struct option *o = opts; o->name; o++)
            if (o->val == ch)
                flag = o->name;
        int r = 0;
        switch (ch) {
        case O_TASKS:
            c->o.tasks_path = optarg;
            break;
        case O_SPLIT:
            c->o.split = optarg;
            break;
        case O_TRAINER:
            c->o.trainer_url = optarg;
            break;
        case O_HOST:
            c->o.sandboxd = optarg;
            break;
        case O_OUT:
            c->o.out_dir = optarg;
            break;
        case O_MODEL:
            c->o.model = optarg;
            break;
        case O_DR:
            c->o.dr_grpo = 1;
            break;
        case O_NOTRAIN:
            c->o.no_train = 1;
            break;
        case O_JSON:
            c->json = 1;
            break;
        case O_PREV:
            c->preview = 1;
            break;
        case O_STEPS:
            r = parse_num(optarg, 1, 1e6, &v, flag);
            c->o.steps = (unsigned)v;
            break;
        case O_TPS:
            r = parse_num(optarg, 1, 1e5, &v, flag);
            c->o.tasks_per_step = (unsigned)v;
            break;
        case O_GROUP:
            r = parse_num(optarg, 1, 1024, &v, flag);
            c->o.group_size = (unsigned)v;
            break;
        case O_INFL:
            r = parse_num(optarg, 1, 1e5, &v, flag);
            c->o.max_inflight = (unsigned)v;
            break;
        case O_TEMP:
            r = parse_num(optarg, 0, 100, &c->o.temperature, flag);
            break;
        case O_SEED:
            r = parse_num(optarg, 0, 1e18, &v, flag);
            c->o.seed = (unsigned long long)v;
            break;
        case O_MAXC:
            r = parse_num(optarg, 0, 1e9, &c->o.max_cost_usd, flag);
            break;
        case O_GPUH:
            r = parse_num(optarg, 0, 1e6, &c->o.gpu_hour_usd, flag);
            break;
        case O_GPUS:
            r = parse_num(optarg, 1, 1e5, &v, flag);
            c->o.gpus = (unsigned)v;
            break;
        case O_RETR:
            r = parse_num(optarg, 0, 100, &v, flag);
            c->o.trainer_retries = (unsigned)v;
            break;
        case O_FAIL:
            r = parse_num(optarg, 0, 1, &c->o.fail_graders, flag);
            break;
        case O_STEPS_S:
            r = parse_num(optarg, 0, 1e7, &c->step_seconds, flag);
            break;
        case O_SBX:
            r = parse_num(optarg, 0, 1e7, &v, flag);
            c->sandboxes = (unsigned)v;
            break;
        case O_SBXH:
            r = parse_num(optarg, 0, 1e6, &c->sandbox_hour_usd, flag);
            break;
        case O_MEAS:
            r = parse_num(optarg, 1, 1e5, &v, flag);
            c->measure = (unsigned)v;
            break;
        case 'h':
        case O_HELP:
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
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
    if (parse_args(&c, argc, argv) < 0)
        return 2;
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
