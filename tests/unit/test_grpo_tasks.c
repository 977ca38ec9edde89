/* GRPO task sets: parsing (bad lines -> errors naming the line), the reward rules, and the seeded
 * deterministic train / held-out split. */
#include "client/grpo/envserver.h"
#include "client/grpo/runner.h"
#include "client/grpo/taskset.h"
#include "common/fdutil.h"
#include "tests/lib/test.h"

#include <math.h>
#include <stdlib.h>

#define HDR "{\"task_set\":\"toy@3\",\"split\":{\"seed\":7,\"held_out\":0.25}}\n"
#define GRADER "\"grader\":{\"command\":\"sh t.sh\",\"files\":{\"t.sh\":\"exit 0\"}}"

static grpo_taskset *parse_ok(const char *text) {
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    int r = grpo_taskset_parse(text, strlen(text), "t.jsonl", &ts, &err);
    CHECK_MSG(r == 0, "parse failed: %s", err.message);
    return ts;
}

static void parse_bad(const char *text, const char *want) {
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    int r = grpo_taskset_parse(text, strlen(text), "t.jsonl", &ts, &err);
    CHECK_MSG(r < 0, "parse of a bad task set succeeded (want \"%s\")", want);
    CHECK(ts == NULL);
    CHECK_MSG(strstr(err.message, want), "error \"%s\" lacks \"%s\"", err.message, want);
}

TEST(grpo_tasks_parse) {
    grpo_taskset *ts = parse_ok(
        HDR "{\"id\":\"a\",\"prompt\":\"task a\",\"max_turns\":3,\"max_completion_tokens\":9,"
            "\"limits\":{\"cpu\":0.5},\"network\":\"none\",\"command_timeout\":\"2s\","
            "\"setup\":{\"files\":{\"x.txt\":\"hi\",\"/etc/y\":\"z\"},\"commands\":[\"true\"]},"
            "\"grader\":{\"command\":\"sh t.sh\",\"files\":{\"t.sh\":\"#!/bin/sh\\nexit 1\"},"
            "\"timeout\":5,\"reward\":{\"exit_codes\":{\"0\":1,\"10\":0.4}}}}\n"
            "\n"
            "{\"id\":\"b\",\"prompt\":[5,6,7],\"grader\":{\"command\":\"cat o\","
            "\"expected_output\":\"42\"}}\n");
    CHECK_STREQ(ts->name, "toy");
    CHECK_STREQ(ts->version, "3");
    CHECK_EQ(ts->n_tasks, 2);
    grpo_task *a = &ts->tasks[0], *b = &ts->tasks[1];
    CHECK_STREQ(a->prompt_text, "task a");
    CHECK(a->sandbox.cpu == 0.5 && a->sandbox.memory == 0 && a->sandbox.pids == 0);
    CHECK_EQ(a->sandbox.timeout_ms, 15 * 60000); /* the runner's defaults */
    CHECK_EQ(a->sandbox.idle_timeout_ms, 5 * 60000);
    CHECK_STREQ(a->network_text, "none");
    CHECK_EQ(a->max_turns, 3);
    CHECK_EQ(a->max_completion_tokens, 9);
    CHECK_EQ(a->command_timeout_ms, 2000);
    CHECK_EQ(a->n_setup_files, 2);
    CHECK_STREQ(a->setup_files[0].path, "/workspace/x.txt");
    CHECK_STREQ(a->setup_files[1].path, "/etc/y");
    CHECK_EQ(a->n_setup_commands, 1);
    CHECK_STREQ(a->grader_files[0].path, "/grader/t.sh");
    CHECK_EQ(a->grader_timeout_ms, 5000);
    CHECK_EQ(a->line, 2);
    CHECK_EQ(b->line, 4);
    double r = -1;
    CHECK(grpo_task_exit_reward(a, 10, &r) && r == 0.4);
    CHECK(!grpo_task_exit_reward(a, 1, &r)); /* unlisted: grader failure */
    CHECK_EQ(b->n_prompt_ids, 3);
    CHECK_EQ(b->prompt_ids[2], 7);
    CHECK_EQ(b->max_turns, 1);
    CHECK_EQ(b->reward_kind, GRPO_REWARD_EXPECTED_OUTPUT);
    CHECK_STREQ(b->expected_output, "42");
    grpo_taskset_free(ts);
}

