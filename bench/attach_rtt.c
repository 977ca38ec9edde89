/* bench/attach_rtt.c: the round trip of an attached command (write a line to its stdin, read
 * its echo) for bench/attach.sh, as JSON lines like bench/lat.c's ({"name","n","p50_ms",...}).
 *
 *   attach_rtt pipe NAME N ARGV...     ARGV (e.g. cat, `sbx exec -i ID -- cat`, `docker exec -i
 *                                      C cat`) on local pipes: N lines written, each echo read
 *   attach_rtt sbx  NAME N HOST ID     libsbx's sbx_process (WebSocket) running `cat` in
 *                                      sandbox ID
 *
 * Built by bench/attach.sh against build/libsbx.a with the public header only. */
#define _GNU_SOURCE
#include <sbx.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

/* ---- pipes ---- */
static int run_pipe(const char *name, size_t n, char **argv) {
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0)
        return perror("pipe"), 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    double *s = calloc(n, sizeof(*s));
    char line[64], buf[4096];
    size_t got = 0;
    /* i == -1: an unrecorded warm-up line, which also waits out ARGV's start (e.g. the exec of
     * `docker exec -i`), as bench/lat.c's loops do */
    for (long i = -1; i < (long)n; i++) {
        int len = snprintf(line, sizeof(line), "ping %ld\n", i);
        double t0 = now_ms();
        if (write(in[1], line, (size_t)len) != len)
            return perror("write"), 1;
        got = 0;
        while (got == 0 || buf[got - 1] != '\n') {
            ssize_t r = read(out[0], buf + got, sizeof(buf) - got);
            if (r <= 0)
                return fprintf(stderr, "%s: the command ended\n", name), 1;
            got += (size_t)r;
        }
        if (i >= 0)
            s[i] = now_ms() - t0;
    }
    close(in[1]);
    waitpid(pid, NULL, 0);
    report(name, s, n);
    free(s);
    return 0;
}

/* ---- libsbx ---- */
typedef struct echo {
    char buf[4096];
    size_t len;
} echo;

static void on_output(void *ud, enum sbx_stream st, const char *d, size_t n) {
    (void)st;
    echo *e = ud;
    if (e->len + n < sizeof(e->buf)) {
        memcpy(e->buf + e->len, d, n);
        e->len += n;
    }
}

static int run_sbx(const char *name, size_t n, const char *host, const char *id) {
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_process *p = NULL;
    sbx_err err = {0};
    echo e = {0};
    static const char *const argv[] = {"cat", NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = argv;
    o.on_output = on_output;
    o.userdata = &e;
    if (sbx_client_new(host, &c, &err) != SBX_OK || sbx_sandbox_open(c, id, &sb, &err) != SBX_OK ||
        sbx_process_start(sb, &o, NULL, &p, &err) != SBX_OK)
        return fprintf(stderr, "%s: %s\n", name, err.message), 1;
    double *s = calloc(n, sizeof(*s));
    char line[64];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(line, sizeof(line), "ping %zu\n", i);
        e.len = 0;
        double t0 = now_ms();
        sbx_process_write(p, line, (size_t)len, &err);
        while (e.len == 0 || e.buf[e.len - 1] != '\n') {
            struct pollfd pf = {.fd = sbx_process_fd(p), .events = sbx_process_poll_events(p)};
            poll(&pf, 1, -1);
            if (sbx_process_dispatch(p, &err) != SBX_OK || sbx_process_done(p))
                return fprintf(stderr, "%s: %s\n", name, err.message), 1;
        }
        s[i] = now_ms() - t0;
    }
    sbx_exec_result r;
    sbx_process_close_stdin(p, &err);
    sbx_process_wait(p, &r, &err);
    sbx_process_free(p);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    report(name, s, n);
    free(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "pipe") == 0)
        return run_pipe(argv[2], strtoul(argv[3], NULL, 10), argv + 4);
    if (argc == 6 && strcmp(argv[1], "sbx") == 0)
        return run_sbx(argv[2], strtoul(argv[3], NULL, 10), argv[4], argv[5]);
    fprintf(stderr, "usage: attach_rtt pipe NAME N ARGV... | sbx NAME N HOST ID\n");
    return 2;
}
