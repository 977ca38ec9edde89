/* `sbx kill ID PID [SIGNAL]`: send SIGNAL to a process, or without one end its whole tree. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void help(void) {
    printf("usage: sbx kill ID PID [SIGNAL]\n\n"
           "Send SIGNAL (a name like TERM or SIGINT, or a number) to process PID of sandbox ID.\n"
           "Without SIGNAL, kill the process and everything it started.\n");
}

int cmd_kill(int argc, char **argv) {
    int prc = cli_parse_common("kill", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    if (argc - optind < 2 || argc - optind > 3)
        return cli_usage_error("kill", "want ID PID [SIGNAL]");
    long pid;
    int rc = cli_parse_pid("kill", argv[optind + 1], &pid);
    const char *sig = argc - optind == 3 ? argv[optind + 2] : NULL;
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    if (rc == 0)
        rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && (sig ? sbx_sandbox_process_signal(sb, pid, sig, &err)
                        : sbx_sandbox_process_kill(sb, pid, &err)) != SBX_OK)
        rc = cli_sbx_error(&err);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