TEST(grpo_tasks_limits) {
    grpo_taskset *ts = parse_ok(
        HDR "{\"id\":\"a\",\"prompt\":\"p\",\"limits\":{\"cpu\":0.25,\"memory\":\"64Mi\","
            "\"disk\":1048576,\"pids\":16,\"timeout\":\"5m\",\"idle_timeout\":30,"
            "\"max_cost_usd\":0.5},\"network\":{\"allow\":[\"10.0.0.0/8\"]}," GRADER "}\n");
    const grpo_limits *l = &ts->tasks[0].sandbox;
    CHECK(l->cpu == 0.25 && l->max_cost_usd == 0.5);
    CHECK_EQ(l->memory, 64ull << 20);
    CHECK_EQ(l->disk, 1048576);
    CHECK_EQ(l->pids, 16);
    CHECK_EQ(l->timeout_ms, 300000);
    CHECK_EQ(l->idle_timeout_ms, 30000);
    CHECK_STREQ(ts->tasks[0].network_text, "{\"allow\":[\"10.0.0.0/8\"]}");
    grpo_taskset_free(ts);
}

TEST(grpo_tasks_pass_fail) {
    grpo_taskset *ts = parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\"," GRADER "}\n");
    double r = -1;
    CHECK(grpo_task_exit_reward(&ts->tasks[0], 0, &r) && r == 1.0);
    CHECK(grpo_task_exit_reward(&ts->tasks[0], 1, &r) && r == 0.0);
    CHECK(!grpo_task_exit_reward(&ts->tasks[0], 2, &r));
    CHECK(!grpo_task_exit_reward(&ts->tasks[0], 139, &r));
    grpo_taskset_free(ts);
}

/* failure_reward: what an episode scores when the agent caused its failure; 0 by default. */
TEST(grpo_tasks_failure_reward) {
    grpo_taskset *ts =
        parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\"," GRADER "}\n"
                     "{\"id\":\"b\",\"prompt\":\"p\",\"failure_reward\":-0.5," GRADER "}\n");
    CHECK(ts->tasks[0].failure_reward == 0.0);
    CHECK(ts->tasks[1].failure_reward == -0.5);
    grpo_taskset_free(ts);
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"failure_reward\":\"low\"," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"failure_reward\" must be a number");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"failure_reward\":-1e300," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"failure_reward\" must be a number in [-1e6, 1e6]");
}

/* Rewards stay within +-1e6, so a group's mean, std and advantages stay finite. */
TEST(grpo_tasks_reward_bounds) {
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                  "\"reward\":{\"exit_codes\":{\"0\":1e308,\"1\":0}}}}\n",
              "t.jsonl:2: task \"a\": \"grader.reward.exit_codes\": the reward of \"0\" must be a "
              "number in [-1e6, 1e6]");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                  "\"reward\":{\"exit_codes\":{\"0\":1,\"1\":-1000001}}}}\n",
              "the reward of \"1\" must be a number in [-1e6, 1e6]");
    grpo_taskset *ts = parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                                    "\"reward\":{\"exit_codes\":{\"0\":1e6,\"1\":-1e6}}}}\n");
    double r = 0;
    CHECK(grpo_task_exit_reward(&ts->tasks[0], 1, &r) && r == -1e6);
    grpo_taskset_free(ts);
    CHECK(grpo_reward_ok(1e6) && grpo_reward_ok(-1e6) && grpo_reward_ok(0));
    CHECK(!grpo_reward_ok(1e6 + 1) && !grpo_reward_ok(INFINITY) && !grpo_reward_ok(NAN));
}

