/* logfmt lines on stderr; timestamps omitted under systemd, whose journal adds its own. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *log_component = "sandboxd";
static enum log_level log_min = LOG_LEVEL_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_setup(const char *component, enum log_level min_level) {
    log_component = component;
    log_min = min_level;
}

int log_level_from_string(const char *s, enum log_level *ret) {
    for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
        if (s && strcmp(s, level_names[i]) == 0) {
            *ret = (enum log_level)i;
            return 0;
        }
    return -EINVAL;
}

void log_emit(enum log_level level, const char *fmt, ...) {
    if (level < log_min)
        return;
    char line[2048];
    size_t n = 0;
    if (!getenv("JOURNAL_STREAM")) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n += strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ ", ts.tv_nsec / 1000000);
    }
    n += (size_t)snprintf(line + n, sizeof(line) - n,
                          "level=%s component=%s msg=", level_names[level], log_component);
    va_list ap;
    va_start(ap, fmt);
    if (n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
