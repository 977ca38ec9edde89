/* Pause to disk with CRIU and resume (core/checkpoint.h). Whether this node can: `criu check`
 * and a trial dump of a sleeping process, once, in a files worker (a process forked from the
 * daemon), their output in <run-dir>/criu-check.log; Debian 12's criu 3.17 cannot start on
 * kernel 6.18 (its vDSO parser), CRIU 4 can (docs/API.md "Pause and resume"). A pause asks the
 * sandbox's shim to save a checkpoint into <state-dir>/checkpoints/<id> (common/shimproto.h
 * "pause"); the sandbox is then paused: no processes, no shim, no room on the node, its uid slot
 * kept (CRIU restores its user namespace's maps as they were). A resume starts a shim on a spec
 * with "restore": the start of a create, except that a failure leaves it paused with its
 * checkpoint, which is removed once it runs again. */
#include "sandboxd/core/checkpoint.h"

#include "common/fdutil.h"
#include "common/filereplace.h"
#include "common/shimproto.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "sandboxd/core/files.h"
#include "sandboxd/core/images.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/shim_client.h"
#include "sandboxd/core/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
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

#define TRIAL_MS 15000 /* a dump of one sleeping process takes ~40 ms */

static _Noreturn void in_namespaces(char *const argv[], char *sleeper);

/* Run argv (the host's PATH) with its output appended to log (none: /dev/null) as the first
 * process of a pid namespace of its own (in_namespaces), under a process of its own in a
 * process group of its own in the worker's session (check_run): when the worker dies with the
 * daemon, that process dies (PR_SET_PDEATHSIG), the namespace's first process with it, and the
 * kernel kills all that is left in the namespace. The group becomes orphaned, too, and the
 * kernel sends SIGHUP and SIGCONT to it if it has a stopped member (a group in its own session
 * is orphaned from the start, so it gets no such signal). sleeper: NULL, or the trial's: the
 * namespace's first process starts a sleeping process first and writes its pid there (an
 * argument of argv) before it runs argv. Its pid, or -errno. */
static pid_t run_logged(char *const argv[], int log, char *sleeper) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the worker died before the line above */
            _exit(127);
        /* the daemon ignores these; an ignored SIGHUP would keep CRIU's stopped child stopped
         * after the kernel's hang-up of its orphaned group */
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int null = open("/dev/null", O_RDWR); /* (inherited where it lands on 0, 1 or 2) */
        if (null > STDIN_FILENO)
            dup2(null, STDIN_FILENO);
        if (log < 0)
            log = null;
        if (log >= 0)
            dup2(log, STDOUT_FILENO), dup2(log, STDERR_FILENO);
        if (null > STDERR_FILENO)
            close(null);
        setpgid(0, 0);
        in_namespaces(argv, sleeper);
    }
    if (pid > 0)
        setpgid(pid, pid); /* (either comes first: its group exists before a kill(-pid)) */
    return pid < 0 ? negative_errno() : pid;
}

/* Wait for pid (run_logged's) at most ms; false when it took longer: its group killed, and the
 * first process of its pid namespace, which the worker adopts (check_run), waited for too (it
 * ends once the kernel has ended the rest of its namespace). */
static bool wait_at_most(pid_t pid, int ms, int *ret_status) {
    for (int waited = 0;; waited += 10) {
        pid_t r = waitpid(pid, ret_status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return true;
        if (waited >= ms) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, ret_status, 0);
            while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
            return false;
        }
        usleep(10000);
    }
}

/* `criu check` passes where a dump still hangs (CRIU 4.1.1 on 6.18.44: its parasite never
 * traps at the end of its rt_sigreturn), so a sleeping process is dumped once for real, CRIU
 * and the sleeping process in one pid namespace (run_logged). */