TEST(grpo_tasks_errors) {
    parse_bad("", "no header");
    parse_bad("{\"name\":\"x\"}\n", "t.jsonl:1: the first line must be the header");
    parse_bad("{\"task_set\":\"x\"}\n", "t.jsonl:1:");
    /* a dataset saved as one JSON array: said so (it was "bad header") */
    parse_bad("[{\"data_source\":\"openai/gsm8k\"}]\n", "t.jsonl:1: the file is JSON Lines");
    parse_bad(HDR, "no tasks");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\"," GRADER "}\n{not json\n",
              "t.jsonl:3: invalid JSON");
    parse_bad(HDR "\n\n{\"prompt\":\"p\"," GRADER "}\n", "t.jsonl:4: missing \"id\"");
    parse_bad(HDR "{\"id\":\"a\"," GRADER "}\n", "t.jsonl:2: task \"a\": \"prompt\"");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\"}\n", "t.jsonl:2: task \"a\": missing \"grader\"");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"max_turns\":0," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"max_turns\"");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":[1,-2]," GRADER "}\n", "\"prompt\"[1]");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"command_timeout\":\"soon\"," GRADER "}\n",
              "bad duration");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                  "\"reward\":{\"exit_codes\":{\"zero\":1}}}}\n",
              "t.jsonl:2: task \"a\": \"grader.reward.exit_codes\": bad entry \"zero\"");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"setup\":{\"files\":{\"../x\":\"y\"}}," GRADER
                  "}\n",
              "without \"..\"");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\"," GRADER
                  "}\n{\"id\":\"a\",\"prompt\":\"q\"," GRADER "}\n",
              "t.jsonl:3: duplicate task id \"a\"");
    parse_bad("{\"task_set\":\"x@1\",\"split\":{\"held_out\":1.5}}\n", "t.jsonl:1: header");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"limits\":{\"memory\":\"lots\"}," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"limits.memory\" must be a size");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"limits\":{\"timeout\":\"soon\"}," GRADER "}\n",
              "\"limits.timeout\": bad duration");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"limits\":{\"cpu\":-1}," GRADER "}\n",
              "\"limits.cpu\" must be a number > 0");
}

/* Loader checks: grader files relative (placed under /grader), the header's split an object,
 * expected_output without a reward rule, exit codes as canonical integers, an env_server
 * entrypoint argv of non-empty strings. */
TEST(grpo_tasks_strict_fields) {
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                  "\"files\":{\"/etc/t.sh\":\"exit 0\"}}}\n",
              "t.jsonl:2: task \"a\": \"grader.files\": file \"/etc/t.sh\" needs a string content "
              "and a relative path");
    grpo_taskset *ts = parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"setup\":{\"files\":"
                                    "{\"/tmp/x\":\"y\",\"b\":\"c\"}}," GRADER "}\n");
    CHECK_STREQ(ts->tasks[0].setup_files[0].path, "/tmp/x"); /* setup files may be absolute */
    CHECK_STREQ(ts->tasks[0].grader_files[0].path, "/grader/t.sh");
    grpo_taskset_free(ts);
    const char *splits[] = {"3", "\"train\"", "[1]", "null"};
    for (size_t i = 0; i < sizeof(splits) / sizeof(*splits); i++) {
        char text[512];
        snprintf(text, sizeof(text),
                 "{\"task_set\":\"x@1\",\"split\":%s}\n{\"id\":\"a\",\"prompt\":\"p\"," GRADER
                 "}\n",
                 splits[i]);
        parse_bad(text, "t.jsonl:1: header: \"split\" must be an object");
    }
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                  "\"expected_output\":\"42\",\"reward\":\"score\"}}\n",
              "t.jsonl:2: task \"a\": \"grader.reward\" cannot be given with "
              "\"grader.expected_output\"");
    const char *codes[] = {" 0", "+0", "00", "01", "0x1", "-0", "1 "};
    for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++) {
        char text[512], want[64];
        snprintf(text, sizeof(text),
                 HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                     "\"reward\":{\"exit_codes\":{\"%s\":1,\"1\":0}}}}\n",
                 codes[i]);
        snprintf(want, sizeof(want), "exit_codes\": bad entry \"%s\"", codes[i]);
        parse_bad(text, want);
    }
    const char *eps[] = {"[]", "[\"\"]", "[\"python3\",1]", "[\"a\",\"\"]", "false"};
    for (size_t i = 0; i < sizeof(eps) / sizeof(*eps); i++) {
        char text[512];
        snprintf(text, sizeof(text),
                 HDR "{\"id\":\"a\",\"prompt\":\"p\",\"env_server\":{\"port\":8000,"
                     "\"entrypoint\":%s}," GRADER "}\n",
                 eps[i]);
        parse_bad(text, "t.jsonl:2: task \"a\": env_server.entrypoint: true or an argv array");
    }
    ts = parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"env_server\":{\"port\":8000,"
                      "\"entrypoint\":[\"python3\",\"/srv/env.py\"]}," GRADER "}\n");
    grpo_taskset_free(ts);
}

/* An env_server that starts the image's Entrypoint and Cmd (entrypoint true, the default) in the
 * host image, which has neither, is refused at load naming the task: it loaded, and each of its
 * episodes failed (the create refused, 400 "entrypoint: image host has no Entrypoint or Cmd"). */
