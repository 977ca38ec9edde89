/* Helper processes started with posix_spawn and reaped through a pidfd (see spawn.h). */
#include "sandboxd/core/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct spawned {
    uv_poll_t poll;
    pid_t pid;
    int pidfd;
    sd_spawn_exit_fn exit_cb;
    void *ud;
} spawned;

static void spawned_closed(uv_handle_t *h) {
    spawned *s = h->data;
    safe_close(s->pidfd);
    free(s);
}

static void spawned_exited(uv_poll_t *p, int status, int events) {
    (void)events;
    spawned *s = p->data;
    siginfo_t si = {0};
    int r, ws = -1; /* as waitpid's status */
    while ((r = waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r < 0) { /* no P_PIDFD (Linux < 5.4) or a poll error: our own child, by its pid */
        if (waitpid(s->pid, &ws, WNOHANG) == 0 && status == 0)
            return; /* not ended yet */
    } else if (si.si_pid == 0) {
        return; /* not ended yet */
    } else if (si.si_code == CLD_EXITED) {
        ws = W_EXITCODE(si.si_status, 0);
    } else {
        ws = (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
    }
    uv_poll_stop(p);
    if (s->exit_cb)
        s->exit_cb(s->ud, ws);
    uv_close((uv_handle_t *)p, spawned_closed);
}

/* The child's start: its own session, fds as spawn.h says, default signals, none blocked.
 * tmp[i] is a copy of fds[i] above fd 3 + n, so no dup2 overwrites a source still to come. */
static int spawn_attrs(posix_spawn_file_actions_t *fa, posix_spawnattr_t *at, const int *tmp,
                       size_t n) {
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    int r = posix_spawnattr_setflags(at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                             POSIX_SPAWN_SETSIGMASK);
    if (!r)
        r = posix_spawnattr_setsigdefault(at, &all);
    if (!r)
        r = posix_spawnattr_setsigmask(at, &none);
    for (size_t i = 0; !r && i < n; i++) /* dup2 clears CLOEXEC on the copy */
        r = posix_spawn_file_actions_adddup2(fa, tmp[i], 3 + (int)i);
    if (!r)
        r = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
    if (!r)
        r = posix_spawn_file_actions_adddup2(fa, 2, 1);
    if (!r) /* CLOEXEC is the rule everywhere; this makes it hold for long-lived shims too */
        r = posix_spawn_file_actions_addclosefrom_np(fa, 3 + (int)n);
    return -r;
}

static int spawn_child(const char *path, char *const argv[], char *const envp[], const int *fds,
                       size_t n, pid_t *ret_pid) {
    int tmp[SD_SPAWN_FDS_MAX];
    size_t k = 0;
    int r = n <= SD_SPAWN_FDS_MAX ? 0 : -EINVAL;
    for (; r == 0 && k < n; k++)
        if ((tmp[k] = fcntl(fds[k], F_DUPFD_CLOEXEC, 3 + (int)n)) < 0)
            r = negative_errno();
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    if (r == 0)
        r = spawn_attrs(&fa, &at, tmp, n);
    if (r == 0)
        r = -posix_spawn(ret_pid, path, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    for (size_t i = 0; i < k; i++)
        safe_close(tmp[i]);
    return r;
}

int sd_spawn(uv_loop_t *loop, const char *path, char *const argv[], char *const envp[],
             const int *fds, size_t n_fds, sd_spawn_exit_fn exit_cb, void *ud, pid_t *ret_pid) {
    spawned *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pid_t pid = -1;
    int r = spawn_child(path, argv, envp, fds, n_fds, &pid);
    if (r < 0) {
        free(s);
        return r;
    }
    s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (s->pidfd < 0 || (r = uv_poll_init(loop, &s->poll, s->pidfd)) < 0) {
        r = s->pidfd < 0 ? negative_errno() : r;
        kill(pid, SIGKILL); /* our own child: the pid cannot have been reused */
        waitpid(pid, NULL, 0);
        safe_close(s->pidfd);
        free(s);
        return r;
    }
    s->pid = pid;
    s->exit_cb = exit_cb;
    s->ud = ud;
    s->poll.data = s;
    if ((r = uv_poll_start(&s->poll, UV_READABLE, spawned_exited)) < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        uv_close((uv_handle_t *)&s->poll, spawned_closed);
        return r;
    }
    uv_unref((uv_handle_t *)&s->poll);
    if (ret_pid)
        *ret_pid = pid;
    return 0;
}
