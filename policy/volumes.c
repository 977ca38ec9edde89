/* Named volumes: the volume create body and the create's "volumes" (see volumes.h). */
#include "policy/volumes.h"

#include "common/jsonkeys.h"
#include "common/macro.h"

#include <stdio.h>
#include <string.h>

const char *const policy_volume_keys[] = {"name", "size", NULL};
const char *const policy_volume_mount_keys[] = {"name", "path", "read_only", NULL};

bool policy_volume_name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= POLICY_VOLUME_NAME_MAX &&
           strchr("abcdefghijklmnopqrstuvwxyz0123456789", s[0]) &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

int policy_volume_bad_name(const char *field, error_rec *err) {
    return error_set(err, -EINVAL,
                     "%s: must be a volume name: 1-%d characters of a-z, 0-9, '_' and '-', "
                     "starting with a letter or digit",
                     field, POLICY_VOLUME_NAME_MAX);
}

/* Where a volume may not go: these and everything under them (the sandbox's system). */
static const char *const system_dirs[] = {"/proc",   "/dev",  "/sys", "/etc",   "/usr",
                                          "/bin",    "/sbin", "/lib", "/lib32", "/lib64",
                                          "/libx32", "/boot", "/run", "/grader"};

static bool under(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/');
}

static int check_path(const char *p, const char *field, error_rec *err) {
    size_t n = p ? strlen(p) : 0;
    if (!p || p[0] != '/')
        return error_set(err, -EINVAL, "%s: must be an absolute path (\"/cache\")", field);
    if (n > POLICY_VOLUME_PATH_MAX)
        return error_set(err, -EINVAL, "%s: is longer than %d bytes", field,
                         POLICY_VOLUME_PATH_MAX);
    for (size_t i = 0; i < n; i++)
        if (p[i] <= ' ' || p[i] > '~')
            return error_set(err, -EINVAL, "%s: only printable ASCII without spaces", field);
    if (n == 1)
        return error_set(err, -EINVAL, "%s: / is the sandbox's root, not a volume's place", field);
    if (p[n - 1] == '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") ||
        (n >= 2 && strcmp(p + n - 2, "/.") == 0) || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
        return error_set(err, -EINVAL,
                         "%s: must be a normal path (no \".\", \"..\", \"//\" or trailing \"/\")",
                         field);
    for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++)
        if (under(p, system_dirs[i]))
            return error_set(err, -EINVAL, "%s: %s is a system directory of the sandbox", field,
                             system_dirs[i]);
    if (strcmp(p, "/workspace") == 0 || strcmp(p, "/tmp") == 0)
        return error_set(err, -EINVAL,
                         "%s: %s is the sandbox's own disk; mount the volume below it (%s/cache)",
                         field, p, p);
    return 0;
}

static int parse_one(json_t *e, size_t i, json_t *out, error_rec *err) {
    char field[48], where[24];
    snprintf(where, sizeof(where), "volumes[%zu]", i);
    if (!json_is_object(e))
        return error_set(err, -EINVAL, "%s: must be an object {\"name\",\"path\",\"read_only\"}",
                         where);
    int r = jsonkeys_check(e, policy_volume_mount_keys, where, err);
    if (r < 0)
        return r;
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *path = json_string_value(json_object_get(e, "path"));
    json_t *ro = json_object_get(e, "read_only");
    snprintf(field, sizeof(field), "%s.name", where);
    if (!policy_volume_name_ok(name))
        return policy_volume_bad_name(field, err);
    snprintf(field, sizeof(field), "%s.path", where);
    if ((r = check_path(path, field, err)) < 0)
        return r;
    if (ro && !json_is_null(ro) && !json_is_boolean(ro))
        return error_set(err, -EINVAL, "%s.read_only: must be true or false", where);
    size_t k;
    json_t *o;
    json_array_foreach(out, k, o) {
        const char *on = json_string_value(json_object_get(o, "name"));
        const char *op = json_string_value(json_object_get(o, "path"));
        if (strcmp(on, name) == 0)
            return error_set(err, -EINVAL, "%s.name: volume %s is named twice", where, name);
        if (strcmp(op, path) == 0)
            return error_set(err, -EINVAL, "%s.path: volumes[%zu] is mounted at %s already", where,
                             k, path);
        if (under(op, path) || under(path, op))
            return error_set(err, -EINVAL, "%s.path: %s and volumes[%zu].path %s are nested", where,
                             path, k, op);
    }
    return json_array_append_new(out, json_pack("{s:s,s:s,s:b}", "name", name, "path", path,
                                                "read_only", json_is_true(ro))) < 0
               ? -ENOMEM
               : 0;
}

int policy_volumes_parse(json_t *v, json_t **ret, error_rec *err) {
    if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0)) {
        *ret = NULL;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) > POLICY_VOLUMES_MAX)
        return error_set(
            err, -EINVAL,
            "volumes: must be an array of at most %d {\"name\",\"path\",\"read_only\"}",
            POLICY_VOLUMES_MAX);
    json_t *out = json_array();
    if (!out)
        return error_set(err, -ENOMEM, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        int r = parse_one(e, i, out, err);
        if (r < 0) {
            json_decref(out);
            return r == -ENOMEM ? error_set(err, r, "out of memory") : r;
        }
    }
    *ret = out;
    return 0;
}
