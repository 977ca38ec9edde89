/* Images: safe tarball import (hostile archives are refused and change nothing) and a sandbox
 * running from an imported directory image as its read-only overlay lower layer. */
#include "common/fdutil.h"
#include "shim/image.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static shimdrv drv;
static void cleanup(void) {
    shimdrv_destroy(&drv);
}

/* A tar builder: add(type, path, content-or-link-target, mode). */
typedef struct {
    struct archive *a;
} tarw;

static void tar_open(tarw *t, const char *path) {
    t->a = archive_write_new();
    archive_write_set_format_pax_restricted(t->a);
    CHECK(archive_write_open_filename(t->a, path) == ARCHIVE_OK);
}

static void tar_add(tarw *t, char type, const char *path, const char *data, size_t len,
                    unsigned mode) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, path);
    archive_entry_set_perm(e, mode);
    switch (type) {
    case 'f':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, (la_int64_t)len);
        break;
    case 'd':
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
    case 'l':
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, data);
        break;
    case 'h':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, data);
        break;
    case 'c':
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdev(e, makedev(1, 3));
        break;
    }
    CHECK(archive_write_header(t->a, e) == ARCHIVE_OK);
    if (type == 'f' && len)
        CHECK(archive_write_data(t->a, data, len) == (la_ssize_t)len);
    archive_entry_free(e);
}

static void tar_close(tarw *t) {
    archive_write_close(t->a);
    archive_write_free(t->a);
}

static void tar_add_host_file(tarw *t, const char *host, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(file_read_all(host, 64u << 20, &buf, &len));
    tar_add(t, 'f', path, buf, len, 0755);
    free(buf);
}

TEST(shim_image_import_is_safe) {
    char base[512], tar[600], dest[600], outside[600], p[700];
    snprintf(base, sizeof(base), "%s", test_tmpdir());
    snprintf(outside, sizeof(outside), "%s/outside", base);
    CHECK_OK(mkdir_p(outside, 0755));
    /* a good archive: directories, a file, a symlink, a hard link, a setuid bit */
    snprintf(tar, sizeof(tar), "%s/good.tar", base);
    snprintf(dest, sizeof(dest), "%s/good", base);
    tarw t;
    tar_open(&t, tar);
    tar_add(&t, 'd', "./", NULL, 0, 0755);
    tar_add(&t, 'd', "./etc", NULL, 0, 0755);
    tar_add(&t, 'f', "./etc/motd", "hello\n", 6, 04755);
    tar_add(&t, 'l', "./etc/abs", "/etc/motd", 0, 0777);
    tar_add(&t, 'h', "./etc/motd2", "./etc/motd", 0, 0644);
    tar_close(&t);
    error_rec err = {0};
    CHECK_MSG(shim_image_import_tar(tar, dest, &err) == 0, "%s", err.message);
    struct stat st;
    snprintf(p, sizeof(p), "%s/etc/motd", dest);
    CHECK_OK(stat(p, &st));
    CHECK_EQ(st.st_mode & 07777, 0755); /* setuid stripped */
    CHECK_EQ(st.st_nlink, 2);
    snprintf(p, sizeof(p), "%s/etc/abs", dest);
    CHECK_OK(lstat(p, &st));
    CHECK(S_ISLNK(st.st_mode));
    CHECK(shim_image_import_tar(tar, dest, &err) < 0); /* dest must be new */

    /* hostile archives: each refused, dest removed, nothing written outside */
    static const struct {
        char type;
        const char *path, *data;
    } evil[][2] = {
        {{'f', "../escape", "x"}, {0}},
        {{'f', "/abs-escape", "x"}, {0}},
        {{'f', "a/../../escape", "x"}, {0}},
        {{'c', "dev-null", NULL}, {0}},
        {{'h', "hl", "../outside/target"}, {0}},
        {{'l', "esc", "OUTSIDE"}, {'f', "esc/pwned", "x"}},
        {{'l', "esc", "OUTSIDE"}, {'h', "hl", "esc/target"}},
    };
    snprintf(p, sizeof(p), "%s/target", outside);
    CHECK_OK(file_write_atomic(p, "host secret", 11, 0644));
    for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
        snprintf(tar, sizeof(tar), "%s/evil%zu.tar", base, i);
        snprintf(dest, sizeof(dest), "%s/evil%zu", base, i);
        tar_open(&t, tar);
        for (size_t k = 0; k < 2 && evil[i][k].type; k++) {
            const char *data = evil[i][k].data;
            if (data && strcmp(data, "OUTSIDE") == 0)
                data = outside;
            tar_add(&t, evil[i][k].type, evil[i][k].path, data, data ? strlen(data) : 0, 0644);
        }
        tar_close(&t);
        memset(&err, 0, sizeof(err));
        int r = shim_image_import_tar(tar, dest, &err);
        CHECK_MSG(r < 0, "hostile archive %zu was accepted", i);
        CHECK_MSG(err.message[0], "no message for archive %zu", i);
        CHECK_MSG(access(dest, F_OK) < 0, "archive %zu left %s", i, dest);
    }
    snprintf(p, sizeof(p), "%s/escape", base);
    CHECK(access(p, F_OK) < 0);
    CHECK(access("/abs-escape", F_OK) < 0);
    snprintf(p, sizeof(p), "%s/pwned", outside);
    CHECK(access(p, F_OK) < 0);
    snprintf(p, sizeof(p), "%s/target", outside);
    CHECK_OK(stat(p, &st));
    CHECK_EQ(st.st_nlink, 1);
}

