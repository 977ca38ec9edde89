/* Structured logging for the edges (daemon and shim mains, request handlers). Libraries never log:
 * they return an error_rec and the edge logs it once. Lines are logfmt: `level=info msg="..." k=v`.
 */
#pragma once

#include "common/macro.h"

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

void log_setup(const char *component, enum log_level min_level);
/* Parse "debug"/"info"/"warn"/"error"; returns -EINVAL on anything else. */
int log_level_from_string(const char *s, enum log_level *ret);
/* `fmt` formats the free-form tail: the message followed by optional ` key=value` pairs. */
void log_emit(enum log_level level, const char *fmt, ...) _printf_(2, 3);

#define log_debug(...) log_emit(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_emit(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_emit(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_emit(LOG_LEVEL_ERROR, __VA_ARGS__)
