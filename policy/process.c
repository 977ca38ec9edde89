/* Process options, terminal sizes and signal names (see process.h). */
#include "policy/process.h"

#include "common/jsonkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    int signo;
} signals[] = {
    {"HUP", 1},   {"INT", 2},     {"QUIT", 3},  {"ILL", 4},     {"TRAP", 5},  {"ABRT", 6},
    {"BUS", 7},   {"FPE", 8},     {"KILL", 9},  {"USR1", 10},   {"SEGV", 11}, {"USR2", 12},
    {"PIPE", 13}, {"ALRM", 14},   {"TERM", 15}, {"STKFLT", 16}, {"CHLD", 17}, {"CONT", 18},
    {"STOP", 19}, {"TSTP", 20},   {"TTIN", 21}, {"TTOU", 22},   {"URG", 23},  {"XCPU", 24},
    {"XFSZ", 25}, {"VTALRM", 26}, {"PROF", 27}, {"WINCH", 28},  {"IO", 29},   {"PWR", 30},
    {"SYS", 31},
};

int policy_signal_parse(json_t *v, int *ret_signo, error_rec *err) {
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > 64)
            return error_set(err, -EINVAL, "signal: %lld is not a signal number (1..64)",
                             (long long)n);
        *ret_signo = (int)n;
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !*s)
        return error_set(err, -EINVAL, "signal: must be a name like \"INT\" or a number 1..64");
    if (strspn(s, "0123456789") == strlen(s) && strlen(s) <= 2) {
        int n = atoi(s);
        if (n >= 1 && n <= 64) {
            *ret_signo = n;
            return 0;
        }
    }
    const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (strcasecmp(name, signals[i].name) == 0) {
            *ret_signo = signals[i].signo;
            return 0;
        }
    return error_set(err, -EINVAL, "signal: unknown signal \"%.64s\"", s);
}

static int size_field(json_t *o, const char *key, const char *field, unsigned *ret,
                      error_rec *err) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > POLICY_TTY_MAX)
        return error_set(err, -EINVAL, "%s: %s must be an integer in 1..%d", field, key,
                         POLICY_TTY_MAX);
    *ret = (unsigned)json_integer_value(v);
    return 0;
}

int policy_tty_size_parse(json_t *v, const char *field, unsigned *ret_rows, unsigned *ret_cols,
                          error_rec *err) {
    unsigned rows, cols;
    if (!json_is_object(v))
        return error_set(err, -EINVAL, "%s: must be an object {\"rows\": R, \"cols\": C}", field);
    int r = size_field(v, "rows", field, &rows, err);
    if (r < 0 || (r = size_field(v, "cols", field, &cols, err)) < 0)
        return r;
    *ret_rows = rows;
    *ret_cols = cols;
    return 0;
}

static bool term_ok(const char *s) {
    size_t n = strlen(s);
    return n >= 1 && n <= POLICY_TERM_MAX &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") == n;
}

static int bool_field(json_t *body, const char *key, bool *ret, error_rec *err) {
    json_t *v = json_object_get(body, key);
    if (v && !json_is_boolean(v))
        return error_set(err, -EINVAL, "%s: must be true or false", key);
    *ret = json_is_true(v);
    return 0;
}

int policy_process_parse(json_t *body, policy_process *ret, error_rec *err) {
    policy_process p = {.rows = 24, .cols = 80};
    snprintf(p.term, sizeof(p.term), "xterm");
    if (!json_is_object(body))
        return error_set(err, -EINVAL, "body: must be a JSON object");
    int r = bool_field(body, "tty", &p.tty, err);
    if (r < 0 || (r = bool_field(body, "background", &p.background, err)) < 0)
        return r;
    json_t *size = json_object_get(body, "tty_size"), *term = json_object_get(body, "term");
    if ((size || term) && !p.tty)
        return error_set(err, -EINVAL, "%s: only with \"tty\": true", size ? "tty_size" : "term");
    static const char *const size_keys[] = {"rows", "cols", NULL};
    if (size && ((r = jsonkeys_check(size, size_keys, "tty_size", err)) < 0 ||
                 (r = policy_tty_size_parse(size, "tty_size", &p.rows, &p.cols, err)) < 0))
        return r;
    if (term && (!json_is_string(term) || !term_ok(json_string_value(term))))
        return error_set(err, -EINVAL, "term: must be 1..%d characters of [A-Za-z0-9._+-]",
                         POLICY_TERM_MAX);
    if (term)
        snprintf(p.term, sizeof(p.term), "%s", json_string_value(term));
    *ret = p;
    return 0;
}
