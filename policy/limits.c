/* Request body validation for the API (see limits.h). */
#include "policy/limits.h"

#include "policy/gpu.h"
#include "policy/image_name.h"
#include "policy/ports.h"
#include "policy/volumes.h"

#include "common/jsonkeys.h"
#include "common/jsonstr.h"

#include "common/b64.h"
#include "common/units.h"

#include <math.h>
#include <string.h>

#define MAX_MAP_ENTRIES 256
#define MAX_KEY_LEN 256
#define MAX_VALUE_LEN 32768
#define MAX_ARGV 4096
#define MAX_PATH_LEN 4096

/* The keys each body may carry (common/jsonkeys.h): one list per body, policy as data. */
const char *const policy_create_keys[] = {
    "image",     "cpu",          "memory",  "disk",         "pids",    "env",
    "labels",    "idle_timeout", "timeout", "max_cost_usd", "network", "lease",
    "profile",   "ports",        "gpus",    "entrypoint", /* parsed by policy/entrypoint.c (the API
                                                             starts it: api/entrypoint.c) */
    "isolation", "volumes",      "on_idle", "pausable",     NULL};
/* Of those, what the operator's config "defaults" may set (the others are a create's own). */
const char *const policy_defaults_keys[] = {"image",        "cpu",     "memory",       "disk",
                                            "pids",         "env",     "idle_timeout", "timeout",
                                            "max_cost_usd", "network", "isolation",    NULL};
static const char *const exec_keys[] = {
    "argv", "shell", "cwd", "user", "env", "stdin", "stdin_b64", "timeout", "max_output",
    /* policy/process.h: how the command runs (policy_process_parse) */
    "tty", "background", "tty_size", "term", NULL};
static const char *const network_keys[] = {"allow", NULL};
static const char *const timeout_keys[] = {"timeout", NULL};
static const char *const lease_keys[] = {"ttl", NULL};

static json_t *pick(json_t *body, json_t *defaults, const char *key) {
    json_t *v = json_is_object(body) ? json_object_get(body, key) : NULL;
    if (v && !json_is_null(v))
        return v;
    v = json_is_object(defaults) ? json_object_get(defaults, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

static int bad(error_rec *err, const char *field, const char *what) {
    return error_set(err, -EINVAL, "%s: %s", field, what);
}

int policy_parse_size(json_t *v, const char *field, uint64_t *ret, error_rec *err) {
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return bad(err, field, "must not be negative");
        *ret = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d < 0 || d != floor(d))
            return bad(err, field, "must be a whole number of bytes");
        if (d >= 1.8e19)
            return bad(err, field, "is too large (at most 2^64-1 bytes)");
        *ret = (uint64_t)d;
        return 0;
    }
    if (json_is_string(v)) {
        if (units_parse_size(json_string_value(v), ret) < 0)
            return bad(err, field, "must be a size like 1048576, \"512Mi\" or \"2Gi\"");
        return 0;
    }
    return bad(err, field, "must be a number of bytes or a size string like \"512Mi\"");
}

int policy_parse_duration(json_t *v, const char *field, uint64_t *ret_ms, error_rec *err) {
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (!isfinite(d) || d < 0)
            return bad(err, field, "must be a non-negative number of seconds");
        if (d > 1e12)
            return bad(err, field, "is too long (at most 1e12 seconds)");
        *ret_ms = (uint64_t)llround(d * 1000.0);
        return 0;
    }
    if (json_is_string(v)) {
        if (units_parse_duration(json_string_value(v), ret_ms) < 0)
            return bad(err, field, "must be a duration like 30, \"30s\", \"5m\" or \"1h\"");
        return 0;
    }
    return bad(err, field, "must be a number of seconds or a duration string like \"30s\"");
}

