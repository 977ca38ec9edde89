/* Configuration: built-in defaults, then the JSON config file (keys mirror the flags in
 * snake_case, plus `price` and `defaults`), then command-line flags. */
#include "sandboxd/config.h"

#include "common/jsonkeys.h"
#include "common/macro.h"
#include "policy/egress.h"
#include "policy/limits.h"

#include <ctype.h>
#include <getopt.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CONFIG "/etc/sandboxd/sandboxd.json"

/* One row per setting: its flag, its key in the config file (NULL: flag only), how its value
 * is read, and the sd_config field it sets. A new setting is one row (and one field). */
typedef enum {
    K_STR,
    K_CGROUP,
    K_UINT,
    K_UINT0,
    K_LOG,
    K_POOL,
    K_CONFIG
} opt_kind; /* UINT0: 0 too */

typedef struct opt_row {
    const char *flag, *key;
    opt_kind kind;
    size_t field; /* offsetof(sd_config, ...) */
} opt_row;

#define F(name) offsetof(sd_config, name)
static const opt_row rows[] = {
    {"config", NULL, K_CONFIG, 0},
    {"socket", "socket", K_STR, F(socket_path)},
    {"tcp", "tcp", K_STR, F(tcp)},
    {"token", "token", K_STR, F(token)},
    {"run-dir", "run_dir", K_STR, F(run_dir)},
    {"state-dir", "state_dir", K_STR, F(state_dir)},
    {"shim", "shim", K_STR, F(shim_path)},
    {"seccomp-profile", "seccomp_profile", K_STR, F(seccomp_profile)},
    {"cgroup-parent", "cgroup_parent", K_CGROUP, F(cgroup_parent)},
    {"max-sandboxes", "max_sandboxes", K_UINT, F(max_sandboxes)},
    {"max-starting", "max_starting", K_UINT, F(max_starting)},
    {"max-idempotency-keys", "max_idempotency_keys", K_UINT, F(max_idem_keys)},
    {"log-level", "log_level", K_LOG, F(log_level)},
    {"pool", NULL, K_POOL, F(pools)},
    {"pool-max-starting", "pool_max_starting", K_UINT, F(pool_max_starting)},
    {"pool-demand-idle", "pool_demand_idle", K_UINT0, F(pool_demand_idle_s)},
    {"spare-shims", "spare_shims", K_UINT0, F(spare_shims)},
    {"sandboxfusion-listen", "sandboxfusion_listen", K_STR, F(sf_listen)},
    {"sandboxfusion-max-running", "sandboxfusion_max_running", K_UINT, F(sf_max_running)},
    {"sandboxfusion-queue-timeout", "sandboxfusion_queue_timeout", K_UINT, F(sf_queue_timeout_s)},
    {"fleet-etcd", "fleet_etcd", K_STR, F(fleet_etcd)},
    {"fleet-prefix", "fleet_prefix", K_STR, F(fleet_prefix)},
    {"node-name", "node_name", K_STR, F(node_name)},
    {"advertise-url", "advertise_url", K_STR, F(advertise_url)},
    {"fleet-ttl", "fleet_ttl", K_UINT, F(fleet_ttl)},
    {"fleet-token", "fleet_token", K_STR, F(fleet_token)},
    {"fleet-ca", "fleet_ca", K_STR, F(fleet_ca)},
    {"fleet-read", "fleet_read", K_STR, F(fleet_read)},
    {"tls-cert", "tls_cert", K_STR, F(tls_cert)},
    {"tls-key", "tls_key", K_STR, F(tls_key)},
    {"gpu-root", "gpu_root", K_STR, F(gpu_root)},
    {"runsc", "runsc", K_STR, F(runsc)},
};
#undef F

enum { OPT_ROW = 256, OPT_HELP = 1000, OPT_VERSION };

