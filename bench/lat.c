/* bench/lat.c: the timing helper behind bench/run.sh. Measures with clock_gettime(MONOTONIC)
 * and prints one JSON object per measurement ({"name","n","p50_ms","p99_ms",...}) on stdout.
 *
 *   lat stats   NAME                       the same statistics of numbers (ms) read from stdin
 *   lat spawn   NAME N ARGV...             fork + exec + wait of ARGV, N times ("{i}" in an
 *                                          argument becomes "<pid>-<iteration>")
 *   lat cycle   NAME N SOCK BODY [-- PEER]  POST /v1/sandboxes BODY, POST exec of `true`, DELETE
 *                                          (LAT_GAP_MS=G: G ms of rest after the peer's run and
 *                                          after each cycle, so that neither runs beside what
 *                                          the other left running: a spare's refill, a teardown)
 *   lat exec    NAME N SOCK [-- PEER]      one sandbox, N round trips of POST exec `true`
 *                                          (with "-- PEER ARGV...", one timed run of the peer
 *                                          before each iteration, reported as NAME.peer: both
 *                                          see the same machine load)
 *   lat burst   NAME ROUNDS K SOCK BODY    K creates at once (one connection each), until all
 *                                          answered 201; then deletes them, 32 at a time
 *   lat idle    NAME K SOCK DAEMON_PID SHIM_PATH CGROUP_PARENT BODY
 *                                          up to K idle sandboxes (created with BODY): PSS of
 *                                          their processes, kernel memory of their cgroups,
 *                                          daemon RSS
 *
 * Built by bench/run.sh with `cc ... $(pkg-config --cflags --libs libcurl jansson)`; not part of
 * the Makefile's programs. Errors go to stderr and make the exit status 1. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

#define BURST_MAX 4096

/* ---- spawn: fork + exec + wait ---- */

