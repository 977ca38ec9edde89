/* Task set parsing and the seeded train / held-out split (see taskset.h). */
#include "client/grpo/taskset.h"
#include "client/grpo/envserver.h"

#include "common/fdutil.h"
#include "common/jsonkeys.h"
#include "common/macro.h"
#include "common/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TASKSET_MAX_BYTES (64u << 20)

static void files_free(grpo_file *f, size_t n) {
    for (size_t i = 0; f && i < n; i++) {
        free(f[i].path);
        free(f[i].data);
    }
    free(f);
}

/* A JSON array of strings into a NULL-terminated vector (*ret, *n as far as filled). */
static int parse_strv(json_t *arr, const char *what, char ***ret, size_t *n, error_rec *err) {
    if (!json_is_array(arr))
        return error_set(err, -EINVAL, "\"%s\" must be an array of strings", what);
    if (!(*ret = calloc(json_array_size(arr) + 1, sizeof(char *))))
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *c = json_array_get(arr, i);
        if (!json_is_string(c))
            return error_set(err, -EINVAL, "\"%s\"[%zu] must be a string", what, i);
        if (!((*ret)[(*n)++] = strdup(json_string_value(c))))
            return -ENOMEM;
    }
    return 0;
}

static void strv_free(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void task_clear(grpo_task *t) {
    free(t->id);
    free(t->prompt_text);
    free(t->prompt_ids);
    json_decref(t->prompt_messages);
    files_free(t->setup_files, t->n_setup_files);
    strv_free(t->setup_commands, t->n_setup_commands);
    strv_free(t->grader_argv, t->n_grader_argv);
    json_decref(t->limits);
    free(t->image);
    free(t->isolation);
    json_decref(t->network);
    free(t->network_text);
    files_free(t->grader_files, t->n_grader_files);
    free(t->grader_command);
    free(t->expected_output);
    grpo_env_server_free(t->env_server);
}

void grpo_taskset_free(grpo_taskset *ts) {
    if (!ts)
        return;
    for (size_t i = 0; i < ts->n_tasks; i++)
        task_clear(&ts->tasks[i]);
    free(ts->tasks);
    files_free(ts->shared_file, ts->shared_file ? 1 : 0);
    free(ts->name);
    free(ts->version);
    free(ts);
}

/* Files given as {"path": "content"}; relative paths are placed under base (absolute ones only
 * where absolute_ok). */
static int parse_files(json_t *obj, const char *base, bool absolute_ok, grpo_file **ret,
                       size_t *ret_n, const char *what, error_rec *err) {
    if (!json_is_object(obj))
        return error_set(err, -EINVAL, "\"%s\" must be an object of path: content", what);
    size_t n = json_object_size(obj), i = 0;
    grpo_file *files = calloc(n ? n : 1, sizeof(*files));
    if (!files)
        return -ENOMEM;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!json_is_string(v) || !*key || strstr(key, "..") || (key[0] == '/' && !absolute_ok)) {
            files_free(files, i);
            return error_set(err, -EINVAL,
                             "\"%s\": file \"%s\" needs a string content and a "
                             "%spath without \"..\"",
                             what, key, absolute_ok ? "" : "relative ");
        }
        if (key[0] == '/')
            files[i].path = strdup(key);
        else if (asprintf(&files[i].path, "%s/%s", base, key) < 0)
            files[i].path = NULL;
        files[i].len = json_string_length(v);
        files[i].data = malloc(files[i].len + 1);
        if (!files[i].path || !files[i].data) {
            files_free(files, i + 1);
            return -ENOMEM;
        }
        memcpy(files[i].data, json_string_value(v), files[i].len + 1);
        i++;
    }
    *ret = files;
    *ret_n = n;
    return 0;
}

static int parse_duration(json_t *v, uint64_t dflt, uint64_t *ret, const char *what,
                          error_rec *err) {
    if (!v) {
        *ret = dflt;
        return 0;
    }
    char buf[64];
    if (json_is_number(v))
        snprintf(buf, sizeof(buf), "%.17g", json_number_value(v));
    else if (json_is_string(v))
        snprintf(buf, sizeof(buf), "%s", json_string_value(v));
    else
        return error_set(err, -EINVAL, "\"%s\" must be a duration", what);
    if (units_parse_duration(buf, ret) < 0 || *ret == 0)
        return error_set(err, -EINVAL, "\"%s\": bad duration \"%s\"", what, buf);
    return 0;
}

