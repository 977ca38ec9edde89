/* The agent's workspace on its way into a grading sandbox: the tar from the agent's sandbox,
 * copied entry by entry without the symbolic links whose target leaves /workspace (absolute
 * elsewhere, or ".." past its top), which are counted (docs/GRPO.md "Grading sandboxes"); and
 * whether the daemon's refusal of it was the agent's doing. */
#include "client/grpo/runner.h"

#include "common/archive.h"
#include "common/grow.h"
#include "common/macro.h"

#include <stdlib.h>
#include <string.h>

#define TOP "/workspace"

typedef struct membuf {
    char *data;
    size_t len, cap;
} membuf;

static la_ssize_t mem_write(struct archive *a, void *ud, const void *buf, size_t n) {
    membuf *m = ud;
    if (grow_reserve((void **)&m->data, &m->cap, m->len + n, 1) < 0)
        return -1;
    memcpy(m->data + m->len, buf, n);
    m->len += n;
    return (la_ssize_t)n;
}

bool grpo_workspace_refused(const sbx_err *err) {
    return err && (err->code == SBX_E_TOO_LARGE || err->code == SBX_E_INVALID);
}

/* Does the link at path (relative to /workspace) with this target stay under /workspace?
 * Lexically, as the kernel would walk it if no other link were in the way (links that are in
 * the way are judged by the same rule, so none of them leaves either). */
bool grpo_link_contained(const char *path, const char *target) {
    char full[8192];
    const char *slash = strrchr(path, '/');
    int n = target[0] == '/' ? snprintf(full, sizeof(full), "%s", target)
                             : snprintf(full, sizeof(full), TOP "/%.*s/%s",
                                        slash ? (int)(slash - path) : 0, path, target);
    if (n < 0 || (size_t)n >= sizeof(full))
        return false;
    /* walk the components: a stack of their start offsets in out */
    char out[8192];
    size_t ol = 0;
    for (char *save = NULL, *c = strtok_r(full, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            while (ol > 0 && out[ol - 1] != '/')
                ol--;
            if (ol > 0)
                ol--;
            continue;
        }
        size_t cl = strlen(c);
        if (ol + cl + 2 > sizeof(out))
            return false;
        out[ol++] = '/';
        memcpy(out + ol, c, cl);
        ol += cl;
    }
    out[ol] = '\0';
    return strncmp(out, TOP, strlen(TOP)) == 0 &&
           (out[strlen(TOP)] == '\0' || out[strlen(TOP)] == '/');
}

static int copy_data(struct archive *r, struct archive *w, error_rec *err) {
    char buf[65536];
    la_ssize_t n;
    while ((n = la.archive_read_data(r, buf, sizeof(buf))) > 0)
        if (la.archive_write_data(w, buf, (size_t)n) != n)
            return error_set(err, -EIO, "workspace tar: %s", la.archive_error_string(w));
    return n < 0 ? error_set(err, -EINVAL, "workspace tar: %s", la.archive_error_string(r)) : 0;
}

static int copy_entries(struct archive *r, struct archive *w, unsigned *dropped, error_rec *err) {
    struct archive_entry *e;
    int h;
    while ((h = la.archive_read_next_header(r, &e)) == ARCHIVE_OK || h == ARCHIVE_WARN) {
        const char *target = la.archive_entry_symlink(e);
        char path[4096];
        if (la.archive_entry_filetype(e) == AE_IFLNK &&
            (!target ||
             libarchive_clean_path(la.archive_entry_pathname(e), path, sizeof(path)) < 0 ||
             !grpo_link_contained(path, target))) {
            (*dropped)++;
            continue;
        }
        if (la.archive_write_header(w, e) != ARCHIVE_OK)
            return error_set(err, -EIO, "workspace tar: %s", la.archive_error_string(w));
        int rr = copy_data(r, w, err);
        if (rr < 0)
            return rr;
    }
    return h == ARCHIVE_EOF
               ? 0
               : error_set(err, -EINVAL, "workspace tar: %s", la.archive_error_string(r));
}

int grpo_workspace_contain(const void *tar, size_t len, void **ret, size_t *ret_len,
                           unsigned *ret_dropped, error_rec *err) {
    int rc = libarchive_load(err);
    if (rc < 0)
        return rc;
    membuf m = {0};
    unsigned dropped = 0;
    struct archive *r = la.archive_read_new(), *w = la.archive_write_new();
    if (!r || !w)
        rc = error_set(err, -ENOMEM, "out of memory");
    else if (la.archive_read_support_format_tar(r) != ARCHIVE_OK ||
             la.archive_read_open_memory(r, tar, len) != ARCHIVE_OK)
        rc = error_set(err, -EINVAL, "workspace tar: %s", la.archive_error_string(r));
    else if (la.archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
             la.archive_write_open(w, &m, NULL, mem_write, NULL) != ARCHIVE_OK)
        rc = error_set(err, -EIO, "workspace tar: %s", la.archive_error_string(w));
    else if ((rc = copy_entries(r, w, &dropped, err)) == 0 &&
             la.archive_write_close(w) != ARCHIVE_OK)
        rc = error_set(err, -EIO, "workspace tar: %s", la.archive_error_string(w));
    if (r)
        la.archive_read_free(r);
    if (w)
        la.archive_write_free(w);
    if (rc < 0) {
        free(m.data);
        return rc;
    }
    *ret = m.data ? m.data : malloc(1);
    *ret_len = m.len;
    *ret_dropped = dropped;
    return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
}
