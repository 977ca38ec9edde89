/* Golden checks of the seccomp profile: its libseccomp pseudo filter code (PFC) must match
 * tests/golden/seccomp.pfc byte for byte, so every change to policy/seccomp.json (or to the
 * compiler) shows up as a reviewed diff; every syscall it names must exist on x86_64; the BPF
 * written for the shim must equal the in-memory export and fit the kernel's limit.
 * Regenerate after an intended change:
 *   SBX_UPDATE_GOLDEN=1 SBX_SRC_DIR=$PWD build/tests/golden/test_seccomp pfc_matches_golden */
#include "common/fdutil.h"
#include "policy/seccomp.h"
#include "tests/lib/test.h"

#include <jansson.h>
#include <seccomp.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <sys/mman.h>

static const char *src_path(const char *rel) {
    static char buf[4][512];
    static int i;
    const char *src = getenv("SBX_SRC_DIR");
    char *b = buf[i++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", src ? src : ".", rel);
    return b;
}

static policy_seccomp *load_profile(void) {
    policy_seccomp *p = NULL;
    error_rec err = {0};
    int r = policy_seccomp_load(src_path("policy/seccomp.json"), &p, &err);
    CHECK_MSG(r == 0, "load: %s", err.message);
    return p;
}

static char *pfc_of(policy_seccomp *p) {
    int fd = memfd_create("pfc", MFD_CLOEXEC);
    CHECK(fd >= 0);
    error_rec err = {0};
    CHECK_MSG(policy_seccomp_export_pfc(p, fd, &err) == 0, "pfc: %s", err.message);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    char *text;
    CHECK_OK(fd_read_all(fd, 4 << 20, &text, NULL));
    close(fd);
    return text;
}

/* Print the first differing line of two texts. */
static void diff_hint(const char *want, const char *got) {
    int line = 1;
    const char *w = want, *g = got;
    while (*w && *w == *g) {
        line += *w == '\n';
        w++, g++;
    }
    while (w > want && w[-1] != '\n')
        w--, g--;
    fprintf(stderr, "first difference at line %d:\n  golden: %.*s\n  actual: %.*s\n", line,
            (int)strcspn(w, "\n"), w, (int)strcspn(g, "\n"), g);
}

static void check_pfc_golden(policy_seccomp *p, const char *golden_rel, const char *case_name) {
    char *got = pfc_of(p);
    policy_seccomp_free(p);
    const char *golden = src_path(golden_rel);
    const char *update = getenv("SBX_UPDATE_GOLDEN"), *ci = getenv("CI");
    if (update && strcmp(update, "1") == 0) {
        CHECK_MSG(!(ci && strcmp(ci, "true") == 0), "SBX_UPDATE_GOLDEN is refused when CI=true");
        CHECK_OK(file_write_atomic(golden, got, strlen(got), 0644));
        fprintf(stderr, "updated %s\n", golden);
        free(got);
        return;
    }
    char *want;
    int r = file_read_all(golden, 4 << 20, &want, NULL);
    CHECK_MSG(r == 0, "reading %s: %s", golden, strerror(-r));
    if (strcmp(want, got) != 0) {
        diff_hint(want, got);
        fprintf(stderr,
                "the compiled profile differs from %s; if the change is intended, run\n"
                "  SBX_UPDATE_GOLDEN=1 SBX_SRC_DIR=$PWD build/tests/golden/test_seccomp "
                "%s\nand review `git diff %s`\n",
                golden, case_name, golden_rel);
        test_fail(__FILE__, __LINE__, "PFC mismatch");
    }
    free(want);
    free(got);
}

TEST(pfc_matches_golden) {
    check_pfc_golden(load_profile(), "tests/golden/seccomp.pfc", "pfc_matches_golden");
}

static policy_seccomp *load_grading(void) {
    policy_seccomp *p = NULL;
    error_rec err = {0};
    int r = policy_seccomp_load_file_profile(src_path("policy/seccomp.json"), "grading", &p, &err);
    CHECK_MSG(r == 0, "load grading: %s", err.message);
    return p;
}

/* The grading profile (docs/GRPO.md "Grading sandboxes"), pinned the same way. */
TEST(grading_pfc_matches_golden) {
    check_pfc_golden(load_grading(), "tests/golden/seccomp-grading.pfc",
                     "grading_pfc_matches_golden");
}

static uint32_t bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d);

