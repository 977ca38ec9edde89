/* The C test framework: TEST(name) registers a case; every case runs in its own process (the
 * runner, tests/run, starts `BIN CASE` under a timeout). `BIN --list` prints "name timeout_s
 * [pass]"; TEST_PASS_T(name, timeout_s, "plain" or "sanitized"): a case that runs in that
 * build's pass only (tests/README.md).
 * A failed CHECK prints file:line and exits 1; SKIP exits 77 with a loud reason. */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn, int timeout_s, const char *pass);

#define TEST_PASS_T(name, timeout_s, pass)                                                         \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void test_reg_##name(void) {                               \
        test_register(#name, test_##name, timeout_s, pass);                                        \
    }                                                                                              \
    static void test_##name(void)
#define TEST_T(name, timeout_s) TEST_PASS_T(name, timeout_s, NULL)
#define TEST(name) TEST_T(name, 60)

void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
void test_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            test_fail(__FILE__, __LINE__, "CHECK(%s)", #c);                                        \
    } while (0)
#define CHECK_MSG(c, ...)                                                                          \
    do {                                                                                           \
        if (!(c))                                                                                  \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                                            \
    } while (0)
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long _a = (long long)(a), _b = (long long)(b);                                        \
        if (_a != _b)                                                                              \
            test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b);               \
    } while (0)
#define CHECK_STREQ(a, b)                                                                          \
    do {                                                                                           \
        const char *_a = (a), *_b = (b);                                                           \
        if (!_a || !_b || strcmp(_a, _b) != 0)                                                     \
            test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,                    \
                      _a ? _a : "(null)", _b ? _b : "(null)");                                     \
    } while (0)
#define CHECK_OK(r)                                                                                \
    do {                                                                                           \
        long long _r = (long long)(r);                                                             \
        if (_r < 0)                                                                                \
            test_fail(__FILE__, __LINE__, "%s failed: %lld (%s)", #r, _r, strerror((int)-_r));     \
    } while (0)
#define SKIP(...) test_skip(__VA_ARGS__)

/* Helpers for integration tests. */
/* Path of a built binary ("sbx-shim", "sandboxd", "sbx"): $SBX_BUILD_DIR/<name>. */
const char *test_bin(const char *name);
/* Skip loudly unless running as root (integration tests need real namespaces and cgroups). */
void test_require_root(void);
/* Fresh private temporary directory for this case (in $SBX_CASE_DIR when the runner gives one),
 * removed at exit. */
const char *test_tmpdir(void);
/* Run fn when the case ends: right after a passing case returns (a false return then fails the
 * case), else at exit (a failed CHECK, or the runner's SIGTERM on a timeout). Last in, first run.
 */
typedef bool (*test_teardown_fn)(void);
void test_at_teardown(test_teardown_fn fn);
