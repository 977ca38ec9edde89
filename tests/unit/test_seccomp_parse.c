/* Unit tests of the seccomp profile parser (policy/seccomp.c): every malformed document gets
 * an error naming the rule and field, nothing is returned on failure, and the accepted forms
 * (symbolic values, numeric errnos, masked compares) compile to the expected filter code. */
#include "common/fdutil.h"
#include "policy/seccomp.h"
#include "shim/seccomp.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <sys/mman.h>

#define HEADER                                                                                     \
    "{\"version\": 1, \"default_action\": \"errno:ENOSYS\", "                                      \
    "\"bad_arch_action\": \"kill_process\", "

/* Load must fail with -EINVAL, leave *ret alone, and the message must contain `want`. */
static void check_rejected(const char *json, const char *want) {
    policy_seccomp *sentinel = (policy_seccomp *)&sentinel, *p = sentinel;
    error_rec err = {0};
    int r = policy_seccomp_load_string(json, &p, &err);
    CHECK_MSG(r == -EINVAL, "accepted or wrong code %d for: %s", r, json);
    CHECK_MSG(p == sentinel, "ret written on failure");
    CHECK_EQ(err.code, -EINVAL);
    CHECK_MSG(strstr(err.message, want), "message \"%s\" lacks \"%s\"", err.message, want);
}

static policy_seccomp *check_loads(const char *json) {
    policy_seccomp *p = NULL;
    error_rec err = {0};
    int r = policy_seccomp_load_string(json, &p, &err);
    CHECK_MSG(r == 0 && p, "rejected: %s\n  %s", err.message, json);
    return p;
}

static char *pfc_of(policy_seccomp *p) {
    int fd = memfd_create("pfc", MFD_CLOEXEC);
    CHECK(fd >= 0);
    error_rec err = {0};
    CHECK_OK(policy_seccomp_export_pfc(p, fd, &err));
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    char *text;
    CHECK_OK(fd_read_all(fd, 1 << 20, &text, NULL));
    close(fd);
    return text;
}

TEST(malformed_json) {
    check_rejected("{", "line 1");
    check_rejected("", "line");
    check_rejected("[]", "top level: expected an object");
    check_rejected(HEADER "\"rules\": [], \"rules\": []}", "duplicate");
}

TEST(header_fields) {
    check_rejected("{\"version\": 2, \"default_action\": \"allow\", \"bad_arch_action\": "
                   "\"kill_process\", \"rules\": []}",
                   "version: expected 1");
    check_rejected("{\"version\": 1, \"bad_arch_action\": \"kill_process\", \"rules\": []}",
                   "default_action: expected a string");
    check_rejected("{\"version\": 1, \"default_action\": \"errno:ENOSYS\", "
                   "\"bad_arch_action\": \"allow\", \"rules\": []}",
                   "bad_arch_action: unknown action \"allow\"");
    check_rejected(HEADER "\"rules\": {}}", "rules: expected an array");
    check_rejected(HEADER "\"rulez\": [], \"rules\": []}", "top level: unknown field \"rulez\"");
}

TEST(unknown_syscall) {
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"allow\"}, "
                          "{\"names\": [\"write\", \"no_such_call\"], \"action\": \"allow\"}]}",
                   "rules[1].names[1]: unknown syscall \"no_such_call\"");
    check_rejected(HEADER "\"rules\": [{\"names\": [42], \"action\": \"allow\"}]}",
                   "rules[0].names[0]: expected a string");
    check_rejected(HEADER "\"rules\": [{\"names\": [], \"action\": \"allow\"}]}",
                   "rules[0].names: expected a non-empty array");
}

TEST(bad_action) {
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"deny\"}]}",
                   "rules[0].action: unknown action \"deny\"");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"errno:EFOO\"}]}",
                   "rules[0].action: unknown action \"errno:EFOO\"");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"errno:5000\"}]}",
                   "unknown action \"errno:5000\"");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"errno:\"}]}",
                   "unknown action");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"]}]}",
                   "rules[0].action: expected a string");
}