static int parse_uint(json_t *v, unsigned dflt, unsigned max, unsigned *ret, const char *what,
                      error_rec *err) {
    if (!v) {
        *ret = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
        return error_set(err, -EINVAL, "\"%s\" must be an integer in [1, %u]", what, max);
    *ret = (unsigned)json_integer_value(v);
    return 0;
}

/* The keys of each object of a task file (docs/GRPO.md); any other is an error naming it. */
static const char *const task_keys[] = {"id",
                                        "prompt",
                                        "setup",
                                        "limits",
                                        "image",
                                        "network",
                                        "max_turns",
                                        "max_completion_tokens",
                                        "command_timeout",
                                        "grader",
                                        "failure_reward",
                                        "env_server", /* client/grpo/envserver_task.c */
                                        "isolation",
                                        NULL};
static const char *const setup_keys[] = {"files", "commands", NULL};
static const char *const grader_keys[] = {"command",         "argv", "files", "timeout", "reward",
                                          "expected_output", NULL};
static const char *const reward_keys[] = {"exit_codes", NULL};
static const char *const limits_keys[] = {"cpu",     "memory",       "disk",         "pids",
                                          "timeout", "idle_timeout", "max_cost_usd", NULL};
static const char *const header_keys[] = {"task_set", "split", NULL};
static const char *const split_keys[] = {"seed", "held_out", NULL};

static int parse_prompt(json_t *v, grpo_task *t, error_rec *err) {
    if (json_is_string(v) && json_string_length(v) > 0)
        return (t->prompt_text = strdup(json_string_value(v))) ? 0 : -ENOMEM;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return error_set(err, -EINVAL, "\"prompt\" must be a non-empty string or token id array");
    t->n_prompt_ids = json_array_size(v);
    t->prompt_ids = calloc(t->n_prompt_ids, sizeof(int));
    if (!t->prompt_ids)
        return -ENOMEM;
    for (size_t i = 0; i < t->n_prompt_ids; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX)
            return error_set(err, -EINVAL, "\"prompt\"[%zu] is not a token id", i);
        t->prompt_ids[i] = (int)json_integer_value(e);
    }
    return 0;
}

static int parse_setup(json_t *setup, grpo_task *t, error_rec *err) {
    if (!setup)
        return 0;
    if (!json_is_object(setup))
        return error_set(err, -EINVAL, "\"setup\" must be an object");
    json_t *files = json_object_get(setup, "files"), *cmds = json_object_get(setup, "commands");
    if (jsonkeys_check(setup, setup_keys, "setup", err) < 0)
        return -EINVAL;
    if (files) {
        int r = parse_files(files, "/workspace", true, &t->setup_files, &t->n_setup_files,
                            "setup.files", err);
        if (r < 0)
            return r;
    }
    if (!cmds)
        return 0;
    return parse_strv(cmds, "setup.commands", &t->setup_commands, &t->n_setup_commands, err);
}