static const char usage[] =
    "usage: sandboxd [--config FILE] [--socket PATH] [--tcp HOST:PORT --token TOKEN]\n"
    "                [--run-dir DIR] [--state-dir DIR] [--shim PATH] [--seccomp-profile PATH]\n"
    "                [--cgroup-parent NAME] [--max-sandboxes N] [--max-starting N]\n"
    "                [--max-idempotency-keys N]\n"
    "                [--log-level debug|info|warn|error]\n"
    "                [--pool size=N,image=..,cpu=..,memory=..,disk=..,pids=..,network=none|open]\n"
    "                [--pool-max-starting N] [--pool-demand-idle SECONDS] [--spare-shims N]\n"
    "                [--sandboxfusion-listen HOST:PORT] [--sandboxfusion-max-running N]\n"
    "                [--sandboxfusion-queue-timeout SECONDS]\n"
    "                [--tls-cert FILE --tls-key FILE] [--gpu-root DIR] [--runsc PATH|none]\n"
    "                [--fleet-etcd URL[,URL...] --advertise-url URL [--node-name NAME]\n"
    "                 [--fleet-prefix P] [--fleet-ttl SECONDS] [--fleet-token TOKEN]\n"
    "                 [--fleet-read watch|poll] [--fleet-ca FILE]]\n";

static void set_str(char **dst, const char *v) {
    free(*dst);
    *dst = v ? strdup(v) : NULL;
}

static int parse_uint(const char *s, const char *what, bool zero, unsigned *ret, error_rec *err) {
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || (v == 0 && !zero) || v > 100000 || *s == '-')
        return error_set(err, -EINVAL, "%s: expected a %s integer, got \"%s\"", what,
                         zero ? "non-negative" : "positive", s);
    *ret = (unsigned)v;
    return 0;
}

/* --pool: a JSON object, or key=value pairs separated by commas ("size=8,cpu=1,memory=2Gi").
 * Numbers stay numbers; everything else is a string, as in a create body. */
static int parse_pool(sd_config *c, const char *v, error_rec *err) {
    json_t *o = NULL;
    if (*v == '{') {
        o = json_loads(v, JSON_REJECT_DUPLICATES, NULL);
    } else {
        o = json_object();
        _cleanup_free_ char *copy = strdup(v);
        char *save = NULL;
        for (char *kv = copy ? strtok_r(copy, ",", &save) : NULL; kv && o;
             kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '='), *end = NULL;
            if (!eq) {
                json_decref(o);
                o = NULL;
                break;
            }
            *eq = 0;
            double num = strtod(eq + 1, &end);
            json_object_set_new(
                o, kv,
                eq[1] && !*end
                    ? (num == (json_int_t)num ? json_integer((json_int_t)num) : json_real(num))
                    : json_string(eq + 1));
        }
    }
    if (!json_is_object(o)) {
        json_decref(o);
        return error_set(err, -EINVAL, "pool: expected a JSON object or key=value,...: \"%s\"", v);
    }
    if (!c->pools)
        c->pools = json_array();
    json_array_append_new(c->pools, o);
    return 0;
}

static int apply(sd_config *c, const opt_row *row, const char *v, error_rec *err) {
    void *field = (char *)c + row->field;
    switch (row->kind) {
    case K_CGROUP:
        if (!*v || strstr(v, ".."))
            return error_set(err, -EINVAL, "%s: invalid name \"%s\"", row->flag, v);
        set_str(field, v);
        return 0;
    case K_STR:
        set_str(field, v);
        return 0;
    case K_UINT:
    case K_UINT0:
        return parse_uint(v, row->flag, row->kind == K_UINT0, field, err);
    case K_POOL:
        return parse_pool(c, v, err);
    case K_LOG:
        if (log_level_from_string(v, field) < 0)
            return error_set(err, -EINVAL, "%s: expected debug, info, warn or error", row->flag);
        return 0;
    case K_CONFIG:
        return 0; /* read first, by sd_config_load */
    }
    return 0;
}

static int load_price(sd_config *c, json_t *p, error_rec *err) {
    if (!p)
        return 0;
    json_t *v = json_object_get(p, "vcpu_hour_usd"), *g = json_object_get(p, "gib_hour_usd");
    json_t *gpu = json_object_get(p, "gpu_hour_usd");
    if (!json_is_object(p) || (v && (!json_is_number(v) || json_number_value(v) < 0)) ||
        (g && (!json_is_number(g) || json_number_value(g) < 0)) ||
        (gpu && (!json_is_number(gpu) || json_number_value(gpu) < 0)))
        return error_set(err, -EINVAL,
                         "config price: expected {vcpu_hour_usd, gib_hour_usd, gpu_hour_usd} >= 0");
    if (v)
        c->price.vcpu_hour_usd = json_number_value(v);
    if (g)
        c->price.gib_hour_usd = json_number_value(g);
    if (gpu)
        c->price.gpu_hour_usd = json_number_value(gpu);
    return 0;
}

