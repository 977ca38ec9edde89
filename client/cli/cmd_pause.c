/* `sbx pause ID` and `sbx resume [--node NAME] ID`: a pausable sandbox (`sbx create --pausable`)
 * saved to the node's disk with its processes, and brought back there or on another node of the
 * fleet (docs/API.md "Pause and resume"). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(const char *cmd) {
    if (strcmp(cmd, "pause") == 0)
        printf("usage: sbx pause ID\n\n"
               "Save sandbox ID (created with --pausable, running no command) to the node's\n"
               "disk: its processes, their memory, its files. It then costs disk only, until\n"
               "`sbx resume ID`. Prints the checkpoint's size and how long the dump took\n"
               "(and sockets_ended=N when it ended N connections to the outside).\n");
    else
        printf("usage: sbx resume [--node NAME] ID\n\n"
               "Bring paused sandbox ID back, with the same id, processes and files: on its\n"
               "node, or with --node on another node of the fleet (its checkpoint moves there).\n"
               "A resume that fails leaves it paused where it was. Prints how long the resume\n"
               "took (and the node, in a fleet).\n");
}

static void print_moved(const char *cmd, json_t *j) {
    json_t *p = json_object_get(j, "pause");
    json_t *ck = json_object_get(p, "checkpoint");
    json_int_t ended = json_integer_value(json_object_get(ck, "sockets_ended"));
    if (strcmp(cmd, "pause") == 0) {
        printf("%s paused bytes=%lld dump_ms=%.1f", json_string_value(json_object_get(j, "id")),
               (long long)json_integer_value(json_object_get(ck, "bytes")),
               json_number_value(json_object_get(ck, "dump_ms")));
        if (ended > 0)
            printf(" sockets_ended=%lld", (long long)ended);
        putchar('\n');
    } else
        printf("%s running resume_ms=%.1f%s%s\n", json_string_value(json_object_get(j, "id")),
               json_number_value(json_object_get(p, "last_resume_ms")),
               json_object_get(j, "node") ? " node=" : "",
               json_string_value(json_object_get(j, "node")) ?: "");
}

static int move(const char *cmd, int argc, char **argv) {
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {"node", 1, 0, 'n'}, {0}};
    bool pause = strcmp(cmd, "pause") == 0;
    const char *node = NULL;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help(cmd);
            return 0;
        }
        if (opt == 'n' && !pause)
            node = optarg;
        else if (!cli_common_opt(opt, optarg))
            return cli_bad_option(cmd, opt, "+:h", argv);
    }
    if (argc - optind != 1)
        return cli_usage_error(cmd, "want ID");
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && (pause ? sbx_sandbox_pause(sb, &js, &err)
                          : sbx_sandbox_resume_on(sb, node, &js, &err)) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json) {
        rc = cli_print_json_text(js);
    } else if (rc == 0) {
        json_t *j = json_loads(js, 0, NULL);
        print_moved(cmd, j);
        json_decref(j);
    }
    free(js);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}

int cmd_pause(int argc, char **argv) {
    return move("pause", argc, argv);
}

int cmd_resume(int argc, char **argv) {
    return move("resume", argc, argv);
}