static int trial_dump(int log, error_rec *err) {
    char dir[PATH_MAX], pidstr[16] = "";
    snprintf(dir, sizeof(dir), "%s.trial", probe.log);
    rm_rf(dir);
    if (mkdir(dir, 0700) < 0)
        return error_set_errno(err, negative_errno(), "mkdir %s", dir);
    pid_t criu =
        run_logged((char *const[]){"criu", "dump", "-t", pidstr, "-D", dir, NULL}, log, pidstr);
    int st = 0;
    bool done = criu > 0 && wait_at_most(criu, TRIAL_MS, &st);
    rm_rf(dir);
    if (criu < 0)
        return error_set_errno(err, criu, "start a process to dump");
    if (!done)
        return error_set(err, -EOPNOTSUPP,
                         "pause: criu check passes, but a trial dump of a sleeping process did "
                         "not finish in %d s: this CRIU hangs on this kernel (CRIU 4.2 works on "
                         "6.18; tests/deps_criu.sh)",
                         TRIAL_MS / 1000);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EOPNOTSUPP, "criu dump of a sleeping process failed (status %d)",
                         st);
    return 0;
}

/* pid's end as an exit status (128 + the signal that killed it), after waiting for it. */
static _Noreturn void exit_as(pid_t pid) {
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    _exit(pid < 0 ? 126 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* The trial's sleeping process, in a session of its own (CRIU dumps a session leader without
 * --shell-job), its pid written into buf (16 bytes); then argv (`criu dump -t <buf>`). In the
 * namespace's first process: async-signal-safe only. */
static _Noreturn void trial_in_namespace(char *const argv[], char *buf) {
    pid_t sleeper = fork();
    if (sleeper == 0) {
        setsid();
        /* a /dev/null of this mount namespace (CRIU fails on a file whose mount is not in it) */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = STDIN_FILENO; null >= 0 && fd <= STDERR_FILENO; fd++)
            dup2(null, fd);
        execvpe("sleep", (char *const[]){"sleep", "600.5", NULL}, (char **)spec_host_env);
        _exit(127);
    }
    if (sleeper < 0)
        _exit(126);
    char digits[16];
    int n = 0;
    for (pid_t v = sleeper; v > 0 && n < 15; v /= 10)
        digits[n++] = (char)('0' + v % 10);
    for (int i = 0; i < n; i++)
        buf[i] = digits[n - 1 - i];
    buf[n] = 0;
    poll(NULL, 0, 20); /* sleeping, not still being exec'd */
    pid_t pid = fork();
    if (pid == 0) {
        execvpe(argv[0], argv, (char **)spec_host_env);
        _exit(127);
    }
    exit_as(pid); /* (the kernel kills the sleeping process as this one ends) */
}

/* argv as the first process of a pid namespace of its own (or, with sleeper, the trial's first
 * process: trial_in_namespace), with its own /proc in a mount namespace of its own: when it
 * ends, however (killed with the worker, or by wait_at_most), the kernel kills whatever it
 * left, a child in a ptrace stop included (seen once, TracerPid 1, after a daemon killed
 * mid-check; and CRIU's children, which its PR_SET_PDEATHSIG does not reach). This process
 * (run_logged's child, in CRIU's group) waits for it and exits as it did. */
