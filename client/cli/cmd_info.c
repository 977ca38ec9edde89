/* `sbx info`: each endpoint's version, capacity (free slots), cgroup mode and prices. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: sbx info [--json]\n\n"
           "Show each daemon's version, capacity, free slots and prices.\n");
}

static void print_info(json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (json_is_object(v)) {
            const char *k2;
            json_t *v2;
            json_object_foreach(v, k2, v2) {
                char *t = json_dumps(v2, JSON_COMPACT | JSON_ENCODE_ANY);
                printf("%s.%-*s %s\n", k, (int)(20 - strlen(k)), k2, t ? t : "?");
                free(t);
            }
            continue;
        }
        char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        printf("%-21s %s\n", k, t ? t : json_string_value(v));
        free(t);
    }
}

int cmd_info(int argc, char **argv) {
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {0}};
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return 0;
        }
        if (!cli_common_opt(opt, optarg))
            return cli_usage_error("info", "unknown option");
    }
    if (optind < argc)
        return cli_usage_error("info", "unexpected argument \"%s\"", argv[optind]);
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_client_info(c, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json)
        rc = cli_print_json_text(js);
    else if (rc == 0) {
        json_t *j = json_loads(js, 0, NULL);
        if (json_is_array(j)) {
            size_t i;
            json_t *o;
            json_array_foreach(j, i, o) {
                if (i)
                    printf("\n");
                print_info(o);
            }
        } else if (json_is_object(j))
            print_info(j);
        else
            rc = cli_error("the daemon sent invalid info");
        json_decref(j);
    }
    free(js);
    sbx_client_free(c);
    return rc;
}
