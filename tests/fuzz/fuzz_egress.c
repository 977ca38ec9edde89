/* libFuzzer target: the egress policy parser (policy_egress_parse) and CIDR parser. A parsed
 * policy must survive dup and to_json, and to_json's output must parse back to the same
 * number of entries (inspect prints that form and clients send it back). */
#include "policy/egress.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_cidr(const uint8_t *data, size_t size) {
    char s[128];
    size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    policy_cidr c;
    if (policy_cidr_parse(s, &c) == 0) {
        char buf[64];
        policy_cidr_format(&c, buf, sizeof(buf));
        policy_cidr c2;
        if (policy_cidr_parse(buf, &c2) < 0 || c2.family != c.family || c2.len != c.len)
            abort();
        (void)policy_egress_always_denied(&c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536)
        return 0;
    fuzz_cidr(data, size);
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!j)
        return 0;
    policy_egress *p = NULL;
    error_rec err = {0};
    if (policy_egress_parse(j, &p, &err) == 0) {
        policy_egress *d = policy_egress_dup(p);
        if (!d || d->n_entries != p->n_entries)
            abort();
        json_t *out = policy_egress_to_json(p);
        if (!out)
            abort();
        policy_egress *p2 = NULL;
        if (policy_egress_parse(out, &p2, &err) < 0 || p2->n_entries != p->n_entries ||
            p2->mode != p->mode)
            abort();
        policy_egress_free(p2);
        json_decref(out);
        policy_egress_free(d);
        policy_egress_free(p);
    } else if (err.message[0] == '\0') {
        abort();
    }
    json_decref(j);
    return 0;
}
