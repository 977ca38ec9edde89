/* verl's RL datasets as task sets (see verlset.h; docs/GRPO.md "verl datasets"): the format check
 * of `--tasks FILE`, a row's fields checked at load, and the completion-answer task made of it.
 * A row is never run as it is read: its fields go to the grading sandbox as row.json. */
#include "client/grpo/verlset.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERL_MAX_BYTES (1u << 30)       /* a dataset file */
#define VERL_MAX_REWARD_FILE (1u << 20) /* a reward file */
#define VERL_REWARD_PATH GRPO_GRADER_DIR "/reward_fn.py"

/* The data_source names /grader/sbx_verl.py scores itself: equal to its BUILTINS
 * (tests/unit/test_sbx_verl.sh compares the two lists). */
static const char *const verl_builtins[] = {"openai/gsm8k",   "gsm8k",
                                            "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval",
                                            "exact_match",    NULL};

typedef struct verl_ctx {
    grpo_taskset *ts;
    const char *base;   /* the file's base name: a row's task id is BASE:LINE */
    char timeout[32];   /* sbx_verl.py --timeout */
    uint64_t grader_ms; /* the grader's exec timeout */
} verl_ctx;

static int bad(error_rec *err, const char *field, const char *what) {
    return error_set(err, -EINVAL, "%s: %s", field, what);
}

static bool builtin(const char *ds) {
    for (size_t i = 0; verl_builtins[i]; i++)
        if (strcmp(ds, verl_builtins[i]) == 0)
            return true;
    return false;
}

/* "prompt": the chat messages, each {"role": "...", "content": "..."} (text only). */
static int check_prompt(json_t *p, error_rec *err) {
    if (!p || json_is_null(p))
        return bad(err, "prompt", "missing");
    if (!json_is_array(p) || json_array_size(p) == 0)
        return bad(err, "prompt",
                   "must be a non-empty array of chat messages {\"role\": ..., \"content\": ...}");
    for (size_t i = 0; i < json_array_size(p); i++) {
        json_t *m = json_array_get(p, i), *role = json_object_get(m, "role");
        json_t *content = json_object_get(m, "content");
        if (!json_is_object(m))
            return error_set(err, -EINVAL, "prompt[%zu]: must be an object", i);
        if (!json_is_string(role) || json_string_length(role) == 0)
            return error_set(err, -EINVAL, "prompt[%zu].role: %s", i,
                             role ? "must be a non-empty string" : "missing");
        if (!json_is_string(content))
            return error_set(err, -EINVAL, "prompt[%zu].content: %s", i,
                             !content ? "missing"
                                      : "must be a string (multimodal content is not supported)");
    }
    return 0;
}

static int check_reward_model(json_t *rm, error_rec *err) {
    if (!rm || json_is_null(rm))
        return bad(err, "reward_model", "missing");
    if (!json_is_object(rm))
        return bad(err, "reward_model",
                   "must be an object {\"style\": \"rule\", \"ground_truth\": ...}");
    json_t *gt = json_object_get(rm, "ground_truth"), *style = json_object_get(rm, "style");
    if (!gt || json_is_null(gt))
        return bad(err, "reward_model.ground_truth", "missing");
    if (style && !json_is_null(style) &&
        (!json_is_string(style) || strcmp(json_string_value(style), "rule") != 0))
        return bad(err, "reward_model.style",
                   "only \"rule\" is scored here (compute_score); a reward model is not");
    return 0;
}

/* The row's fields as verl's reward manager reads them; other columns are passed on as they are. */
static int check_row(json_t *row, bool have_reward_fn, error_rec *err) {
    if (!json_is_object(row))
        return error_set(err, -EINVAL, "a verl row must be a JSON object");
    json_t *ds = json_object_get(row, "data_source"), *x = json_object_get(row, "extra_info");
    json_t *ability = json_object_get(row, "ability");
    int r = check_prompt(json_object_get(row, "prompt"), err);
    if (r < 0)
        return r;
    if (!ds || json_is_null(ds))
        return bad(err, "data_source", "missing");
    if (!json_is_string(ds) || json_string_length(ds) == 0)
        return bad(err, "data_source", "must be a non-empty string");
    if ((r = check_reward_model(json_object_get(row, "reward_model"), err)) < 0)
        return r;
    if (x && !json_is_null(x) && !json_is_object(x))
        return bad(err, "extra_info", "must be an object");
    if (ability && !json_is_null(ability) && !json_is_string(ability))
        return bad(err, "ability", "must be a string");
    for (const char *const *k = (const char *const[]){"images", "videos", NULL}; *k; k++)
        if (json_object_get(row, *k) && !json_is_null(json_object_get(row, *k)))
            return bad(err, *k, "multimodal rows are not supported");
    if (!have_reward_fn && !builtin(json_string_value(ds))) {
        char names[256] = "";
        for (size_t i = 0, n = 0; verl_builtins[i] && n < sizeof(names); i++)
            n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "",
                                  verl_builtins[i]);
        return error_set(err, -EINVAL,
                         "data_source: no built-in scorer for \"%.64s\" (built-ins: %s); give the "
                         "reward function with --reward-fn FILE",
                         json_string_value(ds), names);
    }
    return 0;
}

