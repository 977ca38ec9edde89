/* libsbx's GRPO episode runner, for trainers that embed it (`sbx grpo` is a thin wrapper).
 *
 * A run is steps x tasks_per_step x group_size episodes. All episodes of a step run concurrently
 * on one libuv loop (bounded by max_inflight): each gets its own sandbox on sandboxd, talks to a
 * generation server with vLLM's /v1/completions, /tokenize and /detokenize, and is scored in a
 * fresh grading sandbox by hidden tests. Scored groups go to the trainer's POST /v1/train_step.
 * Protocol, task format, grading design and outputs: docs/GRPO.md. */
#ifndef SBX_GRPO_H
#define SBX_GRPO_H

#include <sbx.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_grpo_progress {
    unsigned step; /* 1-based */
    unsigned steps;
    size_t episodes_done; /* this step */
    size_t episodes_inflight;
    size_t episodes_total; /* this step */
    double reward_mean;    /* this step, over episodes with a reward */
    double pass_rate;      /* this step: reward >= 1 among episodes with a reward */
    size_t infra_failures; /* the whole run */
    double step_seconds;   /* elapsed in this step */
    double cost_usd;       /* the whole run so far: sandboxes + GPU time */
    int step_finished;     /* 1 on the last update of a step */
} sbx_grpo_progress;

typedef void (*sbx_grpo_progress_cb)(void *userdata, const sbx_grpo_progress *p);

typedef struct sbx_grpo_opts {
    const char *tasks_path;   /* the task set (JSONL), or a verl dataset (JSONL rows) */
    const char *split;        /* "train" (default), "held_out" or "all" */
    const char *sandboxd;     /* endpoints as sbx_client_new takes them (comma-separated: each
                               * sandbox placed by free capacity); NULL: $SBX_HOST or default */
    const char *token;        /* bearer token for TCP; NULL: $SBX_TOKEN */
    const char *trainer_url;  /* generation + training server, e.g. "http://127.0.0.1:8000" */
    const char *model;        /* "model" field of completion requests; NULL: omitted */
    const char *out_dir;      /* logs, summary.json, reward.svg; created */
    unsigned steps;           /* default 10 */
    unsigned tasks_per_step;  /* default 16 */
    unsigned group_size;      /* default 8 */
    unsigned max_inflight;    /* episodes at once; default 64 */
    int dr_grpo;              /* advantage r - mean instead of (r - mean) / (std + 1e-6) */
    int no_train;             /* generate and grade only (evaluation, --measure) */
    double temperature;       /* default 1.0 */
    unsigned long long seed;  /* task order and failure injection */
    double max_cost_usd;      /* 0: no cap */
    double gpu_hour_usd;      /* per GPU; 0: GPU time not counted */
    unsigned gpus;            /* default 1 */
    unsigned trainer_retries; /* per request, default 3 */
    double fail_graders;      /* test hook: fraction of graders made to crash (0) */
    int handle_signals;       /* SIGINT/SIGTERM stop the run cleanly */
    sbx_grpo_progress_cb on_progress;
    void *userdata;
    /* verl datasets (tasks_path a JSONL file of verl rows; docs/GRPO.md "verl datasets") */
    const char *reward_fn;          /* a Python file with verl's compute_score(data_source,
                                     * solution_str, ground_truth, extra_info); NULL: the built-in
                                     * scorer named by each row's data_source */
    double reward_timeout_s;        /* per compute_score call (default 10): past it, reward 0 */
    unsigned max_completion_tokens; /* every task's max_tokens per completion; 0: the task's
                                     * own (a verl row: 1024) */
} sbx_grpo_opts;

typedef struct sbx_grpo_summary {
    unsigned steps_done;
    size_t episodes;                            /* started */
    size_t scored;                              /* with a reward */
    size_t infra_failures;                      /* excluded from statistics and training */
    size_t trained;                             /* episodes sent to the trainer */
    double first_reward_mean, last_reward_mean; /* first and last step */
    double pass_rate;                           /* whole run */
    double sandbox_cost_usd, gpu_cost_usd, cost_usd;
    double seconds, mean_step_seconds, mean_episode_seconds;
    unsigned long long policy_version; /* at the end */
    char stop_reason[32]; /* "completed", "max_cost_usd", "trainer_failed", "interrupted", ... */
    char message[512];    /* a human sentence about how the run ended */
    char svg_path[512];   /* the reward curve */
    char warning[512];    /* "" or tasks with a high rate of infrastructure failures */
} sbx_grpo_summary;

void sbx_grpo_opts_init(sbx_grpo_opts *opts);
/* Runs to the end. SBX_OK when the run completed or stopped at its cost cap; otherwise an error
 * (the trainer failed, the daemon is unreachable, bad tasks...) with err filled. The summary is
 * filled in both cases once the run started. No sandbox of the run is left behind. */
sbx_code sbx_grpo_run(const sbx_grpo_opts *opts, sbx_grpo_summary *ret, sbx_err *err);

/* Cost preview: GPU and sandbox spend of a run. */
typedef struct sbx_grpo_preview {
    unsigned steps;
    double step_seconds;
    unsigned gpus;
    double gpu_hour_usd;
    unsigned sandboxes; /* alive during a step */
    double sandbox_hour_usd;
    /* results */
    double gpu_usd, sandbox_usd, total_usd, sandbox_share;
} sbx_grpo_preview;

void sbx_grpo_preview_compute(sbx_grpo_preview *p);

#ifdef __cplusplus
}
#endif
#endif
