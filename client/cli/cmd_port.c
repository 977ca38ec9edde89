/* `sbx port ID PORT...`: open inbound ports of a sandbox and print the URL of each (the
 * daemon's HTTP proxy to it, docs/API.md "Ports"). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void help(void) {
    printf("usage: sbx port ID PORT...\n\n"
           "Open TCP ports of a sandbox (1..65535; idempotent) and print, one a line, the URL on\n"
           "the daemon that proxies HTTP to each (the daemon's token is needed over TCP).\n");
}

int cmd_port(int argc, char **argv) {
    int prc = cli_parse_common("port", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    if (argc - optind < 2)
        return cli_usage_error("port", "usage: sbx port ID PORT...");
    for (int i = optind + 1; i < argc; i++) {
        unsigned long long p;
        if (cli_parse_uint(argv[i], 65535, &p) < 0 || p < 1)
            return cli_usage_error("port", "a port is an integer 1..65535");
    }
    sbx_client *c = NULL;
    int rc = cli_client(&c);
    if (rc != 0)
        return rc;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    if (sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    for (int i = optind + 1; rc == 0 && i < argc; i++) {
        char *url = NULL;
        if (sbx_sandbox_port_url(sb, (unsigned)atol(argv[i]), &url, &err) != SBX_OK)
            rc = cli_sbx_error(&err);
        else
            printf("%s\n", url);
        free(url);
    }
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