static int parse_duration_range(json_t *v, const char *field, uint64_t def, uint64_t min,
                                uint64_t max, uint64_t *ret, error_rec *err) {
    if (!v) {
        *ret = def;
        return 0;
    }
    uint64_t ms;
    int r = policy_parse_duration(v, field, &ms, err);
    if (r < 0)
        return r;
    if (ms < min || ms > max)
        return error_set(err, -EINVAL, "%s: must be between %.3gs and %.0fs", field,
                         (double)min / 1000, (double)max / 1000);
    *ret = ms;
    return 0;
}

/* One entry of a string -> string map (k: kl bytes, not NUL-terminated): the key non-empty,
 * without '=', the value a string; both of bounded size. */
static int check_entry(const char *field, const char *k, size_t kl, json_t *val, error_rec *err) {
    if (kl == 0 || memchr(k, '=', kl) || kl > MAX_KEY_LEN)
        return error_set(err, -EINVAL, "%s: key \"%.*s\" must be 1-256 characters without '='",
                         field, (int)MIN(kl, 64u), k);
    if (!json_is_string(val))
        return error_set(err, -EINVAL, "%s.%.*s: must be a string", field, (int)MIN(kl, 64u), k);
    if (json_string_length(val) > MAX_VALUE_LEN)
        return error_set(err, -EINVAL, "%s.%.*s: value too long", field, (int)MIN(kl, 64u), k);
    return 0;
}

/* A string -> string object: keys non-empty, without '=', bounded sizes. Returns a copy. */
static int parse_string_map(json_t *v, const char *field, json_t **ret, error_rec *err) {
    if (!v) {
        *ret = json_object();
        return 0;
    }
    if (!json_is_object(v))
        return bad(err, field, "must be an object of string keys to string values");
    if (json_object_size(v) > MAX_MAP_ENTRIES)
        return bad(err, field, "has too many entries (at most 256)");
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val) {
        int r = check_entry(field, k, strlen(k), val, err);
        if (r < 0)
            return r;
    }
    *ret = json_deep_copy(v);
    return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
}

/* env (an object) as JSON "K=V" strings is at most max bytes; else -EINVAL naming field. */
static int check_env_size(json_t *env, const char *field, size_t max, error_rec *err) {
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        total += jsonstr_escaped_len(k, strlen(k)) + 4; /* the quotes, '=' and ',' */
        total += jsonstr_escaped_len(json_string_value(v), json_string_length(v));
    }
    if (total > max)
        return error_set(err, -EINVAL,
                         "%s: too large (%zu bytes as JSON, at most %zu): it goes to the sandbox "
                         "with each command",
                         field, total, max);
    return 0;
}

int policy_limits_check_env(json_t *env, error_rec *err) {
    return check_env_size(env, "env", POLICY_MAX_ENV_JSON, err);
}

int policy_limits_check_image_env(json_t *env, error_rec *err) {
    static const char field[] = "image: config Env";
    if (!env)
        return 0;
    if (!json_is_array(env))
        return bad(err, field, "must be an array of NAME=VALUE strings");
    if (json_array_size(env) > MAX_MAP_ENTRIES)
        return bad(err, field, "has too many entries (at most 256)");
    _cleanup_(json_decrefp) json_t *map = json_object();
    if (!map)
        return error_set(err, -ENOMEM, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e) {
        const char *s = json_string_value(e), *eq = s ? strchr(s, '=') : NULL;
        if (!eq || eq == s || strlen(s) != json_string_length(e))
            return error_set(err, -EINVAL, "%s: %.64s is not NAME=VALUE", field,
                             s ? s : "(not a string)");
        _cleanup_(json_decrefp) json_t *val = json_string(eq + 1);
        int r = val ? check_entry(field, s, (size_t)(eq - s), val, err) : -ENOMEM;
        if (r == 0 && json_object_setn(map, s, (size_t)(eq - s), val) < 0)
            r = -ENOMEM;
        if (r < 0)
            return r == -ENOMEM ? error_set(err, r, "out of memory") : r;
    }
    return check_env_size(map, field, POLICY_MAX_IMAGE_ENV_JSON, err);
}