static void export_bpf(policy_seccomp *p, void **bpf, size_t *len) {
    error_rec err = {0};
    CHECK_MSG(policy_seccomp_export_bpf(p, bpf, len, &err) == 0, "%s", err.message);
    policy_seccomp_free(p);
}

/* The grading profile is the default one minus ptrace, process_vm_readv and process_vm_writev
 * (EPERM there): every other syscall number, with each argument probed over edge values, gets
 * the same answer from both programs. */
TEST(grading_is_default_minus_cross_process) {
    static const char *const denied[] = {"ptrace", "process_vm_readv", "process_vm_writev"};
    void *def, *gr;
    size_t dl, gl;
    export_bpf(load_profile(), &def, &dl);
    export_bpf(load_grading(), &gr, &gl);
    static const uint64_t vals[] = {0,           1,     2,          0x10,      0xffffffff,
                                    0x100000000, ~0ULL, 0x7fffffff, 0x80000000};
    size_t differ = 0;
    for (int nr = 0; nr < 1024; nr++) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        if (!name)
            continue;
        bool deny = false;
        for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
            deny = deny || strcmp(name, denied[i]) == 0;
        for (unsigned idx = 0; idx < 6; idx++)
            for (size_t v = 0; v < ARRAY_SIZE(vals); v++) {
                struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64};
                d.args[idx] = vals[v];
                uint32_t a = bpf_run(def, dl / 8, &d), b = bpf_run(gr, gl / 8, &d);
                if (deny) {
                    CHECK_MSG(a == SECCOMP_RET_ALLOW, "%s: the default allows it", name);
                    CHECK_MSG(b == (SECCOMP_RET_ERRNO | EPERM), "%s: grading gives 0x%x", name, b);
                } else
                    CHECK_MSG(a == b, "%s(arg%u = 0x%" PRIx64 "): default 0x%x, grading 0x%x", name,
                              idx, vals[v], a, b);
                differ += a != b;
            }
        free(name);
    }
    CHECK_EQ(differ, ARRAY_SIZE(denied) * 6 * ARRAY_SIZE(vals));
    free(def);
    free(gr);
}

/* A profile named but absent, and a deny list that is not one, are errors. */
TEST(grading_profile_errors) {
    policy_seccomp *p = NULL;
    error_rec err = {0};
    const char *doc =
        "{\"version\":1,\"default_action\":\"errno:ENOSYS\",\"bad_arch_action\":"
        "\"kill_process\",\"profiles\":{\"g\":{\"deny\":[],\"action\":\"errno:EPERM\"}},"
        "\"rules\":[{\"names\":[\"read\",\"ptrace\"],\"action\":\"allow\"}]}";
    CHECK(policy_seccomp_load_profile(doc, "nope", &p, &err) == -ENOENT);
    CHECK_MSG(strstr(err.message, "profiles.nope"), "%s", err.message);
    CHECK(policy_seccomp_load_profile(doc, "g", &p, &err) == -EINVAL);
    CHECK_MSG(strstr(err.message, "profiles.g.deny"), "%s", err.message);
    CHECK_OK(policy_seccomp_load_profile(doc, NULL, &p, &err));
    policy_seccomp_free(p);
}

TEST(names_resolve_x86_64) {
    json_error_t jerr;
    json_t *doc = json_load_file(src_path("policy/seccomp.json"), 0, &jerr);
    CHECK_MSG(doc, "json: %s", jerr.text);
    json_t *rules = json_object_get(doc, "rules");
    size_t n = 0, i;
    json_t *rule;
    json_array_foreach(rules, i, rule) {
        size_t j;
        json_t *name;
        json_array_foreach(json_object_get(rule, "names"), j, name) {
            const char *s = json_string_value(name);
            CHECK_MSG(s, "rules[%zu].names[%zu] is not a string", i, j);
            int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, s);
            CHECK_MSG(nr >= 0, "rules[%zu].names[%zu]: \"%s\" is not an x86_64 syscall (%d)", i, j,
                      s, nr);
            n++;
        }
    }
    CHECK(n > 250); /* an allow-list that runs bash, python, cc, git and make */
    json_decref(doc);
}

