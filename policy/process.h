/* Process options as data: the tty/background fields of an exec body, terminal sizes and signal
 * names (docs/API.md "Processes and attach"). Pure parsing, no side effects. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>

#define POLICY_TTY_MAX 1000 /* rows and cols, each */
#define POLICY_TERM_MAX 64

typedef struct policy_process {
    bool tty, background;
    unsigned rows, cols; /* tty only; default 24x80 */
    char term[POLICY_TERM_MAX + 1];
} policy_process;

/* The optional "tty", "tty_size", "term" and "background" fields of an exec body. */
int policy_process_parse(json_t *body, policy_process *ret, error_rec *err);
/* {"rows": R, "cols": C} in 1..POLICY_TTY_MAX each. */
int policy_tty_size_parse(json_t *v, const char *field, unsigned *ret_rows, unsigned *ret_cols,
                          error_rec *err);
/* "INT", "SIGINT", "int" or a number 1..64 (JSON string or integer). */
int policy_signal_parse(json_t *v, int *ret_signo, error_rec *err);
