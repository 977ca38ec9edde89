/* A real sandboxd for C tests: instances, start and restart with a health wait, stop, and the
 * sweep at the end of the case through tests/lib/daemon.sh (see daemon.h). */
#include "tests/lib/daemon.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_DAEMONS 4
#define MAX_ARGS 64

static test_daemon daemons[MAX_DAEMONS];
static size_t n_daemons;

static const char *src_dir(void) {
    const char *s = getenv("SBX_SRC_DIR");
    return s && *s ? s : ".";
}

static void write_env(const test_daemon *d) {
    char path[400], buf[1200];
    snprintf(path, sizeof(path), "%s/daemon.env", d->dir);
    int n = snprintf(buf, sizeof(buf), "pid=%d\nsock=%s\ncg=%s\nshim=%s\n", d->pid > 0 ? d->pid : 0,
                     d->sock, d->cg, test_bin("sbx-shim"));
    CHECK_OK(file_write_atomic(path, buf, (size_t)n, 0600));
}

/* The sweep, one shell run for all instances; false on a sanitizer report. */
static bool daemons_teardown(void) {
    char cmd[4096];
    int n = snprintf(cmd, sizeof(cmd), "bash %s/tests/lib/daemon.sh --sweep", src_dir());
    for (size_t i = 0; i < n_daemons; i++)
        n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " '%s'", daemons[i].dir);
    fflush(NULL);
    int st = system(cmd);
    for (size_t i = 0; i < n_daemons; i++)
        if (daemons[i].pid > 0) {
            waitpid(daemons[i].pid, NULL, 0); /* the sweep stopped it: reap */
            daemons[i].pid = 0;
        }
    n_daemons = 0;
    return st == 0;
}

test_daemon *test_daemon_use(const char *name) {
    for (size_t i = 0; i < n_daemons; i++)
        if (strcmp(daemons[i].name, name) == 0)
            return &daemons[i];
    CHECK_MSG(n_daemons < MAX_DAEMONS, "more than %d daemons in one case", MAX_DAEMONS);
    const char *tmp = test_tmpdir();
    if (n_daemons == 0)
        test_at_teardown(daemons_teardown);
    test_daemon *d = &daemons[n_daemons++];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "%s", name);
    snprintf(d->dir, sizeof(d->dir), "%s/%s", tmp, name);
    snprintf(d->sock, sizeof(d->sock), "%s/%s/sd.sock", tmp, name);
    snprintf(d->log, sizeof(d->log), "%s/%s/log", tmp, name);
    snprintf(d->cg, sizeof(d->cg), "sbxtest-c-%s-%d-%d", name, (int)getpid(), rand() % 100000);
    CHECK_OK(mkdir_p(d->dir, 0700));
    write_env(d);
    return d;
}

/* GET /healthz over the Unix socket: 200? */
static bool healthy(const test_daemon *d) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", d->sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    static const char q[] = "GET /healthz HTTP/1.0\r\nHost: sd\r\n\r\n";
    char buf[64] = "";
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
              fd_write_all(fd, q, sizeof(q) - 1) == 0 && read(fd, buf, sizeof(buf) - 1) > 12 &&
              strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 9, "200", 3) == 0;
    close(fd);
    return ok;
}

static size_t push_argv(const char **argv, size_t n, const char *const *more) {
    for (; more && *more; more++) {
        CHECK_MSG(n < MAX_ARGS - 1, "too many daemon arguments");
        argv[n++] = *more;
    }
    return n;
}

/* The paths an argv points into. */
struct argv_paths {
    char prof[512], run[400], state[400];
};

static size_t daemon_argv(const test_daemon *d, const test_daemon_opts *o, const char **argv,
                          struct argv_paths *p) {
    snprintf(p->prof, sizeof(p->prof), "%s/policy/seccomp.json", src_dir());
    snprintf(p->run, sizeof(p->run), "%s/run", d->dir);
    snprintf(p->state, sizeof(p->state), "%s/state", d->dir);
    const char *bin = o->bin ? o->bin : test_bin("sandboxd");
    const char *shim = o->shim ? o->shim : test_bin("sbx-shim");
    const char *level = o->log_level ? o->log_level : "debug";
    size_t n = push_argv(argv, 0, o->wrap);
    const char *base[] = {bin,    "--socket",          d->sock,  "--run-dir",
                          p->run, "--state-dir",       p->state, "--cgroup-parent",
                          d->cg,  "--seccomp-profile", p->prof,  NULL};
    n = push_argv(argv, n, base);
    if (*shim)
        n = push_argv(argv, n, (const char *const[]){"--shim", shim, NULL});
    if (*level)
        n = push_argv(argv, n, (const char *const[]){"--log-level", level, NULL});
    n = push_argv(argv, n, o->flags);
    argv[n] = NULL;
    return n;
}

void test_daemon_start(test_daemon *d, const test_daemon_opts *opts) {
    test_require_root();
    static const test_daemon_opts none;
    const char *argv[MAX_ARGS];
    struct argv_paths paths;
    daemon_argv(d, opts ? opts : &none, argv, &paths);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* even when the test crashes, the daemon goes */
        setpgid(0, 0); /* the runner's SIGTERM reaches the test, whose teardown stops us */
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    write_env(d);
    for (int i = 0; i < 200; i++) {
        if (healthy(d))
            return;
        CHECK_MSG(waitpid(pid, NULL, WNOHANG) == 0, "sandboxd %s exited at start; see %s", d->name,
                  d->log);
        usleep(50000);
    }
    test_fail(__FILE__, __LINE__, "sandboxd %s did not answer /healthz in 10 s (log: %s)", d->name,
              d->log);
}

test_daemon *test_daemon_up(const char *name, const test_daemon_opts *opts) {
    test_daemon *d = test_daemon_use(name);
    test_daemon_start(d, opts);
    return d;
}

bool test_daemon_log_has_sanitizer_report(const test_daemon *d) {
    /* the same patterns as daemon.sh's SANITIZER_REPORT */
    static const char *const pat[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                      "runtime error:"};
    _cleanup_free_ char *log = NULL;
    if (file_read_all(d->log, 256u << 20, &log, NULL) < 0)
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(pat); i++)
        if (strstr(log, pat[i]))
            return true;
    return false;
}

void test_daemon_stop(test_daemon *d) {
    CHECK_MSG(d->pid > 0, "sandboxd %s is not running", d->name);
    kill(d->pid, SIGTERM);
    int st = 0;
    CHECK(waitpid(d->pid, &st, 0) == d->pid);
    d->pid = 0;
    write_env(d);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sandboxd %s: status 0x%x after SIGTERM",
              d->name, st);
    CHECK_MSG(!test_daemon_log_has_sanitizer_report(d), "sanitizer reports in %s", d->log);
}