static _Noreturn void in_namespaces(char *const argv[], char *sleeper) {
    int alive[2];
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        pipe2(alive, O_CLOEXEC | O_NONBLOCK) < 0)
        _exit(126);
    pid_t pid = fork();
    if (pid == 0) {
        close(alive[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char c;
        if (read(alive[0], &c, 1) == 0) /* its parent died before the line above: no writer */
            _exit(126);
        close(alive[0]);
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            _exit(126);
        if (sleeper)
            trial_in_namespace(argv, sleeper);
        execvpe(argv[0], argv, (char **)spec_host_env);
        _exit(127);
    }
    close(alive[0]);
    exit_as(pid); /* (alive[1] open until this one ends) */
}

/* In the files worker. Its own session first: CRIU's groups (run_logged) are then orphaned
 * when it dies, whatever adopts them (a subreaper in the daemon's session would otherwise keep
 * them connected, and a stopped child of CRIU stopped). A subreaper itself: a pid namespace's
 * first process whose parent wait_at_most killed is its child then. */
static int check_run(void *ud, error_rec *err) {
    (void)ud;
    if (setsid() < 0)
        return error_set_errno(err, negative_errno(), "setsid");
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        return error_set_errno(err, negative_errno(), "prctl PR_SET_CHILD_SUBREAPER");
    _cleanup_close_ int fd = open(probe.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "open %s", probe.log);
    pid_t pid = run_logged((char *const[]){"criu", "check", NULL}, fd, NULL);
    int st = 0;
    if (pid < 0)
        return error_set_errno(err, pid, "cannot run criu");
    if (!wait_at_most(pid, TRIAL_MS, &st))
        return error_set(err, -EOPNOTSUPP, "pause: criu check did not finish in %d s",
                         TRIAL_MS / 1000);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return error_set(err, -EOPNOTSUPP,
                         "pause: CRIU is not installed on this node (apt-get install criu)");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EOPNOTSUPP, "criu check failed (status %d)", st);
    return trial_dump(fd, err);
}

