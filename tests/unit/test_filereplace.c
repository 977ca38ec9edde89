/* Unit tests of common/filereplace.h: atomic, non-durable replacement of a file. */
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
