/* A test-side client of sbx-shim: writes a spec.json into a fresh directory, starts
 * build/sbx-shim with a pipe as fd 3, speaks common/shimproto.h on shim.sock, runs commands
 * with pipes for stdio and collects their output and exit. Used by tests/integration/test_shim_*.
 * Functions return 0 or -errno and never abort; callers CHECK. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct shimdrv_opts {
    const char *image_dir;       /* NULL: host image */
    double cpu;                  /* 0: 1.0 */
    uint64_t memory, disk, pids; /* 0: 512Mi, 256Mi, 256 */
    const char *extra_env;       /* one more "K=V" for the spec env, or NULL */
    const char *runsc;           /* the gvisor class with this runsc; NULL: native */
} shimdrv_opts;

typedef struct shimdrv {
    char id[64];
    char dir[256];
    char log[300]; /* the shim's stderr */
    pid_t shim_pid;
    int init_pid;
    int sock;
    uint64_t seq;
    json_t *events; /* events received while waiting for something else */
    char start_error[600];
    int start_errno;
} shimdrv;

typedef struct shimdrv_result {
    int exit_code, signal;
    char reason[32];
    char message[128]; /* the exit's message ("" for none) */
    char *out, *err;   /* NUL-terminated, malloc'd */
    size_t out_len, err_len;
    uint64_t duration_ms;
    int start_errno; /* set when the exec was refused (error reply) */
    char start_error[512];
} shimdrv_result;

typedef struct shimdrv_exec_opts {
    uint64_t timeout_ms;
    bool shell;
    const char *stdin_data;
    const char *cwd;
    const char *const *env;
    const char *file_name, *file_data; /* exec's "file" (common/shimproto.h), when file_name */
} shimdrv_exec_opts;

/* The cgroup parent for this test process (sbx-shimtest-<pid>), created on first use; its
 * version is in *ret_version. A watchdog process cleans up every sandbox this process started
 * (sbx-shim cleanup), the cgroup parent and the seccomp program once the process is gone,
 * however it ends. */
const char *shimdrv_cgroup_parent(int *ret_version);
/* Path of a raw BPF compiled once from policy/seccomp.json. */
const char *shimdrv_seccomp_bpf(void);
/* Write the spec (spec_json overrides the generated one when not NULL) and start the shim.
 * On a start-up failure returns the negative errno with d->start_error filled. */
int shimdrv_start(shimdrv *d, const shimdrv_opts *o);
int shimdrv_start_spec(shimdrv *d, const char *spec_json);
/* Send a request (seq added) and wait for its reply; events seen meanwhile are queued. */
int shimdrv_request(shimdrv *d, json_t *req, json_t **ret_reply);
typedef struct shimdrv_pending {
    json_t *xid;
    int out, err, pid;
    int start_errno;
    char start_error[512];
} shimdrv_pending;

/* Start argv without waiting for it (several may run at once). */
int shimdrv_exec_start(shimdrv *d, const char *const *argv, const shimdrv_exec_opts *o,
                       shimdrv_pending *pe);
/* Collect the output and exit of a started command. */
int shimdrv_exec_finish(shimdrv *d, shimdrv_pending *pe, shimdrv_result *res);
/* Run argv; fills res (free with shimdrv_result_free). */
int shimdrv_exec(shimdrv *d, const char *const *argv, const shimdrv_exec_opts *o,
                 shimdrv_result *res);
/* Shortcut: run `sh -c cmd`, return its exit code, stdout in res. */
int shimdrv_sh(shimdrv *d, const char *cmd, shimdrv_result *res);
void shimdrv_result_free(shimdrv_result *res);
/* Next event of the given type (queued or newly received), waiting up to timeout_ms. */
int shimdrv_wait_event(shimdrv *d, const char *type, int timeout_ms, json_t **ret);
/* Send shutdown, wait for the shim to exit. Returns the shim's exit status or -errno
 * (-ENOTRECOVERABLE when the shim's log shows a sanitizer error). */
int shimdrv_shutdown(shimdrv *d);
/* Best-effort: shutdown or `sbx-shim cleanup`, whatever is needed. Safe to call twice. */
void shimdrv_destroy(shimdrv *d);
/* runsc's path for a gvisor-class sandbox (the first on the usual PATH); a loud skip when gVisor
 * is not installed (CI counts it as a failure: tests/deps.sh installs it). */
const char *shimdrv_runsc(void);
/* Count mounts in /proc/self/mountinfo whose line contains needle. */
int shimdrv_count_mounts(const char *needle);
/* Run `sh -c cmd` and return its stdout (malloc'd); *ret_code gets the exit code (-1 when the
 * command could not run). */
char *shimdrv_sh_out(shimdrv *d, const char *cmd, int *ret_code);