/* Archives that plant links to host nodes and then write through them, against private
 * stand-ins: this case runs in its own mount namespace, where /dev/null and /dev/full are
 * nodes made on a private tmpfs and bound over the real ones (never the host's nodes). */
TEST(shim_image_import_planted_links) {
    test_require_root();
    CHECK_OK(unshare(CLONE_NEWNS) < 0 ? -errno : 0);
    CHECK_OK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ? -errno : 0);
    char sn[600], node[700], tar[600], dest[600], p[700];
    snprintf(sn, sizeof(sn), "%s/standins", test_tmpdir());
    CHECK_OK(mkdir_p(sn, 0755));
    CHECK_OK(mount("sbx-standins", sn, "tmpfs", 0, "size=64k,mode=0755") < 0 ? -errno : 0);
    static const struct {
        const char *name;
        unsigned maj, min;
    } nodes[] = {{"null", 1, 3}, {"full", 1, 7}};
    struct stat before[2], now;
    for (size_t i = 0; i < 2; i++) {
        snprintf(node, sizeof(node), "%s/%s", sn, nodes[i].name);
        CHECK_OK(mknod(node, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0 ? -errno : 0);
        CHECK_OK(chmod(node, 0666) < 0 ? -errno : 0);
        snprintf(p, sizeof(p), "/dev/%s", nodes[i].name);
        CHECK_OK(mount(node, p, NULL, MS_BIND, NULL) < 0 ? -errno : 0);
        CHECK_OK(stat(p, &before[i]));
        CHECK_OK(stat(node, &now));
        CHECK_EQ(now.st_ino, before[i].st_ino); /* the stand-in is in place */
    }
    /* links to the nodes, then regular entries, hard links and directory fix-ups through them */
    snprintf(tar, sizeof(tar), "%s/planted.tar", test_tmpdir());
    snprintf(dest, sizeof(dest), "%s/planted", test_tmpdir());
    tarw t;
    tar_open(&t, tar);
    tar_add(&t, 'l', "n", "/dev/full", 0, 0777);
    tar_add(&t, 'f', "n", "over", 4, 0600);
    tar_add(&t, 'l', "m", "/dev/null", 0, 0777);
    tar_add(&t, 'h', "m2", "m", 0, 0600);
    tar_add(&t, 'd', "d", NULL, 0, 0700);
    tar_add(&t, 'l', "d", "/dev/null", 0, 0777);
    tar_close(&t);
    error_rec err = {0};
    int r = shim_image_import_tar(tar, dest, &err);
    snprintf(p, sizeof(p), "%s/n", dest);
    if (r == 0) {
        CHECK_OK(lstat(p, &now));
        CHECK(S_ISREG(now.st_mode));
    }
    /* an entry beneath a link to /dev: refused */
    snprintf(tar, sizeof(tar), "%s/under.tar", test_tmpdir());
    snprintf(dest, sizeof(dest), "%s/under", test_tmpdir());
    tar_open(&t, tar);
    tar_add(&t, 'l', "dd", "/dev", 0, 0777);
    tar_add(&t, 'f', "dd/null", "x", 1, 0600);
    tar_add(&t, 'f', "dd/full", "x", 1, 0600);
    tar_close(&t);
    CHECK(shim_image_import_tar(tar, dest, &err) < 0);
    for (size_t i = 0; i < 2; i++) {
        snprintf(node, sizeof(node), "%s/%s", sn, nodes[i].name);
        CHECK_OK(stat(node, &now));
        CHECK_MSG(now.st_uid == before[i].st_uid && now.st_gid == before[i].st_gid &&
                      now.st_mode == before[i].st_mode && S_ISCHR(now.st_mode),
                  "the stand-in /dev/%s changed: %o %u:%u", nodes[i].name, now.st_mode, now.st_uid,
                  now.st_gid);
    }
    /* the namespace and its mounts go with this process; the tmpfs now, so that the test's
     * directory can be removed */
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "/dev/%s", nodes[i].name);
        umount2(p, MNT_DETACH);
    }
    CHECK_OK(umount2(sn, MNT_DETACH) < 0 ? -errno : 0);
}