static int parse_reward(json_t *rule, grpo_task *t, json_t *expected, error_rec *err) {
    if (expected && rule)
        return error_set(err, -EINVAL,
                         "\"grader.reward\" cannot be given with \"grader.expected_output\" "
                         "(which is its own rule)");
    if (expected) {
        if (!json_is_string(expected))
            return error_set(err, -EINVAL, "\"grader.expected_output\" must be a string");
        t->reward_kind = GRPO_REWARD_EXPECTED_OUTPUT;
        return (t->expected_output = strdup(json_string_value(expected))) ? 0 : -ENOMEM;
    }
    if (!rule || (json_is_string(rule) && strcmp(json_string_value(rule), "pass_fail") == 0)) {
        t->reward_kind = GRPO_REWARD_PASS_FAIL;
        return 0;
    }
    if (json_is_string(rule) && strcmp(json_string_value(rule), "score") == 0) {
        t->reward_kind = GRPO_REWARD_SCORE;
        return 0;
    }
    json_t *codes = json_object_get(rule, "exit_codes");
    if (jsonkeys_check(rule, reward_keys, "grader.reward", err) < 0)
        return -EINVAL;
    if (!json_is_object(codes) || json_object_size(codes) == 0 ||
        json_object_size(codes) > GRPO_MAX_EXIT_MAP)
        return error_set(err, -EINVAL,
                         "\"grader.reward\" must be \"pass_fail\", \"score\" or "
                         "{\"exit_codes\": {\"0\": 1.0, ...}} (at most %d codes)",
                         GRPO_MAX_EXIT_MAP);
    t->reward_kind = GRPO_REWARD_EXIT_CODES;
    const char *key;
    json_t *v;
    json_object_foreach(codes, key, v) {
        char *end;
        long code = strtol(key, &end, 10);
        bool canonical = key[0] >= '0' && key[0] <= '9' && (key[0] != '0' || !key[1]);
        if (!canonical || *end || end == key || code < 0 || code > 255 || !json_is_number(v))
            return error_set(err, -EINVAL, "\"grader.reward.exit_codes\": bad entry \"%s\"", key);
        if (!grpo_reward_ok(json_number_value(v)))
            return error_set(err, -EINVAL,
                             "\"grader.reward.exit_codes\": the reward of \"%s\" must be a "
                             "number in [-1e6, 1e6]",
                             key);
        t->exit_codes[t->n_exit_map] = (int)code;
        t->exit_rewards[t->n_exit_map++] = json_number_value(v);
    }
    return 0;
}

static int parse_grader(json_t *g, grpo_task *t, error_rec *err) {
    if (!json_is_object(g))
        return error_set(err, -EINVAL, "missing \"grader\" object");
    json_t *cmd = json_object_get(g, "command"), *files = json_object_get(g, "files");
    json_t *argv = json_object_get(g, "argv");
    if (jsonkeys_check(g, grader_keys, "grader", err) < 0)
        return -EINVAL;
    if (argv && cmd)
        return error_set(err, -EINVAL, "give \"grader.command\" or \"grader.argv\", not both");
    if (argv) {
        int r = parse_strv(argv, "grader.argv", &t->grader_argv, &t->n_grader_argv, err);
        if (r < 0)
            return r;
        if (t->n_grader_argv == 0 || !t->grader_argv[0][0])
            return error_set(err, -EINVAL, "\"grader.argv\" must start with a program");
    } else if (!json_is_string(cmd) || json_string_length(cmd) == 0)
        return error_set(err, -EINVAL, "\"grader.command\" must be a non-empty string");
    if (cmd && !(t->grader_command = strdup(json_string_value(cmd))))
        return -ENOMEM;
    if (files) {
        int r = parse_files(files, GRPO_GRADER_DIR, false, &t->grader_files, &t->n_grader_files,
                            "grader.files", err);
        if (r < 0)
            return r;
    }
    int r = parse_duration(json_object_get(g, "timeout"), 30000, &t->grader_timeout_ms,
                           "grader.timeout", err);
    if (r < 0)
        return r;
    return parse_reward(json_object_get(g, "reward"), t, json_object_get(g, "expected_output"),
                        err);
}

static int parse_size(json_t *v, uint64_t *ret, const char *what, error_rec *err) {
    char buf[64] = "";
    if (json_is_integer(v) && json_integer_value(v) > 0)
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
    else if (json_is_string(v))
        snprintf(buf, sizeof(buf), "%s", json_string_value(v));
    if (!v)
        return 0;
    if (units_parse_size(buf, ret) < 0 || *ret == 0)
        return error_set(err, -EINVAL, "\"limits.%s\" must be a size like \"512Mi\"", what);
    return 0;
}

static int parse_positive(json_t *v, double *ret, const char *what, error_rec *err) {
    if (!v)
        return 0;
    if (!json_is_number(v) || json_number_value(v) <= 0)
        return error_set(err, -EINVAL, "\"limits.%s\" must be a number > 0", what);
    *ret = json_number_value(v);
    return 0;
}

