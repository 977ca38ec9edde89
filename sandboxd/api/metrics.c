/* Prometheus metrics: counters and histograms kept in sd_metrics, rendered as text on
 * GET /metrics (names in docs/API.md). */
#include "sandboxd/daemon.h"
#include "sandboxd/net/daemon.h"

#include <stdio.h>
#include <string.h>

static const char *const end_reasons[9] = {"exited",     "signaled",     "command_timeout",
                                           "oom_killed", "idle_timeout", "lifetime_exceeded",
                                           "cost_limit", "terminated",   "infrastructure_failure"};
static const char *const exec_outcomes[5] = {"exited", "signaled", "command_timeout", "oom_killed",
                                             "error"};
static const double bounds[11] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

static int index_of(const char *const *names, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

static void observe(uint64_t *buckets, uint64_t *count, double *sum, double v) {
    for (int i = 0; i < 11; i++)
        if (v <= bounds[i])
            buckets[i]++;
    buckets[11]++;
    (*count)++;
    *sum += v;
}

void sd_metrics_end(sd_daemon *d, const char *reason, double cost) {
    int i = index_of(end_reasons, 9, reason);
    if (i >= 0)
        d->m.ends[i]++;
    d->m.cost_total += cost;
}

void sd_metrics_exec(sd_daemon *d, const char *outcome, double seconds) {
    int i = index_of(exec_outcomes, 5, outcome);
    d->m.execs[i >= 0 ? i : 4]++;
    if (i >= 0 && i < 4)
        observe(d->m.exec_buckets, &d->m.exec_count, &d->m.exec_sum, seconds);
}

void sd_metrics_create(sd_daemon *d, const char *outcome, double seconds) {
    if (strcmp(outcome, "ok") == 0) {
        d->m.creates_ok++;
        observe(d->m.create_buckets, &d->m.create_count, &d->m.create_sum, seconds);
    } else if (strcmp(outcome, "full") == 0) {
        d->m.creates_full++;
    } else {
        d->m.creates_error++;
    }
}

static void histogram(FILE *f, const char *name, const uint64_t *b, uint64_t count, double sum) {
    fprintf(f, "# TYPE %s histogram\n", name);
    for (int i = 0; i < 11; i++)
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)b[i]);
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)b[11]);
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, (unsigned long long)count);
}

char *sd_metrics_render(sd_daemon *d) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    unsigned running = 0, starting = 0;
    double live_cost = 0;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        if (sb->pool)
            continue; /* warm pool entries: sandboxd_pool_entries */
        running += sb->state == SD_RUNNING;
        starting += sb->state == SD_STARTING;
        if (sb->state != SD_ENDED)
            live_cost += sd_sandbox_cost(sb);
    }
    fprintf(f,
            "# TYPE sandboxd_sandboxes gauge\nsandboxd_sandboxes{state=\"running\"} %u\n"
            "sandboxd_sandboxes{state=\"starting\"} %u\n",
            running, starting);
    fprintf(f,
            "# TYPE sandboxd_sandbox_creates_total counter\n"
            "sandboxd_sandbox_creates_total{outcome=\"ok\"} %llu\n"
            "sandboxd_sandbox_creates_total{outcome=\"error\"} %llu\n"
            "sandboxd_sandbox_creates_total{outcome=\"full\"} %llu\n",
            (unsigned long long)d->m.creates_ok, (unsigned long long)d->m.creates_error,
            (unsigned long long)d->m.creates_full);
    fprintf(f, "# TYPE sandboxd_sandbox_ends_total counter\n");
    for (int i = 0; i < 9; i++)
        fprintf(f, "sandboxd_sandbox_ends_total{reason=\"%s\"} %llu\n", end_reasons[i],
                (unsigned long long)d->m.ends[i]);
    fprintf(f, "# TYPE sandboxd_execs_total counter\n");
    for (int i = 0; i < 5; i++)
        fprintf(f, "sandboxd_execs_total{outcome=\"%s\"} %llu\n", exec_outcomes[i],
                (unsigned long long)d->m.execs[i]);
    histogram(f, "sandboxd_create_seconds", d->m.create_buckets, d->m.create_count,
              d->m.create_sum);
    histogram(f, "sandboxd_exec_seconds", d->m.exec_buckets, d->m.exec_count, d->m.exec_sum);
    fprintf(f, "# TYPE sandboxd_cost_usd_total counter\nsandboxd_cost_usd_total %.9f\n",
            d->m.cost_total + live_cost);
    fprintf(f, "# TYPE sandboxd_oom_kills_total counter\nsandboxd_oom_kills_total %llu\n",
            (unsigned long long)d->m.oom_kills);
    sd_net_daemon_metrics(d, f);
    sd_pool_metrics(d, f);
    fclose(f);
    return buf;
}
