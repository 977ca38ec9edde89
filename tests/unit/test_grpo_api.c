/* The embedding API (sbx_grpo.h) without sandboxes: option checks, task set errors, a trainer
 * that cannot be reached (the run stops with a clear error and still writes its summary), and the
 * cost preview's arithmetic. */
#include "tests/lib/test.h"

#include <math.h>
#include <sbx_grpo.h>
#include <unistd.h>

static const char *toy_tasks(void) {
    static char path[1024];
    const char *src = getenv("SBX_SRC_DIR");
    snprintf(path, sizeof(path), "%s/tasks/toy-files.jsonl", src ? src : ".");
    return path;
}

TEST(grpo_api_bad_options) {
    sbx_grpo_opts o;
    sbx_grpo_opts_init(&o);
    CHECK_EQ(o.tasks_per_step, 16);
    CHECK_EQ(o.group_size, 8);
    sbx_err err;
    CHECK_EQ(sbx_grpo_run(&o, NULL, &err), SBX_E_INVALID);
    CHECK(strstr(err.message, "task set"));
    o.tasks_path = toy_tasks();
    o.group_size = 0;
    CHECK_EQ(sbx_grpo_run(&o, NULL, &err), SBX_E_INVALID);
    CHECK(strstr(err.message, "group size"));
    o.group_size = 8;
    o.split = "nope";
    o.out_dir = test_tmpdir();
    CHECK_EQ(sbx_grpo_run(&o, NULL, &err), SBX_E_INVALID);
    CHECK(strstr(err.message, "--split"));
}

TEST(grpo_api_bad_tasks) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/t.jsonl", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"task_set\":\"x@1\"}\n{\"id\":\"a\",\"prompt\":\"p\"}\n", f);
    fclose(f);
    sbx_grpo_opts o;
    sbx_grpo_opts_init(&o);
    o.tasks_path = path;
    o.out_dir = test_tmpdir();
    sbx_err err;
    CHECK_EQ(sbx_grpo_run(&o, NULL, &err), SBX_E_INVALID);
    CHECK_MSG(strstr(err.message, "t.jsonl:2") && strstr(err.message, "grader"), "%s", err.message);
}

TEST(grpo_api_trainer_unreachable) {
    char out[1024];
    snprintf(out, sizeof(out), "%s/out", test_tmpdir());
    sbx_grpo_opts o;
    sbx_grpo_opts_init(&o);
    o.tasks_path = toy_tasks();
    o.out_dir = out;
    o.trainer_url = "http://127.0.0.1:1"; /* nothing listens on port 1 */
    o.sandboxd = "/nonexistent/sandboxd.sock";
    o.trainer_retries = 1;
    sbx_grpo_summary s;
    sbx_err err;
    CHECK_EQ(sbx_grpo_run(&o, &s, &err), SBX_E_SERVER);
    CHECK_MSG(strstr(err.message, "trainer http://127.0.0.1:1/v1/state failed after 2 attempts"),
              "%s", err.message);
    CHECK_STREQ(s.stop_reason, "trainer_failed");
    CHECK_EQ(s.episodes, 0);
    char summary[1100];
    snprintf(summary, sizeof(summary), "%s/summary.json", out);
    CHECK(access(summary, R_OK) == 0);
}

TEST(grpo_api_preview) {
    sbx_grpo_preview p = {.steps = 100,
                          .step_seconds = 36,
                          .gpus = 8,
                          .gpu_hour_usd = 2.5,
                          .sandboxes = 128,
                          .sandbox_hour_usd = 0.0179};
    sbx_grpo_preview_compute(&p);
    CHECK(fabs(p.gpu_usd - 20.0) < 1e-9);
    CHECK(fabs(p.sandbox_usd - 2.2912) < 1e-9);
    CHECK(fabs(p.total_usd - 22.2912) < 1e-9);
    CHECK(fabs(p.sandbox_share - 2.2912 / 22.2912) < 1e-12);
    sbx_grpo_preview z = {0};
    sbx_grpo_preview_compute(&z);
    CHECK(z.total_usd == 0 && z.sandbox_share == 0);
}
