/* `sbx volume create|ls|inspect|rm`: a node's named volumes (libsbx sbx_volume_*). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: sbx volume create [--size SIZE] NAME\n"
        "       sbx volume ls\n"
        "       sbx volume inspect NAME\n"
        "       sbx volume rm NAME...\n\n"
        "Manage the daemon's named volumes: file systems of a fixed size (default 1Gi) that\n"
        "outlive sandboxes. A sandbox mounts one with `sbx create --volume NAME:/PATH[:ro]`:\n"
        "read-only by any number of sandboxes at once, writable by one at a time. rm deletes\n"
        "the volume's data and fails while a sandbox uses it; each NAME is tried (exit 1 when any\n"
        "failed).\n");
}

static void help(void) {
    usage(stdout);
}

static int create(int argc, char **argv) {
    enum { OPT_SIZE = CLI_OPT_FIRST_LOCAL };
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS, {"size", required_argument, NULL, OPT_SIZE}, {0}};
    uint64_t size = 0;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return 0;
        } else if (opt == OPT_SIZE) {
            if (sbx_parse_size(optarg, &size) != SBX_OK || size == 0)
                return cli_usage_error("volume create", "--size wants a size like 1Gi, not \"%s\"",
                                       optarg);
        } else if (!cli_common_opt(opt, optarg)) {
            return cli_bad_option("volume create", opt, "+:h", argv);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("volume create", "expected NAME");
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_volume_create(c, argv[optind], size, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0)
        rc = cli_opts.json ? cli_print_json_text(js) : (printf("%s\n", argv[optind]), 0);
    free(js);
    sbx_client_free(c);
    return rc;
}

static void print_list(json_t *a) {
    printf("%-32s %12s %12s %5s %s\n", "NAME", "SIZE", "USED", "USERS", "CREATED");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        printf("%-32s %12lld %12lld %5zu %s\n", json_string_value(json_object_get(v, "name")),
               (long long)json_integer_value(json_object_get(v, "size")),
               (long long)json_integer_value(json_object_get(v, "used")),
               json_array_size(json_object_get(v, "in_use_by")),
               json_string_value(json_object_get(v, "created")));
    }
}

int cmd_volume(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        help();
        return 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "create") == 0)
        return create(argc - 1, argv + 1);
    if (strcmp(sub, "ls") == 0 || strcmp(sub, "inspect") == 0 || strcmp(sub, "rm") == 0)
        return cli_store_cmd(&(cli_store_ops){"volume", sbx_volume_list, sbx_volume_inspect,
                                              sbx_volume_remove, print_list, help},
                             sub, argc - 1, argv + 1);
    return cli_usage_error("volume", "unknown subcommand \"%s\"", sub);
}
