/* What `sbx grpo --tasks FILE` reads: a task set (taskset.h) or a verl RL dataset in JSONL, one
 * row a line (docs/GRPO.md "verl datasets"):
 *   {"data_source":"openai/gsm8k","prompt":[{"role":"user","content":"..."}],"ability":"math",
 *    "reward_model":{"style":"rule","ground_truth":"72"},"extra_info":{"split":"train","index":0}}
 * Each row becomes a completion-answer task (no agent sandbox; the completion text is scored by
 * /grader/sbx_verl.py in a grading sandbox). A Parquet file is refused with how to convert it. */
#pragma once

#include "client/grpo/taskset.h"

#define GRPO_VERL_MAX_TOKENS                                                                       \
    1024 /* a verl row's max_completion_tokens (verl's response length)                            \
          */

/* reward_fn: a Python file with verl's compute_score (NULL: the built-in scorer named by each
 * row's data_source); reward_timeout_s: its budget per call (sbx_verl.py --timeout). Errors name
 * the file, line and field: "data.jsonl:7: reward_model.ground_truth: missing". */
int grpo_verlset_load(const char *path, const char *reward_fn, double reward_timeout_s,
                      grpo_taskset **ret, error_rec *err);
/* The rows of a verl JSONL text (source names it in errors and task ids). */
int grpo_verlset_parse(const char *text, size_t len, const char *source, const char *reward_fn,
                       double reward_timeout_s, grpo_taskset **ret, error_rec *err);