static bool path_ok(const char *p) {
    if (p[0] != '/' || strlen(p) > MAX_PATH_LEN)
        return false;
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
            return false;
    return true;
}

/* images: "host" or a store/config image name (policy/image_name.h); never a host path. */
static int parse_image(json_t *v, char **ret, error_rec *err) {
    const char *s = v ? json_string_value(v) : "host";
    char name[POLICY_IMAGE_NAME_MAX];
    if (!s)
        return bad(err, "image", "must be a string: \"host\" or an image name (NAME[:TAG])");
    if (s[0] == '/')
        return bad(err, "image",
                   "a host directory cannot be named in a request: import an image "
                   "(POST /v1/images) or ask the operator to name the directory in the config "
                   "file (\"images\": {\"NAME\": \"/path\"})");
    int r = policy_image_name(s, "image", name, err);
    if (r < 0)
        return r;
    *ret = strdup(name);
    return *ret ? 0 : -ENOMEM;
}

static int parse_cpu(json_t *v, const policy_host *host, double *ret, error_rec *err) {
    if (!v) {
        *ret = MIN(1.0, host->cpus);
        return 0;
    }
    if (!json_is_number(v))
        return bad(err, "cpu", "must be a number of vCPUs");
    double c = json_number_value(v);
    if (!isfinite(c) || c < POLICY_MIN_CPU || c > host->cpus)
        return error_set(err, -EINVAL, "cpu: must be in [%g, %g] vCPUs", POLICY_MIN_CPU,
                         host->cpus);
    *ret = c;
    return 0;
}

static int parse_size_range(json_t *v, const char *field, uint64_t def, uint64_t min, uint64_t max,
                            uint64_t *ret, error_rec *err) {
    uint64_t b = def;
    if (v) {
        int r = policy_parse_size(v, field, &b, err);
        if (r < 0)
            return r;
    }
    if (b < min || b > max)
        return error_set(err, -EINVAL, "%s: must be between %llu and %llu bytes", field,
                         (unsigned long long)min, (unsigned long long)max);
    *ret = b;
    return 0;
}

static int parse_pids(json_t *v, uint32_t *ret, error_rec *err) {
    if (!v) {
        *ret = 256;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 8 || json_integer_value(v) > 65536)
        return bad(err, "pids", "must be an integer in [8, 65536]");
    *ret = (uint32_t)json_integer_value(v);
    return 0;
}

static int parse_cost(json_t *v, double *ret, error_rec *err) {
    *ret = 0;
    if (!v)
        return 0;
    double usd = json_number_value(v);
    if (!json_is_number(v) || !isfinite(usd) || usd < POLICY_MIN_COST_USD ||
        usd > POLICY_MAX_COST_USD)
        return error_set(err, -EINVAL,
                         "max_cost_usd: must be a number of dollars in [%g, %g] (or null for no "
                         "cap)",
                         POLICY_MIN_COST_USD, POLICY_MAX_COST_USD);
    *ret = json_number_value(v);
    return 0;
}

static int parse_network(json_t *v, policy_create *c, error_rec *err) {
    c->net_mode = POLICY_NET_NONE;
    if (!v || (json_is_string(v) && strcmp(json_string_value(v), "none") == 0))
        return 0;
    if (json_is_string(v) && strcmp(json_string_value(v), "open") == 0) {
        c->net_mode = POLICY_NET_OPEN;
        return 0;
    }
    json_t *allow = json_is_object(v) ? json_object_get(v, "allow") : NULL;
    int r = jsonkeys_check(v, network_keys, "network", err);
    if (r < 0)
        return r;
    if (!json_is_array(allow))
        return bad(err, "network", "must be \"none\", \"open\" or {\"allow\":[...]}");
    if (json_array_size(allow) > MAX_MAP_ENTRIES)
        return bad(err, "network.allow", "has too many entries (at most 256)");
    size_t i;
    json_t *e;
    json_array_foreach(allow, i, e) {
        if (!json_is_string(e) || json_string_length(e) == 0)
            return error_set(err, -EINVAL, "network.allow[%zu]: must be a non-empty string", i);
        if (json_string_length(e) > 261) /* (a 253-byte name with a port fits) */
            return error_set(err, -EINVAL, "network.allow[%zu]: longer than 261 bytes", i);
    }
    c->net_mode = POLICY_NET_ALLOW;
    c->net_allow = json_deep_copy(allow);
    return 0;
}