/* The create fields of "limits" (docs/GRPO.md); other keys are refused, as the API does. */
static int parse_limits(json_t *l, grpo_limits *out, error_rec *err) {
    unsigned pids = 0;
    int r;
    if ((r = jsonkeys_check(l, limits_keys, "limits", err)) < 0 ||
        (r = parse_positive(json_object_get(l, "cpu"), &out->cpu, "cpu", err)) < 0 ||
        (r = parse_size(json_object_get(l, "memory"), &out->memory, "memory", err)) < 0 ||
        (r = parse_size(json_object_get(l, "disk"), &out->disk, "disk", err)) < 0 ||
        (r = parse_uint(json_object_get(l, "pids"), 0, 1u << 20, &pids, "limits.pids", err)) < 0 ||
        (r = parse_duration(json_object_get(l, "timeout"), GRPO_TIMEOUT_MS, &out->timeout_ms,
                            "limits.timeout", err)) < 0 ||
        (r = parse_duration(json_object_get(l, "idle_timeout"), GRPO_IDLE_TIMEOUT_MS,
                            &out->idle_timeout_ms, "limits.idle_timeout", err)) < 0 ||
        (r = parse_positive(json_object_get(l, "max_cost_usd"), &out->max_cost_usd, "max_cost_usd",
                            err)) < 0)
        return r;
    out->pids = pids;
    return 0;
}

static int parse_sandbox(json_t *o, grpo_task *t, error_rec *err) {
    json_t *limits = json_object_get(o, "limits"), *image = json_object_get(o, "image");
    json_t *net = json_object_get(o, "network");
    if (limits && !json_is_object(limits))
        return error_set(err, -EINVAL, "\"limits\" must be an object");
    t->limits = limits ? json_deep_copy(limits) : json_object();
    if (!t->limits)
        return -ENOMEM;
    int r = parse_limits(t->limits, &t->sandbox, err);
    if (r < 0)
        return r;
    if (image && !json_is_string(image))
        return error_set(err, -EINVAL, "\"image\" must be a string");
    if (image && !(t->image = strdup(json_string_value(image))))
        return -ENOMEM;
    json_t *iso = json_object_get(o, "isolation");
    const char *is = json_string_value(iso);
    if (iso && !(is && (strcmp(is, "native") == 0 || strcmp(is, "gvisor") == 0)))
        return error_set(err, -EINVAL, "\"isolation\" must be \"native\" or \"gvisor\"");
    if (is && !(t->isolation = strdup(is)))
        return -ENOMEM;
    const char *ns = json_string_value(net); /* what libsbx takes (its sbx_create_opts) */
    if (net && !json_is_object(net) && !(ns && (!strcmp(ns, "none") || !strcmp(ns, "open"))))
        return error_set(err, -EINVAL, "\"network\" must be \"none\", \"open\" or {\"allow\":[]}");
    t->network = net ? json_deep_copy(net) : NULL;
    if (net && !(t->network_text = json_is_string(net) ? strdup(json_string_value(net))
                                                       : json_dumps(net, JSON_COMPACT)))
        return -ENOMEM;
    return 0;
}

/* What an episode scores when the agent caused its failure (docs/GRPO.md "Failure
 * attribution"): a finite number, 0 by default. */
static int parse_failure_reward(json_t *v, grpo_task *t, error_rec *err) {
    if (!v)
        return 0;
    if (!json_is_number(v) || !grpo_reward_ok(json_number_value(v)))
        return error_set(err, -EINVAL, "\"failure_reward\" must be a number in [-1e6, 1e6]");
    t->failure_reward = json_number_value(v);
    return 0;
}