TEST(bad_args) {
#define ARGS(a)                                                                                    \
    HEADER "\"rules\": [{\"names\": [\"socket\"], \"action\": \"allow\", \"args\": " a "}]}"
    check_rejected(ARGS("[{\"index\": 6, \"op\": \"eq\", \"value\": 1}]"),
                   "rules[0].args[0].index: expected an integer 0..5");
    check_rejected(ARGS("[{\"index\": -1, \"op\": \"eq\", \"value\": 1}]"),
                   "rules[0].args[0].index");
    check_rejected(ARGS("[{\"index\": \"0\", \"op\": \"eq\", \"value\": 1}]"),
                   "rules[0].args[0].index");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"contains\", \"value\": 1}]"),
                   "rules[0].args[0].op: unknown operator");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\"}]"), "rules[0].args[0].value: missing");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"value\": -1}]"),
                   "rules[0].args[0].value: expected a non-negative integer");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"value\": \"AF_NOPE\"}]"),
                   "rules[0].args[0].value: bad value \"AF_NOPE\"");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"value\": \"1|\"}]"), "bad value");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"value\": \"0x1zz\"}]"), "bad value");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"masked_eq\", \"value\": 1}]"),
                   "rules[0].args[0].mask: missing");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"mask\": 1, \"value\": 1}]"),
                   "rules[0].args[0].mask: only valid with masked_eq");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"value\": 1, \"vaule\": 2}]"),
                   "rules[0].args[0]: unknown field \"vaule\"");
    check_rejected(ARGS("[{\"index\": 0, \"op\": \"eq\", \"value\": 1}, "
                        "{\"index\": 0, \"op\": \"ne\", \"value\": 2}]"),
                   "rules[0].args[1].index: argument 0 is already compared in rules[0].args[0]");
    check_rejected(ARGS("[]"), "rules[0].args: expected an array of 1..6");
    check_rejected(ARGS("{}"), "rules[0].args: expected an array");
#undef ARGS
}

TEST(rule_fields_and_conflicts) {
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"allow\", "
                          "\"arg\": []}]}",
                   "rules[0]: unknown field \"arg\"");
    check_rejected(HEADER "\"rules\": [\"read\"]}", "rules[0]: expected an object");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\"], \"action\": \"allow\", "
                          "\"comment\": 1}]}",
                   "rules[0].comment: expected a string");
    /* An unconditional rule would make libseccomp drop the conditional one silently. */
    check_rejected(HEADER "\"rules\": [{\"names\": [\"socket\"], \"action\": \"errno:EPERM\"}, "
                          "{\"names\": [\"socket\"], \"action\": \"allow\", \"args\": "
                          "[{\"index\": 0, \"op\": \"eq\", \"value\": 1}]}]}",
                   "rules[1].names[0]: syscall \"socket\" also appears in rules[0]");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"read\", \"write\"], \"action\": \"allow\"}, "
                          "{\"names\": [\"write\"], \"action\": \"allow\"}]}",
                   "rules[1].names[0]: syscall \"write\" also appears in rules[0]");
}

#define PERS_MASKED(v)                                                                             \
    "{\"names\": [\"personality\"], \"action\": \"allow\", \"args\": [{\"index\": 0, \"op\": "     \
    "\"masked_eq\", \"mask\": \"0xffffffff\", \"value\": " #v "}]}"

/* "otherwise": the calls of a syscall that no earlier rule matched; only after single
 * masked_eq rules on one argument, last, without args. */
TEST(otherwise_rules) {
    check_rejected(HEADER "\"rules\": [" PERS_MASKED(0) ", {\"names\": [\"personality\"], "
                                                        "\"action\": \"errno:EPERM\", "
                                                        "\"otherwise\": 1}]}",
                   "rules[1].otherwise: expected true");
    check_rejected(HEADER
                   "\"rules\": [" PERS_MASKED(0) ", {\"names\": [\"personality\"], "
                                                 "\"action\": \"errno:EPERM\", "
                                                 "\"otherwise\": true, \"args\": [{\"index\": "
                                                 "0, \"op\": \"eq\", \"value\": 1}]}]}",
                   "rules[1]: \"otherwise\" and \"args\" exclude each other");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"personality\"], \"action\": "
                          "\"errno:EPERM\", \"otherwise\": true}]}",
                   "rules[0].names[0]: \"otherwise\" for \"personality\" needs earlier rules");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"personality\"], \"action\": \"allow\", "
                          "\"args\": [{\"index\": 0, \"op\": \"eq\", \"value\": 0}]}, "
                          "{\"names\": [\"personality\"], \"action\": \"errno:EPERM\", "
                          "\"otherwise\": true}]}",
                   "needs every earlier rule for it to be one masked_eq on the same argument "
                   "(rules[0] is not)");
    check_rejected(HEADER "\"rules\": [" PERS_MASKED(
                       0) ", {\"names\": [\"personality\"], "
                          "\"action\": \"allow\", \"args\": [{\"index\": 1, \"op\": "
                          "\"masked_eq\", \"mask\": 1, \"value\": 1}]}, {\"names\": "
                          "[\"personality\"], \"action\": \"errno:EPERM\", \"otherwise\": true}]}",
                   "(rules[1] is not)");
    check_rejected(HEADER
                   "\"rules\": [" PERS_MASKED(0) ", {\"names\": [\"personality\"], "
                                                 "\"action\": \"errno:EPERM\", "
                                                 "\"otherwise\": true}, " PERS_MASKED(8) "]}",
                   "rules[2].names[0]: syscall \"personality\" has its \"otherwise\" rule in "
                   "rules[1]");
    check_rejected(HEADER "\"rules\": [{\"names\": [\"personality\"], \"action\": \"allow\"}, "
                          "{\"names\": [\"personality\"], \"action\": \"errno:EPERM\", "
                          "\"otherwise\": true}]}",
                   "also appears in rules[0]");
    policy_seccomp *p = check_loads(HEADER "\"rules\": [" PERS_MASKED(0) ", " PERS_MASKED(
        8) ", {\"names\": [\"personality\"], \"action\": \"errno:EPERM\", \"otherwise\": true}]}");
    char *pfc = pfc_of(p);
    /* The allowed values are compared first, then an always-true comparison refuses. */
    const char *ok = strstr(pfc, "== 8"), *rest = strstr(pfc, ">= 0");
    CHECK_MSG(ok && rest && ok < rest && strstr(rest, "action ERRNO(1)"), "%s", pfc);
    free(pfc);
    policy_seccomp_free(p);
}

