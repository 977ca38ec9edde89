/* libFuzzer target: the shim's spec.json parser (shim_spec_parse), which a shim reads at start
 * and at cleanup. */
#include "common/spec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    shim_spec *s = NULL;
    error_rec err = {0};
    if (shim_spec_parse(text, &s, &err) == 0) {
        if (!shim_spec_id_valid(s->id) || (s->n_env > 0 && !s->env))
            abort();
        shim_spec_free(s);
    } else if (err.message[0] == '\0') {
        abort();
    }
    free(text);
    return 0;
}