/* The refusal's message: CRIU's own error lines, without their "Error (file:line): " prefix. */
static void describe(error_rec *e) {
    _cleanup_free_ char *text = NULL;
    if (e->code != -EOPNOTSUPP || strncmp(e->message, "criu check failed", 17) != 0 ||
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
    if (e->code < 0)
        describe(&probe.err);
    probe.known = true, probe.running = false;
    log_info("criu check: %s", e->code >= 0 ? "ok: sandboxes can pause" : probe.err.message);
    while (probe.waiters) {
        waiter *w = probe.waiters;
        probe.waiters = w->next;
        w->done(w->ud, &probe.err);
        free(w);
    }
}

const error_rec *sd_checkpoint_known(void) {
    return probe.known ? &probe.err : NULL;
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

/* ---- pause and resume ---- */

void sd_checkpoint_dir(const sd_sandbox *sb, char *buf, size_t len) {
    sd_state_checkpoint_dir(sb->d, sb->id, buf, len);
}

static void tell(sd_sandbox *sb, const error_rec *err) {
    sd_checkpoint_done_fn done = sb->ckpt_done;
    void *ud = sb->ckpt_ud;
    sb->ckpt_done = NULL, sb->ckpt_ud = NULL;
    if (done)
        done(ud, sb, err);
}

void sd_checkpoint_cancel(sd_sandbox *sb, void *ud) {
    if (sb->ckpt_ud == ud)
        sb->ckpt_done = NULL, sb->ckpt_ud = NULL;
}

static uint64_t du_total;
static int du_cb(const char *path, const struct stat *st, int type, struct FTW *f) {
    (void)path, (void)type, (void)f;
    du_total += (uint64_t)st->st_blocks * 512;
    return 0;
}

/* Whether sb's checkpoint is whole (the shim wrote SHIMPROTO_CHECKPOINT_DONE last); its times
 * are read into sb. */
static bool checkpoint_whole(sd_sandbox *sb) {
    char dir[PATH_MAX], done[PATH_MAX + 32];
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    snprintf(done, sizeof(done), "%s/" SHIMPROTO_CHECKPOINT_DONE, dir);
    json_t *j = json_load_file(done, 0, NULL);
    if (!j)
        return false;
    sb->ckpt_dump_ms = json_number_value(json_object_get(j, "dump_ms"));
    sb->ckpt_files_ms = json_number_value(json_object_get(j, "files_ms"));
    sb->ckpt_sockets_ended = (unsigned)json_integer_value(json_object_get(j, "sockets_ended"));
    json_decref(j);
    return true;
}

/* What sb's checkpoint takes on disk (a walk of it: once per pause, and after a restart). */
static void measure(sd_sandbox *sb) {
    char dir[PATH_MAX];
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    du_total = 0;
    nftw(dir, du_cb, 16, FTW_PHYS | FTW_MOUNT);
    sb->ckpt_bytes = du_total;
}

/* CRIU's log of a failed dump or restore, kept in the run directory as criu-<what>-<id>.log
 * (the dump's checkpoint goes; a restore's is overwritten by the next try). */
static void keep_log(sd_sandbox *sb, const char *what, const error_rec *err) {
    char dir[PATH_MAX], log[PATH_MAX + 32], keep[PATH_MAX + 64];
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    snprintf(log, sizeof(log), "%s/images/%s.log", dir, what);
    snprintf(keep, sizeof(keep), "%s/criu-%s-%s.log", sb->d->cfg.run_dir, what, sb->id);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (file_read_all(log, 1 << 22, &text, &len) >= 0 &&
        file_replace_nosync(keep, text, len, 0600) >= 0)
        log_warn("sandbox=%s %s failed: %s (CRIU's log: %s)", sb->id, what, err->message, keep);
}

static void become_paused(sd_sandbox *sb) {
    measure(sb);
    sd_sandbox_set_paused(sb);
    sb->pausing = false;
    sb->paused_ms = now_real_ms();
    log_info("sandbox paused sandbox=%s bytes=%llu dump_ms=%.1f files_ms=%.1f", sb->id,
             (unsigned long long)sb->ckpt_bytes, sb->ckpt_dump_ms, sb->ckpt_files_ms);
    sd_state_save(sb);
    tell(sb, NULL);
}

static void resumed(sd_sandbox *sb) {
    char dir[PATH_MAX];
    uint64_t now = now_real_ms(), away = now > sb->paused_ms ? now - sb->paused_ms : 0;
    sb->resuming = false;
    sb->paused_total_ms += away;
    sb->expires_ms += away; /* its lifetime does not run while paused */
    sb->resume_ms = (double)(now_mono_us() - sb->start_mono_us) / 1000.0;
    sd_sandbox_touch(sb);
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    rm_rf(dir);
    sb->ckpt_bytes = 0;
    log_info("sandbox resumed sandbox=%s ms=%.1f paused_s=%.1f", sb->id, sb->resume_ms,
             (double)away / 1000.0);
    sd_state_save(sb);
    tell(sb, NULL);
}

bool sd_checkpoint_shim_gone(sd_sandbox *sb) {
    if (!(sb->pausing || sb->resuming) || !checkpoint_whole(sb))
        return false;
    if (sb->resuming) { /* the restored sandbox went with its shim: back to its checkpoint */
        sd_sandbox_resume_lost(sb);
        sb->resuming = false;
        log_warn("sandbox=%s lost its shim while resuming: paused again", sb->id);
        sd_state_save(sb);
        error_rec err = {0};
        error_set(&err, -EIO, "resume: the sandbox's shim went away; it is paused again");
        tell(sb, &err);
        return true;
    }
    become_paused(sb);
    return true;
}

/* A networked sandbox that runs on after its pause failed (or a pause or resume a restart
 * interrupted) gets its network again (sd_network_release), else it ends. */
static void network_again(sd_sandbox *sb, const char *what) {
    error_rec err = {0};
    if (sb->state == SD_RUNNING && sd_network_setup(sb, &err) < 0)
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE,
                       "%s and its network could not be set up again: %s", what, err.message);
}

static void pause_reply(void *ud, json_t *reply) {
    sd_sandbox *sb = ud;
    if (sb->state == SD_ENDED)
        return; /* ended meanwhile (its checkpoint went: on_ended) */
    if (reply && strcmp(shimproto_type(reply), "paused") == 0)
        return; /* paused once the shim has ended the sandbox and exited (its cgroup and its
                 * directory gone, which a resume makes anew): on_shim_gone */
    if (!reply && sd_checkpoint_shim_gone(sb))
        return;
    sb->pausing = false;
    sd_state_save(sb);
    error_rec err = {0};
    if (!reply)
        error_set(&err, -EIO, "the sandbox's shim went away during the pause");
    else if (shimproto_error_parse(reply, &err) >= 0)
        error_set(&err, -EPROTO, "unexpected answer \"%s\" from the shim", shimproto_type(reply));
    if (err.code == -ENOENT) /* no criu on this node */
        err.code = -EOPNOTSUPP;
    if (strncmp(err.message, "pause", 5) != 0)
        error_prefix(&err, "pause");
    char dir[PATH_MAX];
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    keep_log(sb, "dump", &err);
    rm_rf(dir);
    network_again(sb, "its pause failed"); /* (before the answer: it runs as it did) */
    tell(sb, &err);
}

int sd_checkpoint_pause(sd_sandbox *sb, sd_checkpoint_done_fn done, void *ud, error_rec *err) {
    char dir[PATH_MAX], parent[PATH_MAX];
    if (sb->state != SD_RUNNING || !sb->shim || sb->pausing)
        return error_set(err, -EBUSY, "sandbox %s is %s: only a running sandbox pauses", sb->id,
                         sb->pausing ? "pausing already" : sd_state_name(sb->state));
    if (!sb->spec.pausable)
        return error_set(err, -EPERM,
                         "sandbox %s was not created with \"pausable\": true (or \"on_idle\": "
                         "\"pause\"), so it cannot pause",
                         sb->id);
    if (sb->commands_running)
        return error_set(err, -EBUSY, "sandbox %s runs %u command(s): a pause waits for none",
                         sb->id, sb->commands_running);
    snprintf(parent, sizeof(parent), "%s/checkpoints", sb->d->cfg.state_dir);
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    rm_rf(dir);
    int r = mkdir_p(parent, 0700);
    if (r < 0 || mkdir(dir, 0700) < 0)
        return error_set_errno(err, r < 0 ? r : negative_errno(), "mkdir %s", dir);
    sd_sandbox_tell_pausing(sb); /* before the freeze: a cut connection's peer gets its end */
    sb->pausing = true;
    sd_state_save(sb); /* "pausing" before the shim hears of it: a restarted daemon looks for
                        * the checkpoint (a shim that paused is gone) or adopts the shim */
    json_t *f = json_pack("{s:s}", "dir", dir);
    r = f ? sd_shim_request(sb->shim, "pause", f, NULL, 0, pause_reply, sb) : -ENOMEM;
    if (r < 0) {
        sb->pausing = false;
        sd_state_save(sb);
        rm_rf(dir);
        return error_set_errno(err, r, "ask the shim to pause");
    }
    sd_network_release(sb); /* (the shim deletes the veth too: the checkpoint has loopback only
                             * even when this daemon is stopped before it gets here) */
    sb->ckpt_done = done, sb->ckpt_ud = ud;
    return 0;
}

int sd_checkpoint_resume(sd_sandbox *sb, sd_checkpoint_done_fn done, void *ud, error_rec *err) {
    sd_daemon *d = sb->d;
    if (sb->state != SD_PAUSED)
        return error_set(err, -EBUSY, "sandbox %s is not paused (it is %s)", sb->id,
                         sb->resuming ? "resuming" : sd_state_name(sb->state));
    if (sb->cleaning)
        return error_set(err, -EBUSY, "sandbox %s is still cleaning up a failed resume", sb->id);
    if (sb->move_to[0])
        return error_set(err, -EBUSY, "sandbox %s is moving to node %s", sb->id, sb->move_to);
    if (!checkpoint_whole(sb))
        return error_set(err, -EIO, "sandbox %s: its checkpoint is missing", sb->id);
    if (!sd_pool_make_room(d, 1, "a resume")) /* (pool entries never keep a sandbox out) */
        return error_set(err, -EAGAIN, "the node is full (%u sandboxes)", d->cfg.max_sandboxes);
    sb->resuming = true;
    sb->ckpt_done = done, sb->ckpt_ud = ud;
    sd_sandbox_resume(sb); /* (saved "starting", resuming, before its shim starts) */
    return 0;
}

int sd_checkpoint_restored(sd_sandbox *sb) {
    if (!checkpoint_whole(sb))
        return -ENOENT;
    measure(sb);
    return 0;
}

void sd_checkpoint_sweep(sd_daemon *d) {
    char parent[PATH_MAX], path[PATH_MAX + 256];
    snprintf(parent, sizeof(parent), "%s/checkpoints", d->cfg.state_dir);
    DIR *dir = opendir(parent);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        sd_sandbox *sb = de->d_name[0] == '.' ? NULL : sd_registry_find(d, de->d_name);
        if (sb && (sb->state == SD_PAUSED || sb->pausing || sb->resuming))
            continue;
        snprintf(path, sizeof(path), "%s/%s", parent, de->d_name);
        log_info("removing the checkpoint of no paused sandbox dir=%s", path); /* or a move's */
        rm_rf(path);
    }
    closedir(dir);
}