/* A config file value: strings as they are, integers as their digits. */
static int apply_json(sd_config *c, const opt_row *row, json_t *v, const char *path,
                      error_rec *err) {
    char num[32];
    if (!v)
        return 0;
    if (json_is_string(v))
        return apply(c, row, json_string_value(v), err);
    if (!json_is_integer(v))
        return error_set(err, -EINVAL, "config %s: %s has the wrong type", path, row->key);
    snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
    return apply(c, row, num, err);
}

/* fleet: "node_labels", published with the node record (docs/FLEET.md). */
static int load_labels(sd_config *c, json_t *labels, const char *path, error_rec *err) {
    const char *k;
    json_t *v;
    bool strings = json_is_object(labels);
    if (!labels)
        return 0;
    json_object_foreach(labels, k, v) strings = strings && json_is_string(v);
    if (!strings)
        return error_set(err, -EINVAL, "config %s: node_labels must be {\"key\": \"value\"}", path);
    c->node_labels = json_incref(labels);
    return 0;
}

/* "network" (docs/NETWORK.md; its values are checked by sd_net_init): the keys and types that
 * sandboxd/core/network.c reads, so that a typo is not a daemon without the setting. */
static int check_network(json_t *n, error_rec *err) {
    static const char *const keys[] = {"enabled", "pool4", "pool6",    "uplink", "dns",
                                       "table",   "guard", "ifprefix", NULL};
    static const char *const strings[] = {"pool4", "pool6", "uplink", "table", "ifprefix"};
    static const char *const bools[] = {"enabled", "guard"};
    if (!n)
        return 0;
    if (!json_is_object(n))
        return error_set(err, -EINVAL, "network: must be an object {\"enabled\": true, ...}");
    int r = jsonkeys_check(n, keys, "network", err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++)
        if (json_object_get(n, strings[i]) && !json_is_string(json_object_get(n, strings[i])))
            return error_set(err, -EINVAL, "network.%s: must be a string", strings[i]);
    for (size_t i = 0; i < ARRAY_SIZE(bools); i++)
        if (json_object_get(n, bools[i]) && !json_is_boolean(json_object_get(n, bools[i])))
            return error_set(err, -EINVAL, "network.%s: must be true or false", bools[i]);
    json_t *dns = json_object_get(n, "dns"), *v;
    size_t i;
    if (dns && (!json_is_array(dns) || json_array_size(dns) > POLICY_EGRESS_MAX_DNS))
        return error_set(err, -EINVAL, "network.dns: must be a list of at most %d addresses",
                         POLICY_EGRESS_MAX_DNS);
    json_array_foreach(dns, i, v) {
        if (!json_is_string(v))
            return error_set(err, -EINVAL, "network.dns[%zu]: must be a string", i);
    }
    return 0;
}

/* The file's keys: those of the flags' rows and the objects below; any other is refused. */
static int check_file_keys(json_t *j, const char *path, error_rec *err) {
    static const char *const objects[] = {"price",   "defaults",     "pools",
                                          "images",  "image_import", "node_labels",
                                          "network", "gpus",         "gpu_control"};
    static const char *const price_keys[] = {"vcpu_hour_usd", "gib_hour_usd", "gpu_hour_usd", NULL};
    static const char *const import_keys[] = {"max_archive", "max_unpacked", NULL};
    const char *keys[ARRAY_SIZE(rows) + ARRAY_SIZE(objects) + 1];
    size_t n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
        if (rows[i].key)
            keys[n++] = rows[i].key;
    for (size_t i = 0; i < ARRAY_SIZE(objects); i++)
        keys[n++] = objects[i];
    keys[n] = NULL;
    int r = jsonkeys_check(j, keys, NULL, err);
    if (r >= 0)
        r = jsonkeys_check(json_object_get(j, "price"), price_keys, "price", err);
    if (r >= 0)
        r = jsonkeys_check(json_object_get(j, "image_import"), import_keys, "image_import", err);
    if (r >= 0)
        r = check_network(json_object_get(j, "network"), err);
    if (r >= 0)
        r = jsonkeys_check(json_object_get(j, "defaults"), policy_create_keys, "defaults", err);
    const char *own = jsonkeys_other(json_object_get(j, "defaults"), policy_defaults_keys);
    if (r >= 0 && own) /* e.g. labels, ports: what one create asks for (policy/limits.h) */
        r = error_set(err, -EINVAL,
                      "defaults.%.64s: a create's own field, not a default (defaults take image, "
                      "cpu, memory, disk, pids, env, idle_timeout, timeout, max_cost_usd, network "
                      "and isolation)",
                      own);
    return r < 0 ? error_prefix(err, "config %s", path) : 0;
}

