/* Unit tests of sandboxd/core/ckpt_archive.h: a checkpoint directory packed and unpacked as it
 * was (owners, modes, symlinks, FIFOs, whiteouts, opaque directories), and every member a
 * moving checkpoint must not bring refused (a table of hand-made archives), nothing written outside
 * the target. */
#include "common/fdutil.h"
#include "sandboxd/core/ckpt_archive.h"
#include "sandboxd/core/registry.h"
#include "tests/lib/test.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define SLOT 3

static void path_of(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", test_tmpdir(), name);
}

static json_t *record(void) {
    return json_pack("{s:s,s:s,s:i}", "id", "sb-0123456789abcdef", "state", "paused", "uid_slot",
                     SLOT);
}

static void put(const char *dir, const char *name, const char *text, uid_t uid, mode_t mode) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    CHECK_OK(fchown(fd, uid, uid));
    CHECK_OK(fchmod(fd, mode));
    close(fd);
}

TEST(pack_unpack_keeps_everything) {
    char src[PATH_MAX], dst[PATH_MAX], tar[PATH_MAX], p[PATH_MAX + 32];
    uid_t base = (uid_t)sd_uid_base(SLOT);
    path_of(src, sizeof(src), "src");
    path_of(dst, sizeof(dst), "dst");
    path_of(tar, sizeof(tar), "c.tar");
    CHECK_OK(mkdir(src, 0700));
    CHECK_OK(mkdir(dst, 0700));
    snprintf(p, sizeof(p), "%s/images", src);
    CHECK_OK(mkdir(p, 0755));
    put(src, "images/core-1.img", "core", 0, 0600);
    snprintf(p, sizeof(p), "%s/root", src);
    CHECK_OK(mkdir(p, 0750));
    CHECK_OK(chown(p, base, base));
    put(src, "root/f", "kept", base + 1000, 0640);
    snprintf(p, sizeof(p), "%s/root/link", src);
    CHECK_OK(symlink("/etc/passwd", p)); /* a symlink is data: never followed */
    snprintf(p, sizeof(p), "%s/root/fifo", src);
    CHECK_OK(mkfifo(p, 0600));
    snprintf(p, sizeof(p), "%s/root/gone", src);
    CHECK_OK(mknod(p, S_IFCHR | 0, makedev(0, 0))); /* an overlayfs whiteout */
    snprintf(p, sizeof(p), "%s/root/opaque", src);  /* an overlay's opaque directory */
    CHECK_OK(mkdir(p, 0755));
    CHECK_OK(setxattr(p, SD_CKPT_XATTR, "y", 1, 0));
    put(src, "checkpoint.json", "{}", 0, 0600);

    json_t *rec = record();
    error_rec err = {0};
    int fd = open(tar, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK_OK(sd_ckpt_pack(src, rec, fd, &err));
    json_decref(rec);
    CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
    json_t *got = NULL;
    CHECK_OK(sd_ckpt_unpack(fd, dst, &got, &err));
    close(fd);
    CHECK_STREQ(json_string_value(json_object_get(got, "id")), "sb-0123456789abcdef");
    json_decref(got);

    struct stat st;
    snprintf(p, sizeof(p), "%s/root/f", dst);
    CHECK_OK(lstat(p, &st));
    CHECK_EQ(st.st_uid, base + 1000);
    CHECK_EQ(st.st_mode & 07777, 0640);
    snprintf(p, sizeof(p), "%s/root", dst);
    CHECK_OK(lstat(p, &st));
    CHECK_EQ(st.st_uid, base);
    CHECK_EQ(st.st_mode & 07777, 0750);
    char target[64] = {0};
    snprintf(p, sizeof(p), "%s/root/link", dst);
    CHECK(readlink(p, target, sizeof(target) - 1) > 0);
    CHECK_STREQ(target, "/etc/passwd");
    snprintf(p, sizeof(p), "%s/root/fifo", dst);
    CHECK_OK(lstat(p, &st));
    CHECK(S_ISFIFO(st.st_mode));
    snprintf(p, sizeof(p), "%s/root/gone", dst);
    CHECK_OK(lstat(p, &st));
    CHECK(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
    char v[8] = {0};
    snprintf(p, sizeof(p), "%s/root/opaque", dst);
    CHECK_EQ(getxattr(p, SD_CKPT_XATTR, v, sizeof(v) - 1), 1);
    CHECK_STREQ(v, "y");
    snprintf(p, sizeof(p), "%s/images/core-1.img", dst);
    CHECK_OK(lstat(p, &st));
    CHECK_EQ(st.st_uid, 0);
    snprintf(p, sizeof(p), "%s/" SD_CKPT_RECORD, dst);
    CHECK_EQ(access(p, F_OK), -1); /* the record is returned, not written */
}

/* ---- refusals: one hand-made archive per row ---- */

typedef struct member {
    const char *name;
    mode_t type, perm;
    la_int64_t uid;
    dev_t rdev;
    const char *link, *hardlink, *xattr;
} member;

static const struct refusal {
    const char *what;
    bool no_record;
    member m;
} refusals[] = {
    {"no record first", true, {"root/f", AE_IFREG, 0644, 0, 0, NULL, NULL, NULL}},
    {"setuid", false, {"root/su", AE_IFREG, 04755, 100000 + 65536 * SLOT, 0, NULL, NULL, NULL}},
    {"setgid", false, {"root/sg", AE_IFREG, 02755, 0, 0, NULL, NULL, NULL}},
    {"block device", false, {"root/sda", AE_IFBLK, 0600, 0, (8 << 8) | 0, NULL, NULL, NULL}},
    {"char device", false, {"root/mem", AE_IFCHR, 0600, 0, (1 << 8) | 1, NULL, NULL, NULL}},
    {"foreign owner", false, {"root/f", AE_IFREG, 0644, 1000, 0, NULL, NULL, NULL}},
    {"another slot's owner", false, {"root/f", AE_IFREG, 0644, 100000, 0, NULL, NULL, NULL}},
    {"dotdot", false, {"root/../../escape", AE_IFREG, 0644, 0, 0, NULL, NULL, NULL}},
    {"absolute", false, {"/tmp/escape", AE_IFREG, 0644, 0, 0, NULL, NULL, NULL}},
    {"hard link", false, {"root/h", AE_IFREG, 0644, 0, 0, NULL, "images/core-1.img", NULL}},
    {"another attribute", false, {"root/d", AE_IFDIR, 0755, 0, 0, NULL, NULL, "user.other"}},
    {"a trusted attribute",
     false,
     {"root/d", AE_IFDIR, 0755, 0, 0, NULL, NULL, "trusted.overlay.opaque"}},
    {"opaque on a file", false, {"root/f", AE_IFREG, 0644, 0, 0, NULL, NULL, SD_CKPT_XATTR}},
};

static void write_entry(struct archive *a, const member *m, const char *data) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, m->name);
    archive_entry_set_filetype(e, m->type);
    archive_entry_set_perm(e, m->perm);
    archive_entry_set_uid(e, m->uid);
    archive_entry_set_gid(e, m->uid);
    archive_entry_set_rdev(e, m->rdev);
    if (m->link)
        archive_entry_set_symlink(e, m->link);
    if (m->hardlink)
        archive_entry_set_hardlink(e, m->hardlink);
    if (m->xattr)
        archive_entry_xattr_add_entry(e, m->xattr, "y", 1);
    archive_entry_set_size(e, m->type == AE_IFREG && !m->hardlink ? (la_int64_t)strlen(data) : 0);
    CHECK_EQ(archive_write_header(a, e), ARCHIVE_OK);
    if (m->type == AE_IFREG && !m->hardlink)
        CHECK_EQ(archive_write_data(a, data, strlen(data)), (la_ssize_t)strlen(data));
    archive_entry_free(e);
}

