/* sbx-shim: start-up, protocol basics and the isolation layers, each observed from inside. */
#include "common/fdutil.h"
#include "common/macro.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

#include <string.h>
#include <unistd.h>

static shimdrv drv;
static void cleanup(void) {
    shimdrv_destroy(&drv);
}

static shimdrv *start(const shimdrv_opts *o) {
    test_require_root();
    atexit(cleanup);
    int r = shimdrv_start(&drv, o);
    CHECK_MSG(r == 0, "shim start: %d %s", r, drv.start_error);
    return &drv;
}

TEST(shim_smoke) {
    shimdrv *d = start(NULL);
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "echo hello; echo err >&2; exit 3", &res), 3);
    CHECK_STREQ(res.out, "hello\n");
    CHECK_STREQ(res.err, "err\n");
    CHECK_STREQ(res.reason, "exited");
    shimdrv_result_free(&res);
    /* the ready line says how long each build step took, the host's and init's */
    char *log = NULL;
    CHECK_OK(file_read_all(d->log, 1 << 20, &log, NULL));
    const char *steps = strstr(log, "sandbox ready");
    CHECK_MSG(steps && (steps = strstr(steps, "steps_ms=\"")), "log: %s", log);
    static const char *const names[] = {
        "spec=",        "cgroup=",          "fork=",         "userns-map=", "init.sync=",
        "init.rootfs=", "init.pivot-root=", "init.seccomp=", "ready="};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        CHECK_MSG(strstr(steps, names[i]) && strstr(steps, names[i]) < strchr(steps + 10, '"'),
                  "no %s in %.400s", names[i], steps);
    free(log);
    CHECK_EQ(shimdrv_shutdown(d), 0);
    CHECK(access(d->dir, F_OK) < 0);
}

TEST(shim_seccomp_compile_command) {
    char out[600], cmd[1400];
    snprintf(out, sizeof(out), "%s/p.bpf", test_tmpdir());
    const char *src = getenv("SBX_SRC_DIR");
    snprintf(cmd, sizeof(cmd), "%s seccomp-compile %s/policy/seccomp.json %s", test_bin("sbx-shim"),
             src ? src : ".", out);
    CHECK_EQ(system(cmd), 0);
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    CHECK_OK(file_read_all(out, 1 << 20, &a, &la));
    const char *ref = shimdrv_seccomp_bpf();
    CHECK(ref);
    CHECK_OK(file_read_all(ref, 1 << 20, &b, &lb));
    CHECK(la > 0 && la % 8 == 0);
    CHECK(la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    snprintf(cmd, sizeof(cmd), "%s seccomp-compile /nonexistent.json %s 2>/dev/null",
             test_bin("sbx-shim"), out);
    CHECK(system(cmd) != 0);
}
