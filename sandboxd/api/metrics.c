/* GET /metrics: the core's counters (core/metrics.h), sandbox gauges, egress denials and warm
 * pool entries as Prometheus text (names in docs/API.md). */
#include "sandboxd/api/api.h"

#include "sandboxd/core/gpu.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"

#include <stdio.h>
#include <string.h>

static void histogram(FILE *f, const char *name, const sd_histogram *h) {
    fprintf(f, "# TYPE %s histogram\n", name);
    for (int i = 0; i < SD_HIST_BOUNDS; i++)
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, sd_hist_bounds[i],
                (unsigned long long)h->buckets[i]);
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
            (unsigned long long)h->buckets[SD_HIST_BOUNDS]);
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

static void sandboxes(sd_daemon *d, FILE *f) {
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
            "sandboxd_sandboxes{state=\"starting\"} %u\n"
            "# TYPE sandboxd_uid_slots_quarantined gauge\nsandboxd_uid_slots_quarantined %u\n",
            running, starting, d->n_quarantined); /* core/quarantine.h */
    const sd_metrics *m = &d->m;
    fprintf(f,
            "# TYPE sandboxd_sandbox_creates_total counter\n"
            "sandboxd_sandbox_creates_total{outcome=\"ok\"} %llu\n"
            "sandboxd_sandbox_creates_total{outcome=\"error\"} %llu\n"
            "sandboxd_sandbox_creates_total{outcome=\"full\"} %llu\n",
            (unsigned long long)m->creates[SD_CREATE_OK],
            (unsigned long long)m->creates[SD_CREATE_ERROR],
            (unsigned long long)m->creates[SD_CREATE_FULL]);
    fprintf(f, "# TYPE sandboxd_sandbox_ends_total counter\n");
    for (int i = 0; i < END_REASON_MAX; i++)
        fprintf(f, "sandboxd_sandbox_ends_total{reason=\"%s\"} %llu\n", end_reason_name(i),
                (unsigned long long)m->ends[i]);
    fprintf(f, "# TYPE sandboxd_execs_total counter\n");
    for (int i = 0; i <= SD_EXEC_ERROR; i++)
        fprintf(f, "sandboxd_execs_total{outcome=\"%s\"} %llu\n",
                i == SD_EXEC_ERROR ? "error" : end_reason_name(i), (unsigned long long)m->execs[i]);
    histogram(f, "sandboxd_create_seconds", &m->create_seconds);
    histogram(f, "sandboxd_exec_seconds", &m->exec_seconds);
    fprintf(f, "# TYPE sandboxd_cost_usd_total counter\nsandboxd_cost_usd_total %.9f\n",
            m->cost_total + live_cost);
    fprintf(f, "# TYPE sandboxd_oom_kills_total counter\nsandboxd_oom_kills_total %llu\n",
            (unsigned long long)m->oom_kills);
    fprintf(f, /* GPUs: core/gpu.c */
            "# TYPE sandboxd_gpus gauge\nsandboxd_gpus{state=\"total\"} %u\n"
            "sandboxd_gpus{state=\"free\"} %u\n",
            sd_gpu_total(d), sd_gpu_free(d));
}

static void egress(sd_daemon *d, FILE *f) {
    fprintf(f, "# TYPE sandboxd_egress_denied_total counter\n");
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        uint64_t n = 0;
        if (sd_network_denied(sb, &n) >= 0)
            fprintf(f, "sandboxd_egress_denied_total{sandbox=\"%s\"} %llu\n", sb->id,
                    (unsigned long long)n);
    }
}

static void pools(sd_daemon *d, FILE *f) {
    fprintf(f,
            "# TYPE sandboxd_pool_hits_total counter\nsandboxd_pool_hits_total %llu\n"
            "# TYPE sandboxd_pool_misses_total counter\nsandboxd_pool_misses_total %llu\n"
            "# TYPE sandboxd_pool_evictions_total counter\nsandboxd_pool_evictions_total %llu\n"
            "# TYPE sandboxd_pool_entries gauge\n",
            (unsigned long long)d->m.pool_hits, (unsigned long long)d->m.pool_misses,
            (unsigned long long)d->m.pool_evictions);
    for (unsigned t = 0; t < sd_pool_count(d); t++) { /* configured, then demand templates */
        unsigned ready, starting;
        sd_pool_entries(d, t, &ready, &starting);
        fprintf(f, "sandboxd_pool_entries{pool=\"%u\",state=\"ready\"} %u\n", t, ready);
        fprintf(f, "sandboxd_pool_entries{pool=\"%u\",state=\"starting\"} %u\n", t, starting);
    }
}

char *sd_api_metrics_text(sd_daemon *d) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    sandboxes(d, f);
    egress(d, f);
    pools(d, f);
    fclose(f);
    return buf;
}

void sd_api_metrics(sd_daemon *d, sd_request *req) {
    char *text = sd_api_metrics_text(d);
    if (!text) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    sd_reply_data(req, 200, "text/plain; version=0.0.4", text, strlen(text));
}
