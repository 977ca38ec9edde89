/* `sbx rm ID...`: terminate sandboxes (idempotent) and print each id removed. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>

static void help(void) {
    printf("usage: sbx rm ID...\n\n"
           "Terminate sandboxes. Removing an ended sandbox succeeds; an unknown id is an error.\n");
}

int cmd_rm(int argc, char **argv) {
    int prc = cli_parse_common("rm", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    if (optind >= argc)
        return cli_usage_error("rm", "missing the sandbox id");
    sbx_client *c = NULL;
    int rc = cli_client(&c);
    if (rc != 0)
        return rc;
    for (int i = optind; i < argc; i++) {
        sbx_sandbox *sb = NULL;
        sbx_err err = {0};
        if (sbx_sandbox_open(c, argv[i], &sb, &err) != SBX_OK ||
            sbx_sandbox_terminate(sb, &err) != SBX_OK)
            rc = cli_sbx_error(&err);
        else
            printf("%s\n", argv[i]);
        sbx_sandbox_free(sb);
    }
    sbx_client_free(c);
    return rc;
}
