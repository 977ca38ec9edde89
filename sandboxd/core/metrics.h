/* The daemon's counters and histograms (rendered as Prometheus text by api/metrics.c). */
#pragma once

#include "common/end_reason.h"

#include <stdint.h>

#define SD_HIST_BOUNDS 11
extern const double sd_hist_bounds[SD_HIST_BOUNDS];

typedef struct sd_histogram {
    uint64_t buckets[SD_HIST_BOUNDS + 1]; /* cumulative; the last is +Inf */
    uint64_t count;
    double sum;
} sd_histogram;

typedef enum { SD_CREATE_OK, SD_CREATE_ERROR, SD_CREATE_FULL } sd_create_outcome;

typedef struct sd_metrics {
    uint64_t creates[3]; /* by sd_create_outcome */
    uint64_t ends[END_REASON_MAX];
    uint64_t execs[END_OOM_KILLED + 2]; /* by command end reason, then "error" */
    sd_histogram create_seconds, exec_seconds;
    double cost_total;
    uint64_t oom_kills;
    uint64_t pool_hits, pool_misses, pool_evictions; /* written by core/pool.c */
} sd_metrics;

#define SD_EXEC_ERROR (END_OOM_KILLED + 1)

void sd_metrics_end(sd_metrics *m, end_reason reason, double cost);
/* outcome: a command end reason (END_EXITED..END_OOM_KILLED) or SD_EXEC_ERROR. */
void sd_metrics_exec(sd_metrics *m, int outcome, double seconds);
void sd_metrics_create(sd_metrics *m, sd_create_outcome outcome, double seconds);
/* The shim reported oom_kills (a running total); counts what is new since old. */
void sd_metrics_oom(sd_metrics *m, uint64_t old, uint64_t now);