static int parse_lease(json_t *v, char **ret, error_rec *err) {
    *ret = NULL;
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 64)
        return bad(err, "lease", "must be a lease id string (\"ls-...\")");
    *ret = strdup(json_string_value(v));
    return *ret ? 0 : -ENOMEM;
}

/* "on_idle": absent/null/"end" (the default: an idle sandbox ends) or "pause". */
static int parse_on_idle(json_t *v, bool *ret, error_rec *err) {
    const char *s = json_string_value(v);
    if (v && !json_is_null(v) && !(s && (!strcmp(s, "end") || !strcmp(s, "pause"))))
        return bad(err, "on_idle", "must be \"end\" or \"pause\"");
    *ret = s && !strcmp(s, "pause");
    return 0;
}

/* "pausable": absent/null/false, or true (docs/API.md "Pause and resume"): the sandbox is built
 * so that it can be paused to disk. "on_idle":"pause" makes it so. Not with what a pause cannot
 * carry yet: grading users, gvisor, GPUs. */
static int parse_pausable(json_t *v, policy_create *c, error_rec *err) {
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return bad(err, "pausable", "must be true or false");
    c->pausable = json_is_true(v) || c->on_idle_pause;
    const char *what = c->grading  ? "\"profile\":\"grading\""
                       : c->gvisor ? "\"isolation\":\"gvisor\""
                       : c->gpus   ? "\"gpus\""
                                   : NULL;
    if (c->pausable && what)
        return error_set(err, -EINVAL, "%s: a pausable sandbox cannot have %s (yet)",
                         c->on_idle_pause ? "on_idle" : "pausable", what);
    return 0;
}

/* "profile": absent/null/"default", or "grading". */
static int parse_profile(json_t *v, bool *ret, error_rec *err) {
    const char *s = json_string_value(v);
    if (v && !json_is_null(v) && !(s && (!strcmp(s, "default") || !strcmp(s, "grading"))))
        return bad(err, "profile", "must be \"default\" or \"grading\"");
    *ret = s && !strcmp(s, "grading");
    return 0;
}

/* "isolation": "native" (the default) or "gvisor". gVisor has no grading users and no GPUs:
 * asked for in the body with either, a 400; an operator's default of gvisor leaves such
 * sandboxes native (their "isolation" says so). */
static int parse_isolation(json_t *body, json_t *defaults, policy_create *c, error_rec *err) {
    json_t *v = pick(body, defaults, "isolation");
    const char *s = json_string_value(v);
    if (v && !(s && (!strcmp(s, "native") || !strcmp(s, "gvisor"))))
        return bad(err, "isolation", "must be \"native\" or \"gvisor\"");
    c->gvisor = s && !strcmp(s, "gvisor");
    if (c->gvisor && (c->grading || c->gpus) && !pick(body, NULL, "isolation"))
        c->gvisor = false;
    if (c->gvisor && c->grading)
        return error_set(err, -EINVAL,
                         "isolation: \"gvisor\" is unsupported with \"profile\":\"grading\" "
                         "(the grader's hidden /proc and its agent socket need the native class)");
    if (c->gvisor && c->gpus)
        return bad(err, "isolation", "\"gvisor\" is unsupported with \"gpus\"");
    return 0;
}