/* ---- a move to another node of the fleet (api/move.c) ---- */

bool sd_checkpoint_node_bound(const sd_sandbox *sb) {
    return json_array_size(sb->spec.volumes) > 0;
}

int sd_checkpoint_move_begin(sd_sandbox *sb, const char *node, error_rec *err) {
    if (sb->state != SD_PAUSED || sb->cleaning)
        return error_set(err, -EBUSY, "sandbox %s is %s: only a paused sandbox moves", sb->id,
                         sb->cleaning ? "cleaning up a failed resume" : sd_state_name(sb->state));
    if (sb->move_to[0])
        return error_set(err, -EBUSY, "sandbox %s is moving to node %s already", sb->id,
                         sb->move_to);
    if (sb->spec.lease)
        return error_set(err, -EBUSY, "sandbox %s lives under lease %s: it cannot move (yet)",
                         sb->id, sb->spec.lease);
    if (sd_checkpoint_node_bound(sb))
        return error_set(err, -EBUSY,
                         "sandbox %s has volumes, which are this node's: it resumes here only",
                         sb->id);
    if (!checkpoint_whole(sb))
        return error_set(err, -EIO, "sandbox %s: its checkpoint is missing", sb->id);
    if (strlen(node) >= sizeof(sb->move_to))
        return error_set(err, -EINVAL, "node: too long");
    snprintf(sb->move_to, sizeof(sb->move_to), "%s", node);
    log_info("sandbox moving sandbox=%s node=%s", sb->id, node);
    sd_state_save(sb); /* a restarted daemon asks that node before it resumes the sandbox */
    return 0;
}

