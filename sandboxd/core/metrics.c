/* The daemon's counters and histograms (core/metrics.h). */
#include "sandboxd/core/metrics.h"

#include <stdbool.h>

const double sd_hist_bounds[SD_HIST_BOUNDS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,    2.5,   5,    10};

static void observe(sd_histogram *h, double v) {
    for (int i = 0; i < SD_HIST_BOUNDS; i++)
        if (v <= sd_hist_bounds[i])
            h->buckets[i]++;
    h->buckets[SD_HIST_BOUNDS]++;
    h->count++;
    h->sum += v;
}

void sd_metrics_end(sd_metrics *m, end_reason reason, double cost) {
    if ((unsigned)reason < END_REASON_MAX)
        m->ends[reason]++;
    m->cost_total += cost;
}

void sd_metrics_exec(sd_metrics *m, int outcome, double seconds) {
    bool ok = outcome >= END_EXITED && outcome <= END_OOM_KILLED;
    m->execs[ok ? outcome : SD_EXEC_ERROR]++;
    if (ok)
        observe(&m->exec_seconds, seconds);
}

void sd_metrics_create(sd_metrics *m, sd_create_outcome outcome, double seconds) {
    m->creates[outcome]++;
    if (outcome == SD_CREATE_OK)
        observe(&m->create_seconds, seconds);
}

void sd_metrics_oom(sd_metrics *m, uint64_t old, uint64_t now) {
    if (now > old)
        m->oom_kills += now - old;
}