int policy_limits_parse_create(json_t *body, json_t *defaults, const policy_host *host,
                               policy_create *ret, error_rec *err) {
    if (!json_is_object(body))
        return error_set(err, -EINVAL, "body: must be a JSON object");
    policy_create c = {0};
    json_t *d = defaults;
    int r = jsonkeys_check(body, policy_create_keys, NULL, err);
    if (r < 0)
        return r;
    /* null is "no cap" (docs/API.md), not "the operator's default" as for the other fields */
    json_t *cost =
        json_is_null(json_object_get(body, "max_cost_usd")) ? NULL : pick(body, d, "max_cost_usd");
    if ((r = parse_image(pick(body, d, "image"), &c.image, err)) < 0 ||
        (r = parse_cpu(pick(body, d, "cpu"), host, &c.cpu, err)) < 0 ||
        (r = parse_size_range(pick(body, d, "memory"), "memory",
                              MIN(2ull << 30, host->memory_bytes), POLICY_MIN_MEMORY,
                              host->memory_bytes, &c.memory, err)) < 0 ||
        (r = parse_size_range(pick(body, d, "disk"), "disk", 1ull << 30, 1ull << 20,
                              POLICY_MAX_DISK, &c.disk, err)) < 0 ||
        (r = parse_pids(pick(body, d, "pids"), &c.pids, err)) < 0 ||
        (r = parse_string_map(pick(body, d, "env"), "env", &c.env, err)) < 0 ||
        (r = parse_string_map(pick(body, NULL, "labels"), "labels", &c.labels, err)) < 0 ||
        (r = parse_duration_range(pick(body, d, "idle_timeout"), "idle_timeout", 300000, 1000,
                                  POLICY_MAX_DURATION_MS, &c.idle_timeout_ms, err)) < 0 ||
        (r = parse_duration_range(pick(body, d, "timeout"), "timeout", 3600000, 1000,
                                  POLICY_MAX_DURATION_MS, &c.timeout_ms, err)) < 0 ||
        (r = parse_cost(cost, &c.max_cost_usd, err)) < 0 ||
        (r = parse_network(pick(body, d, "network"), &c, err)) < 0 ||
        (r = parse_lease(pick(body, NULL, "lease"), &c.lease, err)) < 0 ||
        (r = parse_profile(pick(body, NULL, "profile"), &c.grading, err)) < 0 ||
        (r = policy_parse_ports(pick(body, NULL, "ports"), c.ports, &c.n_ports, err)) < 0 ||
        (r = policy_gpu_parse(pick(body, NULL, "gpus"), &c.gpus, &c.gpu_uuids, err)) < 0 ||
        (r = parse_isolation(body, d, &c, err)) < 0 ||
        (r = policy_volumes_parse(pick(body, NULL, "volumes"), &c.volumes, err)) < 0 ||
        (r = parse_on_idle(pick(body, NULL, "on_idle"), &c.on_idle_pause, err)) < 0 ||
        (r = parse_pausable(pick(body, NULL, "pausable"), &c, err)) < 0) {
        policy_create_done(&c);
        return r == -ENOMEM ? error_set(err, -ENOMEM, "out of memory") : r;
    }
    *ret = c;
    return 0;
}

void policy_create_done(policy_create *c) {
    if (!c)
        return;
    free(c->image);
    free(c->lease);
    json_decref(c->env);
    json_decref(c->labels);
    json_decref(c->net_allow);
    json_decref(c->gpu_uuids);
    json_decref(c->volumes);
    *c = (policy_create){0};
}

