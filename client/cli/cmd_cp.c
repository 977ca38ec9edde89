/* `sbx cp LOCAL ID:PATH` and `sbx cp ID:PATH LOCAL`: copy a file, or a directory's contents, into
 * or out of a sandbox. Directories travel as tar archives, packed and unpacked locally with
 * libarchive (unpacking refuses absolute entry names, `..` and writes through symlinks). */
#include "client/cli/archive_dl.h"
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void help(void) {
    printf("usage: sbx cp LOCAL ID:PATH\n"
           "       sbx cp ID:PATH LOCAL\n\n"
           "Copy a file or a directory into or out of a sandbox. A file is written to PATH (or\n"
           "LOCAL), or into it under the file's own name when it is an existing directory (or\n"
           "PATH ends with /). A directory's contents are copied into PATH (or LOCAL), which\n"
           "is created when missing. A file copied in keeps its permission bits; one copied\n"
           "out is made 0644 (less the umask).\n\n"
           "LOCAL \"-\" is a tar stream, as with docker cp: `sbx cp ID:PATH -` writes PATH\n"
           "(a file or a directory, under its own name) as a tar to stdout, and\n"
           "`sbx cp - ID:DIR` unpacks the tar read from stdin into the directory DIR.\n");
}

/* "ID:PATH" with a plausible sandbox id before the colon. */
static bool split_remote(const char *arg, char *id, size_t idlen, const char **path) {
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg || (size_t)(colon - arg) >= idlen || arg[0] == '/' || arg[0] == '.')
        return false;
    for (const char *p = arg; p < colon; p++)
        if (*p == '/')
            return false;
    memcpy(id, arg, (size_t)(colon - arg));
    id[colon - arg] = 0;
    *path = colon + 1;
    return true;
}

/* ---- packing a directory ---- */
/* To a stream: a memory one (open_memstream) or stdout (`sbx cp ID:PATH -`). */
static la_ssize_t stream_write(struct archive *a, void *ud, const void *buf, size_t n) {
    if (fwrite(buf, 1, n, (FILE *)ud) != n) {
        archive_set_error(a, errno ? errno : ENOMEM, "%s", strerror(errno ? errno : ENOMEM));
        return -1;
    }
    return (la_ssize_t)n;
}

