/* The sandbox spec (common/spec.h): parsing and validation, the writer, and the default
 * environment. */
#include "common/spec.h"

#include "common/fdutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_LIST_MAX 4096

bool shim_spec_id_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > SHIM_ID_MAX)
        return false;
    for (size_t i = 0; i < n;
         i++) /* '.' separates a fleet id's node part: never first, never ".." */
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              (s[i] == '.' && i > 0 && s[i - 1] != '.')))
            return false;
    return true;
}

static void strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void shim_spec_free(shim_spec *s) {
    if (!s)
        return;
    free(s->image_path);
    strv_free(s->layers);
    strv_free(s->env);
    for (size_t i = 0; i < s->n_hosts; i++) {
        free(s->hosts[i].addr);
        free(s->hosts[i].names);
    }
    free(s->hosts);
    strv_free(s->dns);
    free(s->seccomp_bpf);
    free(s->seed_path);
    free(s->cgroup_parent);
    json_decref(s->gpus);
    free(s->runsc);
    free(s->restore);
    json_decref(s->volumes);
    free(s);
}

/* A string free of control characters and newlines (it ends up in generated files). */
static bool text_clean(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

static int parse_strv(json_t *arr, const char *field, char ***ret, size_t *ret_n, error_rec *err) {
    if (!arr) {
        *ret = calloc(1, sizeof(char *));
        *ret_n = 0;
        return *ret ? 0 : -ENOMEM;
    }
    if (!json_is_array(arr))
        return error_set(err, -EINVAL, "spec: %s must be an array of strings", field);
    if (json_array_size(arr) > SPEC_LIST_MAX)
        return error_set(err, -E2BIG, "spec: %s has %zu entries (at most %d)", field,
                         json_array_size(arr), SPEC_LIST_MAX);
    size_t n = json_array_size(arr);
    char **v = calloc(n + 1, sizeof(char *));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        /* env values may hold any text; dns entries end up in /etc/resolv.conf */
        bool ok = s && (strcmp(field, "env") == 0 || text_clean(s));
        if (!ok || !(v[i] = strdup(s))) {
            strv_free(v);
            return error_set(err, -EINVAL, "spec: %s[%zu] must be a string%s", field, i,
                             strcmp(field, "env") ? " without control characters" : "");
        }
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static int check_env(const shim_spec *s, error_rec *err) {
    for (size_t i = 0; i < s->n_env; i++)
        if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
            return error_set(err, -EINVAL, "spec: env[%zu] must be KEY=VALUE", i);
    return 0;
}

static int parse_u64(json_t *o, const char *key, uint64_t def, uint64_t max, uint64_t *ret,
                     error_rec *err) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
        return error_set(err, -EINVAL, "spec: %s must be an integer in 0..%llu", key,
                         (unsigned long long)max);
    *ret = (uint64_t)json_integer_value(v);
    return 0;
}

/* images: "layers": absolute paths of store layers, bottom first */
static int parse_layers(shim_spec *s, json_t *img, error_rec *err) {
    json_t *arr = json_object_get(img, "layers"), *v;
    size_t i, n = json_array_size(arr);
    if (!json_is_array(arr) || n == 0 || n > SHIM_MAX_LAYERS)
        return error_set(err, -EINVAL, "spec: image.layers must list 1-%d paths", SHIM_MAX_LAYERS);
    if (!(s->layers = calloc(n + 1, sizeof(char *))))
        return -ENOMEM;
    json_array_foreach(arr, i, v) {
        const char *p = json_string_value(v);
        if (!p || p[0] != '/' || strstr(p, "/../") || !text_clean(p) || strpbrk(p, ",:\n") ||
            strlen(p) != json_string_length(v))
            return error_set(err, -EINVAL, "spec: image.layers[%zu] must be a clean absolute path",
                             i);
        if (!(s->layers[i] = strdup(p)))
            return -ENOMEM;
        s->n_layers = i + 1;
    }
    s->image_type = SHIM_IMAGE_LAYERS;
    return 0;
}

static int parse_image(shim_spec *s, json_t *img, error_rec *err) {
    const char *type = json_string_value(json_object_get(img, "type"));
    if (!img || !type)
        return error_set(err, -EINVAL, "spec: image.type is required");
    if (strcmp(type, "host") == 0) {
        s->image_type = SHIM_IMAGE_HOST;
        return 0;
    }
    if (strcmp(type, "layers") == 0) /* images: store layers */
        return parse_layers(s, img, err);
    if (strcmp(type, "dir") != 0)
        return error_set(err, -EINVAL, "spec: unknown image type \"%s\"", type);
    const char *path = json_string_value(json_object_get(img, "path"));
    if (!path || path[0] != '/' || strstr(path, "/../") || !text_clean(path) || strchr(path, ',') ||
        strchr(path, ':'))
        return error_set(err, -EINVAL, "spec: image.path must be a clean absolute path");
    s->image_type = SHIM_IMAGE_DIR;
    s->image_path = strdup(path);
    return s->image_path ? 0 : -ENOMEM;
}

static int parse_hosts(shim_spec *s, json_t *arr, error_rec *err) {
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > SPEC_LIST_MAX)
        return error_set(err, -EINVAL, "spec: etc_hosts must be an array");
    s->hosts = calloc(json_array_size(arr) + 1, sizeof(*s->hosts));
    if (!s->hosts)
        return -ENOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *a = json_string_value(json_array_get(e, 0));
        if (!json_is_array(e) || json_array_size(e) < 2 || !a || !text_clean(a))
            return error_set(err, -EINVAL, "spec: etc_hosts[%zu] must be [addr, name...]", i);
        char names[1024] = "";
        for (size_t k = 1; k < json_array_size(e); k++) {
            const char *n = json_string_value(json_array_get(e, k));
            if (!n || !text_clean(n) || strchr(n, ' ') ||
                strlen(names) + strlen(n) + 2 > sizeof(names))
                return error_set(err, -EINVAL, "spec: etc_hosts[%zu] has a bad name", i);
            if (k > 1)
                strcat(names, " ");
            strcat(names, n);
        }
        s->hosts[s->n_hosts].addr = strdup(a);
        s->hosts[s->n_hosts].names = strdup(names);
        s->n_hosts++;
        if (!s->hosts[s->n_hosts - 1].addr || !s->hosts[s->n_hosts - 1].names)
            return -ENOMEM;
    }
    return 0;
}

