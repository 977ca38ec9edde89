/* sandboxd: the daemon's entry point. Reads the configuration, prepares the run and state
 * directories, the seccomp filter and the cgroup subtree, re-adopts sandboxes from the state
 * directory, serves the API on the libuv loop and tells systemd it is ready. SIGTERM/SIGINT
 * stop serving and exit 0, leaving sandboxes (and their shims) running for the next start. */
#include "common/fdutil.h"
#include "policy/seccomp.h"
#include "sandboxd/api/api.h"
#include "sandboxd/api/listen.h"
#include "sandboxd/api/sandboxfusion.h"
#include "sandboxd/config.h"
#include "sandboxd/core/volumes.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/checkpoint.h"
#include "sandboxd/core/exec.h"
#include "sandboxd/core/process.h"
#include "sandboxd/core/commit.h"
#include "sandboxd/core/create.h"
#include "sandboxd/core/fork.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/gvisor.h"
#include "sandboxd/core/images.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/restore.h"
#include "sandboxd/core/spare.h"
#include "sandboxd/core/timers.h"
#include "sandboxd/fleet/fleet.h"

#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

static char *find_shim(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return NULL;
    exe[n] = 0;
    char *dir = dirname(exe), path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/sbx-shim", dir);
    if (access(path, X_OK) == 0)
        return strdup(path);
    snprintf(path, sizeof(path), "%s/../libexec/sandboxd/sbx-shim", dir);
    char *real = realpath(path, NULL);
    return real ? real : strdup(path);
}

/* The profile: --seccomp-profile, else the installed one, else the source tree's (next to a
 * build directory, or the current directory). */
static const char *seccomp_profile(sd_daemon *d, char *buf, size_t len) {
    if (d->cfg.seccomp_profile)
        return d->cfg.seccomp_profile;
    if (access("/usr/local/share/sandboxd/seccomp.json", R_OK) == 0)
        return "/usr/local/share/sandboxd/seccomp.json";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        snprintf(buf, len, "%s/../policy/seccomp.json", dirname(exe));
        if (access(buf, R_OK) == 0)
            return buf;
    }
    return "policy/seccomp.json";
}

static int setup_seccomp(sd_daemon *d, error_rec *err) {
    char buf[PATH_MAX + 32];
    const char *profile = seccomp_profile(d, buf, sizeof(buf));
    snprintf(d->seccomp_bpf, sizeof(d->seccomp_bpf), "%s/seccomp.bpf", d->cfg.run_dir);
    int r = policy_seccomp_compile_file(profile, d->seccomp_bpf, err);
    if (r < 0)
        return error_prefix(err, "seccomp profile %s", profile);
    snprintf(d->seccomp_grading_bpf, sizeof(d->seccomp_grading_bpf), "%s/seccomp-grading.bpf",
             d->cfg.run_dir);
    r = policy_seccomp_compile_file_profile(profile, "grading", d->seccomp_grading_bpf, err);
    if (r < 0)
        return error_prefix(err, "seccomp profile %s (grading)", profile);
    log_info("seccomp profile=%s bpf=%s", profile, d->seccomp_bpf);
    return 0;
}

static void host_limits(sd_daemon *d) {
    struct sysinfo si;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    d->host.cpus = n > 0 ? (double)n : 1;
    d->host.memory_bytes = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 1ull << 30;
    if (!d->cfg.max_sandboxes)
        d->cfg.max_sandboxes = (unsigned)MAX(1, MIN(d->host.memory_bytes / (256ull << 20), 1024));
    if (!d->cfg.max_starting)
        d->cfg.max_starting = (unsigned)(2 * d->host.cpus);
    d->n_slots = MIN(MAX(d->cfg.max_sandboxes * 2, 64u), 60000u);
    d->slots = calloc(d->n_slots, 1);
}

/* The config's "defaults" against this host: values no create here could have (e.g. more CPUs
 * than the host has) stop the start, instead of a 400 for every create that sets none. */
static int check_defaults(sd_daemon *d, error_rec *err) {
    policy_create c = {0};
    if (sd_create_defaults(d, &c, err) < 0)
        return error_prefix(err, "config defaults");
    policy_create_done(&c);
    return 0;
}

static void on_signal(uv_signal_t *s, int signum) {
    sd_daemon *d = s->data;
    log_info("signal %d: stopping (sandboxes keep running)", signum);
    d->shutting_down = true;
    sd_sf_done(d);
    sd_http_stop(d);
    sd_fleet_stop(d);
    sd_fork_stop(d);
    sd_commit_stop(d);
    sd_lifecycle_stop(d);
    uv_stop(d->loop);
}

/* Every sandbox holds a shim connection and every command three pipes: lift the soft limit. */
static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The core's modules, then the API layer, each registering its listener (in this order: the
 * listeners hear news in the order they were added). */
