/* `sbx nodes`: the fleet's nodes (state, capacity, free slots, pools, version, heartbeat age);
 * `sbx node drain|undrain NAME`: no new sandboxes on a node, or again. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help_nodes(void) {
    printf("usage: sbx nodes [--json]\n\n"
           "The nodes of the fleet (--host etcd://host:2379/prefix, or any node's URL): state,\n"
           "capacity, free slots, warm pools, version and the age of the last heartbeat.\n");
}

static void help_node(void) {
    printf("usage: sbx node drain NAME | sbx node undrain NAME\n\n"
           "drain: the node takes no new sandboxes (creates go elsewhere); running ones finish.\n"
           "undrain: it takes new sandboxes again.\n");
}

static void pools_text(json_t *pools, char *buf, size_t len) {
    size_t i, n = 0;
    json_t *p;
    snprintf(buf, len, "-");
    json_array_foreach(pools, i, p) {
        int w = snprintf(buf + n, len - n, "%s%s:%lld/%lld", n ? "," : "",
                         json_string_value(json_object_get(p, "name")) ?: "?",
                         (long long)json_integer_value(json_object_get(p, "ready")),
                         (long long)json_integer_value(json_object_get(p, "size")));
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
    }
}

static void print_node(json_t *n) {
    char pools[128], age[32] = "-";
    pools_text(json_object_get(n, "pools"), pools, sizeof(pools));
    json_t *a = json_object_get(n, "heartbeat_age_s");
    if (json_is_number(a))
        snprintf(age, sizeof(age), "%.1fs", json_number_value(a));
#define I(k) ((long long)json_integer_value(json_object_get(n, k)))
    printf("%-16s %-9s %-28s %5lld %6lld %8lld %5lld  %-10s %-7s %s\n",
           json_string_value(json_object_get(n, "name")) ?: "?",
           json_string_value(json_object_get(n, "state")) ?: "?",
           json_string_value(json_object_get(n, "url")) ?: "?", I("max"), I("active"),
           I("starting"), I("free"), json_string_value(json_object_get(n, "version")) ?: "-", age,
           pools);
#undef I
}

int cmd_nodes(int argc, char **argv) {
    int rc = cli_parse_common("nodes", argc, argv, help_nodes);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (optind < argc)
        return cli_usage_error("nodes", "unexpected argument \"%s\"", argv[optind]);
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    rc = cli_client(&c);
    if (rc == 0 && sbx_client_nodes(c, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json)
        rc = cli_print_json_text(js);
    else if (rc == 0) {
        json_t *j = json_loads(js, 0, NULL), *n;
        const char *etcd = json_string_value(json_object_get(j, "etcd"));
        if (etcd && strcmp(etcd, "ok") != 0)
            fprintf(stderr, "sbx: etcd is %s: this is the last known view\n", etcd);
        printf("%-16s %-9s %-28s %5s %6s %8s %5s  %-10s %-7s %s\n", "NAME", "STATE", "URL", "MAX",
               "ACTIVE", "STARTING", "FREE", "VERSION", "AGE", "POOLS");
        size_t i;
        json_array_foreach(json_object_get(j, "nodes"), i, n) print_node(n);
        json_decref(j);
    }
    free(js);
    sbx_client_free(c);
    return rc;
}

int cmd_node(int argc, char **argv) {
    int rc = cli_parse_common("node", argc, argv, help_node);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (argc - optind != 2)
        return cli_usage_error("node", "want drain NAME or undrain NAME");
    const char *verb = argv[optind], *name = argv[optind + 1];
    bool drain = strcmp(verb, "drain") == 0;
    if (!drain && strcmp(verb, "undrain") != 0)
        return cli_usage_error("node", "unknown verb \"%s\"", verb);
    sbx_client *c = NULL;
    sbx_err err = {0};
    rc = cli_client(&c);
    if (rc == 0 && sbx_node_drain(c, name, drain, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    sbx_client_free(c);
    return rc;
}