json_t *policy_create_to_json(const policy_create *c) {
    json_t *net = c->net_mode == POLICY_NET_NONE   ? json_string("none")
                  : c->net_mode == POLICY_NET_OPEN ? json_string("open")
                                                   : json_pack("{s:O}", "allow", c->net_allow);
    json_t *j =
        json_pack("{s:s,s:f,s:I,s:I,s:i,s:O,s:O,s:f,s:f,s:o,s:o,s:o}", "image", c->image, "cpu",
                  c->cpu, "memory", (json_int_t)c->memory, "disk", (json_int_t)c->disk, "pids",
                  (int)c->pids, "env", c->env, "labels", c->labels, "idle_timeout",
                  c->idle_timeout_ms / 1000.0, "timeout", c->timeout_ms / 1000.0, "max_cost_usd",
                  c->max_cost_usd > 0 ? json_real(c->max_cost_usd) : json_null(), "network", net,
                  "lease", c->lease ? json_string(c->lease) : json_null());
    if (j && c->grading)
        json_object_set_new(j, "profile", json_string("grading"));
    if (j && c->n_ports)
        json_object_set_new(j, "ports", policy_ports_json(c->ports, c->n_ports));
    if (j && c->gpus) /* the uuids once allocated (core/gpu.c), so a restart claims them back */
        json_object_set_new(j, "gpus",
                            c->gpu_uuids ? json_deep_copy(c->gpu_uuids) : json_integer(c->gpus));
    if (j && c->gvisor)
        json_object_set_new(j, "isolation", json_string("gvisor"));
    if (j && c->volumes) /* volumes: a restart claims them back (core/volumes.c) */
        json_object_set_new(j, "volumes", json_deep_copy(c->volumes));
    if (j && c->on_idle_pause)
        json_object_set_new(j, "on_idle", json_string("pause"));
    if (j && c->pausable)
        json_object_set_new(j, "pausable", json_true());
    return j;
}

/* POST /v1/volumes (policy/volumes.h has the rest of a volume's rules). */
int policy_limits_parse_volume(json_t *body, char *name, uint64_t *ret_size, error_rec *err) {
    if (!json_is_object(body))
        return error_set(err, -EINVAL, "body: must be a JSON object");
    int r = jsonkeys_check(body, policy_volume_keys, NULL, err);
    if (r < 0)
        return r;
    const char *n = json_string_value(json_object_get(body, "name"));
    if (!json_object_get(body, "name"))
        return error_set(err, -EINVAL, "name: required");
    if (!policy_volume_name_ok(n))
        return policy_volume_bad_name("name", err);
    uint64_t size = POLICY_VOLUME_DEFAULT_SIZE;
    json_t *s = json_object_get(body, "size");
    if (s && !json_is_null(s) && (r = policy_parse_size(s, "size", &size, err)) < 0)
        return r;
    if (size < POLICY_VOLUME_MIN_SIZE || size > POLICY_VOLUME_MAX_SIZE)
        return error_set(err, -EINVAL, "size: must be between 16Mi (%llu) and 1Ti (%llu) bytes",
                         POLICY_VOLUME_MIN_SIZE, POLICY_VOLUME_MAX_SIZE);
    snprintf(name, POLICY_VOLUME_NAME_MAX + 1, "%s", n);
    *ret_size = size;
    return 0;
}

static int parse_argv(json_t *v, json_t **ret, error_rec *err) {
    if (!json_is_array(v) || json_array_size(v) == 0)
        return bad(err, "argv", "must be a non-empty array of strings");
    if (json_array_size(v) > MAX_ARGV)
        return bad(err, "argv", "has too many elements (at most 4096)");
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e))
            return error_set(err, -EINVAL, "argv[%zu]: must be a string", i);
    }
    if (json_string_length(json_array_get(v, 0)) == 0)
        return bad(err, "argv[0]", "must not be empty");
    *ret = json_deep_copy(v);
    return 0;
}

static int parse_stdin(json_t *body, policy_exec *e, error_rec *err) {
    json_t *text = pick(body, NULL, "stdin"), *b64 = pick(body, NULL, "stdin_b64");
    if (text && b64)
        return bad(err, "stdin", "give either stdin or stdin_b64, not both");
    if (text) {
        if (!json_is_string(text))
            return bad(err, "stdin", "must be a string");
        e->stdin_len = json_string_length(text);
        e->stdin_data = malloc(e->stdin_len + 1);
        if (!e->stdin_data)
            return -ENOMEM;
        memcpy(e->stdin_data, json_string_value(text), e->stdin_len + 1);
    } else if (b64) {
        if (!json_is_string(b64) || b64_decode(json_string_value(b64), json_string_length(b64),
                                               &e->stdin_data, &e->stdin_len) < 0)
            return bad(err, "stdin_b64", "must be a base64 string");
    }
    return 0;
}

