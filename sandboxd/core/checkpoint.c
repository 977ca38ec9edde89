/* Pause to disk with CRIU, as far as this node allows (core/checkpoint.h). Debian 12's criu
 * 3.17 cannot start on kernel 6.18 (its vDSO parser: "vdso: Unexpected rt vDSO area bounds",
 * then "Could not initialize kernel features detection"), so checkpoints are refused with what
 * `criu check` said; where a newer CRIU passes its check, with why it cannot dump a sandbox
 * (SD_CHECKPOINT_NS_REASON). Commit and the rest do not depend on it. `criu check` runs once,
 * in a files worker (a process forked from the daemon), its output in
 * <run-dir>/criu-check.log. */
#include "sandboxd/core/checkpoint.h"

#include "common/fdutil.h"
#include "common/spec.h"
#include "sandboxd/core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct waiter {
    struct waiter *next;
    sd_checkpoint_probe_fn done;
    void *ud;
} waiter;

static struct {
    bool known, running;
    error_rec err; /* why this node cannot pause a sandbox */
    waiter *waiters;
    char log[PATH_MAX];
} probe;

static int check_run(void *ud, error_rec *err) {
    (void)ud;
    int fd = open(probe.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open %s", probe.log);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fd, STDOUT_FILENO), dup2(fd, STDERR_FILENO);
        char *args[] = {"criu", "check", NULL};
        execvpe(args[0], args, (char **)spec_host_env);
        _exit(127);
    }
    close(fd);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return error_set_errno(err, negative_errno(), "cannot run criu");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return error_set(err, -EOPNOTSUPP,
                         "pause: CRIU is not installed on this node (apt-get install criu)");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EOPNOTSUPP, "criu check failed (status %d)", st);
    return 0;
}

/* The refusal's message: CRIU's own error lines, without their "Error (file:line): " prefix. */
static void describe(error_rec *e) {
    _cleanup_free_ char *text = NULL;
    if (e->code != -EOPNOTSUPP || strstr(e->message, "not installed") ||
        file_read_all(probe.log, 1 << 16, &text, NULL) < 0)
        return;
    char msg[ERROR_MSG_MAX];
    size_t n = (size_t)snprintf(msg, sizeof(msg),
                                "pause: CRIU cannot checkpoint on this kernel; criu check says:");
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && n < sizeof(msg);
         l = strtok_r(NULL, "\n", &save)) {
        char *p = strstr(l, "): ");
        if (strncmp(l, "Error", 5) != 0 || strstr(l, "exited, status"))
            continue;
        n += (size_t)snprintf(msg + n, sizeof(msg) - n, " %s;", p ? p + 3 : l);
    }
    if (n < sizeof(msg) && msg[n - 1] == ';')
        msg[n - 1] = 0;
    snprintf(e->message, sizeof(e->message), "%s", msg);
}

static void check_done(void *ud, const error_rec *e) {
    sd_daemon *d = ud;
    (void)d;
    probe.err = *e;
    if (e->code >= 0)
        error_set(&probe.err, -EOPNOTSUPP, "%s", SD_CHECKPOINT_NS_REASON);
    else
        describe(&probe.err);
    probe.known = true, probe.running = false;
    log_info("criu check: %s", e->code >= 0 ? "ok" : probe.err.message);
    while (probe.waiters) {
        waiter *w = probe.waiters;
        probe.waiters = w->next;
        w->done(w->ud, &probe.err);
        free(w);
    }
}

void sd_checkpoint_probe(sd_daemon *d, sd_checkpoint_probe_fn done, void *ud) {
    if (probe.known) {
        done(ud, &probe.err);
        return;
    }
    waiter *w = calloc(1, sizeof(*w));
    error_rec err = {0};
    if (!w) {
        error_set(&err, -ENOMEM, "out of memory");
        done(ud, &err);
        return;
    }
    *w = (waiter){.next = probe.waiters, .done = done, .ud = ud};
    probe.waiters = w;
    if (probe.running)
        return;
    snprintf(probe.log, sizeof(probe.log), "%s/criu-check.log", d->cfg.run_dir);
    sd_files_worker *wk = NULL;
    probe.running = true;
    if (sd_files_worker_start(d->loop, NULL, (const int[]){STDERR_FILENO}, 1, check_run, NULL,
                              check_done, d, &wk, &err) < 0) {
        probe.running = false;
        probe.waiters = w->next;
        free(w);
        error_prefix(&err, "pause");
        done(ud, &err);
    }
}

void sd_checkpoint_probe_cancel(void *ud) {
    for (waiter **pp = &probe.waiters; *pp; pp = &(*pp)->next)
        if ((*pp)->ud == ud) {
            waiter *w = *pp;
            *pp = w->next;
            free(w);
            return;
        }
}
