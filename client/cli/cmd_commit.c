/* `sbx commit [--strip-setuid] ID NAME[:TAG]`: a running sandbox's files become a new image. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static void help(void) {
    printf("usage: sbx commit [--strip-setuid] ID NAME[:TAG]\n\n"
           "Make image NAME of sandbox ID's files: its image's layers (shared on disk) plus one\n"
           "layer holding what the sandbox changed, its /workspace and its /tmp. The sandbox\n"
           "is frozen while its files are copied, then goes on. FIFOs, sockets and devices are\n"
           "left out; a setuid/setgid file is refused unless --strip-setuid clears the bits.\n"
           "Prints NAME and the freeze time; create sandboxes from it with\n"
           "`sbx create --image NAME`.\n");
}

int cmd_commit(int argc, char **argv) {
    enum { OPT_STRIP = CLI_OPT_FIRST_LOCAL };
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS, {"strip-setuid", no_argument, NULL, OPT_STRIP}, {0}};
    unsigned flags = 0;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return 0;
        } else if (opt == OPT_STRIP) {
            flags |= SBX_IMAGE_STRIP_SETUID;
        } else if (!cli_common_opt(opt, optarg)) {
            return cli_bad_option("commit", opt, "+:h", argv);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("commit", "want ID NAME[:TAG]");
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && sbx_sandbox_commit(sb, argv[optind + 1], flags, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json) {
        rc = cli_print_json_text(js);
    } else if (rc == 0) {
        json_t *j = json_loads(js, 0, NULL);
        printf("%s freeze_ms=%lld\n", json_string_value(json_object_get(j, "name")),
               (long long)json_integer_value(json_object_get(j, "freeze_ms")));
        json_decref(j);
    }
    free(js);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
