/* GPU nodes in the sandbox's /dev and the device cgroup (gpu.h). */
#include "shim/gpu.h"

#include "common/fdutil.h"
#include "common/macro.h"
#include "shim/devbpf.h"
#include "shim/rootfs.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static bool name_ok(const char *n) {
    const char *base = strncmp(n, "nvidia-caps/", 12) == 0 ? n + 12 : n;
    size_t len = strlen(base);
    return len >= 1 && len < 100 && base[0] != '.' &&
           strspn(base, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

/* The i-th device of the spec, checked. */
static int device(const shim_spec *spec, size_t i, const char **path, const char **name,
                  shim_devbpf_rule *rule, error_rec *err) {
    json_t *e = json_array_get(json_object_get(spec->gpus, "devices"), i);
    json_t *ma = json_object_get(e, "major"), *mi = json_object_get(e, "minor");
    *path = json_string_value(json_object_get(e, "path"));
    *name = json_string_value(json_object_get(e, "name"));
    if (!*path || (*path)[0] != '/' || !*name || !name_ok(*name) || !json_is_integer(ma) ||
        !json_is_integer(mi) || json_integer_value(ma) < 0 || json_integer_value(ma) > 4095 ||
        json_integer_value(mi) < 0 || json_integer_value(mi) > 1048575)
        return error_set(err, -EINVAL, "spec: gpus.devices[%zu] is malformed", i);
    rule->major = (uint32_t)json_integer_value(ma);
    rule->minor = (uint32_t)json_integer_value(mi);
    return 0;
}

static size_t n_devices(const shim_spec *spec) {
    return json_array_size(json_object_get(spec->gpus, "devices"));
}

int shim_gpu_dev(const shim_spec *spec, const char *dev, uid_t root_uid, error_rec *err) {
    char dst[4400];
    for (size_t i = 0; spec->gpus && i < n_devices(spec); i++) {
        const char *path, *name;
        shim_devbpf_rule rule;
        int r = device(spec, i, &path, &name, &rule, err);
        if (r < 0)
            return r;
        if (!strncmp(name, "nvidia-caps/", 12) &&
            (r = shim_rootfs_ensure_dir(dev, "nvidia-caps", 0755, root_uid, err)) < 0)
            return r;
        snprintf(dst, sizeof(dst), "%s/%s", dev, name);
        _cleanup_close_ int fd = open(dst, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0)
            return error_set_errno(err, negative_errno(), "gpus: create %s", dst);
        if ((r = shim_rootfs_bind(path, dst, MS_NOSUID | MS_NOEXEC, err)) < 0)
            return r;
        struct stat st; /* the node bound is the one the daemon allocated */
        if (stat(dst, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != rule.major ||
            minor(st.st_rdev) != rule.minor)
            return error_set(err, -EINVAL, "gpus: %s is not the device %u:%u", path, rule.major,
                             rule.minor);
    }
    return 0;
}

static int allow_v1(const char *dir, const shim_devbpf_rule *rules, size_t n, error_rec *err) {
    char path[2200], line[64];
    snprintf(path, sizeof(path), "%s/devices.deny", dir);
    int r = file_write_str(path, "a");
    if (r < 0)
        return error_set_errno(err, r, "cgroup: write %s", path);
    snprintf(path, sizeof(path), "%s/devices.allow", dir);
    for (size_t i = 0; i < n; i++) {
        if (rules[i].minor == SHIM_DEVBPF_ANY)
            snprintf(line, sizeof(line), "c %u:* rwm", rules[i].major);
        else
            snprintf(line, sizeof(line), "c %u:%u rwm", rules[i].major, rules[i].minor);
        if ((r = file_write_str(path, line)) < 0)
            return error_set_errno(err, r, "cgroup: write %s=%s", path, line);
    }
    return 0;
}

int shim_gpu_cgroup(shim_cgroup *cg, const shim_spec *spec, error_rec *err) {
    shim_devbpf_rule rules[SHIM_DEVBPF_MAX_RULES];
    size_t n = 0;
    if (!spec->gpus)
        return 0;
    for (; n < shim_devbpf_n_defaults; n++)
        rules[n] = shim_devbpf_defaults[n];
    for (size_t i = 0; i < n_devices(spec); i++) {
        const char *path, *name;
        if (n >= SHIM_DEVBPF_MAX_RULES)
            return error_set(err, -E2BIG, "spec: too many gpus.devices");
        int r = device(spec, i, &path, &name, &rules[n++], err);
        if (r < 0)
            return r;
    }
    if (cg->version == 2)
        return shim_devbpf_attach(cg->dirs[0], rules, n, err);
    for (size_t i = 0; i < cg->n; i++)
        if (!strcmp(cg->ctrls[i], "devices"))
            return allow_v1(cg->dirs[i], rules, n, err);
    return error_set(err, -ENOENT,
                     "cgroup v1 controller devices is not mounted: a GPU "
                     "sandbox needs it");
}
