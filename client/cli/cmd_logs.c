/* `sbx logs [--tail BYTES] ID PID`: the output a process's buffer keeps (stdout to stdout,
 * stderr to stderr). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: sbx logs [--tail SIZE] ID PID\n\n"
           "Print the output kept for process PID of sandbox ID (the last bytes of each stream,\n"
           "up to the process's max_output): stdout to stdout, stderr to stderr.\n"
           "  --tail SIZE   only the last SIZE bytes of each stream, e.g. 4096 or 1Mi\n");
}

int cmd_logs(int argc, char **argv) {
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS, {"tail", required_argument, NULL, 'n'}, {0}};
    uint64_t tail = 0;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:hn:", longopts, NULL)) != -1) {
        if (cli_common_opt(opt, optarg))
            continue;
        if (opt == 'h') {
            help();
            return 0;
        }
        if (opt != 'n')
            return cli_bad_option("logs", opt, "+:hn:", argv);
        if (sbx_parse_size(optarg, &tail) != SBX_OK || tail == 0)
            return cli_usage_error("logs", "--tail wants a size like 4096 or 1Mi");
    }
    if (argc - optind != 2)
        return cli_usage_error("logs", "want ID PID");
    long pid;
    int rc = cli_parse_pid("logs", argv[optind + 1], &pid);
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    sbx_exec_result r = {0};
    if (rc == 0)
        rc = cli_client(&c);
    if (rc == 0 && (sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK ||
                    sbx_sandbox_process_logs(sb, pid, tail, &r, &err) != SBX_OK))
        rc = cli_sbx_error(&err);
    if (rc == 0) {
        cli_stream_output(NULL, SBX_STREAM_STDOUT, r.stdout_data, r.stdout_len);
        cli_stream_output(NULL, SBX_STREAM_STDERR, r.stderr_data, r.stderr_len);
    }
    sbx_exec_result_free(&r);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