static int parse_cgroup(shim_spec *s, json_t *cg, error_rec *err) {
    json_t *ver = json_object_get(cg, "version");
    const char *parent = json_string_value(json_object_get(cg, "parent"));
    if (!json_is_object(cg) || !json_is_integer(ver) || !parent)
        return error_set(err, -EINVAL, "spec: cgroup {version, parent} is required");
    s->cgroup_version = (int)json_integer_value(ver);
    if (s->cgroup_version != 1 && s->cgroup_version != 2)
        return error_set(err, -EINVAL, "spec: cgroup.version must be 1 or 2");
    if (!text_clean(parent) || strstr(parent, "..") || strlen(parent) > 1024 ||
        (s->cgroup_version == 2 && parent[0] != '/'))
        return error_set(err, -EINVAL, "spec: bad cgroup.parent \"%s\"", parent);
    s->cgroup_parent = strdup(parent);
    return s->cgroup_parent ? 0 : -ENOMEM;
}

static int parse_scalars(shim_spec *s, json_t *root, error_rec *err) {
    int r;
    json_t *cpu = json_object_get(root, "cpu");
    if (cpu && (!json_is_number(cpu) || !isfinite(json_number_value(cpu)) ||
                json_number_value(cpu) < 0 || json_number_value(cpu) > 4096))
        return error_set(err, -EINVAL, "spec: cpu must be a number of vCPUs");
    s->cpu = cpu ? json_number_value(cpu) : 1.0;
    if ((r = parse_u64(root, "memory", 2ull << 30, 1ull << 50, &s->memory, err)) < 0 ||
        (r = parse_u64(root, "disk", 1ull << 30, 1ull << 50, &s->disk, err)) < 0 ||
        (r = parse_u64(root, "pids", 256, 1u << 22, &s->pids, err)) < 0)
        return r;
    if (s->disk < (1u << 20))
        return error_set(err, -EINVAL, "spec: disk must be at least 1Mi");
    if (s->pids < 2)
        return error_set(err, -EINVAL, "spec: pids must be at least 2");
    uint64_t ub;
    if ((r = parse_u64(root, "uid_base", 0, UINT32_MAX - SHIM_UID_RANGE, &ub, err)) < 0)
        return r;
    if (ub == 0)
        return error_set(err, -EINVAL, "spec: uid_base is required and must not be 0");
    s->uid_base = (uint32_t)ub;
    return 0;
}