TEST(missing_file) {
    policy_seccomp *p = NULL;
    error_rec err = {0};
    CHECK_EQ(policy_seccomp_load("/nonexistent/seccomp.json", &p, &err), -ENOENT);
    CHECK(p == NULL);
    CHECK(strstr(err.message, "/nonexistent/seccomp.json") != NULL);
    char path[512];
    snprintf(path, sizeof(path), "%s/bad.json", test_tmpdir());
    CHECK_OK(file_write_atomic(path, "{\"version\": 1}", 14, 0644));
    CHECK_EQ(policy_seccomp_load(path, &p, &err), -EINVAL);
    CHECK_MSG(strstr(err.message, path) && strstr(err.message, "default_action"), "%s",
              err.message);
}

TEST(accepted_forms_compile) {
    policy_seccomp *p = check_loads(
        HEADER "\"comment\": \"c\", \"rules\": ["
               "{\"comment\": \"x\", \"names\": [\"read\", \"write\"], \"action\": \"allow\"},"
               "{\"names\": [\"kcmp\"], \"action\": \"errno:13\"},"
               "{\"names\": [\"clone3\"], \"action\": \"errno:ENOSYS\"},"
               "{\"names\": [\"chown32\"], \"action\": \"allow\"},"
               "{\"names\": [\"unshare\"], \"action\": \"errno:EPERM\", \"args\": [{\"index\": 0, "
               "\"op\": \"masked_eq\", \"mask\": \"CLONE_NEWUSER | 0x10\", \"value\": "
               "\"CLONE_NEWUSER\"}]},"
               "{\"names\": [\"unshare\"], \"action\": \"trap\", \"args\": [{\"index\": 0, "
               "\"op\": \"eq\", \"value\": 2}]}]}");
    CHECK_EQ(policy_seccomp_n_rules(p), 6);
    CHECK_EQ(policy_seccomp_n_syscalls(p), 5); /* chown32 has no x86_64 number */
    char *pfc = pfc_of(p);
    CHECK_MSG(strstr(pfc, "action ERRNO(13)"), "%s", pfc);
    CHECK(strstr(pfc, "& 0x10000010 == 268435456"));
    CHECK(strstr(pfc, "action TRAP"));
    CHECK(strstr(pfc, "action ERRNO(38)"));    /* the default */
    CHECK(!strstr(pfc, "\"clone3\""));         /* same as the default: nothing emitted */
    CHECK(strstr(pfc, "action KILL_PROCESS")); /* bad arch */
    free(pfc);
    void *bpf;
    size_t len;
    error_rec err = {0};
    CHECK_OK(policy_seccomp_export_bpf(p, &bpf, &len, &err));
    CHECK(len > 0 && len % 8 == 0);
    free(bpf);
    policy_seccomp_free(p);
    policy_seccomp_free(NULL);
}

TEST(bpf_sizes_checked) {
    char buf[16] = {0};
    CHECK_EQ(shim_seccomp_apply_bpf(NULL, 8), -EINVAL);
    CHECK_EQ(shim_seccomp_apply_bpf(buf, 0), -EINVAL);
    CHECK_EQ(shim_seccomp_apply_bpf(buf, 12), -EINVAL);
    CHECK_EQ(shim_seccomp_apply_bpf(buf, 4097 * 8), -EINVAL);
    char path[512];
    snprintf(path, sizeof(path), "%s/odd.bpf", test_tmpdir());
    CHECK_OK(file_write_atomic(path, buf, 12, 0644));
    void *bpf = NULL;
    size_t len = 0;
    error_rec err = {0};
    CHECK_EQ(policy_seccomp_read_bpf(path, &bpf, &len, &err), -EINVAL);
    CHECK(bpf == NULL && strstr(err.message, "bad size 12"));
}
