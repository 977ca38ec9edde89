/* verl datasets as task sets (client/grpo/verlset.c): rows become completion-answer tasks graded
 * by /grader/sbx_verl.py; a malformed row is refused naming the file, line and field; a Parquet
 * file, a missing reward file or one without compute_score are refused with what to do. */
#include "client/grpo/runner.h"
#include "client/grpo/verlset.h"
#include "common/fdutil.h"
#include "tests/lib/test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT "\"prompt\":[{\"role\":\"user\",\"content\":\"What is 48+24?\"}]"
#define GSM                                                                                        \
    "{\"data_source\":\"openai/gsm8k\"," PROMPT ",\"ability\":\"math\",\"reward_model\":{"         \
    "\"style\":\"rule\",\"ground_truth\":\"72\"},\"extra_info\":{\"split\":\"train\",\"index\":0}" \
    "}"

static char dir[] = "/tmp/sbx-verl-unit.XXXXXX";

static void dir_remove(void) {
    rm_rf(dir);
}

/* Writes text to dir/name (the directory goes at exit); returns the path (static storage, one at
 * a time). */
static const char *put(const char *name, const char *text) {
    static char path[256];
    static bool made;
    if (!made) {
        made = true;
        CHECK(mkdtemp(dir) != NULL);
        atexit(dir_remove);
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *src_dir(void) {
    const char *src = getenv("SBX_SRC_DIR");
    return src ? src : ".";
}

static grpo_taskset *load_ok(const char *path, const char *reward_fn) {
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    CHECK_MSG(grpo_verlset_load(path, reward_fn, 10, &ts, &err) == 0, "load failed: %s",
              err.message);
    return ts;
}

static void load_bad(const char *path, const char *reward_fn, const char *want) {
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    CHECK_MSG(grpo_verlset_load(path, reward_fn, 10, &ts, &err) < 0, "loaded (want \"%s\")", want);
    CHECK(ts == NULL);
    CHECK_MSG(strstr(err.message, want), "error \"%s\" lacks \"%s\"", err.message, want);
}

static void rows_bad(const char *row, const char *want) {
    char text[2048];
    snprintf(text, sizeof(text), GSM "\n\n%s\n", row); /* the bad row is line 3 */
    load_bad(put("data.jsonl", text), NULL, want);
}

TEST(grpo_verl_rows) {
    const char *p = put("data.jsonl",
                        GSM "\n"
                            "{\"data_source\":\"lighteval/MATH\",\"prompt\":[{\"role\":\"system\","
                            "\"content\":\"Box it.\"},{\"role\":\"user\",\"content\":\"1+2?\"}],"
                            "\"reward_model\":{\"ground_truth\":\"3\"},\"extra_info\":{\"split\":"
                            "\"test\"},\"question\":\"an extra column\"}\n");
    grpo_taskset *ts = load_ok(p, NULL);
    CHECK_STREQ(ts->name, "data");
    CHECK_STREQ(ts->version, "verl");
    CHECK_EQ(ts->n_tasks, 2);
    const grpo_task *t = &ts->tasks[0];
    CHECK_STREQ(t->id, "data.jsonl:1");
    CHECK(t->completion_answer && !t->held_out && t->max_turns == 1);
    CHECK_EQ(t->max_completion_tokens, GRPO_VERL_MAX_TOKENS);
    CHECK(t->reward_kind == GRPO_REWARD_SCORE && !t->prompt_text && !t->shared_file);
    CHECK_EQ(json_array_size(t->prompt_messages), 1);
    CHECK_EQ(t->n_grader_argv, 6);
    const char *argv[] = {"python3", "sbx_verl.py", "--timeout", "10", "row.json", "solution.txt"};
    for (size_t i = 0; i < 6; i++)
        CHECK_STREQ(t->grader_argv[i], argv[i]);
    CHECK(t->grader_argv[6] == NULL);
    CHECK_STREQ(t->grader_files[0].path, GRPO_GRADER_DIR "/row.json");
    CHECK(strstr(t->grader_files[0].data, "\"ground_truth\":\"72\""));
    CHECK_EQ(t->grader_timeout_ms, 40000);
    t = &ts->tasks[1];
    CHECK(t->held_out); /* extra_info.split "test" */
    CHECK_EQ(json_array_size(t->prompt_messages), 2);
    CHECK(strstr(t->grader_files[0].data, "\"question\":\"an extra column\""));
    grpo_taskset_free(ts);
}

TEST(grpo_verl_reward_fn) {
    const char *r = put("r.py", "def compute_score(data_source, solution_str, ground_truth, "
                                "extra_info=None):\n    return 1.0\n");
    char rpath[256];
    snprintf(rpath, sizeof(rpath), "%s", r);
    char p[256], none[256];
    snprintf(none, sizeof(none), "%s", put("none.py", "def score(a, b):\n    return 0\n"));
    snprintf(p, sizeof(p), "%s",
             put("mine.jsonl", "{\"data_source\":\"mine\"," PROMPT
                               ",\"reward_model\":{\"ground_truth\":[1,2]}}\n"));
    grpo_taskset *ts = load_ok(p, rpath); /* any data_source, any ground truth */
    const grpo_task *t = &ts->tasks[0];
    CHECK_EQ(t->n_grader_argv, 7);
    CHECK_STREQ(t->grader_argv[6], "reward_fn.py");
    CHECK(t->shared_file == ts->shared_file);
    CHECK_STREQ(t->shared_file->path, GRPO_GRADER_DIR "/reward_fn.py");
    CHECK(strstr(t->shared_file->data, "return 1.0"));
    grpo_taskset_free(ts);
    load_bad(p, NULL, "mine.jsonl:1: data_source: no built-in scorer for \"mine\"");
    load_bad(p, "/nonexistent/r.py", "--reward-fn /nonexistent/r.py: cannot read it");
    load_bad(p, none, "no compute_score in it");
    char ts_path[1024];
    snprintf(ts_path, sizeof(ts_path), "%s/tasks/toy-files.jsonl", src_dir());
    load_bad(ts_path, rpath, "--reward-fn is for verl datasets");
}

/* Every malformed row is refused at load, naming the file, the line and the field. */
TEST(grpo_verl_bad_rows) {
    rows_bad("{\"data_source\":\"openai/gsm8k\"," PROMPT ",\"reward_model\":{\"style\":\"rule\"}}",
             "data.jsonl:3: reward_model.ground_truth: missing");
    rows_bad("{\"data_source\":\"openai/gsm8k\"," PROMPT "}",
             "data.jsonl:3: reward_model: missing");
    rows_bad("{\"data_source\":\"openai/gsm8k\"," PROMPT ",\"reward_model\":\"72\"}",
             "data.jsonl:3: reward_model: must be an object");
    rows_bad("{\"data_source\":\"openai/gsm8k\"," PROMPT
             ",\"reward_model\":{\"style\":\"model\",\"ground_truth\":\"1\"}}",
             "data.jsonl:3: reward_model.style: only \"rule\"");
    rows_bad("{" PROMPT ",\"reward_model\":{\"ground_truth\":\"1\"}}",
             "data.jsonl:3: data_source: missing");
    rows_bad("{\"data_source\":7," PROMPT ",\"reward_model\":{\"ground_truth\":\"1\"}}",
             "data.jsonl:3: data_source: must be a non-empty string");
    rows_bad("{\"data_source\":\"gsm8k\",\"reward_model\":{\"ground_truth\":\"1\"}}",
             "data.jsonl:3: prompt: missing");
    rows_bad(
        "{\"data_source\":\"gsm8k\",\"prompt\":\"hi\",\"reward_model\":{\"ground_truth\":\"1\"}}",
        "data.jsonl:3: prompt: must be a non-empty array of chat messages");
    rows_bad("{\"data_source\":\"gsm8k\",\"prompt\":[{\"role\":\"user\"}],\"reward_model\":{"
             "\"ground_truth\":\"1\"}}",
             "data.jsonl:3: prompt[0].content: missing");
    rows_bad("{\"data_source\":\"gsm8k\",\"prompt\":[{\"role\":\"user\",\"content\":[{\"type\":"
             "\"image\"}]}],\"reward_model\":{\"ground_truth\":\"1\"}}",
             "data.jsonl:3: prompt[0].content: must be a string (multimodal");
    rows_bad("{\"data_source\":\"gsm8k\",\"prompt\":[{\"content\":\"x\"}],\"reward_model\":{"
             "\"ground_truth\":\"1\"}}",
             "data.jsonl:3: prompt[0].role: missing");
    rows_bad("{\"data_source\":\"gsm8k\"," PROMPT ",\"reward_model\":{\"ground_truth\":\"1\"},"
             "\"extra_info\":[1]}",
             "data.jsonl:3: extra_info: must be an object");
    rows_bad("{\"data_source\":\"gsm8k\"," PROMPT ",\"reward_model\":{\"ground_truth\":\"1\"},"
             "\"images\":[\"a.png\"]}",
             "data.jsonl:3: images: multimodal rows are not supported");
    rows_bad("{\"data_source\":\"gsm8k\"," PROMPT ",\"reward_model\":{\"ground_truth\":\"1\"},"
             "\"ability\":3}",
             "data.jsonl:3: ability: must be a string");
    /* verl scores "math" with DAPO's "Answer:" rule (+1/-1): not the built-in \boxed{} rule */
    rows_bad("{\"data_source\":\"math\"," PROMPT ",\"reward_model\":{\"ground_truth\":\"1\"}}",
             "data.jsonl:3: data_source: no built-in scorer for \"math\"");
    rows_bad("{\"data_source\":\"gsm8k\", oops", "data.jsonl:3: invalid JSON");
    rows_bad("[1,2]", "data.jsonl:3: a verl row must be a JSON object");
}

/* Parquet is refused (by name or by its magic bytes) with how to convert it to JSONL. */
TEST(grpo_verl_parquet) {
    load_bad(put("train.parquet", "PAR1...."), NULL,
             "train.parquet: a Parquet file: sbx grpo reads verl datasets as JSONL (Debian 12 "
             "packages neither pyarrow nor fastparquet)");
    load_bad(put("train.data", "PAR1\x15\x04"), NULL, "to_json('data.jsonl', orient='records'");
    /* a task set still loads through the same call */
    char path[1024];
    snprintf(path, sizeof(path), "%s/tasks/tool-test/tasks.jsonl", src_dir());
    grpo_taskset *ts = load_ok(path, NULL);
    CHECK_EQ(ts->n_tasks, 64);
    CHECK(!ts->tasks[0].completion_answer);
    grpo_taskset_free(ts);
}

/* The "score S [remark]" line (client/grpo/verdict.c): a remark of any length leaves the score
 * readable (a verl scorer's raised message), cut into the message; a score that is not a number
 * or not on the last line is the grader's failure. */
static grpo_verdict verdict_of(const char *out, double *reward, char *msg, size_t len) {
    grpo_task t = {.reward_kind = GRPO_REWARD_SCORE, .completion_answer = true};
    sbx_exec_result res = {.stdout_data = (char *)out, .stdout_len = strlen(out)};
    snprintf(res.reason, sizeof(res.reason), "exited");
    return grpo_verdict_of(&t, &res, false, reward, msg, len);
}

TEST(grpo_verdict_score_line) {
    char out[600], msg[64];
    double r = -1;
    int n = snprintf(out, sizeof(out), "noise\nscore 0 (reward function raised ValueError: ");
    memset(out + n, 'x', 400);
    snprintf(out + n + 400, sizeof(out) - n - 400, ")\n");
    CHECK_EQ(verdict_of(out, &r, msg, sizeof(msg)), GRPO_VERDICT_SCORED);
    CHECK(r == 0);
    CHECK_STREQ(msg, "(reward function raised ValueError: xxxxxxxxxxxxxxxxxxxxxxxxxxx");
    CHECK_EQ(verdict_of("score 0.25\n", &r, msg, sizeof(msg)), GRPO_VERDICT_SCORED);
    CHECK(r == 0.25 && msg[0] == 0);
    CHECK_EQ(verdict_of("score  -1 ok\r\n", &r, msg, sizeof(msg)), GRPO_VERDICT_SCORED);
    CHECK(r == -1);
    CHECK_STREQ(msg, "ok");
    CHECK_EQ(verdict_of("score 0 (why)\nmore\n", &r, msg, sizeof(msg)), GRPO_VERDICT_PLATFORM);
    CHECK_EQ(verdict_of("score 1x\n", &r, msg, sizeof(msg)), GRPO_VERDICT_PLATFORM);
    CHECK_EQ(verdict_of("score nan\n", &r, msg, sizeof(msg)), GRPO_VERDICT_PLATFORM);
    CHECK_EQ(verdict_of("score \n", &r, msg, sizeof(msg)), GRPO_VERDICT_PLATFORM);
}
