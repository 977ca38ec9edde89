/* Unit tests of common/filereplace.h: atomic, non-durable replacement of a file, and the in-place
 * rewrite of a small record. */
#include "common/fdutil.h"
#include "common/filereplace.h"
#include "tests/lib/test.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

TEST(replace_creates_and_replaces) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/f.json", test_tmpdir());
    CHECK_OK(file_replace_nosync(path, "first", 5, 0640));
    CHECK_OK(file_replace_nosync(path, "second!", 7, 0600));
    char *s = NULL;
    size_t n = 0;
    CHECK_OK(file_read_all(path, 1024, &s, &n));
    CHECK_EQ(n, 7);
    CHECK_STREQ(s, "second!");
    free(s);
    struct stat st;
    CHECK_OK(stat(path, &st));
    CHECK_EQ(st.st_mode & 0777, 0600);
    CHECK_EQ(count_entries(test_tmpdir()), 1); /* no temporary file left behind */
}

TEST(replace_failure_keeps_old) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/no-such-dir/f", test_tmpdir());
    CHECK_EQ(file_replace_nosync(path, "x", 1, 0600), -ENOENT);
    snprintf(path, sizeof(path), "%s/d", test_tmpdir());
    CHECK_OK(mkdir(path, 0700));
    /* renaming a file over a directory fails: the directory stays, no temp file is left */
    CHECK(file_replace_nosync(path, "x", 1, 0600) < 0);
    struct stat st;
    CHECK_OK(stat(path, &st));
    CHECK(S_ISDIR(st.st_mode));
    CHECK_EQ(count_entries(test_tmpdir()), 1);
}

TEST(rewrite_in_place_keeps_the_inode) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/r.json", test_tmpdir());
    CHECK_OK(file_rewrite_nosync(path, "{\"a\":\"long value\"}", 18, 0600)); /* new: created */
    struct stat st1, st2;
    CHECK_OK(stat(path, &st1));
    CHECK_EQ(st1.st_mode & 0777, 0600);
    CHECK_OK(file_rewrite_nosync(path, "{\"a\":1}", 7, 0600)); /* shorter: padded */
    CHECK_OK(stat(path, &st2));
    CHECK_EQ(st2.st_ino, st1.st_ino);
    char *s = NULL;
    size_t n = 0;
    CHECK_OK(file_read_all(path, 1024, &s, &n));
    CHECK_EQ(n, 18);
    CHECK_STREQ(s, "{\"a\":1}           ");
    free(s);
    CHECK_OK(file_rewrite_nosync(path, "{\"a\":\"a longer value now\"}", 26, 0600)); /* grows */
    CHECK_OK(file_read_all(path, 1024, &s, &n));
    CHECK_EQ(n, 26);
    CHECK_STREQ(s, "{\"a\":\"a longer value now\"}");
    free(s);
    CHECK_OK(stat(path, &st2));
    CHECK_EQ(st2.st_ino, st1.st_ino);
    CHECK_EQ(count_entries(test_tmpdir()), 1);
}

TEST(rewrite_beyond_a_page_replaces) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/big", test_tmpdir());
    static char big[6000];
    memset(big, 'x', sizeof(big));
    CHECK_OK(file_rewrite_nosync(path, "small", 5, 0600));
    struct stat st1, st2;
    CHECK_OK(stat(path, &st1));
    CHECK_OK(file_rewrite_nosync(path, big, sizeof(big), 0600)); /* more than a page: renamed */
    CHECK_OK(stat(path, &st2));
    CHECK(st2.st_ino != st1.st_ino);
    CHECK_EQ(st2.st_size, (off_t)sizeof(big));
    CHECK_OK(file_rewrite_nosync(path, "small", 5, 0600)); /* the old file is over a page too */
    char *s = NULL;
    size_t n = 0;
    CHECK_OK(file_read_all(path, 8192, &s, &n));
    CHECK_EQ(n, 5);
    free(s);
    snprintf(path, sizeof(path), "%s/no-such-dir/f", test_tmpdir());
    CHECK_EQ(file_rewrite_nosync(path, "x", 1, 0600), -ENOENT);
    CHECK_EQ(count_entries(test_tmpdir()), 1);
}
