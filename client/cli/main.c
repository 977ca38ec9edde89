/* sbx entry point (placeholder until the client issue lands). */
#include <sbx.h>
#include <stdio.h>

int main(void) {
    fprintf(stderr, "sbx: not built yet (%s)\n", sbx_code_name(SBX_OK));
    return 1;
}
