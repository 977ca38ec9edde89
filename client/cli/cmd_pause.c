/* `sbx pause ID` and `sbx resume ID`: a pausable sandbox (`sbx create --pausable`) saved to the
 * node's disk with its processes, and brought back (docs/API.md "Pause and resume"). */
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
               "`sbx resume ID`. Prints the checkpoint's size and how long the dump took.\n");
    else
        printf("usage: sbx resume ID\n\n"
               "Bring paused sandbox ID back, with the same id, processes and files. A resume\n"
               "that fails leaves it paused. Prints how long the resume took.\n");
}

static void print_moved(const char *cmd, json_t *j) {
    json_t *p = json_object_get(j, "pause");
    json_t *ck = json_object_get(p, "checkpoint");
    if (strcmp(cmd, "pause") == 0)
        printf("%s paused bytes=%lld dump_ms=%.1f\n", json_string_value(json_object_get(j, "id")),
               (long long)json_integer_value(json_object_get(ck, "bytes")),
               json_number_value(json_object_get(ck, "dump_ms")));
    else
        printf("%s running resume_ms=%.1f\n", json_string_value(json_object_get(j, "id")),
               json_number_value(json_object_get(p, "last_resume_ms")));
}

static int move(const char *cmd, int argc, char **argv) {
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {0}};
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help(cmd);
            return 0;
        }
        if (!cli_common_opt(opt, optarg))
            return cli_usage_error(cmd, "unknown option");
    }
    if (argc - optind != 1)
        return cli_usage_error(cmd, "want ID");
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    char *js = NULL;
    bool pause = strcmp(cmd, "pause") == 0;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 &&
        (pause ? sbx_sandbox_pause(sb, &js, &err) : sbx_sandbox_resume(sb, &js, &err)) != SBX_OK)
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
