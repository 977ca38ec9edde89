/* The error record: formatting helpers for error_rec. */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int error_vset(error_rec *err, int code, int with_errno, const char *fmt, va_list ap) {
    if (!err)
        return code;
    err->code = code;
    int n = vsnprintf(err->message, sizeof(err->message), fmt, ap);
    if (with_errno && n >= 0 && (size_t)n < sizeof(err->message))
        snprintf(err->message + n, sizeof(err->message) - (size_t)n, ": %s", strerror(-code));
    return code;
}

int error_set(error_rec *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

int error_set_errno(error_rec *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, 1, fmt, ap);
    va_end(ap);
    return code;
}

int error_prefix(error_rec *err, const char *fmt, ...) {
    if (!err)
        return -EIO;
    char prefix[ERROR_MSG_MAX], old[ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof(old));
    snprintf(err->message, sizeof(err->message), "%s: %s", prefix, old);
    return err->code;
}

void error_clear(error_rec *err) {
    if (err) {
        err->code = 0;
        err->message[0] = '\0';
    }
}
