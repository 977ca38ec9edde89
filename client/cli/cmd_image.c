/* `sbx image import|ls|inspect|rm`: a node's image store (libsbx sbx_image_*). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: sbx image import [--strip-setuid] FILE|- NAME[:TAG]\n"
            "       sbx image ls\n"
            "       sbx image inspect NAME[:TAG]\n"
            "       sbx image rm NAME[:TAG]...\n\n"
            "Manage the daemon's images. import reads a `docker save` archive, an OCI image\n"
            "layout or a rootfs tarball (gzip or not; - is stdin), streamed. --strip-setuid\n"
            "clears setuid/setgid bits instead of refusing such files. Sandboxes use an image\n"
            "with `sbx create --image NAME`. rm fails while a sandbox or warm pool uses it; each\n"
            "NAME is tried (exit 1 when any failed).\n");
}

static void help(void) {
    usage(stdout);
}

static int import(int argc, char **argv) {
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
            return cli_bad_option("image import", opt, "+:h", argv);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("image import", "expected FILE|- and NAME");
    const char *file = argv[optind], *name = argv[optind + 1];
    int fd = strcmp(file, "-") == 0 ? 0 : open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_error("cannot open %s: %m", file);
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc == 0 && sbx_image_import(c, name, fd, flags, &js, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && cli_opts.json) {
        rc = cli_print_json_text(js);
    } else if (rc == 0) {
        json_t *j = json_loads(js, 0, NULL);
        printf("%s %s\n", json_string_value(json_object_get(j, "name")),
               json_string_value(json_object_get(j, "digest")));
        json_decref(j);
    }
    if (fd > 0)
        close(fd);
    free(js);
    sbx_client_free(c);
    return rc;
}

static void print_list(json_t *a) {
    printf("%-32s %-7s %6s %12s %s\n", "NAME", "FORMAT", "LAYERS", "SIZE", "CREATED");
    size_t i;
    json_t *im;
    json_array_foreach(a, i, im) {
        json_t *layers = json_object_get(im, "layers");
        printf("%-32s %-7s %6zu %12lld %s\n", json_string_value(json_object_get(im, "name")),
               json_string_value(json_object_get(im, "format")),
               json_is_array(layers) ? json_array_size(layers) : 0,
               (long long)json_integer_value(json_object_get(im, "size")),
               json_is_string(json_object_get(im, "created"))
                   ? json_string_value(json_object_get(im, "created"))
                   : "-");
    }
}

int cmd_image(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        help();
        return 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "import") == 0)
        return import(argc - 1, argv + 1);
    if (strcmp(sub, "ls") == 0 || strcmp(sub, "inspect") == 0 || strcmp(sub, "rm") == 0)
        return cli_store_cmd(&(cli_store_ops){"image", sbx_image_list, sbx_image_inspect,
                                              sbx_image_remove, print_list, help},
                             sub, argc - 1, argv + 1);
    return cli_usage_error("image", "unknown subcommand \"%s\"", sub);
}
