/* Image archives on disk (see image_archive.h): libarchive loading, SHA-256, the outer archive's
 * members, and the layer unpacker. Every path inside a layer is opened one component at a time
 * with O_NOFOLLOW from the layer's root descriptor (the equivalent of openat2's
 * RESOLVE_IN_ROOT|RESOLVE_NO_SYMLINKS), so a hostile layer can never write outside it. */
#include "sandboxd/core/image_archive.h"

#include "common/archive.h"
#include "common/fdutil.h"

#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

static void evp_freep(EVP_MD_CTX **c) {
    if (*c)
        EVP_MD_CTX_free(*c);
}

static EVP_MD_CTX *sha_new(void) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(c);
        return NULL;
    }
    return c;
}

static void sha_hex(EVP_MD_CTX *c, char out[IMG_DIGEST_HEX + 1]) {
    unsigned char md[32];
    unsigned n = 0;
    EVP_DigestFinal_ex(c, md, &n);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int img_sha256_file(const char *path, char ret_hex[IMG_DIGEST_HEX + 1], error_rec *err) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    _cleanup_(evp_freep) EVP_MD_CTX *c = sha_new();
    if (fd < 0 || !c)
        return error_set_errno(err, fd < 0 ? negative_errno() : -ENOMEM, "image: open %s", path);
    _cleanup_free_ char *buf = malloc(1 << 16);
    if (!buf)
        return error_set(err, -ENOMEM, "out of memory");
    ssize_t n;
    while ((n = read(fd, buf, 1 << 16)) > 0)
        EVP_DigestUpdate(c, buf, (size_t)n);
    if (n < 0)
        return error_set_errno(err, negative_errno(), "image: read %s", path);
    sha_hex(c, ret_hex);
    return 0;
}

bool img_path_clean(const char *p) {
    if (!p || !*p || *p == '/')
        return false;
    for (;;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!p[n])
            return true;
        p += n + 1;
    }
}

static void archive_freep(struct archive **a) {
    if (*a)
        la.archive_read_free(*a);
}

static int disk_err(error_rec *err, int code, const char *what, const char *path) {
    return error_set_errno(err, code, "image: %s %s", what, path);
}

/* ---- the layer unpacker ---- */

typedef struct layer_ctx {
    int root;
    img_budget *b;
    error_rec *err;
    uint64_t size;
    char path[PATH_MAX]; /* the entry being written, cleaned */
} layer_ctx;

/* Open the directory `rel` (length n) under the layer root, creating missing components
 * (0755, root), never following a symlink. */
static int open_dir(layer_ctx *c, const char *rel, size_t n, int *ret_fd) {
    _cleanup_close_ int fd = fcntl(c->root, F_DUPFD_CLOEXEC, 3);
    char comp[NAME_MAX + 1];
    for (size_t i = 0; i < n && fd >= 0;) {
        size_t k = strcspn(rel + i, "/");
        if (k > n - i)
            k = n - i;
        if (k > NAME_MAX)
            return error_set(c->err, -EINVAL, "image: %s: name too long", c->path);
        memcpy(comp, rel + i, k);
        comp[k] = 0;
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT) {
            if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST)
                return disk_err(c->err, negative_errno(), "create the directory of", c->path);
            next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0 && (errno == ELOOP || errno == ENOTDIR))
            return error_set(c->err, -EINVAL, "image: %s: path goes through a symlink or a file",
                             c->path);
        if (next < 0)
            return disk_err(c->err, negative_errno(), "open the directory of", c->path);
        safe_close(fd);
        fd = next;
        i += k + 1;
    }
    if (fd < 0)
        return disk_err(c->err, negative_errno(), "open", "the layer");
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* The parent directory of c->path and its last component. */
static int open_parent(layer_ctx *c, const char *rel, int *ret_fd, const char **ret_name) {
    const char *slash = strrchr(rel, '/');
    *ret_name = slash ? slash + 1 : rel;
    if (strlen(*ret_name) > NAME_MAX)
        return error_set(c->err, -EINVAL, "image: %s: name too long", c->path);
    return open_dir(c, rel, slash ? (size_t)(slash - rel) : 0, ret_fd);
}