static int make_tar(const struct refusal *r, const char *path) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    CHECK_EQ(archive_write_open_fd(a, fd), ARCHIVE_OK);
    if (!r->no_record) {
        json_t *j = record();
        char *rec = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        member m = {SD_CKPT_RECORD, AE_IFREG, 0600, 0, 0, NULL, NULL, NULL};
        write_entry(a, &m, rec);
        free(rec);
        member img = {"images/core-1.img", AE_IFREG, 0600, 0, 0, NULL, NULL, NULL};
        write_entry(a, &img, "core");
    }
    write_entry(a, &r->m, "x");
    CHECK_EQ(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    lseek(fd, 0, SEEK_SET);
    return fd;
}

TEST(unpack_refuses) {
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const struct refusal *r = &refusals[i];
        char dst[PATH_MAX], tar[PATH_MAX], p[PATH_MAX + 32];
        snprintf(dst, sizeof(dst), "%s/dst%zu", test_tmpdir(), i);
        snprintf(tar, sizeof(tar), "%s/r%zu.tar", test_tmpdir(), i);
        CHECK_OK(mkdir(dst, 0700));
        snprintf(p, sizeof(p), "%s/root", dst);
        CHECK_OK(mkdir(p, 0755));
        int fd = make_tar(r, tar);
        json_t *got = NULL;
        error_rec err = {0};
        int rc = sd_ckpt_unpack(fd, dst, &got, &err);
        close(fd);
        if (rc != -EINVAL)
            fprintf(stderr, "row '%s': %d %s\n", r->what, rc, err.message);
        CHECK_EQ(rc, -EINVAL);
        CHECK(got == NULL);
        CHECK(err.message[0] != 0);
        snprintf(p, sizeof(p), "%s/escape", test_tmpdir());
        CHECK_EQ(access(p, F_OK), -1);
        CHECK_EQ(access("/tmp/escape", F_OK), -1);
    }
}
