/* sbx-shim lifecycle: start-up failures named by step, shutdown and cleanup leave nothing
 * behind, init's death is reported, a lost daemon connection is survived (re-adoption), and
 * create/destroy churn leaks nothing. Also prints create -> exec true -> destroy latency. */
#include "common/fdutil.h"
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "shim/cgroup.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static shimdrv drv;
static void cleanup(void) {
    shimdrv_destroy(&drv);
}

static shimdrv *start(void) {
    test_require_root();
    atexit(cleanup);
    int r = shimdrv_start(&drv, NULL);
    CHECK_MSG(r == 0, "shim start: %d %s", r, drv.start_error);
    return &drv;
}

/* Does any of the sandbox's cgroup directories exist? */
static bool cgroup_exists(const char *id) {
    int ver;
    const char *parent = shimdrv_cgroup_parent(&ver);
    shim_cgroup *cg = NULL;
    CHECK_OK(shim_cgroup_open(ver, parent, id, false, &cg, NULL));
    bool any = false;
    for (size_t i = 0; i < cg->n; i++)
        any = any || access(cg->dirs[i], F_OK) == 0;
    shim_cgroup_free(cg);
    return any;
}

static bool alive(int pid) {
    char p[64], *s = NULL;
    snprintf(p, sizeof(p), "/proc/%d/stat", pid);
    if (file_read_all(p, 4096, &s, NULL) < 0)
        return false;
    bool zombie = strstr(s, ") Z ") != NULL;
    free(s);
    return !zombie;
}

static void wait_gone(int pid) {
    for (int i = 0; i < 500 && alive(pid); i++)
        usleep(10000);
    CHECK_MSG(!alive(pid), "process %d is still alive", pid);
}

static void check_nothing_left(shimdrv *d, int init_pid) {
    CHECK_MSG(access(d->dir, F_OK) < 0, "%s still exists", d->dir);
    CHECK_MSG(!cgroup_exists(d->id), "cgroup of %s still exists", d->id);
    wait_gone(init_pid);
    CHECK_EQ(shimdrv_count_mounts(d->id), 0);
}

TEST(shim_shutdown_leaves_nothing) {
    shimdrv *d = start();
    CHECK(cgroup_exists(d->id));
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "sleep 1000 & sleep 1001 & setsid sleep 1002 & echo", &res), 0);
    shimdrv_result_free(&res);
    int init = d->init_pid;
    CHECK(alive(init));
    CHECK_EQ(shimdrv_shutdown(d), 0);
    check_nothing_left(d, init);
}

TEST(shim_cleanup_after_kill9) {
    shimdrv *d = start();
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "setsid sleep 1000 & echo", &res), 0);
    shimdrv_result_free(&res);
    int init = d->init_pid;
    kill(d->shim_pid, SIGKILL);
    waitpid(d->shim_pid, NULL, 0);
    d->shim_pid = 0;
    CHECK(access(d->dir, F_OK) == 0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s cleanup %s", test_bin("sbx-shim"), d->dir);
    CHECK_EQ(system(cmd), 0);
    check_nothing_left(d, init);
    CHECK_EQ(system(cmd), 0); /* idempotent */
}

TEST(shim_cleanup_of_running_shim) {
    shimdrv *d = start();
    int init = d->init_pid, shim = d->shim_pid;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s cleanup %s", test_bin("sbx-shim"), d->dir);
    CHECK_EQ(system(cmd), 0);
    waitpid(shim, NULL, 0);
    d->shim_pid = 0;
    check_nothing_left(d, init);
}

TEST(shim_init_death_is_reported) {
    shimdrv *d = start();
    int init = d->init_pid;
    kill(init, SIGKILL);
    json_t *ev = NULL;
    CHECK_OK(shimdrv_wait_event(d, "dead", 5000, &ev));
    CHECK_STREQ(json_string_value(json_object_get(ev, "reason")), "init_exited");
    json_decref(ev);
    int st;
    CHECK_EQ(waitpid(d->shim_pid, &st, 0), d->shim_pid);
    d->shim_pid = 0;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    check_nothing_left(d, init);
}

