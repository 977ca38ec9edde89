/* The embedding API (sbx_grpo.h) without sandboxes: option checks, task set errors, a trainer
 * that cannot be reached or that dies mid-answer (the run stops with a clear error and still
 * writes its summary), and the cost preview's arithmetic. */
#include "tests/lib/test.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sbx_grpo.h>
#include <sys/socket.h>
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

/* A trainer that sends a 200 status line and the start of its body, then closes: what a trainer
 * killed mid-answer looks like. Serves `n` connections. */
typedef struct {
    int fd;
    int n;
} cut_trainer;

static void *cut_trainer_main(void *ud) {
    cut_trainer *t = ud;
    static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Content-Length: 100\r\n\r\n{\"policy_ver";
    for (int i = 0; i < t->n; i++) {
        int c = accept(t->fd, NULL, NULL);
        if (c < 0)
            break;
        char buf[4096];
        if (read(c, buf, sizeof(buf)) > 0) /* the request (small, one read) */
            CHECK(write(c, ans, sizeof(ans) - 1) == (ssize_t)sizeof(ans) - 1);
        close(c);
    }
    return NULL;
}

TEST(grpo_api_trainer_dies_mid_answer) {
    cut_trainer t = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), .n = 2};
    CHECK(t.fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    CHECK(bind(t.fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(t.fd, 4) == 0);
    CHECK(getsockname(t.fd, (struct sockaddr *)&a, &alen) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, cut_trainer_main, &t) == 0);

    char out[1024], url[64];
    snprintf(out, sizeof(out), "%s/out", test_tmpdir());
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(a.sin_port));
    sbx_grpo_opts o;
    sbx_grpo_opts_init(&o);
    o.tasks_path = toy_tasks();
    o.out_dir = out;
    o.trainer_url = url;
    o.sandboxd = "/nonexistent/sandboxd.sock";
    o.trainer_retries = 1;
    sbx_grpo_summary s;
    sbx_err err;
    int rc = sbx_grpo_run(&o, &s, &err);
    shutdown(t.fd, SHUT_RDWR); /* wakes the accept when fewer requests came */
    pthread_join(th, NULL);
    close(t.fd);
    /* a cut answer is a transport error: retried, then reported as one (not "not JSON") */
    CHECK_EQ(rc, SBX_E_SERVER);
    CHECK_MSG(strstr(err.message, "/v1/state failed after 2 attempts"), "%s", err.message);
    CHECK_STREQ(s.stop_reason, "trainer_failed");
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
