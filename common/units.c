/* Parsing and printing of sizes and durations (see units.h). */
#include "common/units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int parse_number(const char *s, double *ret, const char **rest) {
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return -EINVAL;
    /* reject hex floats, exponents and nan/inf spellings: users write plain decimals */
    for (const char *p = s; p < end; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return -EINVAL;
    *ret = v;
    *rest = end;
    return 0;
}

int units_parse_size(const char *s, uint64_t *ret_bytes) {
    static const struct {
        const char *suffix;
        double mult;
    } tab[] = {
        {"", 1},
        {"B", 1},
        {"k", 1e3},
        {"K", 1e3},
        {"KB", 1e3},
        {"M", 1e6},
        {"MB", 1e6},
        {"G", 1e9},
        {"GB", 1e9},
        {"T", 1e12},
        {"TB", 1e12},
        {"Ki", 1024.0},
        {"KiB", 1024.0},
        {"Mi", 1048576.0},
        {"MiB", 1048576.0},
        {"Gi", 1073741824.0},
        {"GiB", 1073741824.0},
        {"Ti", 1099511627776.0},
        {"TiB", 1099511627776.0},
    };
    double v;
    const char *rest;
    int r = parse_number(s, &v, &rest);
    if (r < 0)
        return r;
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(rest, tab[i].suffix) == 0) {
            double b = v * tab[i].mult;
            if (b >= 18446744073709551615.0)
                return -ERANGE;
            if (b != floor(b))
                return -EINVAL; /* fractional bytes */
            *ret_bytes = (uint64_t)b;
            return 0;
        }
    return -EINVAL;
}

int units_parse_duration(const char *s, uint64_t *ret_ms) {
    static const struct {
        const char *suffix;
        double ms;
    } tab[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    double v;
    const char *rest;
    int r = parse_number(s, &v, &rest);
    if (r < 0)
        return r;
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(rest, tab[i].suffix) == 0) {
            double ms = v * tab[i].ms;
            if (ms >= 1e15) /* ~31000 years: anything larger is a typo */
                return -ERANGE;
            *ret_ms = (uint64_t)llround(ms);
            return 0;
        }
    return -EINVAL;
}

void units_format_size(uint64_t bytes, char *buf, unsigned len) {
    static const char *const names[] = {"Ti", "Gi", "Mi", "Ki"};
    static const unsigned shifts[] = {40, 30, 20, 10};
    for (unsigned i = 0; i < 4; i++)
        if (bytes && bytes % (1ull << shifts[i]) == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(bytes >> shifts[i]), names[i]);
            return;
        }
    snprintf(buf, len, "%llu", (unsigned long long)bytes);
}