TEST(grpo_tasks_env_server_host_entrypoint) {
    static const char want[] = "t.jsonl:2: task \"a\": env_server.entrypoint: true starts the "
                               "image's Entrypoint and Cmd, which the host image has not";
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"env_server\":{\"port\":8000}," GRADER "}\n",
              want);
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"image\":\"host\",\"env_server\":{\"port\":"
                  "8000,\"entrypoint\":true}," GRADER "}\n",
              want);
    grpo_taskset *ts =
        parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"image\":\"openenv:v1\","
                     "\"env_server\":{\"port\":8000,\"entrypoint\":true}," GRADER "}\n");
    CHECK(ts->tasks[0].env_server && ts->tasks[0].env_server->image_entrypoint);
    grpo_taskset_free(ts);
    ts = parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"image\":\"host\",\"env_server\":{"
                      "\"port\":8000,\"entrypoint\":[\"python3\",\"/srv/env.py\"]}," GRADER "}\n");
    grpo_taskset_free(ts);
}

/* A key the runner does not implement is an error naming the key and the row, never ignored. */
TEST(grpo_tasks_unknown_keys) {
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"gpus\":1," GRADER "}\n",
              "t.jsonl:2: task \"a\": gpus: unknown field");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"limits\":{\"gpus\":1}," GRADER "}\n",
              "t.jsonl:2: task \"a\": limits.gpus: unknown field");
    parse_bad(HDR
              "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\",\"isolation\":1}}\n",
              "t.jsonl:2: task \"a\": grader.isolation: unknown field");
    /* "isolation" is a task key (the agent's sandbox), with its two values only */
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"isolation\":\"kata\"," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"isolation\" must be \"native\" or \"gvisor\"");
    /* "network": what libsbx takes, else refused at load (not when the run creates it) */
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"network\":\"closed\"," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"network\" must be \"none\", \"open\" or {\"allow\":[]}");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"network\":[]," GRADER "}\n",
              "t.jsonl:2: task \"a\": \"network\" must be \"none\", \"open\" or {\"allow\":[]}");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"setup\":{\"ports\":[8000]}," GRADER "}\n",
              "t.jsonl:2: task \"a\": setup.ports: unknown field");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"x\","
                  "\"reward\":{\"exit_codes\":{\"0\":1},\"scale\":2}}}\n",
              "grader.reward.scale: unknown field");
    parse_bad("{\"task_set\":\"x@1\",\"tasks\":3}\n", "t.jsonl:1: header.tasks: unknown field");
    parse_bad("{\"task_set\":\"x@1\",\"split\":{\"seed\":1,\"ratio\":0.5}}\n",
              "t.jsonl:1: split.ratio: unknown field");
}

static char *many_tasks(unsigned n, unsigned seed, bool reversed) {
    size_t cap = 256 + n * 128, len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(
        s, cap, "{\"task_set\":\"m@1\",\"split\":{\"seed\":%u,\"held_out\":0.3}}\n", seed);
    for (unsigned k = 0; k < n; k++) {
        unsigned i = reversed ? n - 1 - k : k;
        len += (size_t)snprintf(s + len, cap - len,
                                "{\"id\":\"t%u\",\"prompt\":\"p\"," GRADER "}\n", i);
    }
    return s;
}

static unsigned held_mask(grpo_taskset *ts, bool *held, unsigned n) {
    unsigned count = 0;
    for (size_t i = 0; i < ts->n_tasks; i++) {
        unsigned id = (unsigned)atoi(ts->tasks[i].id + 1);
        CHECK(id < n);
        held[id] = ts->tasks[i].held_out;
        count += ts->tasks[i].held_out;
    }
    return count;
}

TEST(grpo_tasks_split) {
    enum { N = 40 };
    char *a = many_tasks(N, 7, false), *b = many_tasks(N, 7, true), *c = many_tasks(N, 8, false);
    grpo_taskset *ta = parse_ok(a), *tb = parse_ok(b), *tc = parse_ok(c), *ta2 = parse_ok(a);
    bool ha[N] = {0}, hb[N] = {0}, hc[N] = {0}, ha2[N] = {0};
    CHECK_EQ(held_mask(ta, ha, N), 12); /* round(40 * 0.3) */
    CHECK_EQ(held_mask(tb, hb, N), 12);
    CHECK_EQ(held_mask(tc, hc, N), 12);
    CHECK_EQ(held_mask(ta2, ha2, N), 12);
    CHECK(memcmp(ha, ha2, sizeof(ha)) == 0); /* deterministic */
    CHECK(memcmp(ha, hb, sizeof(ha)) == 0);  /* independent of line order */
    CHECK(memcmp(ha, hc, sizeof(ha)) != 0);  /* the seed matters */
    grpo_taskset_free(ta);
    grpo_taskset_free(tb);
    grpo_taskset_free(tc);
    grpo_taskset_free(ta2);
    free(a);
    free(b);
    free(c);
}

