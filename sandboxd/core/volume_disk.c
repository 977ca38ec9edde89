/* A volume's disk (see volume_disk.h): mkfs.ext4 on a sparse file, mount(8) with a loop
 * device, and their undoing. Runs on libuv's worker threads and at start-up. */
#include "sandboxd/core/volume_disk.h"

#include "common/capture.h"

#include "common/fdutil.h"
#include "common/log.h"
#include "common/spec.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

void sd_vdisk_paths(const char *dir, const char *name, char *img, char *mnt, size_t len) {
    snprintf(img, len, "%s/%s.img", dir, name);
    snprintf(mnt, len, "%s/%s.mnt", dir, name);
}

/* Run a host tool and wait; its output (the last line of it) goes into the error. */
static int run_tool(char *const argv[], error_rec *err) {
    char out[1024];
    int st = 0, r = capture_run(argv, spec_host_env, true, -1, out, sizeof(out), &st);
    if (r < 0)
        return error_set_errno(err, r, "cannot run %s", argv[0]);
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = 0;
    const char *last = strrchr(out, '\n') ? strrchr(out, '\n') + 1 : out;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EIO, "%s failed (status %d): %s", argv[0], st, last);
    return 0;
}

static bool mounted(const char *dir, const char *mnt) {
    struct stat a, b;
    return stat(dir, &a) == 0 && stat(mnt, &b) == 0 && a.st_dev != b.st_dev;
}

int sd_vdisk_mount(const char *dir, const char *name, error_rec *err) {
    char img[4200], mnt[4200];
    sd_vdisk_paths(dir, name, img, mnt, sizeof(img));
    if (mounted(dir, mnt))
        return 0;
    if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
        return error_set_errno(err, negative_errno(), "mkdir %s", mnt);
    char *mount_argv[] = {"mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", img, mnt, NULL};
    return run_tool(mount_argv, err);
}

int sd_vdisk_make(const char *dir, const char *name, uint64_t size, error_rec *err) {
    char img[4200], mnt[4200];
    sd_vdisk_paths(dir, name, img, mnt, sizeof(img));
    int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "create %s", img);
    int r = ftruncate(fd, (off_t)size) < 0 ? negative_errno() : 0;
    close(fd);
    if (r < 0) {
        unlink(img);
        return error_set_errno(err, r, "size %s", img);
    }
    char *mkfs[] = {
        "mkfs.ext4",  "-q", "-F",
        "-m",         "0",  "-L",
        "sbx-volume", "-E", "root_owner=1000:1000,nodiscard,lazy_itable_init=1,lazy_journal_init=1",
        img,          NULL};
    if ((r = run_tool(mkfs, err)) < 0 || (r = sd_vdisk_mount(dir, name, err)) < 0) {
        sd_vdisk_remove(dir, name);
        return r;
    }
    char lf[4300];
    snprintf(lf, sizeof(lf), "%s/lost+found", mnt);
    (void)rmdir(lf); /* an empty volume; e2fsck makes it again when it needs it */
    return 0;
}

void sd_vdisk_remove(const char *dir, const char *name) {
    char img[4200], mnt[4200];
    sd_vdisk_paths(dir, name, img, mnt, sizeof(img));
    for (int i = 0; i < 16 && umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; i++) {
    }
    (void)rmdir(mnt);
    (void)unlink(img);
}

uint64_t sd_vdisk_used(const char *dir, const char *name) {
    char img[4200], mnt[4200];
    sd_vdisk_paths(dir, name, img, mnt, sizeof(img));
    struct statvfs fs;
    if (!mounted(dir, mnt) || statvfs(mnt, &fs) < 0)
        return 0;
    return (uint64_t)(fs.f_blocks - fs.f_bfree) * fs.f_frsize;
}

void sd_vdisk_sweep(const char *dir, bool (*known)(void *ud, const char *name), void *ud) {
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t n = strlen(de->d_name);
        char name[256];
        if (n < 5 || n - 4 >= sizeof(name) ||
            (strcmp(de->d_name + n - 4, ".img") != 0 && strcmp(de->d_name + n - 4, ".mnt") != 0))
            continue;
        memcpy(name, de->d_name, n - 4);
        name[n - 4] = 0;
        if (!known(ud, name)) {
            log_info("removing volume=%s of no record (an interrupted create or delete)", name);
            sd_vdisk_remove(dir, name);
        }
    }
    closedir(dp);
}
