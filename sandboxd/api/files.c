/* Files: GET/PUT /v1/sandboxes/{id}/files?path=. Paths are walked inside the sandbox's root
 * (/proc/<init_pid>/root) by the safe walker (common/safepath.h): no symlink is followed, no
 * device, FIFO or socket is opened, nothing outside the sandbox's writable layer is changed.
 * One file travels as octet-stream (GET: the opened file, bounded by its size), a directory as
 * a tar (entries relative to the directory). Writes and directory tars run in a worker process
 * in the sandbox's memory cgroup (sandboxd/core/files.h), never on the loop; a directory tar is
 * streamed as the worker makes it; a PUT's body arrives spooled to an unlinked file (api/http.c,
 * upload_fd) that the worker reads. Written files belong to the sandbox user (uid_base + 1000),
 * those under /grader of a grading sandbox to the grader (uid_base + 1001). */
#include "sandboxd/api/api.h"

#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/files.h"
#include "sandboxd/core/registry.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool valid_path(const char *p) {
    if (!p || p[0] != '/' || strlen(p) > 4096)
        return false;
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
            return false;
    return true;
}

static void reply_err(sd_request *req, const error_rec *err, bool put) {
    int r = err->code;
    const char *m = err->message;
    if (r == -ENOENT && !put)
        sd_reply_error(req, 404, "not_found", "path: %s", m);
    else if (r == -ENOTDIR || r == -EISDIR || r == -ELOOP || r == -EXDEV || r == -EINVAL ||
             r == -ENAMETOOLONG || r == -EPERM || r == -EEXIST || r == -ENOENT)
        sd_reply_error(req, 400, "invalid_argument", "path: %s", m);
    else if (r == -EROFS || r == -EACCES)
        sd_reply_error(req, 400, "invalid_argument", "path: not writable: %s", m);
    else if (r == -ENOSPC || r == -EDQUOT)
        sd_reply_error(req, 413, "too_large", "path: the sandbox's disk is full: %s", m);
    else if (r == -EFBIG || r == -ENOMEM)
        sd_reply_error(req, 413, "too_large", "path: %s", m);
    else if (r == -ESRCH)
        sd_reply_error(req, 409, "conflict", "the sandbox ended: %s", m);
    else
        sd_reply_error(req, 500, "internal", "path: %s", m);
}

/* ---- one request's job ---- */

typedef struct files_job {
    sd_request *req; /* NULL once the client is gone */
    sd_files_worker *worker;
    safepath sp;
    int root, dirfd, data_w, data_r;
    uv_poll_t data_poll;
    bool get, polling, data_open, data_eof, worker_done, begun;
    error_rec err;
    /* PUT */
    bool tar;
    char *path;
    int body_fd; /* the spooled request body (api/http.c), read by the worker */
    uint64_t body_len;
    mode_t mode;
    sd_files_owners owners;
    char memcg[PATH_MAX + 64]; /* the sandbox's memory cgroup directory */
    sd_daemon *d;
    char sb_id[64];
    char buf[65536];
} files_job;

static void job_free_if_done(files_job *j) {
    if (!j->worker_done || j->data_open)
        return;
    if (j->req) {
        j->req->on_close = NULL;
        j->req->on_drain = NULL;
    }
    safe_close(j->root);
    safe_close(j->dirfd);
    safe_close(j->data_w);
    safe_close(j->body_fd);
    free(j->path);
    free(j);
}

static void data_closed(uv_handle_t *h) {
    files_job *j = h->data;
    safe_close(j->data_r);
    j->data_open = false;
    job_free_if_done(j);
}

static void data_close(files_job *j) {
    if (j->data_open && !uv_is_closing((uv_handle_t *)&j->data_poll))
        uv_close((uv_handle_t *)&j->data_poll, data_closed);
}

