/* The C test framework's main: `--list`, or run one named case (or all, each forked). */
#include "tests/lib/test.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 512

static struct {
    const char *name;
    test_fn fn;
    int timeout_s;
    const char *pass; /* NULL: both passes */
} tests[MAX_TESTS];
static size_t n_tests;
static char tmpdir[256];
static test_teardown_fn teardowns[16];
static size_t n_teardowns;

void test_register(const char *name, test_fn fn, int timeout_s, const char *pass) {
    if (n_tests >= MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        exit(2);
    }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    tests[n_tests].timeout_s = timeout_s;
    tests[n_tests].pass = pass;
    n_tests++;
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "SKIP (prerequisite missing): ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(77);
}

const char *test_bin(const char *name) {
    static char buf[4][512];
    static int i;
    const char *dir = getenv("SBX_BUILD_DIR");
    char *b = buf[i++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", dir ? dir : "build", name);
    return b;
}

void test_require_root(void) {
    if (geteuid() != 0)
        test_skip("needs root for namespaces and cgroups");
}

static void tmpdir_cleanup(void) {
    if (tmpdir[0])
        rm_rf(tmpdir);
}

const char *test_tmpdir(void) {
    if (!tmpdir[0]) {
        const char *base = getenv("SBX_CASE_DIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/sbx-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir))
            test_fail(__FILE__, __LINE__, "mkdtemp");
        atexit(tmpdir_cleanup);
    }
    return tmpdir;
}

static bool run_teardowns(void) {
    bool ok = true;
    while (n_teardowns > 0)
        ok &= teardowns[--n_teardowns]();
    return ok;
}

static void teardowns_at_exit(void) {
    run_teardowns();
}

void test_at_teardown(test_teardown_fn fn) {
    if (n_teardowns >= ARRAY_SIZE(teardowns))
        test_fail(__FILE__, __LINE__, "too many teardowns");
    if (n_teardowns == 0)
        atexit(teardowns_at_exit);
    teardowns[n_teardowns++] = fn;
}

/* The runner's timeout: exit, so that atexit handlers (teardowns, the temp dir) still run. */
static void on_sigterm(int sig) {
    signal(SIGTERM, SIG_IGN); /* it may come twice (to the case, to its group): finish */
    exit(128 + sig);
}

static int run_one(size_t i) {
    signal(SIGTERM, on_sigterm);
    tests[i].fn();
    return run_teardowns() ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n_tests; i++)
            printf("%s %d %s\n", tests[i].name, tests[i].timeout_s,
                   tests[i].pass ? tests[i].pass : "");
        return 0;
    }
    if (argc == 2) {
        for (size_t i = 0; i < n_tests; i++)
            if (strcmp(tests[i].name, argv[1]) == 0)
                return run_one(i);
        fprintf(stderr, "no such test case: %s\n", argv[1]);
        return 2;
    }
    int failed = 0;
    for (size_t i = 0; i < n_tests; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            alarm((unsigned)tests[i].timeout_s);
            _exit(run_one(i));
        }
        int st;
        waitpid(pid, &st, 0);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("%s %s\n", ok ? "ok  " : "FAIL", tests[i].name);
        failed += !ok;
    }
    return failed ? 1 : 0;
}