void sd_checkpoint_move_end(sd_sandbox *sb, bool moved) {
    if (sb->state != SD_PAUSED || !sb->move_to[0])
        return;
    if (!moved) {
        log_info("sandbox stays sandbox=%s node=%s", sb->id, sb->move_to);
        sb->move_to[0] = 0;
        sd_state_save(sb);
        return;
    }
    uint64_t now = now_real_ms();
    sb->expires_ms += now > sb->paused_ms ? now - sb->paused_ms : 0; /* as the node resumed it */
    sd_registry_set_hidden(sb, true); /* a forward only (api/router.c), kept for its lifetime */
    sd_sandbox_end(sb, END_MOVED, "moved to node %s", sb->move_to);
}

void sd_checkpoint_give_back(sd_sandbox *sb, const char *from) {
    if (sb->state == SD_ENDED)
        return; /* ended here meanwhile (a DELETE): `from` keeps its copy */
    snprintf(sb->move_to, sizeof(sb->move_to), "%s", from);
    sd_registry_set_hidden(sb, true);
    sd_sandbox_end(sb, END_MOVED, "its resume on this node failed: it stays paused on node %s",
                   from);
}

/* The record of a sandbox that may come here: paused, with a uid slot free on this node. */
static int import_check(sd_daemon *d, const char *id, json_t *record, error_rec *err) {
    const char *rid = json_string_value(json_object_get(record, "id"));
    const char *state = json_string_value(json_object_get(record, "state"));
    int slot = (int)json_integer_value(json_object_get(record, "uid_slot"));
    if (!rid || strcmp(rid, id) != 0 || !state || strcmp(state, "paused") != 0)
        return error_set(err, -EINVAL, "the checkpoint of %s holds the record of %s (%s)", id,
                         rid ?: "no sandbox", state ?: "no state");
    sd_sandbox *old = sd_registry_find(d, id);
    if (old && old->state != SD_ENDED)
        return error_set(err, -EBUSY, "sandbox %s is %s on this node already", id,
                         sd_state_name(old->state));
    if (old && old->uid_slot >= 0)
        return error_set(err, -EBUSY, "sandbox %s ended here and is still being torn down", id);
    if (sd_slot_taken(d, slot))
        return error_set(err, -EBUSY,
                         "uid slot %d (host ids %d-%d), which the checkpoint's user namespace "
                         "maps, is in use on this node",
                         slot, sd_uid_base(slot), sd_uid_base(slot) + 65535);
    json_t *spec = json_object_get(record, "spec");
    if (json_array_size(json_object_get(spec, "volumes")) > 0) /* (sd_checkpoint_node_bound) */
        return error_set(err, -EINVAL, "sandbox %s has volumes, which stay on their node", id);
    json_t *net = json_object_get(spec, "network");
    const char *mode = json_string_value(net);
    if (net && !json_is_null(net) && !(mode && strcmp(mode, "none") == 0) && !d->net)
        return error_set(err, -EBUSY,
                         "sandbox %s has a network and egress is not enabled on this node", id);
    const char *image = json_string_value(json_object_get(spec, "image"));
    if (image && strcmp(image, "host") != 0 && !sd_images_find(d, image))
        return error_set(err, -EBUSY,
                         "image %s, which sandbox %s runs, is not in this node's store (import "
                         "the same image here first)",
                         image, id);
    if (old) { /* an earlier stay here (moved away, or a failed resume): its record goes */
        sd_state_remove(d, id);
        sd_sandbox_forget(old);
    }
    return 0;
}