static int spawn_once(char **argv, int iter) {
    static char bufs[256][256];
    char *args[256];
    int n = 0, status;
    for (; argv[n] && n < 255; n++) {
        args[n] = argv[n];
        char *at = strstr(argv[n], "{i}");
        if (at) {
            snprintf(bufs[n], sizeof(bufs[n]), "%.*s%d-%d%s", (int)(at - argv[n]), argv[n],
                     (int)getpid(), iter, at + 3);
            args[n] = bufs[n];
        }
    }
    args[n] = NULL;
    static int devnull = -1; /* the program's stdout must not mix into lat's JSON lines */
    if (devnull < 0 && (devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        dup2(devnull, STDOUT_FILENO);
        execvp(args[0], args);
        _exit(127);
    }
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

static int cmd_spawn(const char *name, int n, char **argv) {
    double *s = calloc((size_t)n, sizeof(*s));
    if (!s || spawn_once(argv, -1) < 0) { /* one warm-up run, which must succeed */
        fprintf(stderr, "lat: %s: warm-up run of %s failed\n", name, argv[0]);
        free(s);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        double t0 = now_ms();
        if (spawn_once(argv, i) < 0) {
            fprintf(stderr, "lat: %s: run %d of %s failed\n", name, i, argv[0]);
            free(s);
            return 1;
        }
        s[i] = now_ms() - t0;
    }
    report(name, s, (size_t)n);
    free(s);
    return 0;
}

/* Statistics of samples (ms) read from stdin, one per line: for tests and other timers. */
static int cmd_stats(const char *name) {
    size_t n = 0, cap = 64;
    double v, *s = malloc(cap * sizeof(*s));
    while (s && scanf("%lf", &v) == 1) {
        if (n == cap) {
            double *t = realloc(s, (cap *= 2) * sizeof(*s));
            if (!t)
                break;
            s = t;
        }
        s[n++] = v;
    }
    if (!s)
        return 1;
    report(name, s, n);
    free(s);
    return 0;
}

/* ---- HTTP over the daemon's Unix socket (libcurl; one handle keeps its connection) ---- */

struct buf {
    char *data;
    size_t len;
};

static size_t buf_write(char *p, size_t sz, size_t nm, void *ud) {
    struct buf *b = ud;
    size_t add = sz * nm;
    char *d = realloc(b->data, b->len + add + 1);
    if (!d)
        return 0;
    memcpy(d + b->len, p, add);
    b->len += add;
    d[b->len] = '\0';
    b->data = d;
    return add;
}

static struct curl_slist *json_headers(void) {
    static struct curl_slist *h;
    if (!h) {
        h = curl_slist_append(NULL, "Content-Type: application/json");
        h = curl_slist_append(h, "Expect:");
    }
    return h;
}

static void req_setup(CURL *h, const char *sock, const char *method, const char *path,
                      const char *body, struct buf *out) {
    char url[512];
    snprintf(url, sizeof(url), "http://localhost%s", path);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, json_headers());
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

/* One request; returns the HTTP status (or -1) and leaves the body in *out. */
static long req(CURL *h, const char *sock, const char *method, const char *path, const char *body,
                struct buf *out) {
    long status = -1;
    out->len = 0;
    if (out->data)
        out->data[0] = '\0';
    req_setup(h, sock, method, path, body, out);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "lat: %s %s: %s\n", method, path, curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* The "id" of a sandbox object, copied into id (>= 128 bytes). */
static int parse_id(const char *body, char *id, size_t len) {
    json_t *j = json_loads(body ? body : "", 0, NULL);
    const char *s = j ? json_string_value(json_object_get(j, "id")) : NULL;
    int r = s && strlen(s) < len ? 0 : -EPROTO;
    if (r == 0)
        strcpy(id, s);
    json_decref(j);
    return r;
}

static int sb_create(CURL *h, const char *sock, const char *body, char *id, struct buf *b) {
    long st = req(h, sock, "POST", "/v1/sandboxes", body, b);
    if (st != 201 || parse_id(b->data, id, 128) < 0) {
        fprintf(stderr, "lat: create: HTTP %ld: %s\n", st, b->data ? b->data : "");
        return -1;
    }
    return 0;
}

static int sb_exec_true(CURL *h, const char *sock, const char *id, struct buf *b) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
    long st = req(h, sock, "POST", path, "{\"argv\":[\"true\"]}", b);
    if (st != 200 || !b->data || !strstr(b->data, "\"exit_code\":0")) {
        fprintf(stderr, "lat: exec: HTTP %ld: %s\n", st, b->data ? b->data : "");
        return -1;
    }
    return 0;
}

static int sb_delete(CURL *h, const char *sock, const char *id, struct buf *b) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    long st = req(h, sock, "DELETE", path, NULL, b);
    if (st != 204) {
        fprintf(stderr, "lat: delete %s: HTTP %ld\n", id, st);
        return -1;
    }
    return 0;
}

/* One timed run of the interleaved peer (argv NULL: none) into *slot. */
static int peer_once(char **peer, int i, double *slot) {
    if (!peer)
        return 0;
    double t0 = now_ms();
    if (spawn_once(peer, i) < 0) {
        fprintf(stderr, "lat: interleaved peer %s failed\n", peer[0]);
        return -1;
    }
    if (i >= 0)
        *slot = now_ms() - t0;
    return 0;
}

static void report_peer(const char *name, char **peer, double *s, size_t n) {
    char nm[256];
    if (!peer)
        return;
    snprintf(nm, sizeof(nm), "%s.peer", name);
    report(nm, s, n);
}

/* LAT_GAP_MS of rest (none when unset). */
static void gap(void) {
    const char *g = getenv("LAT_GAP_MS");
    long ms = g ? strtol(g, NULL, 10) : 0;
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

static int cmd_cycle(const char *name, int n, const char *sock, const char *body, char **peer) {
    double *s[5];
    char id[128], nm[256];
    struct buf b = {0};
    int ret = 1;
    CURL *h = curl_easy_init();
    for (int k = 0; k < 5; k++)
        s[k] = calloc((size_t)n + 1, sizeof(double));
    for (int i = -1; i < n; i++) { /* i == -1: warm-up, not recorded */
        if (peer_once(peer, i, &s[4][i < 0 ? 0 : i]) < 0)
            goto out;
        if (peer)
            gap();
        double t0 = now_ms(), t1, t2, t3;
        if (sb_create(h, sock, body, id, &b) < 0)
            goto out;
        t1 = now_ms();
        if (sb_exec_true(h, sock, id, &b) < 0)
            goto out;
        t2 = now_ms();
        if (sb_delete(h, sock, id, &b) < 0)
            goto out;
        t3 = now_ms();
        if (i >= 0) {
            s[0][i] = t3 - t0, s[1][i] = t1 - t0, s[2][i] = t2 - t1, s[3][i] = t3 - t2;
        }
        gap();
    }
    report(name, s[0], (size_t)n);
    const char *parts[] = {NULL, "create", "exec", "delete"};
    for (int k = 1; k < 4; k++) {
        snprintf(nm, sizeof(nm), "%s.%s", name, parts[k]);
        report(nm, s[k], (size_t)n);
    }
    report_peer(name, peer, s[4], (size_t)n);
    ret = 0;
out:
    for (int k = 0; k < 5; k++)
        free(s[k]);
    free(b.data);
    curl_easy_cleanup(h);
    return ret;
}

static int cmd_exec(const char *name, int n, const char *sock, char **peer) {
    char id[128];
    struct buf b = {0};
    double *s = calloc((size_t)n, sizeof(*s)), *ps = calloc((size_t)n + 1, sizeof(*ps));
    int ret = 1;
    CURL *h = curl_easy_init();
    if (sb_create(h, sock, "{}", id, &b) < 0)
        goto out;
    for (int i = -3; i < n; i++) { /* three warm-up round trips */
        if (peer_once(peer, i, &ps[i < 0 ? 0 : i]) < 0)
            goto del;
        double t0 = now_ms();
        if (sb_exec_true(h, sock, id, &b) < 0)
            goto del;
        if (i >= 0)
            s[i] = now_ms() - t0;
    }
    report(name, s, (size_t)n);
    report_peer(name, peer, ps, (size_t)n);
    ret = 0;
del:
    if (sb_delete(h, sock, id, &b) < 0)
        ret = 1;
out:
    free(s);
    free(ps);
    free(b.data);
    curl_easy_cleanup(h);
    return ret;
}

/* ---- many requests at once: one easy handle (own connection) per request ---- */

struct par {
    CURL *h;
    struct buf b;
    long status;
    double done_ms;
    char id[128];
};

/* Runs k requests in parallel; bodies[i] / paths[i]; fills p[i].status and p[i].done_ms. */
static int run_parallel(struct par *p, int k, const char *sock, const char *method,
                        char paths[][256], const char *body) {
    CURLM *m = curl_multi_init();
    int running = 0;
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    for (int i = 0; i < k; i++) {
        p[i].h = curl_easy_init();
        p[i].b.len = 0;
        p[i].status = -1;
        req_setup(p[i].h, sock, method, paths[i], body, &p[i].b);
        curl_easy_setopt(p[i].h, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(p[i].h, CURLOPT_PRIVATE, &p[i]);
        curl_multi_add_handle(m, p[i].h);
    }
    do {
        CURLMsg *msg;
        int left;
        curl_multi_perform(m, &running);
        while ((msg = curl_multi_info_read(m, &left))) {
            struct par *q;
            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            q->done_ms = now_ms();
            if (msg->data.result == CURLE_OK)
                curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &q->status);
        }
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    } while (running);
    for (int i = 0; i < k; i++) {
        curl_multi_remove_handle(m, p[i].h);
        curl_easy_cleanup(p[i].h);
    }
    curl_multi_cleanup(m);
    return 0;
}

/* Deletes every sandbox of p[0..k) that has an id, 32 at a time. */
static int delete_all(struct par *p, int k, const char *sock) {
    static char paths[BURST_MAX][256];
    static struct par q[BURST_MAX];
    int bad = 0;
    for (int i = 0; i < k; i += 32) {
        int c = 0;
        for (int j = i; j < k && j < i + 32; j++)
            if (p[j].id[0])
                snprintf(paths[c++], 256, "/v1/sandboxes/%s", p[j].id);
        memset(q, 0, sizeof(q[0]) * (size_t)c);
        run_parallel(q, c, sock, "DELETE", paths, NULL);
        for (int j = 0; j < c; j++) {
            bad += q[j].status != 204;
            free(q[j].b.data);
        }
    }
    if (bad)
        fprintf(stderr, "lat: %d deletes failed\n", bad);
    return bad ? -1 : 0;
}

/* Creates k sandboxes at once; returns how many answered 201 (their ids in p[i].id). */
static int create_parallel(struct par *p, int k, const char *sock, const char *body) {
    static char paths[BURST_MAX][256];
    int ok = 0;
    for (int i = 0; i < k; i++) {
        snprintf(paths[i], 256, "/v1/sandboxes");
        p[i].id[0] = '\0';
    }
    run_parallel(p, k, sock, "POST", paths, body);
    for (int i = 0; i < k; i++) {
        if (p[i].status == 201 && parse_id(p[i].b.data, p[i].id, sizeof(p[i].id)) == 0)
            ok++;
        else if (ok == i) /* report the first failure only */
            fprintf(stderr, "lat: create: HTTP %ld: %s\n", p[i].status,
                    p[i].b.data ? p[i].b.data : "");
    }
    return ok;
}

static int cmd_burst(const char *name, int rounds, int k, const char *sock, const char *body) {
    static struct par p[BURST_MAX];
    double *all = calloc((size_t)rounds, sizeof(double)),
           *del = calloc((size_t)rounds, sizeof(double));
    double *each = calloc((size_t)rounds * (size_t)k, sizeof(double));
    char nm[256];
    int ret = 1;
    for (int r = 0; r < rounds; r++) {
        memset(p, 0, sizeof(p[0]) * (size_t)k);
        double t0 = now_ms(), last = t0;
        int ok = create_parallel(p, k, sock, body);
        for (int i = 0; i < k; i++) {
            last = p[i].done_ms > last ? p[i].done_ms : last;
            each[r * k + i] = p[i].done_ms - t0;
        }
        all[r] = last - t0;
        double t1 = now_ms();
        int d = delete_all(p, k, sock);
        del[r] = now_ms() - t1;
        for (int i = 0; i < k; i++)
            free(p[i].b.data);
        if (ok != k || d < 0) {
            fprintf(stderr, "lat: %s: round %d: %d of %d creates succeeded\n", name, r, ok, k);
            goto out;
        }
    }
    report(name, all, (size_t)rounds);
    snprintf(nm, sizeof(nm), "%s.each", name);
    report(nm, each, (size_t)rounds * (size_t)k);
    snprintf(nm, sizeof(nm), "%s.delete_all", name);
    report(nm, del, (size_t)rounds);
    ret = 0;
out:
    free(all), free(del), free(each);
    return ret;
}

/* ---- idle memory ---- */

static long read_long_field(const char *path, const char *key) {
    char line[256];
    long v = -1;
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0) {
            v = strtol(line + strlen(key), NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static long read_long_file(const char *path) {
    return read_long_field(path, "");
}

/* The v1 memory cgroup directory of the sandboxes: NAME at the root of the memory hierarchy or
 * under the daemon's own memory cgroup. */
static int find_memcg(pid_t daemon, const char *parent, char *out, size_t len) {
    char path[PATH_MAX], line[PATH_MAX];
    snprintf(out, len, "/sys/fs/cgroup/memory/%s", parent);
    if (access(out, F_OK) == 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)daemon);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f)) {
        char *c = strstr(line, ":memory:");
        if (!c)
            continue;
        c[strcspn(c, "\n")] = '\0';
        snprintf(out, len, "/sys/fs/cgroup/memory%s/%s", c + 8, parent);
        fclose(f);
        if (access(out, F_OK) == 0)
            return 0;
        out[0] = '\0';
        return -ENOENT;
    }
    if (f)
        fclose(f);
    out[0] = '\0';
    return -ENOENT;
}

struct proc {
    pid_t pid, ppid;
    bool mark;
};

/* Sum of PSS (kB) of every process that is a shim (by executable), a descendant of the daemon
 * or of a shim; *count gets how many. */
static long sandbox_pss_kb(pid_t daemon, const char *shim_path, int *count) {
    static struct proc ps[65536];
    int n = 0, changed = 1;
    long kb = 0;
    char path[64], exe[PATH_MAX];
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 65536) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == daemon)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        ps[n] = (struct proc){pid, (pid_t)read_long_field(path, "PPid:"), false};
        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        ssize_t l = readlink(path, exe, sizeof(exe) - 1);
        exe[l > 0 ? l : 0] = '\0';
        ps[n].mark = ps[n].ppid == daemon || strcmp(exe, shim_path) == 0;
        n++;
    }
    if (d)
        closedir(d);
    while (changed) { /* propagate to descendants */
        changed = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; !ps[i].mark && j < n; j++)
                if (ps[j].mark && ps[j].pid == ps[i].ppid)
                    ps[i].mark = true, changed = 1;
    }
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (!ps[i].mark)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)ps[i].pid);
        long v = read_long_field(path, "Pss:");
        if (v > 0)
            kb += v, (*count)++;
    }
    return kb;
}