TEST(shim_dir_image_sandbox) {
    test_require_root();
    atexit(cleanup);
    char tar[600], img[600], p[700];
    snprintf(tar, sizeof(tar), "%s/rootfs.tar", test_tmpdir());
    snprintf(img, sizeof(img), "%s/rootfs", test_tmpdir());
    /* a tiny rootfs: dash, cat and the C library, merged-usr style */
    tarw t;
    tar_open(&t, tar);
    tar_add(&t, 'd', "usr", NULL, 0, 0755);
    tar_add(&t, 'd', "usr/bin", NULL, 0, 0755);
    tar_add(&t, 'd', "usr/lib", NULL, 0, 0755);
    tar_add(&t, 'd', "usr/lib/x86_64-linux-gnu", NULL, 0, 0755);
    tar_add(&t, 'd', "usr/lib64", NULL, 0, 0755);
    tar_add(&t, 'l', "bin", "usr/bin", 0, 0777);
    tar_add(&t, 'l', "lib", "usr/lib", 0, 0777);
    tar_add(&t, 'l', "lib64", "usr/lib64", 0, 0777);
    tar_add_host_file(&t, "/usr/bin/dash", "usr/bin/sh");
    tar_add_host_file(&t, "/usr/bin/cat", "usr/bin/cat");
    tar_add_host_file(&t, "/usr/lib/x86_64-linux-gnu/libc.so.6",
                      "usr/lib/x86_64-linux-gnu/libc.so.6");
    tar_add_host_file(&t, "/usr/lib64/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2");
    tar_add(&t, 'd', "etc", NULL, 0, 0755);
    tar_add(&t, 'l', "etc/hosts", "/etc/shadow", 0, 0777); /* must not redirect a host write */
    tar_close(&t);
    error_rec err = {0};
    CHECK_MSG(shim_image_import_tar(tar, img, &err) == 0, "%s", err.message);
    shimdrv_opts o = {.image_dir = img};
    int r = shimdrv_start(&drv, &o);
    CHECK_MSG(r == 0, "start: %s", drv.start_error);
    int code;
    char *out = shimdrv_sh_out(&drv, "echo $((6*7)); cat /etc/passwd | cat; cat /etc/hosts", &code);
    CHECK_EQ(code, 0);
    CHECK_MSG(strncmp(out, "42\nroot:x:0:0", 13) == 0, "%s", out);
    CHECK(strstr(out, "sandbox:x:1000"));
    CHECK(strstr(out, "127.0.0.1\tlocalhost"));
    free(out);
    free(shimdrv_sh_out(&drv, "echo x > /workspace/w && echo x > /tmp/t", &code));
    CHECK_EQ(code, 0);
    free(shimdrv_sh_out(&drv, "echo x > /usr/bin/new", &code));
    CHECK(code != 0);
    CHECK_EQ(shimdrv_shutdown(&drv), 0);
    /* the image itself is untouched */
    snprintf(p, sizeof(p), "%s/etc/passwd", img);
    CHECK(access(p, F_OK) < 0);
    snprintf(p, sizeof(p), "%s/workspace", img);
    CHECK(access(p, F_OK) < 0);
    struct stat st;
    snprintf(p, sizeof(p), "%s/etc/hosts", img);
    CHECK_OK(lstat(p, &st));
    CHECK(S_ISLNK(st.st_mode));
}
