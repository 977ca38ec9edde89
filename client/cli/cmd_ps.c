/* `sbx ps ID`: the sandbox's processes (running and recently ended): pid, state, exit, argv. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: sbx ps [--json] ID\n\n"
           "List sandbox ID's processes: running ones and recently ended ones (background\n"
           "commands and attached ones).\n");
}

static void print_row(json_t *p) {
    json_t *argv = json_object_get(p, "argv"), *a;
    size_t i;
    const char *state = json_string_value(json_object_get(p, "state"));
    char exitbuf[32] = "-";
    json_t *code = json_object_get(p, "exit_code"), *sig = json_object_get(p, "signal");
    if (json_is_integer(sig) && json_integer_value(sig) > 0)
        snprintf(exitbuf, sizeof(exitbuf), "signal %lld", (long long)json_integer_value(sig));
    else if (json_is_integer(code))
        snprintf(exitbuf, sizeof(exitbuf), "%lld", (long long)json_integer_value(code));
    printf("%-8lld %-8s %-10s %-4s %-3s ", (long long)json_integer_value(json_object_get(p, "pid")),
           state ? state : "?", exitbuf, json_is_true(json_object_get(p, "tty")) ? "tty" : "-",
           json_is_true(json_object_get(p, "background")) ? "bg" : "-");
    json_array_foreach(argv, i, a) printf("%s%s", i ? " " : "", json_string_value(a));
    printf("\n");
}

int cmd_ps(int argc, char **argv) {
    int prc = cli_parse_common("ps", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    if (optind + 1 != argc)
        return cli_usage_error("ps", "want exactly one sandbox id");
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    char *json = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && (sbx_sandbox_open(c, argv[optind], &sb, &err) != SBX_OK ||
                    sbx_sandbox_process_list(sb, &json, &err) != SBX_OK))
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json) {
        rc = cli_print_json_text(json);
    } else if (rc == 0) {
        json_t *o = json_loads(json, 0, NULL), *p;
        size_t i;
        printf("%-8s %-8s %-10s %-4s %-3s %s\n", "PID", "STATE", "EXIT", "TTY", "BG", "COMMAND");
        json_array_foreach(json_object_get(o, "processes"), i, p) print_row(p);
        json_decref(o);
    }
    free(json);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}
