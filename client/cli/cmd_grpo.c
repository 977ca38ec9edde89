/* `sbx grpo`: the GRPO episode runner's command line (placeholder until the GRPO issue lands). */
#include "client/cli/commands.h"

#include <stdio.h>

int cmd_grpo(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "sbx grpo: not built yet\n");
    return 1;
}
