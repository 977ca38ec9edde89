/* libFuzzer target: image import from a tarball (shim_image_import_tar), the path where a
 * hostile archive meets the host file system. The archive is extracted into
 * <tmp>/box/out; after each run <tmp>/box must hold nothing but out (nothing written beside or
 * through it), and on failure out must be gone. */
#include "shim/image.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64], box[96], out[128], tarpath[96];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

static int open_up(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)f;
    if (flag == FTW_D || flag == FTW_DNR)
        chmod(p, 0700); /* before nftw reads it: archives may hold mode 000 directories */
    return 0;
}

static void rm_tree(const char *path) {
    nftw(path, open_up, 16, FTW_PHYS);
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void at_exit(void) {
    if (root[0])
        rm_tree(root);
}

static void setup(void) {
    snprintf(root, sizeof(root), "/tmp/fuzz-tar.XXXXXX");
    if (!mkdtemp(root))
        abort();
    atexit(at_exit);
    snprintf(box, sizeof(box), "%s/box", root);
    snprintf(out, sizeof(out), "%s/out", box);
    snprintf(tarpath, sizeof(tarpath), "%s/in.tar", root);
    if (mkdir(box, 0755) < 0)
        abort();
}

static void check_box(bool ok) {
    DIR *d = opendir(box);
    if (!d)
        abort();
    struct dirent *e;
    bool saw_out = false;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (strcmp(e->d_name, "out") != 0) {
            fprintf(stderr, "fuzz_tar: %s written beside the destination\n", e->d_name);
            abort();
        }
        saw_out = true;
    }
    closedir(d);
    if (saw_out != ok)
        abort(); /* success leaves the tree, failure removes it */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 20)
        return 0;
    if (!root[0])
        setup();
    int fd = open(tarpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    error_rec err = {0};
    int r = shim_image_import_tar(tarpath, out, &err);
    check_box(r == 0);
    if (r < 0 && err.message[0] == '\0')
        abort();
    rm_tree(out);
    return 0;
}