/* The grader: python3 sbx_verl.py --timeout S row.json solution.txt [reward_fn.py], started
 * directly in /grader; its "score S" line is the reward. */
static int verl_grader(grpo_task *t, json_t *row, const verl_ctx *c) {
    const char *argv[] = {"python3",  "sbx_verl.py",  "--timeout",    c->timeout,
                          "row.json", "solution.txt", "reward_fn.py", NULL};
    size_t n = c->ts->shared_file ? 7 : 6;
    if (!(t->grader_argv = calloc(n + 1, sizeof(char *))))
        return -ENOMEM;
    for (t->n_grader_argv = 0; t->n_grader_argv < n; t->n_grader_argv++)
        if (!(t->grader_argv[t->n_grader_argv] = strdup(argv[t->n_grader_argv])))
            return -ENOMEM;
    if (!(t->grader_files = calloc(1, sizeof(grpo_file))))
        return -ENOMEM;
    t->n_grader_files = 1;
    t->grader_files[0].path = strdup(GRPO_GRADER_DIR "/row.json");
    t->grader_files[0].data = json_dumps(row, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!t->grader_files[0].path || !t->grader_files[0].data)
        return -ENOMEM;
    t->grader_files[0].len = strlen(t->grader_files[0].data);
    t->grader_timeout_ms = c->grader_ms;
    t->reward_kind = GRPO_REWARD_SCORE;
    t->shared_file = c->ts->shared_file;
    return 0;
}

/* One row as a task: one completion, no agent sandbox; extra_info.split "test" is held out. */
static int verl_task(json_t *row, grpo_task *t, unsigned lineno, const verl_ctx *c) {
    json_t *split = json_object_get(json_object_get(row, "extra_info"), "split");
    if (asprintf(&t->id, "%.100s:%u", c->base, lineno) < 0) {
        t->id = NULL;
        return -ENOMEM;
    }
    t->prompt_messages = json_incref(json_object_get(row, "prompt"));
    t->completion_answer = true;
    if (!(t->limits = json_object()))
        return -ENOMEM;
    t->sandbox.timeout_ms = GRPO_TIMEOUT_MS;
    t->sandbox.idle_timeout_ms = GRPO_IDLE_TIMEOUT_MS;
    t->max_turns = 1;
    t->max_completion_tokens = GRPO_VERL_MAX_TOKENS;
    t->command_timeout_ms = 30000;
    t->held_out = json_is_string(split) && strcmp(json_string_value(split), "test") == 0;
    t->line = lineno;
    return verl_grader(t, row, c);
}

static int on_row(void *ud, const char *line, size_t len, unsigned lineno, error_rec *err) {
    verl_ctx *c = ud;
    json_error_t jerr;
    json_t *row = json_loadb(line, len, 0, &jerr);
    if (!row)
        return error_set(err, -EINVAL, "invalid JSON: %s (column %d)", jerr.text, jerr.column);
    int r = check_row(row, c->ts->shared_file != NULL, err);
    grpo_task *nt = r < 0 ? NULL : realloc(c->ts->tasks, (c->ts->n_tasks + 1) * sizeof(*nt));
    if (r >= 0 && !nt)
        r = -ENOMEM;
    if (r >= 0) {
        c->ts->tasks = nt;
        memset(&nt[c->ts->n_tasks], 0, sizeof(*nt));
        r = verl_task(row, &nt[c->ts->n_tasks++], lineno, c);
        if (r == -ENOMEM)
            r = error_set(err, r, "out of memory");
    }
    json_decref(row);
    return r;
}

/* --reward-fn FILE: read once, written into every grading sandbox as /grader/reward_fn.py. It
 * runs only there; here it is only looked at for the name compute_score. */
