/* The gVisor class on this node (see gvisor.h). */
#include "sandboxd/core/gvisor.h"

#include "common/fdutil.h"
#include "common/log.h"
#include "common/spec.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct sd_gvisor {
    char *runsc;       /* absolute path, or NULL */
    char version[128]; /* "0.0~20221219.0" */
    char reason[512];  /* why it cannot run here; "" when it can */
};

/* The config's path, or the first executable "runsc" on PATH. */
static char *find_runsc(const sd_daemon *d, char *reason, size_t len) {
    const char *cfg = d->cfg.runsc;
    if (cfg && *cfg) {
        if (cfg[0] != '/' || access(cfg, X_OK) < 0) {
            snprintf(reason, len, "runsc %s (the configuration's \"runsc\"): %s", cfg,
                     cfg[0] != '/' ? "not an absolute path" : strerror(errno));
            return NULL;
        }
        return strdup(cfg);
    }
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy = strdup(path && *path ? path : spec_host_env[0] + 5);
    char *save = NULL, buf[4200];
    for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(buf, sizeof(buf), "%s/runsc", dir);
        if (dir[0] == '/' && access(buf, X_OK) == 0)
            return strdup(buf);
    }
    snprintf(reason, len,
             "runsc is not installed (not on PATH; apt-get install runsc, or set "
             "\"runsc\" in the configuration)");
    return NULL;
}

/* `runsc --version`'s first line: "runsc version X". */
static int read_version(struct sd_gvisor *g) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], STDOUT_FILENO), dup2(p[1], STDERR_FILENO);
        char *args[] = {g->runsc, "--version", NULL};
        execve(args[0], args, spec_host_env);
        _exit(127);
    }
    close(p[1]);
    char out[512] = "";
    size_t n = 0;
    ssize_t k;
    while (pid > 0 && n < sizeof(out) - 1 && (k = read(p[0], out + n, sizeof(out) - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = '\0';
    close(p[0]);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return -errno;
    out[strcspn(out, "\n")] = '\0';
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strncmp(out, "runsc version ", 14) != 0) {
        snprintf(g->reason, sizeof(g->reason), "%s --version failed (status %d): %.200s", g->runsc,
                 st, out);
        return 0;
    }
    snprintf(g->version, sizeof(g->version), "%s", out + 14);
    return 0;
}

/* What runsc's ptrace platform needs from the kernel: ptrace of its own children and user
 * namespaces (it runs as root of the sandbox's); and what the shim needs of the host: the
 * directory /run, which init covers with a tmpfs in its own mount namespace (shim/gvisor.c). */
static void check_kernel(struct sd_gvisor *g) {
    _cleanup_free_ char *scope = NULL, *userns = NULL;
    struct stat st;
    int run = stat("/run", &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
    if (run < 0)
        snprintf(g->reason, sizeof(g->reason),
                 "the gvisor class needs the directory /run on the host (a sandbox's init mounts "
                 "a tmpfs on it in its own mount namespace): /run: %s",
                 strerror(-run));
    else if (file_read_all("/proc/sys/kernel/yama/ptrace_scope", 64, &scope, NULL) == 0 &&
             atoi(scope) >= 3)
        snprintf(g->reason, sizeof(g->reason),
                 "ptrace is disabled on this kernel (kernel.yama.ptrace_scope=3); runsc's ptrace "
                 "platform needs it");
    else if (file_read_all("/proc/sys/user/max_user_namespaces", 64, &userns, NULL) == 0 &&
             atoi(userns) == 0)
        snprintf(g->reason, sizeof(g->reason),
                 "user namespaces are disabled (user.max_user_namespaces=0)");
}

int sd_gvisor_init(sd_daemon *d, error_rec *err) {
    struct sd_gvisor *g = calloc(1, sizeof(*g));
    if (!g)
        return error_set(err, -ENOMEM, "out of memory");
    d->gvisor = g;
    if (d->cfg.runsc && strcmp(d->cfg.runsc, "none") == 0) {
        snprintf(g->reason, sizeof(g->reason),
                 "disabled by the configuration (\"runsc\":\"none\")");
        return 0;
    }
    g->runsc = find_runsc(d, g->reason, sizeof(g->reason));
    int r = g->runsc ? read_version(g) : 0;
    if (r < 0)
        snprintf(g->reason, sizeof(g->reason), "cannot run %s: %s", g->runsc, strerror(-r));
    if (!g->reason[0])
        check_kernel(g);
    if (g->reason[0])
        log_warn("gvisor isolation unavailable: %s", g->reason);
    else
        log_info("gvisor isolation available runsc=%s version=%s", g->runsc, g->version);
    return 0;
}

void sd_gvisor_done(sd_daemon *d) {
    if (!d->gvisor)
        return;
    free(d->gvisor->runsc);
    free(d->gvisor);
    d->gvisor = NULL;
}

int sd_gvisor_check(const sd_daemon *d, const policy_create *c, error_rec *err) {
    if (!c->gvisor || !d->gvisor || !d->gvisor->reason[0])
        return 0;
    return error_set(err, -EPROTONOSUPPORT, "isolation: gvisor is unavailable on this node: %s",
                     d->gvisor->reason);
}

const char *sd_gvisor_runsc(const sd_daemon *d) {
    return d->gvisor && !d->gvisor->reason[0] ? d->gvisor->runsc : NULL;
}

json_t *sd_gvisor_info_json(const sd_daemon *d) {
    const struct sd_gvisor *g = d->gvisor;
    const char *def = json_string_value(json_object_get(d->cfg.defaults, "isolation"));
    json_t *gv = json_pack("{s:b}", "available", g && !g->reason[0]);
    if (g && g->runsc)
        json_object_set_new(gv, "runsc", json_string(g->runsc));
    if (g && g->version[0])
        json_object_set_new(gv, "version", json_string(g->version));
    if (g && !g->reason[0])
        json_object_set_new(gv, "platform", json_string("ptrace"));
    if (g && g->reason[0])
        json_object_set_new(gv, "reason", json_string(g->reason));
    return json_pack("{s:s,s:{s:{s:b},s:o}}", "default", def ? def : "native", "classes", "native",
                     "available", 1, "gvisor", gv);
}