/* A whiteout this unpacker made (the layer itself may hold no device). */
static bool is_whiteout(const struct stat *st) {
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/* Remove what the same layer put at dirfd/name before (a tar may repeat a path). 1: it was a
 * whiteout (the layer deletes the lower layers' name, then makes its own). */
static int clear_name(layer_ctx *c, int dirfd, const char *name, bool keep_dir) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : disk_err(c->err, negative_errno(), "stat", c->path);
    if (S_ISDIR(st.st_mode)) {
        if (keep_dir)
            return 0;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
            return error_set(c->err, -EINVAL, "image: %s: replaces a non-empty directory", c->path);
        return 0;
    }
    if (unlinkat(dirfd, name, 0) < 0)
        return disk_err(c->err, negative_errno(), "replace", c->path);
    return is_whiteout(&st) ? 1 : 0;
}

/* trusted.overlay.opaque=y: what the lower layers have under the directory is hidden. */
static int mark_opaque(layer_ctx *c, int fd) {
    if (fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
        return disk_err(c->err, negative_errno(), "mark opaque", c->path);
    return 0;
}

/* ".wh.NAME" deletes NAME of the lower layers only (OCI image spec, layer.md "Whiteouts"): a
 * NAME this layer has already stays, and a directory of it then hides the lower ones' content. */
static int whiteout_name(layer_ctx *c, int dfd, const char *target) {
    struct stat st;
    if (fstatat(dfd, target, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return disk_err(c->err, negative_errno(), "stat", c->path);
        if (mknodat(dfd, target, S_IFCHR | 0, makedev(0, 0)) < 0)
            return disk_err(c->err, negative_errno(), "write the whiteout", c->path);
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0; /* this layer's file, symlink or whiteout already hides the lower ones */
    _cleanup_close_ int fd = openat(dfd, target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? disk_err(c->err, negative_errno(), "open", c->path) : mark_opaque(c, fd);
}

static int whiteout(layer_ctx *c, const char *rel, const char *base) {
    _cleanup_close_ int dfd = -1;
    const char *name;
    int r = open_parent(c, rel, &dfd, &name);
    if (r < 0)
        return r;
    if (strcmp(base, ".wh..wh..opq") == 0)
        return mark_opaque(c, dfd);
    const char *target = base + 4;
    if (strncmp(base, ".wh..wh.", 8) == 0 || !*target || strcmp(target, ".") == 0 ||
        strcmp(target, "..") == 0)
        return error_set(c->err, -EINVAL, "image: %s: unsupported whiteout", c->path);
    return whiteout_name(c, dfd, target);
}

static int copy_data(layer_ctx *c, struct archive *a, int fd) {
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r = la.archive_read_data_block(a, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return error_set(c->err, -EINVAL, "image: %s: %s", c->path, la.archive_error_string(a));
        if ((c->b->unpacked += len) > c->b->unpacked_max)
            return error_set(c->err, -EFBIG, "image: unpacks to more than %llu bytes (the limit)",
                             (unsigned long long)c->b->unpacked_max);
        c->size += len;
        if (fd < 0)
            continue;
        for (size_t done = 0; done < len;) {
            ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return disk_err(c->err, negative_errno(), "write", c->path);
            done += (size_t)n;
        }
    }
}

/* A relative symlink target may not climb above the image's root from where it lives. */
static bool link_stays(const char *rel, const char *target) {
    if (target[0] == '/')
        return true; /* resolved inside the sandbox's root */
    int depth = 0;
    for (const char *p = rel; (p = strchr(p, '/')); p++)
        depth++;
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return false;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n;
        while (*p == '/')
            p++;
    }
    return true;
}

static int check_mode(layer_ctx *c, struct archive_entry *e, mode_t *ret_perm) {
    mode_t perm = la.archive_entry_mode(e) & 07777;
    bool dir = la.archive_entry_filetype(e) == AE_IFDIR;
    if (dir)
        perm &= ~(mode_t)S_ISUID; /* setgid on a directory only passes its group on */
    else if ((perm & (S_ISUID | S_ISGID)) && !c->b->strip_setuid)
        return error_set(c->err, -EINVAL,
                         "image: %s: setuid/setgid files are not allowed (import with "
                         "setuid=strip to clear the bits)",
                         c->path);
    else
        perm &= ~(mode_t)(S_ISUID | S_ISGID);
    la_int64_t uid = la.archive_entry_uid(e), gid = la.archive_entry_gid(e);
    if (uid < 0 || uid > 65535 || gid < 0 || gid > 65535)
        return error_set(c->err, -EINVAL, "image: %s: owner %lld:%lld is outside 0..65535", c->path,
                         (long long)uid, (long long)gid);
    *ret_perm = perm;
    return 0;
}

static int set_owner_mode(layer_ctx *c, int fd, struct archive_entry *e, mode_t perm) {
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = la.archive_entry_mtime(e)}};
    if (fchown(fd, (uid_t)la.archive_entry_uid(e), (gid_t)la.archive_entry_gid(e)) < 0 ||
        fchmod(fd, perm) < 0 || (la.archive_entry_filetype(e) != AE_IFDIR && futimens(fd, ts) < 0))
        return disk_err(c->err, negative_errno(), "set the owner and mode of", c->path);
    return 0;
}

static int hard_link(layer_ctx *c, int dfd, const char *name, const char *hl) {
    char target[PATH_MAX];
    if (libarchive_clean_path(hl, target, sizeof(target)) < 0 || !target[0])
        return error_set(c->err, -EINVAL, "image: %s: hard link to \"%s\" leaves the image",
                         c->path, hl);
    _cleanup_close_ int tfd = -1;
    const char *tname;
    error_rec quiet = {0};
    error_rec *saved = c->err;
    c->err = &quiet;
    int r = open_parent(c, target, &tfd, &tname);
    c->err = saved;
    struct stat st;
    if (r < 0 || fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
        return error_set(c->err, -EINVAL,
                         "image: %s: hard link to \"%s\", which is not a regular file earlier "
                         "in this layer",
                         c->path, target);
    if (linkat(tfd, tname, dfd, name, 0) < 0)
        return disk_err(c->err, negative_errno(), "link", c->path);
    return 0;
}

static int write_entry(layer_ctx *c, struct archive *a, struct archive_entry *e, const char *rel) {
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    if (strncmp(base, ".wh.", 4) == 0)
        return whiteout(c, rel, base);
    const char *hl = la.archive_entry_hardlink(e);
    unsigned type = la.archive_entry_filetype(e);
    if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
        return error_set(c->err, -EINVAL,
                         "image: %s: device nodes, FIFOs and sockets are not allowed", c->path);
    mode_t perm = 0;
    _cleanup_close_ int dfd = -1;
    const char *name;
    int r = check_mode(c, e, &perm);
    if (r < 0 || (r = open_parent(c, rel, &dfd, &name)) < 0 ||
        (r = clear_name(c, dfd, name, !hl && type == AE_IFDIR)) < 0)
        return r;
    bool replaces_whiteout = r == 1; /* a directory then hides the lower layers' one */
    if (hl)
        return hard_link(c, dfd, name, hl);
    if (type == AE_IFLNK) {
        const char *t = la.archive_entry_symlink(e);
        if (t && strlen(t) >= PATH_MAX)
            return error_set(c->err, -EINVAL, "image: %s: symlink target too long", c->path);
        if (!t || !*t || !link_stays(rel, t))
            return error_set(c->err, -EINVAL, "image: %s: symlink to \"%s\" leaves the image",
                             c->path, t ? t : "");
        if (symlinkat(t, dfd, name) < 0 ||
            fchownat(dfd, name, (uid_t)la.archive_entry_uid(e), (gid_t)la.archive_entry_gid(e),
                     AT_SYMLINK_NOFOLLOW) < 0)
            return disk_err(c->err, negative_errno(), "create the symlink", c->path);
        return 0;
    }
    _cleanup_close_ int fd = -1;
    if (type == AE_IFDIR) {
        if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
            return disk_err(c->err, negative_errno(), "create the directory", c->path);
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } else {
        fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (fd < 0)
        return disk_err(c->err, negative_errno(), "create", c->path);
    if (type == AE_IFDIR && replaces_whiteout && (r = mark_opaque(c, fd)) < 0)
        return r;
    if (type == AE_IFREG) {
        la_int64_t size = la.archive_entry_size(e);
        if ((r = copy_data(c, a, fd)) < 0)
            return r;
        if (size > 0 && ftruncate(fd, size) < 0)
            return disk_err(c->err, negative_errno(), "write", c->path);
    }
    return set_owner_mode(c, fd, e, perm);
}

/* The uncompressed byte stream of a blob, hashed as the tar reader takes it. */
typedef struct raw_src {
    struct archive *raw;
    EVP_MD_CTX *sha;
    error_rec *err;
    bool failed;
    char buf[1 << 16];
} raw_src;

static la_ssize_t raw_read(struct archive *a, void *ud, const void **ret) {
    raw_src *s = ud;
    la_ssize_t n = la.archive_read_data(s->raw, s->buf, sizeof(s->buf));
    if (n < 0) {
        s->failed = true;
        error_set(s->err, -EINVAL, "image: layer: %s", la.archive_error_string(s->raw));
        return -1;
    }
    EVP_DigestUpdate(s->sha, s->buf, (size_t)n);
    *ret = s->buf;
    return n;
}

/* AUFS's own metadata at the layer's root, ".wh..wh.plnk/", ".wh..wh.aufs", ".wh..wh.orph/" and
 * what is below them (docker's pkg/archive skips every path under a ".wh..wh." name at the root but
 * the opaque marker ".wh..wh..opq"): left out, as docker does, not written nor refused. */
static bool aufs_meta(const char *rel) {
    return strncmp(rel, ".wh..wh.", 8) == 0 && strcmp(rel, ".wh..wh..opq") != 0;
}

static int unpack_entries(layer_ctx *c, struct archive *t) {
    for (;;) {
        struct archive_entry *e;
        int r = la.archive_read_next_header(t, &e);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return error_set(c->err, -EINVAL, "image: layer is not a valid tar: %s",
                             la.archive_error_string(t));
        const char *p = la.archive_entry_pathname(e);
        if ((r = libarchive_clean_path(p, c->path, sizeof(c->path))) < 0)
            return error_set(c->err, -EINVAL,
                             r == -ENAMETOOLONG
                                 ? "image: path too long: \"%.200s...\""
                                 : "image: unsafe path \"%.200s\" (absolute or \"..\")",
                             p ? p : "");
        la_int64_t sz = la.archive_entry_size(e);
        if ((c->b->unpacked += 512) > c->b->unpacked_max)
            return error_set(c->err, -EFBIG, "image: unpacks to more than %llu bytes (the limit)",
                             (unsigned long long)c->b->unpacked_max);
        if (!c->path[0] || c->root < 0 || aufs_meta(c->path)) {
            if (sz > 0 && (r = copy_data(c, t, -1)) < 0)
                return r;
            continue;
        }
        if ((r = write_entry(c, t, e, c->path)) < 0)
            return r;
    }
}

int img_unpack_layer(const char *blob_path, int dest_fd, img_budget *b,
                     char ret_diff_id[IMG_DIGEST_HEX + 1], uint64_t *ret_size, error_rec *err) {
    int r = libarchive_load(err);
    if (r < 0)
        return r;
    _cleanup_free_ raw_src *srcp = malloc(sizeof(*srcp));
    _cleanup_(evp_freep) EVP_MD_CTX *sha = sha_new();
    _cleanup_(archive_freep) struct archive *raw = la.archive_read_new();
    _cleanup_(archive_freep) struct archive *t = la.archive_read_new();
    if (!srcp || !sha || !raw || !t)
        return error_set(err, -ENOMEM, "out of memory");
    raw_src *src = srcp;
    src->raw = raw, src->sha = sha, src->err = err, src->failed = false;
    la.archive_read_support_filter_all(raw);
    la.archive_read_support_format_raw(raw);
    struct archive_entry *e;
    if (la.archive_read_open_filename(raw, blob_path, 1 << 16) != ARCHIVE_OK ||
        la.archive_read_next_header(raw, &e) != ARCHIVE_OK)
        return error_set(err, -EINVAL, "image: layer: %s", la.archive_error_string(raw));
    la.archive_read_support_format_tar(t);
    la.archive_read_support_format_gnutar(t);
    if (la.archive_read_open(t, src, NULL, raw_read, NULL) != ARCHIVE_OK)
        return src->failed ? err->code
                           : error_set(err, -EINVAL, "image: layer is not a tar: %s",
                                       la.archive_error_string(t));
    layer_ctx c = {.root = dest_fd, .b = b, .err = err};
    if ((r = unpack_entries(&c, t)) < 0)
        return src->failed ? err->code : r;
    const void *ignored;
    la_ssize_t n;
    while ((n = raw_read(NULL, src, &ignored)) > 0) /* padding after the end-of-archive */
        ;
    if (n < 0)
        return err->code;
    sha_hex(sha, ret_diff_id);
    *ret_size = c.size;
    return 0;
}

/* ---- the outer archive ---- */

static bool is_hex64(const char *s, size_t n) {
    if (n != IMG_DIGEST_HEX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* Names a docker save or OCI layout archive holds. */
static bool image_member_name(const char *p) {
    static const char *const fixed[] = {"manifest.json", "index.json", "oci-layout",
                                        "repositories",  "blobs",      "blobs/sha256"};
    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
        if (strcmp(p, fixed[i]) == 0)
            return true;
    if (strncmp(p, "blobs/sha256/", 13) == 0)
        return is_hex64(p + 13, strlen(p + 13));
    size_t n = strcspn(p, "/.");
    if (!is_hex64(p, n))
        return false;
    const char *rest = p + n;
    return !*rest || strcmp(rest, ".json") == 0 || strcmp(rest, "/layer.tar") == 0 ||
           strcmp(rest, "/json") == 0 || strcmp(rest, "/VERSION") == 0;
}

static int save_member(struct archive *a, const char *file, img_budget *b, img_member *m,
                       error_rec *err) {
    _cleanup_close_ int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    _cleanup_(evp_freep) EVP_MD_CTX *sha = sha_new();
    if (fd < 0 || !sha)
        return disk_err(err, fd < 0 ? negative_errno() : -ENOMEM, "create", file);
    _cleanup_free_ char *buf = malloc(1 << 16);
    if (!buf)
        return error_set(err, -ENOMEM, "out of memory");
    la_ssize_t n;
    while ((n = la.archive_read_data(a, buf, 1 << 16)) > 0) {
        if ((b->unpacked += (uint64_t)n) > b->unpacked_max)
            return error_set(err, -EFBIG, "image: unpacks to more than %llu bytes (the limit)",
                             (unsigned long long)b->unpacked_max);
        int r = fd_write_all(fd, buf, (size_t)n);
        if (r < 0)
            return disk_err(err, r, "write", file);
        EVP_DigestUpdate(sha, buf, (size_t)n);
        m->size += (uint64_t)n;
    }
    if (n < 0)
        return error_set(err, -EINVAL, "image: %s: %s", m->path, la.archive_error_string(a));
    sha_hex(sha, m->sha256);
    m->file = strdup(file);
    return m->file ? 0 : -ENOMEM;
}

static int add_member(img_members *ms, const char *path, img_member **ret) {
    if (ms->n % 16 == 0) {
        img_member *v = realloc(ms->v, (ms->n + 16) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        ms->v = v;
    }
    img_member *m = &ms->v[ms->n];
    *m = (img_member){.path = strdup(path)};
    if (!m->path)
        return -ENOMEM;
    ms->n++;
    *ret = m;
    return 0;
}

/* The archive path a relative symlink at `at` points to (lexically), into out (PATH_MAX). */
static int resolve_link(const char *at, const char *target, char *out) {
    char joined[PATH_MAX * 2];
    const char *slash = strrchr(at, '/');
    snprintf(joined, sizeof(joined), "%.*s/%s", slash ? (int)(slash - at) : 0, at, target);
    size_t o = 0;
    for (const char *p = joined; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (o == 0)
                return -EINVAL;
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o + n + 2 > PATH_MAX)
                return -ENAMETOOLONG;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = 0;
    return o ? 0 : -EINVAL;
}

static int members_read(struct archive *a, const char *dir, img_budget *b, img_members *ms,
                        error_rec *err) {
    char path[PATH_MAX], file[PATH_MAX + 32], link[PATH_MAX];
    for (size_t i = 0;; i++) {
        struct archive_entry *e;
        int r = la.archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            return i == 0 ? error_set(err, -EINVAL, "image: the archive is empty") : 0;
        if (r < ARCHIVE_WARN)
            return error_set(err, -EINVAL, "image: not a tar archive: %s",
                             la.archive_error_string(a));
        if (libarchive_clean_path(la.archive_entry_pathname(e), path, sizeof(path)) < 0)
            return error_set(err, -EINVAL, "image: unsafe path \"%.200s\" (absolute or \"..\")",
                             la.archive_entry_pathname(e));
        if (!path[0])
            continue;
        if (!image_member_name(path))
            return ms->n == 0 ? 1 : error_set(err, -EINVAL, "image: unexpected member %s", path);
        unsigned type = la.archive_entry_filetype(e);
        if (type == AE_IFDIR)
            continue;
        img_member *m;
        if ((r = add_member(ms, path, &m)) < 0)
            return error_set(err, r, "out of memory");
        if (type == AE_IFLNK) {
            /* docker save links a layer seen twice to its first copy: "../<id>/layer.tar" */
            const char *t = la.archive_entry_symlink(e);
            if (!t || t[0] == '/' || !link_stays(path, t) || resolve_link(path, t, link) < 0)
                return error_set(err, -EINVAL, "image: %s: link leaves the archive", path);
            if (!(m->link = strdup(link)))
                return -ENOMEM;
            continue;
        }
        if (type != AE_IFREG || la.archive_entry_hardlink(e))
            return error_set(err, -EINVAL, "image: %s: not a regular file", path);
        snprintf(file, sizeof(file), "%s/m%zu", dir, ms->n);
        if ((r = save_member(a, file, b, m, err)) < 0)
            return r;
    }
}

int img_members_save(const char *path, const char *dir, img_budget *b, img_members *ret,
                     error_rec *err) {
    int r = libarchive_load(err);
    if (r < 0)
        return r;
    _cleanup_(archive_freep) struct archive *a = la.archive_read_new();
    if (!a)
        return error_set(err, -ENOMEM, "out of memory");
    la.archive_read_support_filter_all(a);
    la.archive_read_support_format_tar(a);
    la.archive_read_support_format_gnutar(a);
    if (la.archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK)
        return error_set(err, -EINVAL, "image: not an archive: %s", la.archive_error_string(a));
    img_members ms = {0};
    r = members_read(a, dir, b, &ms, err);
    if (r != 0) {
        img_members_done(&ms);
        return r;
    }
    *ret = ms;
    return 0;
}

const img_member *img_members_find(const img_members *m, const char *path) {
    for (int hops = 0; hops < 2; hops++) {
        const img_member *hit = NULL;
        for (size_t i = m->n; i-- > 0 && !hit;) /* a later copy replaces an earlier, as in tar */
            if (strcmp(m->v[i].path, path) == 0)
                hit = &m->v[i];
        if (!hit || !hit->link)
            return hit && hit->file ? hit : NULL;
        path = hit->link;
    }
    return NULL;
}

void img_members_done(img_members *m) {
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].file)
            unlink(m->v[i].file);
        free(m->v[i].path);
        free(m->v[i].link);
        free(m->v[i].file);
    }
    free(m->v);
    *m = (img_members){0};
}
