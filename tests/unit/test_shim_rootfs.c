/* Unit tests of shim_rootfs_mask (shim/rootfs.h), which masks /proc entries without a stat of
 * each first. A private mount namespace and a tmpfs on a temporary directory stand in for /proc
 * and the masks: nothing of the host's is mounted on. */
#include "shim/rootfs.h"
#include "tests/lib/test.h"

#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[] = "/tmp/sbx-mask.XXXXXX";
static char proc[64], mask_file[64], mask_dir[64];

static void cleanup(void) {
    umount2(tmp, MNT_DETACH);
    rmdir(tmp);
}

static void make(const char *name, bool dir) {
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", tmp, name);
    if (dir) {
        CHECK(mkdir(p, 0755) == 0);
        return;
    }
    int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "host", 4) == 4);
    close(fd);
}

/* A private mount namespace with a tmpfs on tmp holding proc/{file,dir}, mask-file, mask-dir. */
static void world(void) {
    test_require_root();
    CHECK(unshare(CLONE_NEWNS) == 0);
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    CHECK(mkdtemp(tmp));
    atexit(cleanup);
    CHECK(mount("sbx-test", tmp, "tmpfs", 0, "size=64k") == 0);
    make("proc", true);
    make("proc/dir", true);
    make("proc/file", false);
    make("mask-dir", true);
    make("mask-file", false);
    snprintf(proc, sizeof(proc), "%s/proc", tmp);
    snprintf(mask_file, sizeof(mask_file), "%s/mask-file", tmp);
    snprintf(mask_dir, sizeof(mask_dir), "%s/mask-dir", tmp);
}

/* Whether tmp/a is now tmp/b: the same inode of the same file system. */
static bool same(const char *a, const char *b) {
    char pa[128], pb[128];
    struct stat sa, sb;
    snprintf(pa, sizeof(pa), "%s/%s", tmp, a);
    snprintf(pb, sizeof(pb), "%s/%s", tmp, b);
    return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Mask names (3 of them) with mask, other; the file then shows the file mask and the directory
 * the directory mask, whichever list named them, and "gone" (which this "kernel" lacks) is left
 * out. */
static void mask_and_check(const char *const *names, const char *mask, const char *other) {
    world();
    error_rec err = {0};
    CHECK_MSG(shim_rootfs_mask(proc, names, 3, mask, other, &err) == 0, "%s", err.message);
    CHECK(same("proc/file", "mask-file"));
    CHECK(same("proc/dir", "mask-dir"));
    CHECK(!same("proc/gone", "mask-file"));
}

TEST(shim_rootfs_mask_listed_as_files) { /* the directory gets the other mask (ENOTDIR) */
    static const char *const names[] = {"file", "gone", "dir"};
    mask_and_check(names, mask_file, mask_dir);
}

TEST(shim_rootfs_mask_listed_as_dirs) {
    static const char *const names[] = {"dir", "gone", "file"};
    mask_and_check(names, mask_dir, mask_file);
}

/* A missing mask is an error, not an entry left out; a target neither mask fits is an error. */
TEST(shim_rootfs_mask_errors) {
    world();
    static const char *const names[] = {"file"};
    char gone[96];
    snprintf(gone, sizeof(gone), "%s/no-mask", tmp);
    error_rec err = {0};
    CHECK(shim_rootfs_mask(proc, names, 1, gone, mask_dir, &err) == -ENOENT);
    CHECK(strstr(err.message, "no-mask"));
    CHECK(!same("proc/file", "mask-file"));
    static const char *const under_file[] = {"file/x"};
    err = (error_rec){0};
    CHECK(shim_rootfs_mask(proc, under_file, 1, mask_file, mask_dir, &err) == -ENOTDIR);
    CHECK(strstr(err.message, "file/x"));
}
