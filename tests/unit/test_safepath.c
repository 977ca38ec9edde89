/* Unit tests of common/safepath.h's write side: a file is put in place whole or not at all
 * (the old node stays on failure, no temporary name is left), a link, FIFO or socket there is
 * replaced without being followed, hard links over a name (to itself: nothing to do), and a
 * symlink on the way of a walk is named as one. */
#include "common/fdutil.h"
#include "common/safepath.h"
#include "tests/lib/test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int count_entries(int dir) {
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

static void put(int dir, const char *name, const char *s) {
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    CHECK_OK(fd_write_all(fd, s, strlen(s)));
    close(fd);
}

static void check_content(int dir, const char *name, const char *want) {
    char buf[64] = {0};
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(read(fd, buf, sizeof(buf) - 1) >= 0);
    close(fd);
    CHECK_STREQ(buf, want);
}

/* The walker over the test's directory (any owner may be changed). */
static int setup(safepath *sp, int *ret_dir) {
    int root = open(test_tmpdir(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(root >= 0);
    static const char *const writable[] = {"/"};
    CHECK_OK(safepath_init(sp, root, writable, 1));
    CHECK_OK(safepath_dir(sp, "/", true, false, 0, ret_dir));
    return root;
}

TEST(file_replaces_whole_or_not_at_all) {
    safepath sp;
    int dir, root = setup(&sp, &dir);
    put(dir, "a", "old");
    int reader = openat(dir, "a", O_RDONLY | O_CLOEXEC);
    CHECK(reader >= 0);
    safepath_file f;
    CHECK_OK(safepath_file_new(&sp, dir, "a", 0600, getuid(), &f));
    CHECK_OK(fd_write_all(f.fd, "part", 4));
    safepath_file_discard(dir, &f); /* a failure midway: the old file as it was */
    check_content(dir, "a", "old");
    CHECK_EQ(count_entries(dir), 1);
    CHECK_OK(safepath_file_new(&sp, dir, "a", 0600, getuid(), &f));
    CHECK_OK(fd_write_all(f.fd, "new!", 4));
    check_content(dir, "a", "old"); /* not in place before the commit */
    CHECK_OK(safepath_file_commit(&sp, dir, "a", &f));
    check_content(dir, "a", "new!");
    char buf[8] = {0};
    CHECK_EQ(pread(reader, buf, sizeof(buf) - 1, 0), 3); /* a reader keeps the old file */
    CHECK_STREQ(buf, "old");
    struct stat st;
    CHECK_OK(fstatat(dir, "a", &st, 0));
    CHECK_EQ(st.st_mode & 0777, 0600);
    CHECK_EQ(count_entries(dir), 1);
    close(reader);
    close(dir);
    close(root);
}

TEST(file_replaces_links_never_their_targets) {
    safepath sp;
    int dir, root = setup(&sp, &dir);
    put(dir, "target", "keep");
    CHECK_OK(symlinkat("target", dir, "link"));
    CHECK_OK(mkfifoat(dir, "fifo", 0600));
    CHECK_OK(mkdirat(dir, "sub", 0755));
    const char *names[] = {"link", "fifo"};
    for (size_t i = 0; i < 2; i++) {
        safepath_file f;
        CHECK_OK(safepath_file_new(&sp, dir, names[i], 0644, getuid(), &f));
        CHECK_OK(fd_write_all(f.fd, "regular", 7));
        CHECK_OK(safepath_file_commit(&sp, dir, names[i], &f));
        struct stat st;
        CHECK_OK(fstatat(dir, names[i], &st, AT_SYMLINK_NOFOLLOW));
        CHECK(S_ISREG(st.st_mode));
        check_content(dir, names[i], "regular");
    }
    check_content(dir, "target", "keep");
    safepath_file f;
    CHECK_EQ(safepath_file_new(&sp, dir, "sub", 0644, getuid(), &f), -EISDIR);
    CHECK_EQ(safepath_file_new(&sp, dir, "..", 0644, getuid(), &f), -EINVAL);
    CHECK_OK(safepath_symlink_over(&sp, "elsewhere", dir, "target", getuid()));
    char l[32] = {0};
    CHECK_EQ(readlinkat(dir, "target", l, sizeof(l) - 1), 9);
    CHECK_EQ(count_entries(dir), 4); /* target, link, fifo, sub: no temporary name */
    close(dir);
    close(root);
}

TEST(hard_link_over_and_to_itself) {
    safepath sp;
    int dir, root = setup(&sp, &dir);
    put(dir, "a", "A");
    put(dir, "b", "B");
    int a = openat(dir, "a", O_PATH | O_CLOEXEC);
    CHECK(a >= 0);
    CHECK_OK(safepath_link_over(&sp, a, dir, "a")); /* itself: nothing to do, nothing lost */
    check_content(dir, "a", "A");
    CHECK_OK(safepath_link_over(&sp, a, dir, "b"));
    check_content(dir, "b", "A");
    struct stat st;
    CHECK_OK(fstat(a, &st));
    CHECK_EQ(st.st_nlink, 2);
    CHECK_EQ(count_entries(dir), 2);
    close(a);
    close(dir);
    close(root);
}

TEST(symlink_on_the_way_is_named) {
    safepath sp;
    int dir, root = setup(&sp, &dir);
    CHECK_OK(mkdirat(dir, "d", 0755));
    CHECK_OK(symlinkat("d", dir, "l"));
    int fd = -1;
    CHECK_EQ(safepath_dir(&sp, "/l/x", false, false, 0, &fd), -ELOOP);
    CHECK_EQ(safepath_dir(&sp, "/l", true, true, getuid(), &fd), -ELOOP);
    put(dir, "f", "");
    CHECK_EQ(safepath_dir(&sp, "/f/x", false, false, 0, &fd), -ENOTDIR);
    close(dir);
    close(root);
}