static int load_reward_fn(const char *path, grpo_taskset *ts, error_rec *err) {
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = file_read_all(path, VERL_MAX_REWARD_FILE, &text, &len);
    if (r < 0)
        return error_set_errno(err, r, "--reward-fn %s: cannot read it", path);
    if (memmem(text, len, "compute_score", 13) == NULL)
        return error_set(err, -EINVAL,
                         "--reward-fn %s: no compute_score in it (verl's reward function: "
                         "def compute_score(data_source, solution_str, ground_truth, "
                         "extra_info=None))",
                         path);
    if (!(ts->shared_file = calloc(1, sizeof(grpo_file))) ||
        !(ts->shared_file->path = strdup(VERL_REWARD_PATH)))
        return error_set(err, -ENOMEM, "out of memory");
    ts->shared_file->data = TAKE_PTR(text);
    ts->shared_file->len = len;
    return 0;
}

static int verl_parse(const char *text, size_t len, const char *path, const char *reward_fn,
                      double timeout_s, grpo_taskset *ts, error_rec *err) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    verl_ctx c = {.ts = ts, .base = base, .grader_ms = (uint64_t)(timeout_s * 1000) + 30000};
    snprintf(c.timeout, sizeof(c.timeout), "%g", timeout_s);
    ts->name = strndup(base, dot && dot != base ? (size_t)(dot - base) : strlen(base));
    ts->version = strdup("verl");
    if (!ts->name || !ts->version)
        return error_set(err, -ENOMEM, "out of memory");
    int r = reward_fn ? load_reward_fn(reward_fn, ts, err) : 0;
    if (r >= 0)
        r = grpo_jsonl_each(text, len, path, on_row, &c, err);
    if (r >= 0 && ts->n_tasks == 0)
        r = error_set(err, -EINVAL, "%s: no rows", path);
    return r;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

static int parquet_refused(const char *path, error_rec *err) {
    return error_set(err, -EINVAL,
                     "%s: a Parquet file: sbx grpo reads verl datasets as JSONL (Debian 12 "
                     "packages neither pyarrow nor fastparquet); convert it where pandas and "
                     "pyarrow are installed: python3 -c \"import pandas as p; "
                     "p.read_parquet('%.64s').to_json('data.jsonl', orient='records', "
                     "lines=True)\"",
                     path, path);
}

/* verl rows: the first line is an object without a task set's header but with one of a row's
 * own fields. */
static bool looks_verl(const char *text, size_t len) {
    size_t a = strspn(text, " \t\r\n");
    const char *nl = a < len ? memchr(text + a, '\n', len - a) : NULL;
    json_t *o =
        a < len ? json_loadb(text + a, nl ? (size_t)(nl - text) - a : len - a, 0, NULL) : NULL;
    bool verl = json_is_object(o) && !json_object_get(o, "task_set") &&
                (json_object_get(o, "data_source") || json_object_get(o, "reward_model") ||
                 json_is_array(json_object_get(o, "prompt")));
    json_decref(o);
    return verl;
}

int grpo_verlset_parse(const char *text, size_t len, const char *source, const char *reward_fn,
                       double reward_timeout_s, grpo_taskset **ret, error_rec *err) {
    if (!(reward_timeout_s > 0 && reward_timeout_s <= 3600))
        return error_set(err, -EINVAL, "the reward timeout must be in (0, 3600] seconds");
    grpo_taskset *ts = calloc(1, sizeof(*ts));
    if (!ts)
        return error_set(err, -ENOMEM, "out of memory");
    int r = verl_parse(text, len, source, reward_fn, reward_timeout_s, ts, err);
    if (r < 0) {
        grpo_taskset_free(ts);
        return r;
    }
    *ret = ts;
    return 0;
}

int grpo_verlset_load(const char *path, const char *reward_fn, double reward_timeout_s,
                      grpo_taskset **ret, error_rec *err) {
    if (has_suffix(path, ".parquet"))
        return parquet_refused(path, err);
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = file_read_all(path, VERL_MAX_BYTES, &text, &len);
    if (r < 0)
        return error_set_errno(err, r, "cannot read task set %s", path);
    if (len >= 4 && memcmp(text, "PAR1", 4) == 0)
        return parquet_refused(path, err);
    if (looks_verl(text, len))
        return grpo_verlset_parse(text, len, path, reward_fn, reward_timeout_s, ret, err);
    if (reward_fn)
        return error_set(err, -EINVAL,
                         "--reward-fn is for verl datasets; %s is a task set (its graders "
                         "score it)",
                         path);
    return grpo_taskset_parse(text, len, path, ret, err);
}
