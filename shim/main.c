/* sbx-shim entry point (placeholder until the sandbox issue lands). */
#include <stdio.h>

int main(void) {
    fprintf(stderr, "sbx-shim: not built yet\n");
    return 1;
}