struct memsnap {
    long pss_kb, kmem, usage, daemon_rss_kb;
    int procs;
};

static void snap(struct memsnap *m, pid_t daemon, const char *shim, const char *cg) {
    char path[PATH_MAX + 64];
    m->pss_kb = sandbox_pss_kb(daemon, shim, &m->procs);
    snprintf(path, sizeof(path), "%s/memory.kmem.usage_in_bytes", cg);
    m->kmem = cg[0] ? read_long_file(path) : -1;
    snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", cg);
    m->usage = cg[0] ? read_long_file(path) : -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)daemon);
    m->daemon_rss_kb = read_long_field(path, "VmRSS:");
}

static int cmd_idle(const char *name, int k, const char *sock, pid_t daemon, const char *shim,
                    const char *parent, const char *body) {
    static struct par p[BURST_MAX];
    struct memsnap a = {0}, z = {0};
    char cg[PATH_MAX] = "";
    int made = 0, ret = 1;
    if (k > BURST_MAX)
        k = BURST_MAX;
    find_memcg(daemon, parent, cg, sizeof(cg)); /* may appear only with the first sandbox */
    snap(&a, daemon, shim, cg);
    double t0 = now_ms();
    while (made < k) { /* 16 at a time; stop at the first refusal (node full) */
        int c = k - made < 16 ? k - made : 16;
        int ok = create_parallel(p + made, c, sock, body);
        for (int i = made; i < made + c; i++)
            free(p[i].b.data), p[i].b.data = NULL;
        made += c;
        if (ok < c)
            break;
    }
    double t_create = now_ms() - t0;
    int live = 0;
    for (int i = 0; i < made; i++)
        live += p[i].id[0] != '\0';
    if (!cg[0] && find_memcg(daemon, parent, cg, sizeof(cg)) == 0)
        a.kmem = a.usage = 0; /* the cgroup did not exist before: nothing was charged */
    sleep(2);                 /* let the sandboxes settle into idle */
    snap(&z, daemon, shim, cg);
    double per =
        live ? ((double)(z.pss_kb - a.pss_kb) * 1024.0 + (double)(z.kmem - a.kmem)) / live : 0;
    printf("{\"name\":\"%s\",\"requested\":%d,\"sandboxes\":%d,\"create_all_ms\":%.1f,"
           "\"procs\":%d,\"pss_bytes\":%ld,\"kmem_bytes\":%ld,\"cgroup_usage_bytes\":%ld,"
           "\"per_sandbox_bytes\":%.0f,\"daemon_rss_before_bytes\":%ld,"
           "\"daemon_rss_bytes\":%ld,\"cgroup\":\"%s\"}\n",
           name, k, live, t_create, z.procs - a.procs, (z.pss_kb - a.pss_kb) * 1024,
           cg[0] ? z.kmem - a.kmem : -1, cg[0] ? z.usage - a.usage : -1, per,
           a.daemon_rss_kb * 1024, z.daemon_rss_kb * 1024, cg);
    fflush(stdout);
    ret = live > 0 ? 0 : 1;
    if (delete_all(p, made, sock) < 0)
        ret = 1;
    return ret;
}