/* The tar has been read to its end and the worker is gone: finish the answer. */
static void stream_finish(files_job *j) {
    if (!j->worker_done || !j->data_eof || !j->req)
        return;
    sd_request *req = j->req;
    if (!j->begun && j->err.code < 0)
        reply_err(req, &j->err, false);
    else if (!j->begun)
        sd_reply_error(req, 500, "internal", "the directory's tar was empty");
    else if (j->err.code < 0) {
        log_warn("files: tar of a directory failed midway: %s", j->err.message);
        sd_stream_abort(req);
    } else
        sd_stream_end(req);
}

static void data_readable(uv_poll_t *p, int status, int events);

static void stream_drained(sd_request *req, void *ud) {
    (void)req;
    files_job *j = ud;
    if (j->data_open && !j->polling && !uv_is_closing((uv_handle_t *)&j->data_poll)) {
        j->polling = true;
        uv_poll_start(&j->data_poll, UV_READABLE, data_readable);
    }
}

static void data_readable(uv_poll_t *p, int status, int events) {
    (void)status;
    (void)events;
    files_job *j = p->data;
    ssize_t n = read(j->data_r, j->buf, sizeof(j->buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0 || !j->req) { /* end of the tar (or the worker died) */
        uv_poll_stop(p);
        j->polling = false;
        j->data_eof = true;
        stream_finish(j); /* if the worker is gone too */
        data_close(j);
        return;
    }
    if (!j->begun) {
        j->begun = true;
        sd_stream_begin(j->req, "application/x-tar");
    }
    sd_stream_write(j->req, j->buf, (size_t)n);
    if (sd_stream_full(j->req)) { /* the client is slow: the worker waits on a full pipe */
        uv_poll_stop(p);
        j->polling = false;
    }
}

static void job_req_closed(sd_request *req, void *ud) {
    (void)req;
    files_job *j = ud;
    j->req = NULL;
    if (!j->worker_done)
        sd_files_worker_cancel(j->worker);
    if (j->polling)
        uv_poll_stop(&j->data_poll);
    j->polling = false;
    data_close(j);
}

/* A worker killed (-ENOMEM, files_worker.c) while its sandbox ended or paused was killed with
 * it, not for memory: the sandbox ended (409), as for -ESRCH. */
static void killed_with_sandbox(files_job *j) {
    if (j->err.code != -ENOMEM)
        return;
    sd_sandbox *sb = sd_registry_find(j->d, j->sb_id);
    if (sb && sb->state == SD_RUNNING)
        return;
    error_set(&j->err, -ESRCH, "sandbox %s is %s: the files worker was killed with it", j->sb_id,
              sb ? sd_state_name(sb->state) : "gone");
}

static void job_done(void *ud, const error_rec *err) {
    files_job *j = ud;
    j->worker_done = true;
    j->err = *err;
    killed_with_sandbox(j);
    if (j->get) /* a directory GET: finished once the tar has been read to its end */
        stream_finish(j);
    else if (j->req && j->err.code < 0)
        reply_err(j->req, &j->err, true);
    else if (j->req)
        sd_reply_json(j->req, 204, NULL);
    job_free_if_done(j);
}

static int job_start(sd_daemon *d, sd_sandbox *sb, files_job *j, sd_files_fn fn) {
    sd_cgroup_memcg_dir(d, sb->id, j->memcg, sizeof(j->memcg));
    j->d = d;
    snprintf(j->sb_id, sizeof(j->sb_id), "%s", sb->id);
    int keep[] = {j->root, j->dirfd, j->data_w, j->body_fd};
    error_rec err = {0};
    int r = sd_files_worker_start(d->loop, j->memcg, keep, ARRAY_SIZE(keep), fn, j, job_done, j,
                                  &j->worker, &err);
    if (r < 0) {
        log_warn("files: %s", err.message);
        return r;
    }
    j->data_w = safe_close(j->data_w);
    j->req->on_close = job_req_closed;
    j->req->close_ud = j;
    return 0;
}

static files_job *job_new(sd_request *req) {
    files_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->req = req;
    j->root = j->dirfd = j->data_w = j->data_r = j->body_fd = -1;
    return j;
}

/* Checks shared by GET and PUT; returns the job (root and walker set) or NULL after answering. */
static files_job *files_prologue(sd_request *req, sd_sandbox *sb, const char **ret_path) {
    const char *path = sd_req_query(req, "path");
    if (!valid_path(path)) {
        sd_reply_error(req, 400, "invalid_argument",
                       "path: must be an absolute path without \"..\" components");
        return NULL;
    }
    if (sb->state != SD_RUNNING || sb->init_pid <= 0 || sb->pausing) { /* (see exec.c) */
        sd_reply_error(req, 409, "conflict", "sandbox %s is %s", sb->id,
                       sb->pausing ? "pausing" : "not running");
        return NULL;
    }
    files_job *j = job_new(req);
    if (!j) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    char root[64];
    snprintf(root, sizeof(root), "/proc/%d/root", sb->init_pid);
    j->root = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    uid_t base = (uid_t)sd_uid_base(sb->uid_slot);
    if (j->root < 0 || sd_files_safepath(j->root, base, &j->sp) < 0) {
        sd_reply_error(req, 500, "internal", "cannot open the sandbox's root: %m");
        safe_close(j->root);
        free(j);
        return NULL;
    }
    /* grading sandboxes: what goes under /grader belongs to the grader (docs/GRPO.md), chosen
     * per path by the worker (a tar put at / may hold grader/... entries) */
    j->owners = (sd_files_owners){.agent = base + 1000,
                                  .grader = sb->spec.grading ? base + 1001 : (uid_t)-1};
    *ret_path = path;
    return j;
}

static void job_abandon(files_job *j) {
    j->worker_done = true;
    job_free_if_done(j);
}

/* ---- GET ---- */

static int tar_job(void *ud, error_rec *err) {
    files_job *j = ud;
    int r = sd_files_tar(&j->sp, j->dirfd, j->data_w, err);
    safe_close(j->data_w);
    return r;
}

static void get_dir(sd_daemon *d, sd_sandbox *sb, files_job *j) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        sd_reply_error(j->req, 500, "internal", "files: pipe: %m");
        job_abandon(j);
        return;
    }
    j->data_r = p[0];
    j->data_w = p[1];
    j->get = true;
    fd_set_nonblock(j->data_r, 1);
    if (uv_poll_init(d->loop, &j->data_poll, j->data_r) < 0) {
        sd_reply_error(j->req, 500, "internal", "files: cannot watch the tar's pipe");
        j->data_r = safe_close(j->data_r); /* not data_open: job_free_if_done leaves it */
        job_abandon(j);
        return;
    }
    j->data_open = true;
    j->data_poll.data = j;
    if (job_start(d, sb, j, tar_job) < 0) {
        sd_reply_error(j->req, 500, "internal", "files: cannot start the worker");
        j->worker_done = true;
        data_close(j);
        return;
    }
    j->req->on_drain = stream_drained;
    j->req->drain_ud = j;
    j->polling = true;
    uv_poll_start(&j->data_poll, UV_READABLE, data_readable);
}

