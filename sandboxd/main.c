/* sandboxd entry point (placeholder until the daemon issue lands). */
#include <stdio.h>

int main(void) {
    fprintf(stderr, "sandboxd: not built yet\n");
    return 1;
}
