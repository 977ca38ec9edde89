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

TEST(pfc_matches_golden) {
    policy_seccomp *p = load_profile();
    char *got = pfc_of(p);
    policy_seccomp_free(p);
    const char *golden = src_path("tests/golden/seccomp.pfc");
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
                "pfc_matches_golden\nand review `git diff %s`\n",
                golden, "tests/golden/seccomp.pfc");
        test_fail(__FILE__, __LINE__, "PFC mismatch");
    }
    free(want);
    free(got);
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
