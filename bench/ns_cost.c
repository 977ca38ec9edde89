/* bench/ns_cost.c: what a fresh process with new namespaces costs this machine, the part of a
 * sandbox's start and end that no design of a fresh sandbox per request avoids (docs/
 * BENCHMARKS.md, "/run_code throughput beside bubblewrap and crun").
 *
 *   cc -O2 -o /tmp/ns_cost bench/ns_cost.c && /tmp/ns_cost [N] [ROUNDS]
 *
 * A forked child calls unshare(2) with one namespace (or all six that a sandbox's init makes
 * besides pid, which only takes effect for a child and is not measured) and exits; the parent
 * waits. Also: a cgroup v1 directory in each of the memory, pids, cpu and cpuacct hierarchies (a
 * co-mounted "cpu,cpuacct" once) made at the hierarchy's root, given a memory and a pids limit,
 * and removed, with no process moved into it (a sandbox makes five, under a parent, and moves its
 * init). Each row runs N (300) times per round, ROUNDS (3) rounds alternating the rows; prints,
 * as Markdown, the median over rounds of the machine's busy CPU per start (all CPUs, from
 * /proc/stat, in clock ticks: one tick over N steps is the resolution; the kworkers' later
 * cleanup included: each batch waits a second after it) and of the wall time. Run it on a quiet
 * machine: any other work counts. Needs root. SIGINT and SIGTERM end it after the current step,
 * with nothing left behind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 15
#define ALL_SIX                                                                                    \
    (CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

static const struct row {
    const char *name;
    int flags; /* -1: the cgroup step */
} rows[] = {
    {"fork and exit", 0},
    {"+ user namespace", CLONE_NEWUSER},
    {"+ network namespace", CLONE_NEWNET},
    {"+ mount namespace", CLONE_NEWNS},
    {"+ IPC namespace", CLONE_NEWIPC},
    {"+ UTS namespace", CLONE_NEWUTS},
    {"+ cgroup namespace", CLONE_NEWCGROUP},
    {"+ all six", ALL_SIX},
    {"v1 cgroups (memory, pids, cpu, cpuacct): mkdir, 2 limits, rmdir", -1},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))
static const char *const controllers[] = {"memory", "pids", "cpu", "cpuacct"};
static char hier[4][256]; /* each controller's hierarchy, resolved: co-mounted ones once */
static int n_hier;
static volatile sig_atomic_t stop; /* SIGINT, SIGTERM: end after the current step */

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static long long busy_ticks(void) { /* all CPUs: user..steal, less idle and iowait */
    long long v[8] = {0}, sum = 0;
    FILE *f = fopen("/proc/stat", "re");
    if (!f || fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]) != 8) {
        perror("ns_cost: /proc/stat");
        exit(1);
    }
    fclose(f);
    for (int i = 0; i < 8; i++) /* guest time is inside user and nice already */
        sum += v[i];
    return sum - v[3] - v[4];
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void fork_unshare(int flags) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(flags && unshare(flags) < 0 ? 1 : 0);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || st != 0) {
        fprintf(stderr, "ns_cost: fork or unshare(%#x) failed\n", (unsigned)flags);
        exit(1);
    }
}

/* The v1 hierarchies of memory, pids, cpu and cpuacct, each once (cpu and cpuacct are often one
 * "cpu,cpuacct" mount that both names link to): false unless all four exist. */
static bool find_hierarchies(void) {
    for (size_t c = 0; c < 4; c++) {
        char p[64], real[PATH_MAX];
        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s", controllers[c]);
        struct statfs sf;
        if (!realpath(p, real) || strlen(real) >= sizeof(hier[0]) || statfs(real, &sf) < 0 ||
            sf.f_type != CGROUP_SUPER_MAGIC)
            return false;
        bool dup = false;
        for (int h = 0; h < n_hier; h++)
            dup = dup || strcmp(hier[h], real) == 0;
        if (!dup)
            snprintf(hier[n_hier++], sizeof(hier[0]), "%s", real);
    }
    return true;
}

static int put(const char *dir, const char *file, const char *value) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC), r = 0;
    if (fd < 0 || write(fd, value, strlen(value)) < 0)
        r = -1, perror(p);
    if (fd >= 0)
        close(fd);
    return r;
}

/* mkdir in each hierarchy, the memory and pids limits, rmdir: no process is moved. Whatever it
 * made is removed before it fails. */
static void cgroup_step(int i) {
    char d[4][sizeof(hier) + 64]; /* sizeof(hier): what the compiler can bound */
    int made = 0, r = 0;
    for (; made < n_hier; made++) {
        snprintf(d[made], sizeof(d[made]), "%s/ns-cost-%d-%d", hier[made], (int)getpid(), i);
        if (mkdir(d[made], 0755) < 0) {
            r = -1, perror(d[made]);
            break;
        }
    }
    for (int h = 0; r == 0 && h < n_hier; h++) {
        if (strstr(hier[h], "memory"))
            r = put(d[h], "memory.limit_in_bytes", "2147483648");
        else if (strstr(hier[h], "pids"))
            r = put(d[h], "pids.max", "256");
    }
    for (int h = 0; h < made; h++)
        if (rmdir(d[h]) < 0)
            r = -1, perror(d[h]);
    if (r < 0)
        exit(1);
}

/* One batch: machine CPU ms and wall ms per step into ret_cpu, ret_wall. */
static void batch(const struct row *r, int n, double *ret_cpu, double *ret_wall) {
    usleep(500 * 1000);
    long long c0 = busy_ticks();
    double w0 = now_ms();
    for (int i = 0; i < n && !stop; i++)
        r->flags < 0 ? cgroup_step(i) : fork_unshare(r->flags);
    double wall = now_ms() - w0;
    sleep(1);
    *ret_cpu = (double)(busy_ticks() - c0) * 1e3 / (double)sysconf(_SC_CLK_TCK) / n;
    *ret_wall = wall / n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 300, rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 1 || rounds < 1 || rounds > MAX_ROUNDS)
        return fprintf(stderr, "usage: ns_cost [N] [ROUNDS 1..%d]\n", MAX_ROUNDS), 2;
    bool v1 = find_hierarchies();
    if (!v1)
        fprintf(stderr, "!!! ns_cost: no cgroup v1 memory, pids, cpu and cpuacct hierarchies "
                        "here: the cgroup row is SKIPPED\n");
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    static double cpu[NROWS][MAX_ROUNDS], wall[NROWS][MAX_ROUNDS];
    for (int k = 0; k < rounds; k++)
        for (size_t i = 0; i < NROWS; i++)
            if (rows[i].flags >= 0 || v1)
                batch(&rows[i], n, &cpu[i][k], &wall[i][k]);
    if (stop)
        return fprintf(stderr, "ns_cost: interrupted\n"), 130;
    printf("| what (%d each, median of %d rounds) | machine CPU ms | wall ms | CPU over the fork's "
           "|\n",
           n, rounds);
    printf("|---|---|---|---|\n");
    double base = median(cpu[0], rounds);
    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].flags < 0 && !v1)
            continue;
        double c = median(cpu[i], rounds), w = median(wall[i], rounds);
        if (rows[i].flags > 0)
            printf("| %s | %.3f | %.3f | %+.3f |\n", rows[i].name, c, w, c - base);
        else
            printf("| %s | %.3f | %.3f | |\n", rows[i].name, c, w);
    }
    return 0;
}
