/* sbx-shim: builds one sandbox and supervises it (see shim/server.h and common/shimproto.h).
 *   sbx-shim <dir>                          build the sandbox described by <dir>/spec.json
 *   sbx-shim spare PAD [CGV CGPARENT [ROOT]]  a spare started ahead of need: reads <dir>
 *                                           and a newline from fd 4, then builds it like the
 *                                           first; with the daemon's cgroup version and parent,
 *                                           it parks an init ahead (shim_parked_make) meanwhile,
 *                                           which builds a root on the empty directory ROOT
 *   sbx-shim cleanup <dir>                  reclaim what a killed shim left behind
 *   sbx-shim seccomp-compile IN.json OUT.bpf  compile a seccomp policy to a raw BPF program */
#include "common/fdutil.h"
#include "common/log.h"
#include "policy/seccomp.h"
#include "shim/init.h"
#include "shim/sandbox.h"
#include "shim/server.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define STATUS_FD 3
#define SPARE_FD 4

static void ensure_stdio(void) {
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
}

static void report(int fd, json_t *msg) {
    if (fd < 0 || !msg) {
        json_decref(msg);
        return;
    }
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (s) {
        size_t n = strlen(s);
        s[n] = '\n';
        fd_write_all(fd, s, n + 1);
        free(s);
    }
    close(fd);
}

static int cmd_run(const char *arg, shim_parked *parked) {
    _cleanup_(shim_parked_freep) shim_parked *p = parked;
    int status = fcntl(STATUS_FD, F_GETFD) >= 0 ? STATUS_FD : -1;
    if (status >= 0)
        fd_set_cloexec(status, 1);
    char dir[PATH_MAX];
    if (!realpath(arg, dir)) {
        report(status, json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", errno, "message",
                                 "step dir: no such sandbox directory"));
        return 1;
    }
    setsid(); /* survive the daemon: own session, no controlling terminal */
    shim_server_block_signals();
    shim_sandbox *sb = NULL;
    error_rec err = {0};
    int r = shim_sandbox_build(dir, TAKE_PTR(p), &sb, &err);
    if (r < 0) {
        log_error("build failed: %s", err.message);
        report(status, json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", -r, "message", err.message));
        return 1;
    }
    log_info("sandbox ready id=%s init_pid=%d steps_ms=\"%s\"", sb->spec->id, (int)sb->init_pid,
             sb->step_ms);
    report(status, json_pack("{s:b, s:i, s:i}", "ok", 1, "init_pid", (int)sb->init_pid, "shim_pid",
                             (int)getpid()));
    r = shim_server_run(sb);
    shim_sandbox_free(sb);
    return r;
}

/* With the daemon's cgroup version and parent: an init parked ahead, in the signal state a
 * build's init starts with (cmd_run), at SHIM_SPARE_NICE unless the directory is here already
 * (the daemon's own renice at the hand-off may have come before ours). *ret_nice: the priority
 * to go back to. NULL (logged) when it cannot be made: builds as usual. */
static shim_parked *park(int argc, char **argv, int *ret_nice) {
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    *ret_nice = errno ? 0 : nice;
    if (argc != 5 && argc != 6)
        return NULL;
    shim_server_block_signals();
    struct pollfd taken = {.fd = SPARE_FD, .events = POLLIN};
    setpriority(PRIO_PROCESS, 0, SHIM_SPARE_NICE);
    if (poll(&taken, 1, 0) > 0)
        setpriority(PRIO_PROCESS, 0, *ret_nice);
    shim_parked *p = NULL;
    error_rec err = {0};
    if (shim_parked_make(atoi(argv[3]), argv[4], argc == 6 ? argv[5] : NULL, &p, &err) < 0)
        log_warn("spare: no sandbox parked ahead: %s", err.message);
    return p;
}

/* A spare (sandboxd/core/spare.h): wait for the directory, then become `sbx-shim <dir>`, argv
 * included (cleanup's kill_old_shim knows a shim by its argv[1]); PAD and what follows are the
 * room for it. End of file before a whole line: the daemon ended the spare or went away;
 * nothing to build (what was parked is removed). */
static int cmd_spare(int argc, char **argv) {
    int nice;
    _cleanup_(shim_parked_freep) shim_parked *parked = park(argc, argv, &nice);
    char dir[PATH_MAX + 1];
    size_t n = 0;
    char *nl = NULL;
    while (!nl && n < sizeof(dir) - 1) {
        ssize_t k = read(SPARE_FD, dir + n, sizeof(dir) - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return 0;
        nl = memchr(dir + n, '\n', (size_t)k);
        n += (size_t)k;
    }
    close(SPARE_FD);
    shim_parked_nice(parked, nice);
    size_t room = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) - argv[1]);
    if (!nl || (size_t)(nl - dir) > room) {
        report(STATUS_FD, json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", ENAMETOOLONG, "message",
                                    "step dir: the directory does not fit the spare's argv"));
        return 1;
    }
    *nl = 0;
    memset(argv[1], 0, room);
    memcpy(argv[1], dir, (size_t)(nl - dir));
    return cmd_run(dir, TAKE_PTR(parked));
}

static int cmd_cleanup(const char *arg) {
    char dir[PATH_MAX];
    if (!realpath(arg, dir))
        return access(arg, F_OK) < 0 ? 0 : 1; /* nothing left: already clean */
    error_rec err = {0};
    if (shim_sandbox_cleanup(dir, &err) < 0) {
        log_error("cleanup %s: %s", dir, err.message);
        return 1;
    }
    return 0;
}

static int cmd_seccomp_compile(const char *in, const char *out) {
    error_rec err = {0};
    if (policy_seccomp_compile_file(in, out, &err) < 0) {
        fprintf(stderr, "sbx-shim: %s\n", err.message);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    ensure_stdio();
    shim_init_title = argv[0];
    shim_init_title_len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) - argv[0]);
    log_setup("sbx-shim", LOG_LEVEL_INFO);
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("sbx-shim %s\n", SBX_VERSION);
        return 0;
    }
    if ((argc == 3 || argc == 5 || argc == 6) && strcmp(argv[1], "spare") == 0)
        return cmd_spare(argc, argv);
    if (argc == 3 && strcmp(argv[1], SHIM_INIT_AGAIN) == 0)
        shim_init_again(argv[2]); /* a pausable sandbox's init, inside it (shim/init.h) */
    if (argc == 3 && strcmp(argv[1], "cleanup") == 0)
        return cmd_cleanup(argv[2]);
    if (argc == 4 && strcmp(argv[1], "seccomp-compile") == 0)
        return cmd_seccomp_compile(argv[2], argv[3]);
    if (argc == 2 && argv[1][0] != '-')
        return cmd_run(argv[1], NULL);
    fprintf(stderr, "usage: sbx-shim <dir> | sbx-shim spare PAD [CGV CGPARENT [ROOT]] | "
                    "sbx-shim cleanup <dir> | "
                    "sbx-shim seccomp-compile IN.json OUT.bpf\n");
    return 2;
}