static int usage(void) {
    fprintf(stderr,
            "usage: lat stats NAME | spawn NAME N ARGV... | cycle NAME N SOCK BODY [-- PEER...]"
            " | exec NAME N SOCK [-- PEER...] | burst NAME ROUNDS K SOCK BODY"
            " | idle NAME K SOCK PID SHIM CGPARENT BODY\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "stats") == 0)
        return cmd_stats(argv[2]);
    if (argc < 4)
        return usage();
    const char *cmd = argv[1], *name = argv[2];
    int n = atoi(argv[3]);
    if (n <= 0)
        return usage();
    if (strcmp(cmd, "spawn") == 0 && argc >= 5)
        return cmd_spawn(name, n, argv + 4);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (strcmp(cmd, "cycle") == 0 && (argc == 6 || (argc > 7 && strcmp(argv[6], "--") == 0)))
        return cmd_cycle(name, n, argv[4], argv[5], argc > 7 ? argv + 7 : NULL);
    if (strcmp(cmd, "exec") == 0 && (argc == 5 || (argc > 6 && strcmp(argv[5], "--") == 0)))
        return cmd_exec(name, n, argv[4], argc > 6 ? argv + 6 : NULL);
    if (strcmp(cmd, "burst") == 0 && argc == 7 && atoi(argv[4]) > 0 && atoi(argv[4]) <= BURST_MAX)
        return cmd_burst(name, n, atoi(argv[4]), argv[5], argv[6]);
    if (strcmp(cmd, "idle") == 0 && argc == 9)
        return cmd_idle(name, n, argv[4], (pid_t)atoi(argv[5]), argv[6], argv[7], argv[8]);
    return usage();
}