TEST(grpo_tasks_toy_set) {
    /* the committed toy task set parses and splits 33 -> 24 train / 8 held out */
    char path[1024];
    const char *src = getenv("SBX_SRC_DIR");
    snprintf(path, sizeof(path), "%s/tasks/toy-files.jsonl", src ? src : ".");
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    CHECK_MSG(grpo_taskset_load(path, &ts, &err) == 0, "%s", err.message);
    CHECK_EQ(ts->n_tasks, 32);
    size_t held = 0;
    for (size_t i = 0; i < ts->n_tasks; i++)
        held += ts->tasks[i].held_out;
    CHECK_EQ(held, 8);
    grpo_taskset_free(ts);
}

/* The expected value in a tool-test grader ("... = 'WANT' ]"), copied into buf. */
static const char *tool_want(const grpo_task *t, char *buf, size_t len) {
    const char *a = strstr(t->grader_files[0].data, "= '"), *b = a ? strchr(a + 3, '\'') : NULL;
    CHECK(a && b && (size_t)(b - a - 3) < len);
    snprintf(buf, len, "%.*s", (int)(b - a - 3), a + 3);
    return buf;
}

TEST(grpo_tasks_tool_test_set) {
    /* tasks/tool-test: 21 train / 43 held out, seed 42, 3 turns, 256 tokens; no held-out
     * instance (prompt, setup file or expected answer) equals a train one */
    char path[1024], w1[128], w2[128];
    const char *src = getenv("SBX_SRC_DIR");
    snprintf(path, sizeof(path), "%s/tasks/tool-test/tasks.jsonl", src ? src : ".");
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    CHECK_MSG(grpo_taskset_load(path, &ts, &err) == 0, "%s", err.message);
    CHECK_EQ(ts->n_tasks, 64);
    CHECK_EQ(ts->seed, 42);
    size_t held = 0;
    for (size_t i = 0; i < ts->n_tasks; i++) {
        const grpo_task *h = &ts->tasks[i];
        CHECK(h->max_turns == 3 && h->max_completion_tokens == 256 && h->n_setup_files == 1);
        held += h->held_out;
        for (size_t j = 0; h->held_out && j < ts->n_tasks; j++) {
            const grpo_task *t = &ts->tasks[j];
            if (t->held_out)
                continue;
            CHECK(strcmp(h->prompt_text, t->prompt_text) != 0);
            CHECK(strcmp(h->setup_files[0].path, t->setup_files[0].path) != 0);
            CHECK_MSG(strcmp(tool_want(h, w1, sizeof(w1)), tool_want(t, w2, sizeof(w2))) != 0 ||
                          strcmp(h->setup_files[0].data, t->setup_files[0].data) != 0,
                      "%s and %s are the same instance", h->id, t->id);
        }
    }
    CHECK_EQ(held, 43);
    CHECK_EQ(ts->n_tasks - held, 21);
    grpo_taskset_free(ts);
}

/* ---- the workspace copied into a grading sandbox (client/grpo/contain.c) ---- */

