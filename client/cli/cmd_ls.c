/* `sbx ls [--label k=v]`: a table of sandboxes (running and recently ended), or the JSON array. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: sbx ls [--label k=v] [--json]\n\n"
           "List sandboxes (running and recently ended) on every endpoint.\n");
}

static void labels_text(json_t *labels, char *buf, size_t len) {
    const char *k;
    json_t *v;
    size_t n = 0;
    buf[0] = 0;
    json_object_foreach(labels, k, v) {
        int w = snprintf(buf + n, len - n, "%s%s=%s", n ? "," : "", k,
                         json_is_string(v) ? json_string_value(v) : "?");
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
    }
}

static void print_row(json_t *s) {
    json_t *lim = json_object_get(s, "limits"), *end = json_object_get(s, "end");
    const char *state = json_string_value(json_object_get(s, "state"));
    const char *reason = json_string_value(json_object_get(end, "reason"));
    char st[48], mem[32] = "-", lbl[256];
    snprintf(st, sizeof(st), "%s%s%s%s", state ? state : "?", reason ? " (" : "",
             reason ? reason : "", reason ? ")" : "");
    json_t *m = json_object_get(lim, "memory");
    if (json_is_integer(m))
        snprintf(mem, sizeof(mem), "%lldMi", (long long)(json_integer_value(m) >> 20));
    labels_text(json_object_get(s, "labels"), lbl, sizeof(lbl));
    const char *created = json_string_value(json_object_get(s, "created_at"));
    printf("%-22s %-32s %-6s %-5g %-8s %-24s %-12.8f %s\n",
           json_string_value(json_object_get(s, "id")) ?: "?", st,
           json_string_value(json_object_get(s, "image")) ?: "-",
           json_number_value(json_object_get(lim, "cpu")), mem, created ? created : "-",
           json_number_value(json_object_get(s, "cost_usd")), lbl);
}

int cmd_ls(int argc, char **argv) {
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS, {"label", required_argument, NULL, 'l'}, {0}};
    const char *label = NULL;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:hl:", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return 0;
        } else if (opt == 'l') {
            if (!strchr(optarg, '=') || optarg[0] == '=')
                return cli_usage_error("ls", "--label wants k=v, not \"%s\"", optarg);
            label = optarg;
        } else if (!cli_common_opt(opt, optarg))
            return cli_bad_option("ls", opt, "+:hl:", argv);
    }
    if (optind < argc)
        return cli_usage_error("ls", "unexpected argument \"%s\"", argv[optind]);
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_client_list(c, label, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json)
        rc = cli_print_json_text(js);
    else if (rc == 0) {
        json_t *arr = json_loads(js, 0, NULL);
        if (!json_is_array(arr))
            rc = cli_error("the daemon sent an invalid list");
        else {
            printf("%-22s %-32s %-6s %-5s %-8s %-24s %-12s %s\n", "ID", "STATE", "IMAGE", "CPU",
                   "MEMORY", "CREATED", "COST_USD", "LABELS");
            size_t i;
            json_t *s;
            json_array_foreach(arr, i, s) print_row(s);
        }
        json_decref(arr);
    }
    free(js);
    sbx_client_free(c);
    return rc;
}