int sd_checkpoint_import(sd_daemon *d, const char *id, const char *staged, json_t *record,
                         sd_sandbox **ret, error_rec *err) {
    char dir[PATH_MAX];
    sd_sandbox *sb = NULL;
    bool pool = false;
    int r = import_check(d, id, record, err);
    if (r < 0)
        return r;
    if (sd_state_load(d, record, &sb, &pool) < 0 || pool || sb->state != SD_PAUSED) {
        sd_sandbox_free(sb);
        return error_set(err, -EINVAL, "the checkpoint's record of %s cannot be read", id);
    }
    sd_state_checkpoint_dir(d, id, dir, sizeof(dir));
    rm_rf(dir);
    if (rename(staged, dir) < 0) {
        sd_sandbox_free(sb);
        return error_set_errno(err, negative_errno(), "rename %s", staged);
    }
    sb->move_to[0] = 0;
    sb->pausing = sb->resuming = false;
    sd_slot_claim(d, sb->uid_slot);
    sd_registry_insert(d, sb);
    if (!checkpoint_whole(sb)) {
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "its checkpoint came without its end");
        return error_set(err, -EINVAL, "the checkpoint of %s is not whole", id);
    }
    measure(sb);
    log_info("sandbox came paused sandbox=%s bytes=%llu", id, (unsigned long long)sb->ckpt_bytes);
    sd_state_save(sb);
    *ret = sb;
    return 0;
}