void sd_api_files_get(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    const char *path;
    files_job *j = files_prologue(req, sb, &path);
    if (!j)
        return;
    int fd;
    uint64_t size;
    bool is_dir;
    error_rec err = {0};
    /* a walk of opens and stats that cannot block: done here */
    if (sd_files_open_read(&j->sp, path, &fd, &size, &is_dir, &err) < 0) {
        reply_err(req, &err, false);
        job_abandon(j);
        return;
    }
    if (!is_dir) {
        job_abandon(j);
        fd_set_nonblock(fd, 0);
        sd_reply_fd(req, "application/octet-stream", fd, size);
        return;
    }
    j->dirfd = fd;
    get_dir(d, sb, j);
}

/* ---- PUT ---- */

static int parse_mode(const char *s, mode_t *ret) {
    if (!s) {
        *ret = 0644;
        return 0;
    }
    /* octal digits only: strtoul alone takes "+7", " 7" and "-7" */
    if (!*s || strspn(s, "01234567") != strlen(s))
        return -EINVAL;
    char *end;
    unsigned long m = strtoul(s, &end, 8);
    if (*end || m > 0777)
        return -EINVAL;
    *ret = (mode_t)m;
    return 0;
}

static int put_job(void *ud, error_rec *err) {
    files_job *j = ud;
    uint64_t room;
    if (sd_files_memcg_room(j->memcg, &room) < 0)
        room = UINT64_MAX; /* no memory accounting to go by: the disk's size bounds it */
    return j->tar ? sd_files_untar(&j->sp, j->path, j->body_fd, &j->owners, room, err)
                  : sd_files_write(&j->sp, j->path, j->body_fd, j->body_len, j->mode, &j->owners,
                                   room, err);
}