TEST(bpf_file_matches_export) {
    policy_seccomp *p = load_profile();
    void *mem;
    size_t mem_len;
    error_rec err = {0};
    CHECK_MSG(policy_seccomp_export_bpf(p, &mem, &mem_len, &err) == 0, "%s", err.message);
    CHECK(mem_len > 0 && mem_len % 8 == 0 && mem_len / 8 <= 4096);
    policy_seccomp_free(p);

    char out[512];
    snprintf(out, sizeof(out), "%s/seccomp.bpf", test_tmpdir());
    CHECK_MSG(policy_seccomp_compile_file(src_path("policy/seccomp.json"), out, &err) == 0, "%s",
              err.message);
    void *file;
    size_t file_len;
    CHECK_MSG(policy_seccomp_read_bpf(out, &file, &file_len, &err) == 0, "%s", err.message);
    CHECK_EQ(file_len, mem_len);
    CHECK(memcmp(file, mem, mem_len) == 0);
    fprintf(stderr, "seccomp program: %zu instructions\n", mem_len / 8);
    free(file);
    free(mem);
}

/* ---- at least as strict as Docker's default profile ----
 * tests/golden/moby-seccomp-default.json is Docker's (moby's) default profile. For every
 * x86_64 syscall number and a set of argument values, the compiled program (run by a small
 * classic-BPF interpreter) may allow a call only where Docker's profile, as a default container
 * gets it (amd64, Docker's default capabilities, kernel >= 4.8), allows the same call as the
 * kernel sees it (int arguments truncated to 32 bits). */

static const char *const docker_default_caps[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",    "CAP_AUDIT_WRITE",
};

static bool has_default_cap(json_t *caps) {
    size_t i;
    json_t *c;
    json_array_foreach(caps, i, c) {
        for (size_t j = 0; j < ARRAY_SIZE(docker_default_caps); j++)
            if (strcmp(json_string_value(c), docker_default_caps[j]) == 0)
                return true;
    }
    return false;
}

static bool has_string(json_t *arr, const char *s) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

/* Does a Docker rule apply to a default amd64 container? */
static bool docker_rule_applies(json_t *rule) {
    json_t *inc = json_object_get(rule, "includes"), *exc = json_object_get(rule, "excludes");
    json_t *arches = json_object_get(inc, "arches"), *caps = json_object_get(inc, "caps");
    if (arches && !has_string(arches, "amd64"))
        return false;
    if (caps && !has_default_cap(caps))
        return false;
    if (has_string(json_object_get(exc, "arches"), "amd64"))
        return false;
    return !has_default_cap(json_object_get(exc, "caps"));
}

static bool docker_arg_matches(json_t *a, const uint64_t *args) {
    uint64_t v = args[json_integer_value(json_object_get(a, "index"))];
    uint64_t k = (uint64_t)json_integer_value(json_object_get(a, "value"));
    uint64_t k2 = (uint64_t)json_integer_value(json_object_get(a, "valueTwo"));
    const char *op = json_string_value(json_object_get(a, "op"));
    if (strcmp(op, "SCMP_CMP_EQ") == 0)
        return v == k;
    if (strcmp(op, "SCMP_CMP_NE") == 0)
        return v != k;
    if (strcmp(op, "SCMP_CMP_LT") == 0)
        return v < k;
    if (strcmp(op, "SCMP_CMP_LE") == 0)
        return v <= k;
    if (strcmp(op, "SCMP_CMP_GT") == 0)
        return v > k;
    if (strcmp(op, "SCMP_CMP_GE") == 0)
        return v >= k;
    CHECK_MSG(strcmp(op, "SCMP_CMP_MASKED_EQ") == 0, "unknown Docker op %s", op);
    return (v & k) == k2; /* Docker: value is the mask, valueTwo the datum */
}