TEST(shim_survives_daemon_disconnect) {
    shimdrv *d = start();
    const char *argv[] = {"sh", "-c", "sleep 0.5; echo done", NULL};
    shimdrv_pending pe;
    CHECK_OK(shimdrv_exec_start(d, argv, NULL, &pe));
    /* the "daemon" goes away and comes back */
    close(d->sock);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/shim.sock", d->dir);
    d->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK_OK(connect(d->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0);
    json_t *hello = NULL;
    CHECK_OK(shimdrv_request(d, json_pack("{s:s}", "type", "hello"), &hello));
    CHECK_STREQ(json_string_value(json_object_get(hello, "id")), d->id);
    CHECK_EQ(json_integer_value(json_object_get(hello, "version")), SHIMPROTO_VERSION);
    CHECK_EQ(json_integer_value(json_object_get(hello, "init_pid")), d->init_pid);
    CHECK_STREQ(json_string_value(json_object_get(hello, "state")), "running");
    CHECK(json_equal(json_array_get(json_object_get(hello, "running"), 0), pe.xid));
    json_decref(hello);
    /* the exit of the command started on the old connection arrives on the new one */
    shimdrv_result res;
    CHECK_OK(shimdrv_exec_finish(d, &pe, &res));
    CHECK_STREQ(res.out, "done\n");
    CHECK_STREQ(res.reason, "exited");
    shimdrv_result_free(&res);
}

static void expect_start_failure(const char *spec, const char *step) {
    shimdrv d = {0};
    int r = shimdrv_start_spec(&d, spec);
    CHECK_MSG(r < 0, "spec accepted: %s", spec);
    CHECK_MSG(strncmp(d.start_error, step, strlen(step)) == 0, "want \"%s...\", got \"%s\"", step,
              d.start_error);
    CHECK(d.start_errno > 0);
    int st;
    waitpid(d.shim_pid, &st, 0);
    d.shim_pid = 0;
    CHECK_MSG(access(d.dir, F_OK) < 0, "%s left behind", d.dir);
    CHECK(!cgroup_exists(d.id));
    shimdrv_destroy(&d);
}

TEST(shim_startup_failures_name_the_step) {
    test_require_root();
    int ver;
    const char *parent = shimdrv_cgroup_parent(&ver);
    const char *bpf = shimdrv_seccomp_bpf();
    CHECK(bpf);
    char spec[2048];
    expect_start_failure("{\"id\":\"BAD ID\"}", "step spec:");
    expect_start_failure("not json", "step spec:");
    snprintf(spec, sizeof(spec),
             "{\"id\":\"sbt-%d-f1\",\"image\":{\"type\":\"host\"},\"uid_base\":3000000,"
             "\"seccomp_bpf\":\"/nonexistent.bpf\",\"cgroup\":{\"version\":%d,\"parent\":\"%s\"}}",
             (int)getpid(), ver, parent);
    expect_start_failure(spec, "step seccomp:");
    snprintf(spec, sizeof(spec),
             "{\"id\":\"sbt-%d-f2\",\"image\":{\"type\":\"dir\",\"path\":\"/nonexistent-image\"},"
             "\"uid_base\":3000000,\"seccomp_bpf\":\"%s\",\"cgroup\":{\"version\":%d,"
             "\"parent\":\"%s\"}}",
             (int)getpid(), bpf, ver, parent);
    expect_start_failure(spec, "step rootfs:");
    snprintf(
        spec, sizeof(spec),
        "{\"id\":\"sbt-%d-f3\",\"image\":{\"type\":\"host\"},\"uid_base\":3000000,"
        "\"memory\":1000,\"seccomp_bpf\":\"%s\",\"cgroup\":{\"version\":%d,\"parent\":\"%s\"}}",
        (int)getpid(), bpf, ver, parent);
    shimdrv d = {0};
    if (shimdrv_start_spec(&d, spec) == 0) /* a tiny memory limit may or may not start */
        shimdrv_shutdown(&d);
    shimdrv_destroy(&d);
}

static int count_fds(void) {
    DIR *dir = opendir("/proc/self/fd");
    int n = 0;
    while (readdir(dir))
        n++;
    closedir(dir);
    return n;
}

static int count_children(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_type == DT_DIR && e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* create -> exec true -> destroy, 1000 times or until the time budget (SBX_CHURN_SECONDS,
 * default 20: some hundreds of cycles under ASan, where CI runs it) is spent; nothing may leak.
 * Prints the rate and the latency percentiles. */
TEST_PASS_T(shim_churn_leaks_nothing, 150, "sanitized") { /* (once: tests/README.md) */
    test_require_root();
    int ver;
    const char *parent = shimdrv_cgroup_parent(&ver);
    shimdrv_seccomp_bpf();
    int fds0 = count_fds(), mounts0 = shimdrv_count_mounts(" - ");
    const char *budget_env = getenv("SBX_CHURN_SECONDS");
    uint64_t budget_ms = (budget_env ? (uint64_t)atoi(budget_env) : 20) * 1000;
    enum { MAX = 1000 };
    static uint64_t lat[MAX];
    size_t n = 0;
    uint64_t t0 = now_mono_ms();
    while (n < MAX && now_mono_ms() - t0 < budget_ms) {
        shimdrv d = {0};
        uint64_t a = now_mono_us();
        int r = shimdrv_start(&d, NULL);
        CHECK_MSG(r == 0, "cycle %zu: %s", n, d.start_error);
        const char *argv[] = {"true", NULL};
        shimdrv_result res;
        CHECK_OK(shimdrv_exec(&d, argv, NULL, &res));
        CHECK_EQ(res.exit_code, 0);
        shimdrv_result_free(&res);
        int init = d.init_pid;
        CHECK_EQ(shimdrv_shutdown(&d), 0);
        lat[n++] = now_mono_us() - a;
        CHECK(!alive(init) || (wait_gone(init), true));
        shimdrv_destroy(&d);
    }
    uint64_t took = now_mono_ms() - t0;
    qsort(lat, n, sizeof(lat[0]), cmp_u64);
    fprintf(stderr,
            "churn: %zu create->exec true->destroy cycles in %llu ms (%.1f/s); "
            "latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            n, (unsigned long long)took, n * 1000.0 / (double)took, lat[n / 2] / 1000.0,
            lat[n * 99 / 100] / 1000.0, lat[n - 1] / 1000.0);
    CHECK(n >= 50);
    CHECK_EQ(count_fds(), fds0);
    CHECK_EQ(shimdrv_count_mounts(" - "), mounts0);
    if (ver == 1) {
        char mnt[512], p[1024];
        CHECK_OK(shim_cgroup_v1_mount("memory", mnt, sizeof(mnt)));
        snprintf(p, sizeof(p), "%s/%s", mnt, parent);
        CHECK_EQ(count_children(p), 0);
    } else
        CHECK_EQ(count_children(parent), 0);
    /* no sandbox directory (and so no socket) is left in the test's temp dir */
    CHECK_EQ(count_children(test_tmpdir()), 0);
}

TEST(shim_sigterm_tears_down) {
    shimdrv *d = start();
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "setsid sleep 1000 & echo", &res), 0);
    shimdrv_result_free(&res);
    int init = d->init_pid, st;
    CHECK_OK(kill(d->shim_pid, SIGTERM));
    CHECK_EQ(waitpid(d->shim_pid, &st, 0), d->shim_pid);
    d->shim_pid = 0;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    check_nothing_left(d, init);
}