/* ---- news from core/lifecycle.c ---- */

/* A resume's start finished: running (its checkpoint goes), or paused again. */
static void on_create_finished(void *ud, sd_sandbox *sb, const error_rec *err) {
    (void)ud;
    if (!sb->resuming || sb->state == SD_ENDED)
        return;
    if (!err) {
        resumed(sb);
        return;
    }
    keep_log(sb, "restore", err);
    sb->resuming = false;
    log_warn("sandbox resume failed sandbox=%s error=\"%s\"", sb->id, err->message);
    sd_state_save(sb);
    tell(sb, err);
}

static void remove_checkpoint(sd_sandbox *sb) {
    char dir[PATH_MAX];
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    if (access(dir, F_OK) == 0)
        rm_rf(dir);
}

/* The answer to a request sent behind the pause of a sandbox that ended, or its shim's end
 * (NULL): the shim serves one request at a time, so its pause, CRIU's dump included, is over. */
static void pause_over(void *ud, json_t *reply) {
    (void)reply;
    remove_checkpoint(ud);
}

/* A sandbox that ends takes its checkpoint along (a pause or resume in flight hears it). While
 * its shim pauses it (this daemon's pause, or one a restart adopted), CRIU writes into the
 * checkpoint: it goes once the pause is over (removed at once, it lost what CRIU wrote during
 * the removal, and what CRIU wrote after, until the next start's sweep). While a resume's shim
 * builds (no connection to it yet) or a failed resume's is cleaned up, its CRIU may restore
 * from it, writing restore.log: it goes once the `sbx-shim cleanup` the end runs (or the one
 * running) has killed that shim and CRIU (on_cleaned). */
static void on_ended(void *ud, sd_sandbox *sb) {
    (void)ud;
    bool restoring = sb->cleaning || (sb->resuming && !sb->shim); /* on_cleaned removes it */
    if (!restoring && !(sb->pausing && sb->shim &&
                        sd_shim_request(sb->shim, "hello", NULL, NULL, 0, pause_over, sb) == 0))
        remove_checkpoint(sb);
    sb->pausing = sb->resuming = false;
    error_rec err = {0};
    error_set(&err, -EBUSY, "sandbox %s ended: %s", sb->id, sb->end_message);
    tell(sb, &err);
}

/* A restarted daemon found the shim of a sandbox that was pausing or resuming: it runs (the
 * pause failed, or the resume ran). */
static void on_adopted(void *ud, sd_sandbox *sb) {
    (void)ud;
    char dir[PATH_MAX];
    if (sb->resuming) {
        sb->start_mono_us = now_mono_us(); /* (its resume's time is not known) */
        resumed(sb);
        network_again(sb, "the daemon restarted during its resume");
        return;
    }
    if (!sb->pausing)
        return;
    sb->pausing = false;
    sd_checkpoint_dir(sb, dir, sizeof(dir));
    rm_rf(dir);
    sd_state_save(sb);
    error_rec err = {0};
    error_set(&err, -EIO, "pause: the daemon restarted during the pause, which failed");
    tell(sb, &err);
    network_again(sb, "its pause failed while the daemon restarted");
}

static void on_shim_gone(void *ud, sd_sandbox *sb) {
    (void)ud;
    sd_checkpoint_shim_gone(sb);
}

static void on_cleaned(void *ud, sd_sandbox *sb) {
    (void)ud;
    if (sb->state == SD_ENDED)
        remove_checkpoint(sb);
}

static const sd_listener listener = {.create_finished = on_create_finished,
                                     .ended = on_ended,
                                     .adopted = on_adopted,
                                     .shim_gone = on_shim_gone,
                                     .cleaned = on_cleaned};

int sd_checkpoint_init(sd_daemon *d) {
    return sd_listener_add(d, &listener, NULL);
}