/* Docker's verdict: true when it allows the call. */
static bool docker_allows(json_t *docker, const char *name, const uint64_t *args) {
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(docker, "syscalls"), i, rule) {
        if (!has_string(json_object_get(rule, "names"), name) || !docker_rule_applies(rule))
            continue;
        if (strcmp(json_string_value(json_object_get(rule, "action")), "SCMP_ACT_ALLOW") != 0)
            continue;
        bool all = true;
        size_t j;
        json_t *a;
        json_array_foreach(json_object_get(rule, "args"), j, a) all &= docker_arg_matches(a, args);
        if (all)
            return true;
    }
    return false; /* default: SCMP_ACT_ERRNO (EPERM) */
}

/* A classic-BPF interpreter for what libseccomp emits; returns the SECCOMP_RET_* value. */
static uint32_t bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d) {
    uint32_t A = 0, mem[BPF_MEMWORDS] = {0};
    for (size_t pc = 0; pc < n; pc++) {
        const struct sock_filter *in = &f[pc];
        uint32_t k = in->k;
        switch (in->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            CHECK_MSG(k % 4 == 0 && k + 4 <= sizeof(*d), "load at %u", k);
            memcpy(&A, (const char *)d + k, 4);
            break;
        case BPF_LD | BPF_MEM:
            A = mem[k % BPF_MEMWORDS];
            break;
        case BPF_ST:
            mem[k % BPF_MEMWORDS] = A;
            break;
        case BPF_ALU | BPF_AND | BPF_K:
            A &= k;
            break;
        case BPF_RET | BPF_K:
            return k;
        case BPF_JMP | BPF_JA:
            pc += k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += A == k ? in->jt : in->jf;
            break;
        case BPF_JMP | BPF_JGT | BPF_K:
            pc += A > k ? in->jt : in->jf;
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += A >= k ? in->jt : in->jf;
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += (A & k) ? in->jt : in->jf;
            break;
        default:
            CHECK_MSG(false, "BPF opcode 0x%x at %zu not interpreted", in->code, pc);
        }
    }
    CHECK_MSG(false, "BPF program ran off its end");
    return 0;
}

/* Argument values to probe: edges, every single bit, and Docker's constants +-1 with and
 * without high bits. */
static size_t probe_values(json_t *docker, uint64_t *out, size_t cap) {
    size_t n = 0;
    static const uint64_t fixed[] = {0, 1, 0xffffffff, 0x100000000, ~0ULL, 0x7fffffff, 0x80000000};
    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
        out[n++] = fixed[i];
    for (int b = 0; b < 64; b++)
        out[n++] = 1ULL << b;
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(docker, "syscalls"), i, rule) {
        size_t j;
        json_t *a;
        json_array_foreach(json_object_get(rule, "args"), j, a) {
            uint64_t k = (uint64_t)json_integer_value(json_object_get(a, "value"));
            uint64_t vals[] = {k, k - 1, k + 1};
            for (size_t v = 0; v < 3 && n + 2 <= cap; v++) {
                out[n++] = vals[v];
                out[n++] = vals[v] | 0x100000000ULL;
            }
        }
    }
    return n;
}

/* Arguments the kernel reads as int or unsigned int, for the syscalls Docker filters. */
static uint64_t kernel_view(const char *name, unsigned idx, uint64_t v) {
    if (strcmp(name, "personality") == 0 || (strcmp(name, "socket") == 0 && idx < 3))
        return v & 0xffffffff;
    return v;
}