static int parse_seed(shim_spec *s, json_t *seed, error_rec *err) {
    if (!seed)
        return 0;
    const char *path = json_string_value(json_object_get(seed, "path"));
    json_t *ub = json_object_get(seed, "uid_base");
    if (!path || path[0] != '/' || strstr(path, "..") || !text_clean(path) ||
        !json_is_integer(ub) || json_integer_value(ub) < 0 || /* 0: a commit's store layer */
        json_integer_value(ub) > (json_int_t)(UINT32_MAX - SHIM_UID_RANGE))
        return error_set(err, -EINVAL, "spec: seed must be {path (absolute), uid_base}");
    s->seed_uid_base = (uint32_t)json_integer_value(ub);
    s->seed_path = strdup(path);
    return s->seed_path ? 0 : -ENOMEM;
}

/* "isolation": absent, {"type":"native"} or {"type":"gvisor","runsc":"/abs/path"}. */
static int parse_isolation(shim_spec *s, json_t *iso, error_rec *err) {
    if (!iso || json_is_null(iso))
        return 0;
    const char *type = json_string_value(json_object_get(iso, "type"));
    const char *runsc = json_string_value(json_object_get(iso, "runsc"));
    if (type && strcmp(type, "native") == 0)
        return 0;
    if (!type || strcmp(type, "gvisor") != 0 || !runsc || runsc[0] != '/' || !text_clean(runsc))
        return error_set(err, -EINVAL,
                         "spec: isolation must be {\"type\":\"native\"} or "
                         "{\"type\":\"gvisor\",\"runsc\":\"/abs/path\"}");
    s->runsc = strdup(runsc);
    return s->runsc ? 0 : -ENOMEM;
}

