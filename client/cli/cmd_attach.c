/* `sbx attach [--no-stdin] [--replay] ID PID`: attach to a running process: its output from now
 * on (with --replay, the kept tail first), sbx's stdin to its stdin, and for a terminal process
 * the local terminal in raw mode with resizes. Exits with the command's status when it ends. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: sbx attach [--no-stdin] [--replay] ID PID\n\n"
           "Attach to running process PID of sandbox ID. Its output streams here; sbx's stdin\n"
           "goes to it (one client holds a process's stdin at a time); a terminal process puts\n"
           "the local terminal in raw mode. sbx exits with the command's status once it ends.\n"
           "  --no-stdin   only watch the output\n"
           "  --replay     first print the output kept so far\n");
}

enum { OPT_NO_STDIN = CLI_OPT_FIRST_LOCAL, OPT_REPLAY };

/* Whether the process has a terminal (from its process object). */
static bool process_tty(sbx_sandbox *sb, long pid) {
    char *json = NULL;
    sbx_err err;
    if (sbx_sandbox_process_get(sb, pid, 0, &json, &err) != SBX_OK)
        return false; /* attach itself reports the error */
    json_t *o = json_loads(json, 0, NULL);
    bool tty = json_is_true(json_object_get(o, "tty"));
    json_decref(o);
    free(json);
    return tty;
}

int cmd_attach(int argc, char **argv) {
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS,
                                             {"no-stdin", no_argument, NULL, OPT_NO_STDIN},
                                             {"replay", no_argument, NULL, OPT_REPLAY},
                                             {0}};
    unsigned flags = SBX_ATTACH_STDIN;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        if (cli_common_opt(opt, optarg))
            continue;
        if (opt == 'h') {
            help();
            return 0;
        } else if (opt == OPT_NO_STDIN)
            flags &= ~SBX_ATTACH_STDIN;
        else if (opt == OPT_REPLAY)
            flags |= SBX_ATTACH_REPLAY;
        else
            return cli_bad_option("attach", opt, "+:h", argv);
    }
    if (argc - optind != 2)
        return cli_usage_error("attach", "want ID PID");
    long pid;
    int rc = cli_parse_pid("attach", argv[optind + 1], &pid);
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_process *p = NULL;
    sbx_err err = {0};
    if (rc == 0)
        rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    bool tty = rc == 0 && process_tty(sb, pid);
    if (rc == 0 && sbx_process_attach(sb, pid, flags, cli_stream_output, NULL, &p, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0) {
        bool raw = tty && (flags & SBX_ATTACH_STDIN) && cli_tty_raw() == 0;
        if (raw) {
            unsigned rows, cols;
            if (cli_tty_size(&rows, &cols) == 0)
                sbx_process_resize(p, rows, cols, &err);
        }
        rc = cli_stream_run(p, NULL, flags & SBX_ATTACH_STDIN, raw, NULL);
    }
    sbx_process_free(p);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