TEST(no_looser_than_docker) {
    json_error_t jerr;
    json_t *docker = json_load_file(src_path("tests/golden/moby-seccomp-default.json"), 0, &jerr);
    CHECK_MSG(docker, "Docker's profile: %s", jerr.text);
    policy_seccomp *p = load_profile();
    void *bpf;
    size_t len;
    error_rec err = {0};
    CHECK_MSG(policy_seccomp_export_bpf(p, &bpf, &len, &err) == 0, "%s", err.message);
    policy_seccomp_free(p);
    uint64_t vals[512];
    size_t n_vals = probe_values(docker, vals, ARRAY_SIZE(vals)), checked = 0, allowed = 0;
    for (int nr = 0; nr < 1024; nr++) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        if (!name)
            continue;
        for (unsigned idx = 0; idx < 3; idx++) {
            for (size_t v = 0; v < n_vals; v++) {
                struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64};
                uint64_t kargs[6] = {0};
                d.args[idx] = vals[v];
                kargs[idx] = kernel_view(name, idx, vals[v]);
                bool ours =
                    (bpf_run(bpf, len / 8, &d) & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW;
                CHECK_MSG(!ours || docker_allows(docker, name, kargs),
                          "%s(arg%u = 0x%" PRIx64 "): allowed by ours, refused by Docker's", name,
                          idx, vals[v]);
                checked++;
                allowed += ours;
            }
        }
        free(name);
    }
    fprintf(stderr, "%zu calls checked, %zu allowed by both\n", checked, allowed);
    CHECK(allowed > 0);
    free(bpf);
    json_decref(docker);
}

/* The "ours" column of a row of the decision table, checked against the compiled program for
 * a call with all-zero arguments: "allow", "EPERM", "ENOSYS (default)" and "not on x86_64"
 * must be what the program does; other texts (argument rules) are the behaviour tests'. */
static void check_row_ours(const char *name, const char *ours, const void *bpf, size_t len) {
    int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
    if (strncmp(ours, "not on x86_64 |", 15) == 0) {
        CHECK_MSG(nr < 0, "`%s` is an x86_64 syscall (%d), the table says it is not", name, nr);
        return;
    }
    uint32_t want;
    if (strncmp(ours, "allow |", 7) == 0)
        want = SECCOMP_RET_ALLOW;
    else if (strncmp(ours, "EPERM |", 7) == 0)
        want = SECCOMP_RET_ERRNO | EPERM;
    else if (strncmp(ours, "ENOSYS", 6) == 0)
        want = SECCOMP_RET_ERRNO | ENOSYS;
    else
        return;
    if (nr < 0) /* newer than the installed libseccomp: the default, by number unknown here */
        return;
    struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64};
    uint32_t got = bpf_run(bpf, len / 8, &d);
    CHECK_MSG(got == want, "`%s`: the table says \"%.20s\", the program returns 0x%x", name, ours,
              got);
}

/* docs/SECURITY-seccomp.md records a decision for every syscall Docker's profile names, and
 * its "ours" column says what the compiled program does. */
TEST(doc_covers_docker_profile) {
    json_error_t jerr;
    json_t *docker = json_load_file(src_path("tests/golden/moby-seccomp-default.json"), 0, &jerr);
    CHECK_MSG(docker, "Docker's profile: %s", jerr.text);
    char *doc;
    CHECK_OK(file_read_all(src_path("docs/SECURITY-seccomp.md"), 1 << 20, &doc, NULL));
    policy_seccomp *p = load_profile();
    void *bpf;
    size_t len;
    error_rec err = {0};
    CHECK_MSG(policy_seccomp_export_bpf(p, &bpf, &len, &err) == 0, "%s", err.message);
    policy_seccomp_free(p);
    size_t i, n = 0;
    json_t *rule;
    json_array_foreach(json_object_get(docker, "syscalls"), i, rule) {
        size_t j;
        json_t *name;
        json_array_foreach(json_object_get(rule, "names"), j, name) {
            char row[96];
            snprintf(row, sizeof(row), "\n| `%s` |", json_string_value(name));
            const char *at = strstr(doc, row);
            CHECK_MSG(at, "docs/SECURITY-seccomp.md has no row for `%s`", json_string_value(name));
            const char *ours = strstr(at + strlen(row), " | "); /* past Docker's column */
            CHECK(ours);
            check_row_ours(json_string_value(name), ours + 3, bpf, len);
            n++;
        }
    }
    CHECK(n > 400);
    free(bpf);
    free(doc);
    json_decref(docker);
}