/* The body as a file: the one http.c spooled it into (taken), else the small one it kept in
 * memory, copied into a memfd. Answers and returns -1 on failure. */
static int put_body(sd_request *req) {
    if (req->upload_err == -ENOSPC || req->upload_err == -EDQUOT) {
        sd_reply_error(req, 507, "insufficient_storage",
                       "the daemon's disk filled up while uploading");
        return -1;
    }
    if (req->upload_err) {
        sd_reply_error(req, 500, "internal", "cannot store the upload: %s",
                       strerror(-req->upload_err));
        return -1;
    }
    if (req->upload_fd >= 0)
        return TAKE_FD(req->upload_fd);
    int fd = memfd_create("sandboxd-put", MFD_CLOEXEC);
    int r = fd < 0 ? negative_errno() : fd_write_all(fd, req->body ? req->body : "", req->body_len);
    if (r < 0) {
        safe_close(fd);
        sd_reply_error(req, 500, "internal", "cannot store the upload: %s", strerror(-r));
        return -1;
    }
    return fd;
}

/* Whether the media type of a Content-Type value is type (case aside; parameters after ';'). */
static bool media_type_is(const char *ctype, const char *type) {
    size_t n = strlen(type);
    ctype += strspn(ctype, " \t");
    if (strncasecmp(ctype, type, n) != 0)
        return false;
    ctype += n;
    ctype += strspn(ctype, " \t");
    return !*ctype || *ctype == ';';
}

void sd_api_files_put(sd_daemon *d, sd_request *req, sd_sandbox *sb) {
    const char *ctype = sd_req_header(req, "Content-Type");
    bool tar = ctype && media_type_is(ctype, "application/x-tar");
    if (ctype && !tar && !media_type_is(ctype, "application/octet-stream")) {
        sd_reply_error(req, 415, "unsupported_media_type",
                       "Content-Type must be application/octet-stream or application/x-tar");
        return;
    }
    mode_t mode;
    if (parse_mode(sd_req_query(req, "mode"), &mode) < 0) {
        sd_reply_error(req, 400, "invalid_argument", "mode: must be octal, at most 0777");
        return;
    }
    if (tar && sd_req_query(req, "mode")) { /* a tar's entries carry their own modes */
        sd_reply_error(req, 400, "invalid_argument",
                       "mode: only with application/octet-stream (a tar's entries have their own)");
        return;
    }
    const char *path;
    files_job *j = files_prologue(req, sb, &path);
    if (!j)
        return;
    j->tar = tar;
    j->mode = mode;
    j->body_len = req->body_len;
    if ((j->body_fd = put_body(req)) < 0) {
        job_abandon(j);
        return;
    }
    if (!(j->path = strdup(path)) || job_start(d, sb, j, put_job) < 0) {
        sd_reply_error(req, 500, "internal", "files: cannot start the worker");
        job_abandon(j);
    }
    /* answered by job_done */
}
