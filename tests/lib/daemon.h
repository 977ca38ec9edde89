/* A real sandboxd for C tests, the twin of tests/lib/daemon.sh (same layout, same cleanup): each
 * named instance gets a directory in the case's temp dir (run/, state/, log, sd.sock and the
 * daemon.env that `daemon.sh --sweep` reads) and a unique cgroup parent. test_daemon_start
 * starts or restarts it on those directories and waits for /healthz; test_daemon_stop sends
 * SIGTERM and fails the case unless it exits 0 with a clean log. When the case ends, every
 * instance is swept by `daemon.sh --sweep` (sandboxes ended, daemon stopped, `sbx-shim
 * cleanup` on leftovers, mounts and cgroups removed), which fails the case on a sanitizer
 * report in a daemon's log. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct test_daemon {
    char name[32];
    char dir[320]; /* run/, state/, log, sd.sock, daemon.env */
    char sock[400];
    char log[400];
    char cg[96];
    pid_t pid; /* 0 when not running */
} test_daemon;

typedef struct test_daemon_opts {
    const char *const *flags; /* extra daemon flags, NULL-terminated */
    const char *const *wrap;  /* a command prefix (e.g. nsenter ...), NULL-terminated */
    const char *bin;          /* the sandboxd to run; NULL: the build's */
    const char *shim;         /* --shim; NULL: the build's sbx-shim, "": none */
    const char *log_level;    /* --log-level; NULL: "debug", "": none */
} test_daemon_opts;

/* Instance `name` (at most 4 per case), its directories made on first use; not started. */
test_daemon *test_daemon_use(const char *name);
/* Start (or restart) d with opts (NULL: defaults) and wait until it answers /healthz. */
void test_daemon_start(test_daemon *d, const test_daemon_opts *opts);
/* test_daemon_use + test_daemon_start; returns the instance. */
test_daemon *test_daemon_up(const char *name, const test_daemon_opts *opts);
/* SIGTERM, wait; the case fails unless it exits 0 and its log holds no sanitizer report. */
void test_daemon_stop(test_daemon *d);
/* Does the daemon's log hold a sanitizer report? */
bool test_daemon_log_has_sanitizer_report(const test_daemon *d);