static int parse_task(json_t *o, grpo_task *t, error_rec *err) {
    if (!json_is_object(o))
        return error_set(err, -EINVAL, "a task must be a JSON object");
    json_t *id = json_object_get(o, "id");
    if (!json_is_string(id) || json_string_length(id) == 0 || json_string_length(id) > 128)
        return error_set(err, -EINVAL, "missing \"id\" (a string of 1..128 bytes)");
    if (!(t->id = strdup(json_string_value(id))))
        return -ENOMEM;
    int r = jsonkeys_check(o, task_keys, NULL, err);
    if (r >= 0)
        r = parse_prompt(json_object_get(o, "prompt"), t, err);
    if (r >= 0)
        r = parse_setup(json_object_get(o, "setup"), t, err);
    if (r >= 0)
        r = parse_sandbox(o, t, err);
    if (r >= 0)
        r = parse_uint(json_object_get(o, "max_turns"), 1, 1000, &t->max_turns, "max_turns", err);
    if (r >= 0)
        r = parse_uint(json_object_get(o, "max_completion_tokens"), 256, 1u << 20,
                       &t->max_completion_tokens, "max_completion_tokens", err);
    if (r >= 0)
        r = parse_duration(json_object_get(o, "command_timeout"), 30000, &t->command_timeout_ms,
                           "command_timeout", err);
    if (r >= 0)
        r = parse_grader(json_object_get(o, "grader"), t, err);
    if (r >= 0)
        r = parse_failure_reward(json_object_get(o, "failure_reward"), t, err);
    if (r >= 0) /* a server environment: client/grpo/envserver_task.c */
        r = grpo_env_server_parse(json_object_get(o, "env_server"), &t->env_server, err);
    if (r >= 0)
        r = grpo_env_server_check_image(t->env_server, t->image, err);
    if (r < 0 && t->id)
        error_prefix(err, "task \"%s\"", t->id);
    return r;
}

static int parse_header(json_t *o, grpo_taskset *ts, error_rec *err) {
    json_t *name = json_object_get(o, "task_set"), *split = json_object_get(o, "split");
    const char *s = json_string_value(name), *at = s ? strchr(s, '@') : NULL;
    if (!at || at == s || !at[1])
        return error_set(err, -EINVAL,
                         "the first line must be the header "
                         "{\"task_set\":\"name@version\",\"split\":{\"seed\":N,\"held_out\":F}}");
    ts->name = strndup(s, (size_t)(at - s));
    ts->version = strdup(at + 1);
    if (!ts->name || !ts->version)
        return -ENOMEM;
    if (split && !json_is_object(split))
        return error_set(err, -EINVAL,
                         "header: \"split\" must be an object {\"seed\":N,\"held_out\":F}");
    if (jsonkeys_check(o, header_keys, "header", err) < 0 ||
        jsonkeys_check(split, split_keys, "split", err) < 0)
        return -EINVAL;
    if (!split)
        return 0;
    json_t *seed = json_object_get(split, "seed"), *ho = json_object_get(split, "held_out");
    if ((seed && (!json_is_integer(seed) || json_integer_value(seed) < 0)) ||
        (ho && (!json_is_number(ho) || json_number_value(ho) < 0 || json_number_value(ho) >= 1)))
        return error_set(err, -EINVAL,
                         "header: \"split\" needs \"seed\" (integer >= 0) and "
                         "\"held_out\" (a fraction in [0, 1))");
    ts->seed = seed ? (uint64_t)json_integer_value(seed) : 0;
    ts->held_out_fraction = ho ? json_number_value(ho) : 0;
    return 0;
}

static int check_unique(const grpo_taskset *ts, const char *id) {
    for (size_t i = 0; i + 1 < ts->n_tasks; i++)
        if (strcmp(ts->tasks[i].id, id) == 0)
            return -EEXIST;
    return 0;
}

/* One line: the header when it is the first, else a task appended to ts. */
static int parse_line(grpo_taskset *ts, const char *line, size_t len, bool header, unsigned lineno,
                      error_rec *err) {
    json_error_t jerr;
    json_t *o = json_loadb(line, len, 0, &jerr);
    if (!o)
        return error_set(err, -EINVAL, "invalid JSON: %s (column %d)", jerr.text, jerr.column);
    int r;
    if (header) {
        r = json_is_object(o) ? parse_header(o, ts, err)
            : json_is_array(o)
                ? error_set(err, -EINVAL,
                            "the file is JSON Lines (one JSON object per line: a task set's "
                            "header and its tasks, or verl rows), not a JSON array")
                : error_set(err, -EINVAL, "the first line must be the header, a JSON object");
    } else {
        grpo_task *nt = realloc(ts->tasks, (ts->n_tasks + 1) * sizeof(*nt));
        if (!nt) {
            json_decref(o);
            return -ENOMEM;
        }
        ts->tasks = nt;
        grpo_task *t = &ts->tasks[ts->n_tasks++];
        memset(t, 0, sizeof(*t));
        t->line = lineno;
        r = parse_task(o, t, err);
        if (r >= 0 && check_unique(ts, t->id) < 0)
            r = error_set(err, -EINVAL, "duplicate task id \"%s\"", t->id);
    }
    json_decref(o);
    return r;
}