static int load_file(sd_config *c, const char *path, bool required, error_rec *err) {
    struct stat st;
    if (!required && stat(path, &st) < 0)
        return 0;
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return error_set(err, -EINVAL, "config %s: %s (line %d)", path,
                         j ? "not an object" : je.text, je.line);
    }
    int r = check_file_keys(j, path, err);
    for (size_t i = 0; i < ARRAY_SIZE(rows) && r >= 0; i++)
        if (rows[i].key)
            r = apply_json(c, &rows[i], json_object_get(j, rows[i].key), path, err);
    if (r >= 0)
        r = load_price(c, json_object_get(j, "price"), err);
    json_t *defs = json_object_get(j, "defaults");
    if (r >= 0 && defs) {
        if (!json_is_object(defs))
            r = error_set(err, -EINVAL, "config %s: defaults must be an object", path);
        else if ((r = policy_limits_check_env(json_object_get(defs, "env"), err)) < 0)
            error_prefix(err, "config %s: defaults", path);
        else
            c->defaults = json_incref(defs);
    }
    json_t *pools = json_object_get(j, "pools");
    if (r >= 0 && pools) {
        if (!json_is_array(pools))
            r = error_set(err, -EINVAL, "config %s: pools must be an array", path);
        else
            c->pools = json_deep_copy(pools);
    }
    /* images: directory images and import limits, validated by core/images.c */
    if (r >= 0 && json_object_get(j, "images") && !json_is_object(json_object_get(j, "images")))
        r = error_set(err, -EINVAL, "config %s: images must be an object {\"NAME\": \"/dir\"}",
                      path);
    if (r >= 0) {
        c->images = json_incref(json_object_get(j, "images"));
        c->image_import = json_incref(json_object_get(j, "image_import"));
    }
    if (r >= 0)
        r = load_labels(c, json_object_get(j, "node_labels"), path, err);
    if (r >= 0) { /* GPUs: validated by core/gpu.c */
        c->gpus = json_incref(json_object_get(j, "gpus"));
        c->gpu_control = json_incref(json_object_get(j, "gpu_control"));
    }
    if (r >= 0 && json_object_get(j, "network"))
        c->network = json_incref(json_object_get(j, "network"));
    json_decref(j);
    return r;
}

static int parse_flags(int argc, char **argv, sd_config *c, error_rec *err) {
    static struct option options[ARRAY_SIZE(rows) + 3];
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
        options[i] = (struct option){rows[i].flag, required_argument, NULL, OPT_ROW + (int)i};
    options[ARRAY_SIZE(rows)] = (struct option){"help", no_argument, NULL, OPT_HELP};
    options[ARRAY_SIZE(rows) + 1] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    optind = 1;
    int opt, r;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == OPT_VERSION) {
            printf("sandboxd %s\n", SBX_VERSION);
            exit(0);
        }
        if (opt == OPT_HELP) {
            fputs(usage, stdout);
            exit(0);
        }
        if (opt == '?' || opt == ':')
            return error_set(err, -EINVAL, "%s", usage);
        if ((r = apply(c, &rows[opt - OPT_ROW], optarg, err)) < 0)
            return r;
    }
    if (optind < argc)
        return error_set(err, -EINVAL, "unexpected argument \"%s\"\n%s", argv[optind], usage);
    return 0;
}

