/* The one error record: a negative errno plus a human message. It crosses process boundaries
 * (shim -> daemon -> API client) unchanged, like crun's libcrun_error. */
#pragma once

#include "common/macro.h"

#define ERROR_MSG_MAX 512

typedef struct error_rec {
    int code; /* negative errno, 0 when unset */
    char message[ERROR_MSG_MAX];
} error_rec;

/* Record an error and return `code` (a negative errno) so callers can `return error_set(...)`.
 * `err` may be NULL. The message is formatted; when errno_suffix is wanted use error_setf_errno. */
int error_set(error_rec *err, int code, const char *fmt, ...) _printf_(3, 4);
/* Like error_set, appending ": <strerror(-code)>". */
int error_set_errno(error_rec *err, int code, const char *fmt, ...) _printf_(3, 4);
/* Prefix an existing message with more context ("step mount: ..."). Returns err->code. */
int error_prefix(error_rec *err, const char *fmt, ...) _printf_(2, 3);
void error_clear(error_rec *err);