static int copy_file_data(struct archive *w, const char *src) {
    int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return cli_error("cannot open %s: %s", src, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        if (archive_write_data(w, buf, (size_t)n) != n) {
            close(fd);
            return cli_error("cannot pack %s: %s", src, archive_error_string(w));
        }
    close(fd);
    return n < 0 ? cli_error("cannot read %s: %s", src, strerror(errno)) : 0;
}

static int pack_dir(const char *dir, FILE *out) {
    int lrc = cli_archive_load();
    if (lrc != 0)
        return lrc;
    struct archive *w = archive_write_new(), *disk = archive_read_disk_new();
    struct archive_entry *e = archive_entry_new();
    int rc = 0;
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    archive_write_set_format_pax_restricted(w);
    archive_read_disk_set_symlink_physical(disk);
    if (archive_write_open2(w, out, NULL, stream_write, NULL, NULL) != ARCHIVE_OK ||
        archive_read_disk_open(disk, dir) != ARCHIVE_OK)
        rc = cli_error("cannot read %s: %s", dir, archive_error_string(disk));
    while (rc == 0) {
        int r = archive_read_next_header2(disk, e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK) {
            rc = cli_error("cannot read %s: %s", dir, archive_error_string(disk));
            break;
        }
        archive_read_disk_descend(disk);
        const char *p = archive_entry_pathname(e);
        const char *rel = p + (strncmp(p, dir, dlen) == 0 ? dlen : 0);
        while (*rel == '/')
            rel++;
        if (!*rel)
            continue; /* the directory itself */
        char *relcopy = strdup(rel);
        archive_entry_set_pathname(e, relcopy);
        free(relcopy);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_uname(e, NULL);
        archive_entry_set_gname(e, NULL);
        if (archive_write_header(w, e) != ARCHIVE_OK)
            rc = cli_error("cannot pack %s: %s", p, archive_error_string(w));
        else if (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0)
            rc = copy_file_data(w, archive_entry_sourcepath(e));
    }
    if (archive_write_close(w) != ARCHIVE_OK && rc == 0)
        rc = cli_error("cannot pack %s: %s", dir, archive_error_string(w));
    archive_entry_free(e);
    archive_read_free(disk);
    archive_write_free(w);
    return rc;
}

/* ---- unpacking into a directory ---- */
static int unpack_into(const void *tar, size_t len, const char *dir) {
    int lrc = cli_archive_load();
    if (lrc != 0)
        return lrc;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return cli_error("cannot create %s: %s", dir, strerror(errno));
    struct archive *r = archive_read_new(), *w = archive_write_disk_new();
    archive_read_support_format_tar(r);
    archive_write_disk_set_options(w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                          ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    int rc = 0;
    struct archive_entry *e;
    if (archive_read_open_memory(r, tar, len) != ARCHIVE_OK)
        rc = cli_error("the daemon sent a bad archive: %s", archive_error_string(r));
    while (rc == 0) {
        int x = archive_read_next_header(r, &e);
        if (x == ARCHIVE_EOF)
            break;
        if (x != ARCHIVE_OK) {
            rc = cli_error("bad archive: %s", archive_error_string(r));
            break;
        }
        char name[4096];
        snprintf(name, sizeof(name), "%s", archive_entry_pathname(e));
        if (name[0] == '/' || strcmp(name, "..") == 0 || strncmp(name, "../", 3) == 0 ||
            strstr(name, "/../")) {
            rc = cli_error("refusing archive entry %s", name);
            break;
        }
        if (!*name || strcmp(name, ".") == 0 || strcmp(name, "./") == 0)
            continue; /* the directory itself: already made */
        char *full = NULL;
        if (asprintf(&full, "%s/%s", dir, name) < 0) {
            rc = cli_error("out of memory");
            break;
        }
        archive_entry_set_pathname(e, full);
        free(full);
        const void *buf;
        size_t n;
        la_int64_t off;
        if (archive_write_header(w, e) != ARCHIVE_OK)
            rc = cli_error("cannot write %s: %s", name, archive_error_string(w));
        while (rc == 0 && (x = archive_read_data_block(r, &buf, &n, &off)) == ARCHIVE_OK)
            if (archive_write_data_block(w, buf, n, off) != ARCHIVE_OK)
                rc = cli_error("cannot write %s: %s", name, archive_error_string(w));
        if (rc == 0 && x != ARCHIVE_EOF)
            rc = cli_error("bad archive data for %s: %s", name, archive_error_string(r));
        if (rc == 0 && archive_write_finish_entry(w) != ARCHIVE_OK)
            rc = cli_error("cannot write %s: %s", name, archive_error_string(w));
    }
    archive_write_close(w);
    archive_write_free(w);
    archive_read_free(r);
    return rc;
}

static int write_local_file(const char *local, const char *remote_path, const void *data,
                            size_t len) {
    struct stat st;
    char *target = NULL;
    if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
        char *copy = strdup(remote_path);
        int r = copy ? asprintf(&target, "%s/%s", local, basename(copy)) : -1;
        free(copy);
        if (r < 0)
            return cli_error("out of memory");
    } else if (!(target = strdup(local)))
        return cli_error("out of memory");
    int rc = 0, fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        rc = cli_error("cannot create %s: %s", target, strerror(errno));
    const char *p = data;
    while (rc == 0 && len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = cli_error("cannot write %s: %s", target, strerror(errno));
        else
            p += n, len -= (size_t)n;
    }
    if (fd >= 0 && close(fd) < 0 && rc == 0)
        rc = cli_error("cannot write %s: %s", target, strerror(errno));
    free(target);
    return rc;
}

/* Whether a write failed because path is a directory in the sandbox (the daemon's 400 names
 * the errno: "path: /workspace: Is a directory"). */
static bool is_a_directory(const sbx_err *err) {
    static const char tail[] = ": Is a directory";
    size_t n = strlen(err->message);
    return err->http_status == 400 && n >= sizeof(tail) - 1 &&
           strcmp(err->message + n - (sizeof(tail) - 1), tail) == 0;
}

/* One file to PATH, or into PATH under the local file's name when PATH ends with '/' or is a
 * directory, as docker cp does (`sbx cp main.py ID:/workspace` failed: "Is a directory"). The
 * file's permission bits go with it, as docker cp keeps them (0 is the default 0644). */
static int upload_file(sbx_sandbox *sb, const char *local, const char *path, const char *data,
                       size_t len, unsigned mode) {
    sbx_err err = {0};
    size_t n = strlen(path);
    bool dir = n > 0 && path[n - 1] == '/';
    if (!dir && sbx_sandbox_write_file_mode(sb, path, data, len, mode, &err) == SBX_OK)
        return 0;
    if (!dir && !is_a_directory(&err))
        return cli_sbx_error(&err);
    char *copy = strdup(local), *into = NULL;
    int rc = copy && asprintf(&into, "%s%s%s", path, dir ? "" : "/", basename(copy)) >= 0
                 ? 0
                 : cli_error("out of memory");
    if (rc == 0 && sbx_sandbox_write_file_mode(sb, into, data, len, mode, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    free(into);
    free(copy);
    return rc;
}

static int upload(sbx_sandbox *sb, const char *local, const char *path) {
    struct stat st;
    sbx_err err = {0};
    if (stat(local, &st) < 0)
        return cli_error("cannot read %s: %s", local, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        char *tar = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&tar, &len);
        if (!m)
            return cli_error("cannot pack %s: %s", local, strerror(errno));
        int rc = pack_dir(local, m);
        if (fclose(m) != 0 && rc == 0)
            rc = cli_error("cannot pack %s: out of memory", local);
        if (rc == 0 && sbx_sandbox_put_archive(sb, path, tar, len, &err) != SBX_OK)
            rc = cli_sbx_error(&err);
        free(tar);
        return rc;
    }
    if (!S_ISREG(st.st_mode))
        return cli_error("%s is neither a file nor a directory", local);
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_error("cannot open %s: %s", local, strerror(errno));
    char *data = NULL;
    size_t len = 0;
    int r = cli_read_fd(fd, &data, &len), rc = 0;
    close(fd);
    if (r < 0)
        return cli_error("cannot read %s: %s", local, strerror(-r));
    rc = upload_file(sb, local, path, data, len, st.st_mode & 0777);
    free(data);
    return rc;
}

/* One request, whatever path is: a file, or a directory's tar unpacked into local (read_file
 * and then get_archive fetched a directory's tar twice). */
static int download(sbx_sandbox *sb, const char *path, const char *local) {
    void *data = NULL;
    size_t len = 0;
    sbx_err err = {0};
    int dir = 0, rc;
    if (sbx_sandbox_read_path(sb, path, &data, &len, &dir, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    else
        rc = dir ? unpack_into(data, len, local) : write_local_file(local, path, data, len);
    free(data);
    return rc;
}

/* ---- "-": a tar on stdin or stdout, as docker cp reads and writes one ---- */

/* `sbx cp - ID:DIR`: the tar on stdin, unpacked into DIR. */
static int upload_tar(sbx_sandbox *sb, const char *path) {
    char *data = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&data, &len);
    char buf[65536];
    size_t n;
    int rc = m ? 0 : cli_error("out of memory");
    while (rc == 0 && (n = fread(buf, 1, sizeof(buf), stdin)) > 0)
        if (fwrite(buf, 1, n, m) != n)
            rc = cli_error("out of memory");
    if (rc == 0 && ferror(stdin))
        rc = cli_error("cannot read stdin: %s", strerror(errno));
    if (m && fclose(m) != 0 && rc == 0)
        rc = cli_error("out of memory");
    sbx_err err = {0};
    if (rc == 0 && sbx_sandbox_put_archive(sb, path, data, len, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    free(data);
    return rc;
}

/* One regular file `name` (0644: the API gives a file's data only), or a directory (0755). */
static int tar_file(struct archive *w, const char *name, bool dir, const void *data, size_t len) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e, dir ? 0755 : 0644);
    archive_entry_set_size(e, (la_int64_t)len);
    int rc = 0;
    if (archive_write_header(w, e) != ARCHIVE_OK ||
        (len && archive_write_data(w, data, len) != (la_ssize_t)len))
        rc = cli_error("cannot write the archive: %s", archive_error_string(w));
    archive_entry_free(e);
    return rc;
}

/* `prefix` + "/" + a name of the daemon's archive ("." or "./x": its directory's own). */
static char *under(const char *prefix, const char *name) {
    char *full = NULL;
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    bool top = !*name || strcmp(name, ".") == 0;
    return asprintf(&full, "%s%s%s", prefix, top ? "" : "/", top ? "" : name) < 0 ? NULL : full;
}

/* The daemon's tar of a directory (names relative to it) again, under `name`/ (its entry
 * first). */
static int tar_dir(struct archive *w, const char *name, const void *tar, size_t len) {
    struct archive *r = archive_read_new();
    struct archive_entry *e;
    archive_read_support_format_tar(r);
    int rc = archive_read_open_memory(r, tar, len) == ARCHIVE_OK
                 ? tar_file(w, name, true, NULL, 0)
                 : cli_error("the daemon sent a bad archive: %s", archive_error_string(r));
    while (rc == 0) {
        int x = archive_read_next_header(r, &e);
        if (x == ARCHIVE_EOF)
            break;
        char *full = x == ARCHIVE_OK ? under(name, archive_entry_pathname(e)) : NULL;
        char *link =
            full && archive_entry_hardlink(e) ? under(name, archive_entry_hardlink(e)) : NULL;
        if (x != ARCHIVE_OK || !full || (archive_entry_hardlink(e) && !link)) {
            free(full);
            rc = cli_error("bad archive: %s", archive_error_string(r));
            break;
        }
        if (strcmp(full, name) == 0) { /* the directory's own entry: written first */
            free(full);
            free(link);
            continue;
        }
        archive_entry_set_pathname(e, full);
        if (link)
            archive_entry_set_hardlink(e, link);
        free(full);
        free(link);
        const void *buf;
        size_t n;
        la_int64_t off;
        if (archive_write_header(w, e) != ARCHIVE_OK)
            rc = cli_error("cannot write the archive: %s", archive_error_string(w));
        while (rc == 0 && (x = archive_read_data_block(r, &buf, &n, &off)) == ARCHIVE_OK)
            if (archive_write_data(w, buf, n) != (la_ssize_t)n)
                rc = cli_error("cannot write the archive: %s", archive_error_string(w));
        if (rc == 0 && x != ARCHIVE_EOF)
            rc = cli_error("bad archive: %s", archive_error_string(r));
    }
    archive_read_free(r);
    return rc;
}

/* `sbx cp ID:PATH -`: a tar of PATH on stdout, PATH's own name its top entry. */
static int download_tar(sbx_sandbox *sb, const char *path) {
    void *data = NULL;
    size_t len = 0;
    sbx_err err = {0};
    int dir = 0, rc = cli_archive_load();
    if (rc == 0 && sbx_sandbox_read_path(sb, path, &data, &len, &dir, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    char *copy = rc == 0 ? strdup(path) : NULL;
    const char *name = copy ? basename(copy) : NULL;
    if (rc == 0 && !copy)
        rc = cli_error("out of memory");
    if (name && (!*name || strcmp(name, "/") == 0))
        name = ".";
    struct archive *w = rc == 0 ? archive_write_new() : NULL;
    if (w) {
        archive_write_set_format_pax_restricted(w);
        if (archive_write_open2(w, stdout, NULL, stream_write, NULL, NULL) != ARCHIVE_OK)
            rc = cli_error("cannot write the archive: %s", archive_error_string(w));
        if (rc == 0)
            rc = dir ? tar_dir(w, name, data, len) : tar_file(w, name, false, data, len);
        if (archive_write_close(w) != ARCHIVE_OK && rc == 0)
            rc = cli_error("cannot write the archive: %s", archive_error_string(w));
        archive_write_free(w);
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = cli_error("cannot write stdout: %s", strerror(errno));
    free(copy);
    free(data);
    return rc;
}

int cmd_cp(int argc, char **argv) {
    int prc = cli_parse_common("cp", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    if (argc - optind != 2)
        return cli_usage_error("cp", "wants exactly two arguments: a source and a destination");
    char id_src[160], id_dst[160];
    const char *p_src, *p_dst;
    bool rs = split_remote(argv[optind], id_src, sizeof(id_src), &p_src);
    bool rd = split_remote(argv[optind + 1], id_dst, sizeof(id_dst), &p_dst);
    if (rs == rd)
        return cli_usage_error("cp", "exactly one side must be ID:PATH");
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    int rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open(c, rs ? id_src : id_dst, &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    const char *local = argv[optind + (rs ? 1 : 0)];
    if (rc == 0 && strcmp(local, "-") == 0)
        rc = rs ? download_tar(sb, p_src) : upload_tar(sb, p_dst);
    else if (rc == 0)
        rc = rs ? download(sb, p_src, local) : upload(sb, local, p_dst);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
