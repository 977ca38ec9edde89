/* sbx-shim: start-up, protocol basics and the isolation layers, each observed from inside. */
#include "common/fdutil.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

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
    CHECK_EQ(shimdrv_shutdown(d), 0);
    CHECK(access(d->dir, F_OK) < 0);
}
