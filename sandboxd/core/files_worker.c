/* The files API's worker process (see files.h): fork, join the sandbox's memory cgroup, close
 * every descriptor but the few the job needs, run the job, write one error record into a pipe
 * and exit. The loop watches the child's pidfd, so it never waits for it. */
#include "sandboxd/core/files.h"

#include "common/fdutil.h"
#include "common/macro.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct sd_files_worker {
    pid_t pid;
    int pidfd, res;
    uv_poll_t poll;
    sd_files_done_fn done;
    void *done_ud;
};

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* Close every descriptor of the child except keep[] (the daemon's sockets must not outlive it
 * in a slow worker). */
static void close_others(const int *keep, size_t n) {
    int k[16];
    n = MIN(n, ARRAY_SIZE(k));
    memcpy(k, keep, n * sizeof(int));
    qsort(k, n, sizeof(int), cmp_int);
    unsigned from = 3;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < 0 || (unsigned)k[i] < from) {
            from = MAX(from, (unsigned)(k[i] + 1));
            continue;
        }
        if ((unsigned)k[i] > from)
            syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0);
        from = (unsigned)k[i] + 1;
    }
    syscall(SYS_close_range, from, ~0u, 0);
}

static _Noreturn void child(int res, const char *memcg, const int *keep, size_t n_keep,
                            sd_files_fn fn, void *fn_ud) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    int k[17];
    n_keep = MIN(n_keep, (size_t)16);
    memcpy(k, keep, n_keep * sizeof(int));
    k[n_keep] = res;
    close_others(k, n_keep + 1);
    error_rec err = {0};
    int r = 0;
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", memcg ? memcg : "");
    if (memcg && (r = file_write_str(procs, "0")) < 0)
        error_set_errno(&err, r == -ENOENT ? -ESRCH : r, "cannot join the sandbox's memory cgroup");
    if (r == 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { /* deep trees hold a descriptor per level */
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        setlocale(LC_CTYPE, "C.UTF-8"); /* file names travel as UTF-8 (or raw bytes) */
        r = fn(fn_ud, &err);
        if (r < 0 && err.code == 0)
            error_set_errno(&err, r, "files");
    }
    (void)!write(res, &err, sizeof(err)); /* < PIPE_BUF: one atomic write */
    _exit(0);
}

static void worker_closed(uv_handle_t *h) {
    sd_files_worker *w = h->data;
    safe_close(w->pidfd);
    safe_close(w->res);
    free(w);
}

static void worker_exited(uv_poll_t *p, int status, int events) {
    (void)status;
    (void)events;
    sd_files_worker *w = p->data;
    int ws = 0;
    if (waitpid(w->pid, &ws, WNOHANG) == 0)
        return; /* not yet */
    error_rec err = {0};
    ssize_t n = read(w->res, &err, sizeof(err));
    if (n != (ssize_t)sizeof(err)) {
        if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)
            error_set(&err, -ENOMEM,
                      "the files worker was killed (out of memory in the sandbox's cgroup: files "
                      "written into a sandbox count against its memory limit)");
        else
            error_set(&err, -EIO, "the files worker died (status %d)", ws);
    }
    err.message[sizeof(err.message) - 1] = 0;
    uv_poll_stop(p);
    if (w->done)
        w->done(w->done_ud, &err);
    uv_close((uv_handle_t *)p, worker_closed);
}

int sd_files_worker_start(uv_loop_t *loop, const char *memcg, const int *keep, size_t n_keep,
                          sd_files_fn fn, void *fn_ud, sd_files_done_fn done, void *done_ud,
                          sd_files_worker **ret, error_rec *err) {
    int res[2];
    if (pipe2(res, O_CLOEXEC) < 0)
        return error_set_errno(err, negative_errno(), "files: pipe");
    pid_t pid = fork();
    if (pid < 0) {
        int r = negative_errno();
        safe_close(res[0]);
        safe_close(res[1]);
        return error_set_errno(err, r, "files: fork");
    }
    if (pid == 0)
        child(res[1], memcg, keep, n_keep, fn, fn_ud);
    safe_close(res[1]);
    sd_files_worker *w = calloc(1, sizeof(*w));
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (!w || pidfd < 0 || uv_poll_init(loop, &w->poll, pidfd) < 0) {
        int r = pidfd < 0 ? negative_errno() : -ENOMEM;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0); /* it was killed: no wait to speak of */
        safe_close(pidfd);
        safe_close(res[0]);
        free(w);
        return error_set_errno(err, r, "files: watch the worker");
    }
    fd_set_nonblock(res[0], 1);
    w->pid = pid;
    w->pidfd = pidfd;
    w->res = res[0];
    w->done = done;
    w->done_ud = done_ud;
    w->poll.data = w;
    uv_poll_start(&w->poll, UV_READABLE, worker_exited);
    *ret = w;
    return 0;
}

void sd_files_worker_cancel(sd_files_worker *w) {
    syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
}

static int read_u64(const char *dir, const char *knob, uint64_t *ret) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", dir, knob);
    _cleanup_free_ char *s = NULL;
    int r = file_read_all(p, 64, &s, NULL);
    if (r < 0)
        return r;
    if (strncmp(s, "max", 3) == 0) {
        *ret = UINT64_MAX;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    *ret = v;
    return 0;
}

int sd_files_memcg_room(const char *dir, uint64_t *ret) {
    uint64_t limit, usage;
    bool v2 = read_u64(dir, "memory.max", &limit) == 0;
    int r = v2 ? read_u64(dir, "memory.current", &usage)
               : read_u64(dir, "memory.limit_in_bytes", &limit);
    if (r == 0 && !v2)
        r = read_u64(dir, "memory.usage_in_bytes", &usage);
    if (r < 0)
        return r;
    *ret = limit > usage ? limit - usage : 0;
    return 0;
}
