/* bench/stats.h: the timing and statistics shared by bench's C helpers (lat.c, attach_rtt.c):
 * a monotonic clock in milliseconds and one JSON line of nearest-rank percentiles per
 * measurement ({"name","n","p50_ms","p99_ms","min_ms","mean_ms","max_ms"}). Header-only: each
 * helper is built by its own script with one cc command. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples. */
static inline double pct(const double *s, size_t n, double p) {
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    rank = rank < 1 ? 1 : rank > n ? n : rank;
    return s[rank - 1];
}

/* Sorts the n samples and prints their line. */
static inline void report(const char *name, double *s, size_t n) {
    double sum = 0;
    if (n == 0) {
        printf("{\"name\":\"%s\",\"n\":0}\n", name);
        return;
    }
    qsort(s, n, sizeof(*s), cmp_double);
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    printf("{\"name\":\"%s\",\"n\":%zu,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"min_ms\":%.3f,"
           "\"mean_ms\":%.3f,\"max_ms\":%.3f}\n",
           name, n, pct(s, n, 50), pct(s, n, 99), s[0], sum / (double)n, s[n - 1]);
    fflush(stdout);
}