static int parse_all(shim_spec *s, json_t *root, error_rec *err) {
    int r;
    const char *id = json_string_value(json_object_get(root, "id"));
    if (!id || !shim_spec_id_valid(id))
        return error_set(err, -EINVAL, "spec: id must match [a-z0-9-]{1,64}");
    strcpy(s->id, id);
    const char *hn = json_string_value(json_object_get(root, "hostname"));
    if (!hn)
        hn = id;
    if (strlen(hn) >= sizeof(s->hostname) || !shim_spec_id_valid(hn))
        return error_set(err, -EINVAL, "spec: hostname must match [a-z0-9-]{1,64}");
    strcpy(s->hostname, hn);
    if ((r = parse_image(s, json_object_get(root, "image"), err)) < 0 ||
        (r = parse_scalars(s, root, err)) < 0 ||
        (r = parse_strv(json_object_get(root, "env"), "env", &s->env, &s->n_env, err)) < 0 ||
        (r = parse_strv(json_object_get(root, "dns"), "dns", &s->dns, &s->n_dns, err)) < 0 ||
        (r = parse_hosts(s, json_object_get(root, "etc_hosts"), err)) < 0 ||
        (r = parse_cgroup(s, json_object_get(root, "cgroup"), err)) < 0)
        return r;
    if ((r = check_env(s, err)) < 0)
        return r;
    const char *mode = json_string_value(json_object_get(json_object_get(root, "network"), "mode"));
    if (!mode || strcmp(mode, "none") == 0)
        s->net_mode = SHIM_NET_NONE;
    else if (strcmp(mode, "veth") == 0)
        s->net_mode = SHIM_NET_VETH;
    else
        return error_set(err, -EINVAL, "spec: network.mode must be none or veth");
    const char *bpf = json_string_value(json_object_get(root, "seccomp_bpf"));
    if (!bpf || bpf[0] != '/')
        return error_set(err, -EINVAL, "spec: seccomp_bpf (absolute path) is required");
    s->seccomp_bpf = strdup(bpf);
    json_t *prof = json_object_get(root, "profile");
    if (prof && !(json_is_string(prof) && strcmp(json_string_value(prof), "grading") == 0))
        return error_set(err, -EINVAL, "spec: profile must be \"grading\" when present");
    s->grading = prof != NULL;
    json_t *gpus = json_object_get(root, "gpus");
    if (gpus && !json_is_null(gpus) && !json_is_object(gpus))
        return error_set(err, -EINVAL, "spec: gpus must be an object when present");
    s->gpus = json_is_object(gpus) ? json_incref(gpus) : NULL;
    if ((r = parse_isolation(s, json_object_get(root, "isolation"), err)) < 0)
        return r;
    json_t *vols = json_object_get(root, "volumes"); /* volumes: checked by shim/volumes.c */
    if (vols && !json_is_null(vols) && !json_is_array(vols))
        return error_set(err, -EINVAL, "spec: volumes must be an array when present");
    s->volumes = json_is_array(vols) ? json_incref(vols) : NULL;
    json_t *pausable = json_object_get(root, "pausable");
    if (pausable && !json_is_boolean(pausable))
        return error_set(err, -EINVAL, "spec: pausable must be a boolean when present");
    s->pausable = json_is_true(pausable);
    json_t *restore = json_object_get(root, "restore");
    if (restore &&
        !(json_is_string(restore) && json_string_value(restore)[0] == '/' && s->pausable))
        return error_set(err, -EINVAL, "spec: restore must be an absolute path, with pausable");
    if (restore && !(s->restore = strdup(json_string_value(restore))))
        return -ENOMEM;
    return s->seccomp_bpf ? parse_seed(s, json_object_get(root, "seed"), err) : -ENOMEM;
}

int shim_spec_parse(const char *text, shim_spec **ret, error_rec *err) {
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return error_set(err, -EINVAL, "spec: not a JSON object: %s", jerr.text);
    }
    _cleanup_(shim_spec_freep) shim_spec *s = calloc(1, sizeof(*s));
    int r = s ? parse_all(s, root, err) : -ENOMEM;
    json_decref(root);
    if (r == -ENOMEM && err && !err->code)
        error_set(err, r, "spec: out of memory");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(s);
    return 0;
}

int shim_spec_load(const char *path, shim_spec **ret, error_rec *err) {
    _cleanup_free_ char *text = NULL;
    int r = file_read_all(path, SPEC_FILE_MAX, &text, NULL);
    if (r < 0)
        return error_set_errno(err, r, "spec: cannot read %s", path);
    return shim_spec_parse(text, ret, err);
}

const char *const spec_default_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace",
                                        "LANG=C.UTF-8", NULL};

char *spec_host_env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                         "LC_ALL=C", NULL};

void spec_env_append(json_t *arr, json_t *env) {
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        char *kv;
        if (arr && asprintf(&kv, "%s=%s", k, json_string_value(v)) >= 0) {
            json_array_append_new(arr, json_string(kv));
            free(kv);
        }
    }
}