int policy_limits_parse_exec(json_t *body, policy_exec *ret, error_rec *err) {
    if (!json_is_object(body))
        return error_set(err, -EINVAL, "body: must be a JSON object");
    policy_exec e = {0};
    json_t *shell = pick(body, NULL, "shell"), *cwd = pick(body, NULL, "cwd");
    int r = jsonkeys_check(body, exec_keys, NULL, err);
    if (r < 0)
        return r;
    if ((r = parse_argv(pick(body, NULL, "argv"), &e.argv, err)) < 0)
        goto fail;
    if (shell && !json_is_boolean(shell)) {
        r = bad(err, "shell", "must be true or false");
        goto fail;
    }
    e.shell = json_is_true(shell);
    if (cwd && (!json_is_string(cwd) || !path_ok(json_string_value(cwd)))) {
        r = bad(err, "cwd", "must be an absolute path without \"..\"");
        goto fail;
    }
    e.cwd = strdup(cwd ? json_string_value(cwd) : "/workspace");
    json_t *user = pick(body, NULL, "user");
    const char *us = json_string_value(user);
    if (user && !json_is_null(user) && !(us && (!strcmp(us, "agent") || !strcmp(us, "grader")))) {
        r = bad(err, "user", "must be \"agent\" or \"grader\"");
        goto fail;
    }
    e.as_grader = us && !strcmp(us, "grader");
    if ((r = parse_string_map(pick(body, NULL, "env"), "env", &e.env, err)) < 0 ||
        (r = parse_stdin(body, &e, err)) < 0 ||
        (r = parse_duration_range(pick(body, NULL, "timeout"), "timeout", 0, 1,
                                  POLICY_MAX_DURATION_MS, &e.timeout_ms, err)) < 0 ||
        (r = parse_size_range(pick(body, NULL, "max_output"), "max_output", 1ull << 20, 1,
                              POLICY_MAX_OUTPUT, &e.max_output, err)) < 0)
        goto fail;
    *ret = e;
    return 0;
fail:
    policy_exec_done(&e);
    return r == -ENOMEM ? error_set(err, -ENOMEM, "out of memory") : r;
}

void policy_exec_done(policy_exec *e) {
    if (!e)
        return;
    json_decref(e->argv);
    json_decref(e->env);
    json_decref(e->file);
    free(e->cwd);
    free(e->stdin_data);
    *e = (policy_exec){0};
}

int policy_limits_parse_timeout(json_t *body, uint64_t *ret_ms, error_rec *err) {
    json_t *v = json_is_object(body) ? json_object_get(body, "timeout") : NULL;
    if (!json_is_object(body))
        return error_set(err, -EINVAL, "body: must be a JSON object");
    int r = jsonkeys_check(body, timeout_keys, NULL, err);
    if (r < 0)
        return r;
    if (!v || json_is_null(v))
        return bad(err, "timeout", "is required");
    return parse_duration_range(v, "timeout", 0, 1000, POLICY_MAX_DURATION_MS, ret_ms, err);
}

int policy_limits_parse_lease(json_t *body, uint64_t *ret_ms, error_rec *err) {
    if (body && !json_is_object(body))
        return error_set(err, -EINVAL, "body: must be a JSON object");
    int r = jsonkeys_check(body, lease_keys, NULL, err);
    if (r < 0)
        return r;
    return parse_duration_range(pick(body, NULL, "ttl"), "ttl", 60000, 1000, POLICY_MAX_DURATION_MS,
                                ret_ms, err);
}
