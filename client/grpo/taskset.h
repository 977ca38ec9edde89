/* Task sets: a versioned JSONL file of GRPO tasks with a seeded train / held-out split.
 *
 * Line 1 is the header, every further non-blank line one task (format: docs/GRPO.md):
 *   {"task_set":"toy-files@1","split":{"seed":7,"held_out":0.25}}
 *   {"id":"k3","prompt":"task k3","setup":{...},"limits":{...},"max_turns":1,
 *    "max_completion_tokens":6,"grader":{"files":{...},"command":"...","reward":"pass_fail"}} */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRPO_MAX_EXIT_MAP 16
/* A reward (exit_codes' values, failure_reward, a grader's score S) is within +-this: the group
 * statistics stay finite. */
#define GRPO_REWARD_MAX 1e6
/* Where hidden tests are placed in the grading sandbox (the root is read-only; /tmp is not). */
#define GRPO_GRADER_DIR "/grader" /* the grading sandbox's, uid 1001 only (docs/GRPO.md) */

typedef struct grpo_file {
    char *path; /* absolute inside the sandbox */
    char *data;
    size_t len;
} grpo_file;

typedef enum grpo_reward_kind {
    GRPO_REWARD_PASS_FAIL,       /* exit 0 -> 1, exit 1 -> 0, anything else: grader failure */
    GRPO_REWARD_EXIT_CODES,      /* listed exit codes -> rewards, anything else: grader failure */
    GRPO_REWARD_EXPECTED_OUTPUT, /* stdout (trimmed) == expected -> 1, else 0 */
    GRPO_REWARD_SCORE            /* the last stdout line "score S": reward S (verl rows) */
} grpo_reward_kind;

#define GRPO_TIMEOUT_MS (15 * 60000u)     /* a sandbox's "limits.timeout" by default */
#define GRPO_IDLE_TIMEOUT_MS (5 * 60000u) /* and its "limits.idle_timeout" */

/* A task's "limits": the create fields its sandboxes get (0: the daemon's default). */
typedef struct grpo_limits {
    double cpu;
    uint64_t memory, disk;
    unsigned pids;
    uint64_t timeout_ms;      /* default 15m */
    uint64_t idle_timeout_ms; /* default 5m */
    double max_cost_usd;
} grpo_limits;

typedef struct grpo_task {
    char *id;
    char *prompt_text; /* one of prompt_text / prompt_ids / prompt_messages */
    int *prompt_ids;
    size_t n_prompt_ids;
    json_t
        *prompt_messages; /* chat messages (a verl row): the server's chat template renders them */
    /* A verl row (client/grpo/verlset.c): no agent sandbox, one completion whose text is the
     * answer, written to GRPO_GRADER_DIR/solution.txt of the grading sandbox. */
    bool completion_answer;
    const grpo_file *shared_file; /* owned by the set (the verl reward file); placed like grader
                                   * files; NULL: none */
    grpo_file *setup_files;
    size_t n_setup_files;
    char **setup_commands;
    size_t n_setup_commands;
    json_t *limits;      /* the task's "limits" object, as written */
    grpo_limits sandbox; /* the same, parsed: what both sandboxes are created with */
    char *image;         /* NULL: host */
    char *isolation;     /* NULL: the daemon's default; "native" or "gvisor" (agent sandbox) */
    json_t *network;     /* NULL: none (agent sandbox only; graders never get a network) */
    char *network_text;  /* network as sbx_create_opts takes it ("none", "open", JSON) */
    unsigned max_turns;
    unsigned max_completion_tokens;
    uint64_t command_timeout_ms;
    /* the grader */
    grpo_file *grader_files; /* placed under GRPO_GRADER_DIR in the grading sandbox only */
    size_t n_grader_files;
    char *grader_command; /* run as /bin/sh -c COMMAND; NULL when grader_argv is given */
    char **grader_argv;   /* NULL-terminated: started directly (grader.argv) */
    size_t n_grader_argv;
    uint64_t grader_timeout_ms;
    grpo_reward_kind reward_kind;
    int exit_codes[GRPO_MAX_EXIT_MAP];
    double exit_rewards[GRPO_MAX_EXIT_MAP];
    size_t n_exit_map;
    char *expected_output;
    double failure_reward; /* what an episode scores when the agent caused its failure (0) */
    struct grpo_env_server *env_server; /* "env_server" (client/grpo/envserver.h); NULL: none */
    bool held_out;
    unsigned line; /* line number in the file */
} grpo_task;

typedef struct grpo_taskset {
    char *name;
    char *version;
    uint64_t seed;
    double held_out_fraction;
    grpo_task *tasks;
    size_t n_tasks;
    grpo_file *shared_file; /* what tasks' shared_file points to (verlset.c); NULL: none */
} grpo_taskset;

/* Parse a task set. Errors name the source and line: "tasks.jsonl:4: task \"k3\": ...". */
int grpo_taskset_parse(const char *text, size_t len, const char *source, grpo_taskset **ret,
                       error_rec *err);
int grpo_taskset_load(const char *path, grpo_taskset **ret, error_rec *err);
/* Calls fn for each non-blank line of a JSONL text (leading blanks skipped) with its 1-based
 * number; stops at the first error, which gets the prefix "source:line: ". */
typedef int (*grpo_line_fn)(void *ud, const char *line, size_t len, unsigned lineno,
                            error_rec *err);
int grpo_jsonl_each(const char *text, size_t len, const char *source, grpo_line_fn fn, void *ud,
                    error_rec *err);
void grpo_taskset_free(grpo_taskset *ts);
/* The split: the round(n * held_out) tasks with the smallest hash(seed, id) are held out.
 * Deterministic for a seed, independent of line order. Called by parse; exposed for tests. */
void grpo_taskset_split(grpo_taskset *ts);
/* Map a grader's exit code to a reward by the task's rule; false: the grader failed. */
bool grpo_task_exit_reward(const grpo_task *t, int exit_code, double *ret_reward);
/* A finite number within +-GRPO_REWARD_MAX. */
bool grpo_reward_ok(double r);
