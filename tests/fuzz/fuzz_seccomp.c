/* libFuzzer target: the JSON seccomp profile parser (policy_seccomp_load_string). A profile
 * that loads must also export a BPF program of a valid size. */
#include "policy/seccomp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 200000)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    policy_seccomp *p = NULL;
    error_rec err = {0};
    if (policy_seccomp_load_string(text, &p, &err) == 0) {
        void *bpf = NULL;
        size_t len = 0;
        if (policy_seccomp_export_bpf(p, &bpf, &len, &err) == 0) {
            if (len == 0 || len % 8 != 0)
                abort();
            free(bpf);
        }
        policy_seccomp_free(p);
    } else if (err.message[0] == '\0') {
        abort();
    }
    free(text);
    return 0;
}
