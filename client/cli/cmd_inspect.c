/* `sbx inspect ID...`: a sandbox's state, limits, usage, cost and end as `key: value` lines (or
 * the JSON object). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: sbx inspect [--json] ID...\n\n"
           "Show a sandbox's state, limits, usage, cost so far and how it ended. Each ID is tried\n"
           "(exit 1 when any failed); --json prints the object, or for several IDs an array of\n"
           "those found.\n");
}

/* Flatten an object into "prefix.key: value" lines. */
static void print_flat(const char *prefix, json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        char name[128];
        snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", k);
        if (json_is_object(v) && json_object_size(v) > 0 && strcmp(k, "labels") != 0) {
            print_flat(name, v);
            continue;
        }
        char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (json_is_real(v)) {
            free(text);
            text = NULL;
            size_t nl = strlen(name);
            bool usd = nl >= 3 && strcmp(name + nl - 3, "usd") == 0; /* money: fixed point */
            printf(usd ? "%-28s %.8f\n" : "%-28s %.9g\n", name, json_real_value(v));
            continue;
        }
        printf("%-28s %s\n", name, text ? text : json_string_value(v));
        free(text);
    }
}

/* The sandbox object of id into *ret (json_decref it); 0, or CLI_EXIT_ERROR with the message
 * printed. */
static int inspect_one(sbx_client *c, const char *id, json_t **ret) {
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = 0;
    if (sbx_sandbox_open(c, id, &sb, &err) != SBX_OK ||
        sbx_sandbox_inspect(sb, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    json_t *o = rc == 0 ? json_loads(js, 0, NULL) : NULL;
    if (rc == 0 && !json_is_object(o))
        rc = cli_error("the daemon sent an invalid sandbox object");
    free(js);
    sbx_sandbox_free(sb);
    if (rc == 0)
        *ret = o;
    else
        json_decref(o);
    return rc;
}

/* Each sandbox (as sbx rm, on past an id that fails: CLI_EXIT_ERROR at the end), printed as it
 * comes, or with --json all at once: the object for one id, an array of those found for several. */
int cmd_inspect(int argc, char **argv) {
    int prc = cli_parse_common("inspect", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    if (optind >= argc)
        return cli_usage_error("inspect", "missing the sandbox id");
    sbx_client *c = NULL;
    int rc = cli_client(&c);
    if (rc != 0)
        return rc;
    json_t *all = json_array();
    for (int i = optind; i < argc; i++) {
        json_t *o = NULL;
        if (inspect_one(c, argv[i], &o) != 0) {
            rc = CLI_EXIT_ERROR;
            continue;
        }
        if (!cli_opts.json) {
            if (json_array_size(all) > 0)
                printf("\n");
            print_flat("", o);
        }
        json_array_append_new(all, o);
    }
    json_t *one = json_array_get(all, 0);
    if (cli_opts.json && (argc - optind > 1 || one) &&
        cli_print_json(argc - optind == 1 ? one : all) != 0)
        rc = CLI_EXIT_ERROR;
    json_decref(all);
    sbx_client_free(c);
    return rc;
}
