/* libFuzzer target: the image store's layer unpacker (sandboxd/core/image_archive.c,
 * img_unpack_layer), where a hostile layer tar meets the host file system. The layer is unpacked
 * into <tmp>/box/out; after each run <tmp>/box must hold nothing but out (nothing written
 * beside it or through a symlink), and out must hold no setuid/setgid file, no device but the
 * 0/0 whiteouts the unpacker makes, no FIFO or socket. The first byte picks setuid=strip. */
#include "sandboxd/core/image_archive.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
        chmod(p, 0700); /* archives may hold mode 000 directories */
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
    snprintf(root, sizeof(root), "/tmp/fuzz-layer.XXXXXX");
    if (!mkdtemp(root))
        abort();
    atexit(at_exit);
    snprintf(box, sizeof(box), "%s/box", root);
    snprintf(out, sizeof(out), "%s/out", box);
    snprintf(tarpath, sizeof(tarpath), "%s/in.tar", root);
    if (mkdir(box, 0755) < 0)
        abort();
}

static int check_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)flag, (void)f;
    bool whiteout = S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
    if ((!S_ISDIR(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID))) ||
        (S_ISDIR(st->st_mode) && (st->st_mode & S_ISUID)) ||
        (!whiteout && !S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode))) {
        fprintf(stderr, "fuzz_layer: %s has mode %o\n", p, (unsigned)st->st_mode);
        abort();
    }
    return 0;
}

static void check_box(void) {
    DIR *d = opendir(box);
    if (!d)
        abort();
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "out")) {
            fprintf(stderr, "fuzz_layer: %s written beside the layer\n", e->d_name);
            abort();
        }
    closedir(d);
    nftw(out, check_entry, 16, FTW_PHYS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 20)
        return 0;
    if (!root[0])
        setup();
    int fd = open(tarpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
        abort();
    close(fd);
    if (mkdir(out, 0755) < 0)
        abort();
    int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        abort();
    img_budget b = {.unpacked_max = 64u << 20, .strip_setuid = data[0] & 1};
    char diff_id[IMG_DIGEST_HEX + 1];
    uint64_t written = 0;
    error_rec err = {0};
    int r = img_unpack_layer(tarpath, dfd, &b, diff_id, &written, &err);
    close(dfd);
    if (r < 0 && err.message[0] == '\0')
        abort();
    if (r == 0 && strlen(diff_id) != IMG_DIGEST_HEX)
        abort();
    check_box();
    rm_tree(out);
    return 0;
}