int grpo_jsonl_each(const char *text, size_t len, const char *source, grpo_line_fn fn, void *ud,
                    error_rec *err) {
    unsigned lineno = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        lineno++;
        size_t a = pos;
        while (a < end && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        int r = a < end ? fn(ud, text + a, end - a, lineno, err) : 0;
        if (r < 0)
            return error_prefix(err, "%s:%u", source, lineno), r;
        pos = end + 1;
    }
    return 0;
}

typedef struct parse_state {
    grpo_taskset *ts;
    bool header;
} parse_state;

static int on_line(void *ud, const char *line, size_t len, unsigned lineno, error_rec *err) {
    parse_state *p = ud;
    int r = parse_line(p->ts, line, len, p->header, lineno, err);
    p->header = false;
    return r;
}

int grpo_taskset_parse(const char *text, size_t len, const char *source, grpo_taskset **ret,
                       error_rec *err) {
    parse_state p = {.ts = calloc(1, sizeof(grpo_taskset)), .header = true};
    if (!p.ts)
        return -ENOMEM;
    int r = grpo_jsonl_each(text, len, source, on_line, &p, err);
    if (r < 0) {
        grpo_taskset_free(p.ts);
        return r;
    }
    if (p.header || p.ts->n_tasks == 0) {
        grpo_taskset_free(p.ts);
        return error_set(err, -EINVAL, "%s: no %s", source, p.header ? "header" : "tasks");
    }
    grpo_taskset_split(p.ts);
    *ret = p.ts;
    return 0;
}

int grpo_taskset_load(const char *path, grpo_taskset **ret, error_rec *err) {
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = file_read_all(path, TASKSET_MAX_BYTES, &text, &len);
    if (r < 0)
        return error_set_errno(err, r, "cannot read task set %s", path);
    return grpo_taskset_parse(text, len, path, ret, err);
}

/* splitmix64 over FNV-1a of the id, keyed by the seed. */
static uint64_t split_hash(uint64_t seed, const char *id) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    h += 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

void grpo_taskset_split(grpo_taskset *ts) {
    size_t n = ts->n_tasks, k = (size_t)llround((double)n * ts->held_out_fraction);
    for (size_t i = 0; i < n; i++)
        ts->tasks[i].held_out = false;
    /* Select the k smallest hashes (ties broken by id) by repeated minimum: n is small. */
    for (size_t j = 0; j < k; j++) {
        size_t best = n;
        uint64_t bh = 0;
        for (size_t i = 0; i < n; i++) {
            if (ts->tasks[i].held_out)
                continue;
            uint64_t h = split_hash(ts->seed, ts->tasks[i].id);
            if (best == n || h < bh || (h == bh && strcmp(ts->tasks[i].id, ts->tasks[best].id) < 0))
                best = i, bh = h;
        }
        ts->tasks[best].held_out = true;
    }
}

bool grpo_reward_ok(double r) {
    return isfinite(r) && fabs(r) <= GRPO_REWARD_MAX;
}

bool grpo_task_exit_reward(const grpo_task *t, int exit_code, double *ret_reward) {
    switch (t->reward_kind) {
    case GRPO_REWARD_PASS_FAIL:
        if (exit_code != 0 && exit_code != 1)
            return false;
        *ret_reward = exit_code == 0 ? 1.0 : 0.0;
        return true;
    case GRPO_REWARD_EXIT_CODES:
        for (size_t i = 0; i < t->n_exit_map; i++)
            if (t->exit_codes[i] == exit_code) {
                *ret_reward = t->exit_rewards[i];
                return true;
            }
        return false;
    case GRPO_REWARD_EXPECTED_OUTPUT:
    case GRPO_REWARD_SCORE:
        break;
    }
    return false;
}