static int wire(sd_daemon *d, error_rec *err) {
    int r;
    if ((r = sd_network_init(d, err)) < 0) /* egress: "network" in the config file */
        return r;
    if ((r = sd_gvisor_init(d, err)) < 0) /* the gvisor class: runsc found and checked */
        return r;
    if ((r = sd_gpu_init(d, err)) < 0) /* GPUs: before restore claims them back */
        return r;
    if ((r = sd_images_init(d, err)) < 0) /* images: before pools and restore name images */
        return r;
    if ((r = sd_volumes_init(d, err)) < 0) /* volumes: mounted before restore, creates */
        return r;
    if ((r = sd_spares_init(d, err)) < 0) /* spare shims: core/spare.h */
        return r;
    if (sd_exec_init(d) < 0 || sd_process_init(d) < 0 || sd_fork_init(d) < 0 ||
        sd_checkpoint_init(d) < 0)
        return error_set(err, -ENOSPC, "too many listeners");
    if ((r = sd_pool_init(d, err)) < 0 || (r = sd_api_init(d, err)) < 0 ||
        (r = sd_sf_init(d, err)) < 0)
        return r;
    return 0;
}

static int setup(sd_daemon *d, error_rec *err) {
    int r;
    raise_nofile();
    host_limits(d);
    if (!d->slots)
        return error_set(err, -ENOMEM, "out of memory");
    if ((r = check_defaults(d, err)) < 0)
        return r;
    if (!d->cfg.shim_path)
        d->cfg.shim_path = find_shim();
    if (!d->cfg.shim_path || access(d->cfg.shim_path, X_OK) < 0)
        return error_set_errno(err, negative_errno(), "sbx-shim not found at %s (use --shim PATH)",
                               d->cfg.shim_path ? d->cfg.shim_path : "(unknown)");
    if ((r = mkdir_p(d->cfg.run_dir, 0711)) < 0)
        return error_set_errno(err, r, "mkdir %s", d->cfg.run_dir);
    if ((r = mkdir_p(d->cfg.state_dir, 0700)) < 0)
        return error_set_errno(err, r, "mkdir %s", d->cfg.state_dir);
    if ((r = setup_seccomp(d, err)) < 0 || (r = sd_cgroup_setup(d, err)) < 0)
        return r;
    int ufd = sd_listen_activated(), tfd = -1;
    if (ufd < 0 && (r = sd_listen_unix(d->cfg.socket_path, &ufd, err)) < 0)
        return r;
    if (d->cfg.tcp && (r = sd_listen_tcp("--tcp", d->cfg.tcp, &tfd, err)) < 0)
        return r;
    if ((r = wire(d, err)) < 0)
        return r;
    sd_restore(d);
    if ((r = sd_http_start(d, ufd, tfd, sd_api_dispatch, err)) < 0)
        return r;
    if (d->cfg.sf_listen) {
        int sfd;
        if ((r = sd_listen_tcp("--sandboxfusion-listen", d->cfg.sf_listen, &sfd, err)) < 0 ||
            (r = sd_http_start_sandboxfusion(d, sfd, err)) < 0)
            return r;
        if (!sd_listen_is_loopback(sfd))
            log_warn("SandboxFusion endpoints on %s take requests without a token from "
                     "anyone who can reach that address",
                     d->cfg.sf_listen);
        log_info("SandboxFusion endpoints on %s", d->cfg.sf_listen);
    }
    sd_timers_start(d);
    if ((r = sd_fleet_init(d, err)) < 0) /* fleet: after restore, the record counts them */
        return r;
    uv_signal_init(d->loop, &d->sigterm);
    uv_signal_init(d->loop, &d->sigint);
    d->sigterm.data = d->sigint.data = d;
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    return 0;
}

int main(int argc, char **argv) {
    static sd_daemon d;
    error_rec err = {0};
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN); /* a closed terminal must not stop the fleet */
    if (sd_config_load(argc, argv, &d.cfg, &err) < 0) {
        fprintf(stderr, "sandboxd: %s\n", err.message);
        return 2;
    }
    log_setup("sandboxd", d.cfg.log_level);
    if (d.cfg.fleet_ca) /* before any thread: libsbx reads it for a move's calls (fleet/move.c) */
        setenv("SBX_CA", d.cfg.fleet_ca, 1);
    /* libuv's worker threads: a move's calls hold one each for its length (fleet/move.c, at
     * most SD_MOVES_MAX each way), next to image, volume and packing work */
    setenv("UV_THREADPOOL_SIZE", "16", 0);
    d.loop = uv_default_loop();
    if (setup(&d, &err) < 0) {
        log_error("cannot start: %s", err.message);
        sd_spares_stop(&d); /* started before the failing step: they and their cgroups go */
        sd_cgroup_release(&d);
        return 1;
    }
    log_info("serving socket=%s tcp=%s max_sandboxes=%u max_starting=%u cgroup=v%d:%s shim=%s",
             d.cfg.socket_path, d.cfg.tcp ? d.cfg.tcp : "off", d.cfg.max_sandboxes,
             d.cfg.max_starting, d.cgroup_version, d.cgroup_parent, d.cfg.shim_path);
    sd_notify_ready();
    uv_run(d.loop, UV_RUN_DEFAULT);
    sd_spares_stop(&d);
    sd_cgroup_release(&d);
    sd_gpu_done(&d);
    sd_gvisor_done(&d);
    log_info("stopped");
    return 0;
}