TEST(link_containment) {
    static const struct {
        const char *path, *target;
        bool in;
    } cases[] = {
        {"a", "b", true},
        {"d/a", "../b", true},
        {"d/a", "../../etc/passwd", false},
        {"a", "..", false},
        {"a", ".", true},
        {"a", "/workspace/x", true},
        {"a", "/workspace", true},
        {"a", "/workspace/../etc", false},
        {"a", "/workspacex", false},
        {"a", "/etc/passwd", false},
        {"a", "/grader/test.py", false},
        {"d/e/a", "../../x/./y", true},
        {"d/e/a", "../../../workspace/x", true}, /* back in through the top */
        {"a", "//workspace//x", true},
        {"a", "/", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        CHECK_MSG(grpo_link_contained(cases[i].path, cases[i].target) == cases[i].in, "%s -> %s",
                  cases[i].path, cases[i].target);
}

TEST(workspace_contain_drops_escaping_links) {
    char cmd[2048], tar[600];
    const char *d = test_tmpdir();
    snprintf(tar, sizeof(tar), "%s/ws.tar", d);
    snprintf(cmd, sizeof(cmd),
             "set -e; mkdir -p %s/ws/sub && cd %s/ws && echo hi > f.txt && ln -s f.txt in && "
             "ln -s /etc/passwd abs && ln -s ../../../../etc sub/up && ln -s ../f.txt sub/ok && "
             "tar cf %s .",
             d, d, tar);
    CHECK_EQ(system(cmd), 0);
    char *data;
    size_t len;
    CHECK_OK(file_read_all(tar, 1 << 20, &data, &len));
    void *out;
    size_t out_len;
    unsigned dropped = 0;
    error_rec err = {0};
    CHECK_MSG(grpo_workspace_contain(data, len, &out, &out_len, &dropped, &err) == 0, "%s",
              err.message);
    CHECK_EQ(dropped, 2);
    char out_path[700];
    snprintf(out_path, sizeof(out_path), "%s/out.tar", d);
    CHECK_OK(file_write_atomic(out_path, out, out_len, 0644));
    free(out);
    snprintf(cmd, sizeof(cmd), "tar tvf %s | awk '{print $6, $7, $8}' | sort > %s/list", out_path,
             d);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s/list", d);
    char *list;
    CHECK_OK(file_read_all(cmd, 1 << 16, &list, NULL));
    CHECK_MSG(strstr(list, "./in -> f.txt") && strstr(list, "./sub/ok -> ../f.txt") &&
                  strstr(list, "./f.txt") && !strstr(list, "abs") && !strstr(list, "up"),
              "%s", list);
    CHECK_EQ(grpo_workspace_contain("junk", 4, &out, &out_len, &dropped, &err), -EINVAL);
    free(list);
    free(data);
}

/* grader.argv: started directly, as the grader user, without a shell. */
TEST(grader_argv) {
    grpo_taskset *ts =
        parse_ok(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"argv\":[\"python3\","
                     "\"/grader/t.py\"],\"files\":{\"t.py\":\"\"}}}\n");
    const grpo_task *t = &ts->tasks[0];
    CHECK(t->grader_command == NULL);
    CHECK_EQ(t->n_grader_argv, 2);
    CHECK_STREQ(t->grader_argv[1], "/grader/t.py");
    CHECK(t->grader_argv[2] == NULL);
    grpo_taskset_free(ts);
    parse_bad(HDR
              "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"argv\":[\"x\"],\"command\":\"x\"}}\n",
              "not both");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"argv\":[]}}\n", "must start with");
    parse_bad(HDR "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"argv\":[1]}}\n", "grader.argv");
}

/* A turn's output cut at its bound (4 KiB) stays valid UTF-8: a character split at the cut made
 * grpo_text_for_log turn every non-ASCII byte into '?' (what the policy then saw). */
TEST(output_cut_keeps_utf8) {
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (size_t c = 0; c < 3; c++)
        for (size_t pad = 0; pad < 4; pad++) {
            char src[6000], buf[4096 + 64];
            size_t n = 0, k = strlen(chars[c]);
            for (; n < pad; n++)
                src[n] = 'a';
            while (n + k < sizeof(src)) {
                memcpy(src + n, chars[c], k);
                n += k;
            }
            size_t end = grpo_text_append(buf, 0, 4095, src, n);
            buf[end] = 0;
            CHECK_MSG(end <= 4095 && end + k > 4095, "char %zu pad %zu: %zu bytes", c, pad, end);
            grpo_text_for_log(buf);
            CHECK_MSG(memcmp(buf, src, end) == 0, "char %zu pad %zu: became %.12s", c, pad,
                      buf + pad);
        }
    char buf[16]; /* cut between characters, or the whole text: nothing dropped */
    CHECK_EQ(grpo_text_append(buf, 0, 4, "ab\xc3\xa9z", 5), 4);
    CHECK_EQ(grpo_text_append(buf, 0, 15, "ab\xc3\xa9", 4), 4);
    CHECK_EQ(grpo_text_append(buf, 2, 4, "\xc3\xa9\xc3\xa9", 4), 4);
    CHECK_EQ(grpo_text_append(buf, 1, 3, "\xe2\x82\xac", 3), 1);
    CHECK_EQ(grpo_text_append(buf, 0, 3, "a\0b\0", 4), 3);
    CHECK_EQ(memcmp(buf, "a?b", 3), 0);
}
