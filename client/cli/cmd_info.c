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

/* A value as text: numbers without float noise, strings bare. Returns malloc'd text. */
static char *value_text(json_t *v) {
    char *t = NULL;
    if (json_is_real(v)) {
        if (asprintf(&t, "%.10g", json_real_value(v)) < 0)
            t = NULL;
    } else if (json_is_string(v))
        t = strdup(json_string_value(v));
    else
        t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    return t;
}

static void print_info(json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (json_is_object(v)) {
            const char *k2;
            json_t *v2;
            json_object_foreach(v, k2, v2) {
                char *t = value_text(v2);
                printf("%s.%-*s %s\n", k, (int)(20 - strlen(k)), k2, t ? t : "?");
                free(t);
            }
            continue;
        }
        char *t = value_text(v);
        printf("%-21s %s\n", k, t ? t : "?");
        free(t);
    }
}

int cmd_info(int argc, char **argv) {
    int prc = cli_parse_common("info", argc, argv, help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
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