/* The host name, lowered, other characters as '-', cut at 40: a default node name. */
static char *default_node_name(void) {
    char h[256] = "";
    if (gethostname(h, sizeof(h) - 1) < 0 || !*h)
        snprintf(h, sizeof(h), "node");
    h[40] = 0;
    for (char *p = h; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '-';
    return strdup(h);
}

static bool node_name_ok(const char *n) {
    size_t len = strlen(n);
    return len >= 1 && len <= 40 && strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
}

/* The fleet settings (docs/FLEET.md): defaults and the checks between them. */
static int fleet_finish(sd_config *c, error_rec *err) {
    if ((c->tls_cert != NULL) != (c->tls_key != NULL))
        return error_set(err, -EINVAL, "--tls-cert and --tls-key go together");
    if (!c->fleet_etcd)
        return 0;
    if (!c->fleet_prefix)
        c->fleet_prefix = strdup("/sandboxd");
    size_t n = strlen(c->fleet_prefix);
    while (n > 1 && c->fleet_prefix[n - 1] == '/')
        c->fleet_prefix[--n] = 0;
    if (!c->node_name)
        c->node_name = default_node_name();
    if (!c->fleet_ttl)
        c->fleet_ttl = 5;
    if (!c->node_name || !node_name_ok(c->node_name))
        return error_set(err, -EINVAL, "--node-name: expected [a-z0-9-]{1,40}, got \"%s\"",
                         c->node_name ? c->node_name : "");
    if (!c->advertise_url || (strncmp(c->advertise_url, "http://", 7) != 0 &&
                              strncmp(c->advertise_url, "https://", 8) != 0))
        return error_set(err, -EINVAL,
                         "--fleet-etcd needs --advertise-url http(s)://HOST:PORT (how other "
                         "nodes and clients reach this node)");
    if (c->fleet_ttl < 2)
        return error_set(err, -EINVAL, "--fleet-ttl: at least 2 seconds");
    if (c->fleet_read && strcmp(c->fleet_read, "watch") != 0 && strcmp(c->fleet_read, "poll") != 0)
        return error_set(err, -EINVAL, "--fleet-read: \"watch\" or \"poll\", got \"%s\"",
                         c->fleet_read);
    return 0;
}

int sd_config_load(int argc, char **argv, sd_config *c, error_rec *err) {
    *c = (sd_config){.log_level = LOG_LEVEL_INFO,
                     .price = policy_price_default(),
                     .pool_demand_idle_s = 30,
                     .spare_shims = 1};
    const char *config = NULL;
    for (int i = 1; i < argc; i++) { /* the file comes first, flags override it */
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            config = argv[i] + 9;
    }
    int r = load_file(c, config ? config : DEFAULT_CONFIG, config != NULL, err);
    if (r < 0 || (r = parse_flags(argc, argv, c, err)) < 0)
        return r;
    c->config_path = strdup(config ? config : DEFAULT_CONFIG);
    if (!c->socket_path)
        c->socket_path = strdup("/run/sandboxd/sandboxd.sock");
    if (!c->run_dir)
        c->run_dir = strdup("/run/sandboxd");
    if (!c->state_dir)
        c->state_dir = strdup("/var/lib/sandboxd");
    if (c->tcp && (!c->token || !*c->token) && (!c->fleet_token || !*c->fleet_token))
        return error_set(err, -EINVAL,
                         "--tcp needs --token TOKEN: TCP is never served without one");
    if (c->spare_shims > SD_SPARE_SHIMS_MAX)
        return error_set(err, -EINVAL, "--spare-shims: at most %d, got %u", SD_SPARE_SHIMS_MAX,
                         c->spare_shims);
    return fleet_finish(c, err);
}

void sd_config_done(sd_config *c) {
    free(c->config_path);
    free(c->socket_path);
    free(c->tcp);
    free(c->sf_listen);
    free(c->token);
    free(c->run_dir);
    free(c->state_dir);
    free(c->shim_path);
    free(c->seccomp_profile);
    free(c->cgroup_parent);
    json_decref(c->defaults);
    json_decref(c->network);
    json_decref(c->pools);
    json_decref(c->images);
    json_decref(c->image_import);
    json_decref(c->node_labels);
    json_decref(c->gpus);
    json_decref(c->gpu_control);
    free(c->gpu_root);
    free(c->runsc);
    free(c->fleet_etcd);
    free(c->fleet_prefix);
    free(c->node_name);
    free(c->advertise_url);
    free(c->fleet_token);
    free(c->fleet_ca);
    free(c->fleet_read);
    free(c->tls_cert);
    free(c->tls_key);
    *c = (sd_config){0};
}