json_t *spec_env_json(json_t *env) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && spec_default_env[i]; i++)
        json_array_append_new(arr, json_string(spec_default_env[i]));
    spec_env_append(arr, env);
    return arr;
}

int shim_spec_set_env(shim_spec *s, json_t *env, error_rec *err) {
    strv_free(s->env);
    s->env = NULL;
    int r = parse_strv(env, "env", &s->env, &s->n_env, err);
    return r < 0 ? r : check_env(s, err);
}

int shim_spec_set_hosts(shim_spec *s, json_t *etc_hosts, error_rec *err) {
    return parse_hosts(s, etc_hosts, err);
}

int shim_spec_set_dns(shim_spec *s, json_t *dns, error_rec *err) {
    strv_free(s->dns);
    s->dns = NULL;
    return parse_strv(dns, "dns", &s->dns, &s->n_dns, err);
}

static json_t *strv_json(char **v) {
    json_t *a = json_array();
    for (size_t i = 0; a && v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *hosts_json(const shim_spec *s) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->n_hosts; i++) {
        json_t *e = json_pack("[s]", s->hosts[i].addr);
        char *names = strdup(s->hosts[i].names), *save = NULL;
        for (char *n = names ? strtok_r(names, " ", &save) : NULL; e && n;
             n = strtok_r(NULL, " ", &save))
            json_array_append_new(e, json_string(n));
        free(names);
        json_array_append_new(a, e);
    }
    return a;
}

static json_t *image_json(const shim_spec *s) {
    if (s->image_type == SHIM_IMAGE_HOST)
        return json_pack("{s:s}", "type", "host");
    if (s->image_type == SHIM_IMAGE_LAYERS) /* images */
        return json_pack("{s:s,s:o}", "type", "layers", "layers", strv_json(s->layers));
    return json_pack("{s:s,s:s}", "type", "dir", "path", s->image_path);
}

json_t *shim_spec_to_json(const shim_spec *s) {
    json_t *j = json_pack(
        "{s:s,s:o,s:f,s:I,s:I,s:I,s:I,s:s,s:o,s:{s:s},s:{s:i,s:s}}", "id", s->id, "image",
        image_json(s), "cpu", s->cpu, "memory", (json_int_t)s->memory, "disk", (json_int_t)s->disk,
        "pids", (json_int_t)s->pids, "uid_base", (json_int_t)s->uid_base, "hostname", s->hostname,
        "env", strv_json(s->env), "network", "mode", s->net_mode == SHIM_NET_VETH ? "veth" : "none",
        "cgroup", "version", s->cgroup_version, "parent", s->cgroup_parent ? s->cgroup_parent : "");
    if (j && s->n_hosts)
        json_object_set_new(j, "etc_hosts", hosts_json(s));
    if (j && s->dns && s->n_dns)
        json_object_set_new(j, "dns", strv_json(s->dns));
    if (j && s->seccomp_bpf)
        json_object_set_new(j, "seccomp_bpf", json_string(s->seccomp_bpf));
    if (j && s->seed_path)
        json_object_set_new(
            j, "seed",
            json_pack("{s:s,s:I}", "path", s->seed_path, "uid_base", (json_int_t)s->seed_uid_base));
    if (j && s->grading)
        json_object_set_new(j, "profile", json_string("grading"));
    if (j && s->gpus)
        json_object_set_new(j, "gpus", json_incref(s->gpus));
    if (j && s->runsc)
        json_object_set_new(j, "isolation",
                            json_pack("{s:s,s:s}", "type", "gvisor", "runsc", s->runsc));
    if (j && s->volumes)
        json_object_set_new(j, "volumes", json_incref(s->volumes));
    if (j && s->pausable)
        json_object_set_new(j, "pausable", json_true());
    if (j && s->restore)
        json_object_set_new(j, "restore", json_string(s->restore));
    return j;
}
