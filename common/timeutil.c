/* Clock helpers (see timeutil.h). */
#include "common/timeutil.h"

#include <stdio.h>
#include <time.h>

static uint64_t clock_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t now_mono_us(void) {
    return clock_us(CLOCK_MONOTONIC);
}
uint64_t now_mono_ms(void) {
    return clock_us(CLOCK_MONOTONIC) / 1000u;
}
uint64_t now_real_ms(void) {
    return clock_us(CLOCK_REALTIME) / 1000u;
}

void time_format_rfc3339(uint64_t real_ms, char *buf, size_t len) {
    time_t s = (time_t)(real_ms / 1000u);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    if (n > 0 && n < len)
        snprintf(buf + n, len - n, ".%03uZ", (unsigned)(real_ms % 1000u));
}
