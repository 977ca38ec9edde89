/* `sbx create [flags]`: create a sandbox and print its id (or its object with --json; a
 * sandbox whose object cannot be read back is terminated, not left running unnamed). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void help(void) {
    printf("usage: sbx create [FLAGS]\n\n"
           "Create a sandbox and print its id.\n\n" CLI_CREATE_HELP
           "  --json                print the sandbox object (if it cannot be read back, the\n"
           "                        sandbox is terminated and the command fails)\n"
           "  --host ENDPOINTS      daemon endpoints (see sbx --help)\n");
}

/* --json: the new sandbox's object. When it cannot be had (the inspect after the create
 * failed), the command fails, and so that it leaves nothing behind, the sandbox is terminated
 * (named on stderr if even that fails). */
static int print_object(sbx_sandbox *sb) {
    sbx_err err = {0};
    char *js = NULL;
    int rc = sbx_sandbox_inspect(sb, &js, &err) == SBX_OK ? cli_print_json_text(js)
                                                          : cli_sbx_error(&err);
    free(js);
    const char *id = sbx_sandbox_id(sb);
    if (rc != 0 && sbx_sandbox_terminate(sb, &err) != SBX_OK)
        cli_error("sandbox %s was created but could not be terminated: %s (`sbx rm %s` ends it)",
                  id, err.message, id);
    return rc;
}

int cmd_create(int argc, char **argv) {
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS, CLI_CREATE_LONGOPTS, {0}};
    cli_create_flags f;
    cli_create_flags_init(&f);
    int opt, rc = 0;
    optind = 0;
    while (rc == 0 && (opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help();
            cli_create_flags_free(&f);
            return 0;
        }
        if (cli_common_opt(opt, optarg))
            continue;
        int r = cli_create_flag(&f, "create", opt, optarg);
        if (r < 0)
            rc = CLI_EXIT_USAGE;
        else if (r == 0)
            rc = cli_bad_option("create", opt, "+:h", argv);
    }
    if (rc == 0 && optind < argc)
        rc = cli_usage_error("create", "unexpected argument \"%s\"", argv[optind]);
    sbx_client *c = NULL;
    if (rc == 0)
        rc = cli_client(&c);
    if (rc == 0) {
        sbx_sandbox *sb = NULL;
        sbx_err err = {0};
        if (cli_create_sandbox(c, &f, &sb, &err) != SBX_OK)
            rc = cli_sbx_error(&err);
        else if (cli_opts.json)
            rc = print_object(sb);
        else
            printf("%s\n", sbx_sandbox_id(sb));
        sbx_sandbox_free(sb);
    }
    sbx_client_free(c);
    cli_create_flags_free(&f);
    return rc;
}
