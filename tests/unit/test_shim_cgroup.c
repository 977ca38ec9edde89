/* Unit tests of shim_cgroup_rename (shim/cgroup.h), which makes a spare's parked cgroup the
 * sandbox's: every directory renamed to its sibling named by the id, or none. Plain
 * directories under a temporary one stand in for a v1 sandbox's per-controller cgroups (rename
 * does the same on both). */
#include "shim/cgroup.h"
#include "tests/lib/test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A shim_cgroup of n directories <tmp>/c<i>/<name>, made on disk. */
static shim_cgroup *stand_in(const char *tmp, size_t n, const char *name) {
    shim_cgroup *cg = calloc(1, sizeof(*cg));
    CHECK(cg);
    cg->version = 1;
    cg->oom_fd = -1;
    for (size_t i = 0; i < n; i++) {
        char d[512];
        snprintf(d, sizeof(d), "%s/c%zu", tmp, i);
        CHECK(mkdir(d, 0700) == 0);
        snprintf(d, sizeof(d), "%s/c%zu/%s", tmp, i, name);
        CHECK(mkdir(d, 0700) == 0);
        cg->dirs[i] = strdup(d);
        cg->ctrls[i] = "memory";
    }
    cg->n = n;
    return cg;
}

static bool is_dir(const char *tmp, size_t i, const char *name) {
    char d[512];
    struct stat st;
    snprintf(d, sizeof(d), "%s/c%zu/%s", tmp, i, name);
    return stat(d, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Every directory of cg is <tmp>/c<i>/<name>, on disk and in the struct. */
static void check_named(const char *tmp, const shim_cgroup *cg, const char *name) {
    for (size_t i = 0; i < cg->n; i++) {
        char want[512];
        snprintf(want, sizeof(want), "%s/c%zu/%s", tmp, i, name);
        CHECK(is_dir(tmp, i, name));
        CHECK_STREQ(cg->dirs[i], want);
    }
}

static void remove_tmp(const char *tmp) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
}

TEST(shim_cgroup_rename_all) {
    char tmp[] = "/tmp/sbx-cgrename.XXXXXX";
    CHECK(mkdtemp(tmp));
    shim_cgroup *cg = stand_in(tmp, 5, "spare-42");
    error_rec err = {0};
    CHECK_MSG(shim_cgroup_rename(cg, "sb-1", &err) == 0, "%s", err.message);
    check_named(tmp, cg, "sb-1");
    for (size_t i = 0; i < 5; i++)
        CHECK(!is_dir(tmp, i, "spare-42"));
    shim_cgroup_free(cg);
    remove_tmp(tmp);
}

/* The fourth rename fails (a non-empty directory has the new name there): the three before it
 * are put back and the struct still names the old directories. */
TEST(shim_cgroup_rename_none_on_failure) {
    char tmp[] = "/tmp/sbx-cgrename.XXXXXX";
    CHECK(mkdtemp(tmp));
    shim_cgroup *cg = stand_in(tmp, 5, "spare-42");
    char block[512];
    snprintf(block, sizeof(block), "%s/c3/sb-1", tmp);
    CHECK(mkdir(block, 0700) == 0);
    snprintf(block, sizeof(block), "%s/c3/sb-1/child", tmp);
    CHECK(mkdir(block, 0700) == 0);
    error_rec err = {0};
    CHECK(shim_cgroup_rename(cg, "sb-1", &err) < 0);
    CHECK_MSG(strstr(err.message, "c3/spare-42") != NULL, "%s", err.message);
    check_named(tmp, cg, "spare-42");
    for (size_t i = 0; i < 5; i++)
        CHECK(i == 3 || !is_dir(tmp, i, "sb-1"));
    shim_cgroup_free(cg);
    remove_tmp(tmp);
}
