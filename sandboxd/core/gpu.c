/* GPUs: inventory, exclusive allocation, and what a GPU sandbox's shim gets (core/gpu.h). */
#include "sandboxd/core/gpu.h"

#include "common/fdutil.h"
#include "common/jsonkeys.h"
#include "common/macro.h"
#include "common/capture.h"
#include "policy/gpu.h"
#include "policy/limits.h"
#include "sandboxd/core/sandbox.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_GPUS 64
#define MAX_CTL 32
#define MAX_BINDS 128

static void closedirp(DIR **d) {
    if (*d)
        closedir(*d);
}

typedef struct gpu_node {
    char path[PATH_MAX]; /* the host's node */
    char name[128];      /* its name under the sandbox's /dev ("nvidia0", "nvidia-caps/cap1") */
    unsigned major, minor;
} gpu_node;

typedef struct gpu {
    gpu_node node;
    char uuid[POLICY_GPU_UUID_MAX + 1], bus_id[64];
    uint64_t memory;
    char owner[64]; /* the sandbox holding it, "" when free */
} gpu;

struct sd_gpus {
    gpu gpu[MAX_GPUS];
    size_t n;
    gpu_node ctl[MAX_CTL]; /* nvidiactl, nvidia-uvm, nvidia-caps: every GPU sandbox's */
    size_t n_ctl;
    struct {
        char *src, *path; /* the host's file; where the sandbox sees it */
        char *alt;        /* a library's path in an image without path's directory, or NULL */
    } binds[MAX_BINDS];   /* the driver's user-space files, bound read-only */
    size_t n_binds;
};

static int node_fill(gpu_node *n, const char *path, const char *name, error_rec *err) {
    struct stat st;
    if (stat(path, &st) < 0)
        return error_set_errno(err, negative_errno(), "gpus: %s", path);
    if (!S_ISCHR(st.st_mode))
        return error_set(err, -EINVAL, "gpus: %s is not a character device", path);
    snprintf(n->path, sizeof(n->path), "%s", path);
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->major = major(st.st_rdev);
    n->minor = minor(st.st_rdev);
    return 0;
}

/* The name under /dev: the base name, or nvidia-caps/BASE for a node in a nvidia-caps dir. */
static void node_name(const char *path, char *buf, size_t len) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t dl = (size_t)(base - path);
    bool caps = dl >= 13 && strncmp(base - 13, "/nvidia-caps/", 13) == 0;
    snprintf(buf, len, "%s%s", caps ? "nvidia-caps/" : "", base);
}

static int add_ctl(struct sd_gpus *g, const char *path, error_rec *err) {
    char name[128];
    if (g->n_ctl >= MAX_CTL)
        return error_set(err, -EINVAL, "gpus: more than %d control devices", MAX_CTL);
    node_name(path, name, sizeof(name));
    int r = node_fill(&g->ctl[g->n_ctl], path, name, err);
    g->n_ctl += r >= 0;
    return r;
}

/* The config file's "gpus": [{"device", "uuid", "memory", "bus_id"}], "gpu_control": [path]. */
static int from_config(struct sd_gpus *g, json_t *list, json_t *ctl, error_rec *err) {
    size_t i;
    json_t *e;
    if (!json_is_array(list) || json_array_size(list) > MAX_GPUS)
        return error_set(err, -EINVAL, "config gpus: must be a list of at most %d objects",
                         MAX_GPUS);
    json_array_foreach(list, i, e) {
        static const char *const keys[] = {"device", "uuid", "memory", "bus_id", NULL};
        const char *dev = json_string_value(json_object_get(e, "device"));
        const char *uuid = json_string_value(json_object_get(e, "uuid"));
        const char *bus = json_string_value(json_object_get(e, "bus_id"));
        json_t *mem = json_object_get(e, "memory");
        gpu *p = &g->gpu[g->n];
        char name[128];
        if (!json_is_object(e) || !dev || dev[0] != '/' || (uuid && !policy_gpu_uuid_ok(uuid)))
            return error_set(err, -EINVAL,
                             "config gpus[%zu]: needs \"device\" (an absolute path) and a "
                             "\"uuid\" of [A-Za-z0-9-_]",
                             i);
        if (jsonkeys_check(e, keys, NULL, err) < 0 ||
            (mem && !json_is_null(mem) && policy_parse_size(mem, "memory", &p->memory, err) < 0))
            return error_prefix(err, "config gpus[%zu]", i);
        node_name(dev, name, sizeof(name));
        if (node_fill(&p->node, dev, name, err) < 0)
            return err->code;
        snprintf(p->uuid, sizeof(p->uuid), "%s", uuid ? uuid : "");
        if (!uuid)
            snprintf(p->uuid, sizeof(p->uuid), "GPU-%u-%u", p->node.major, p->node.minor);
        snprintf(p->bus_id, sizeof(p->bus_id), "%s", bus ? bus : "");
        for (size_t k = 0; k < g->n; k++)
            if (!strcmp(g->gpu[k].uuid, p->uuid) || !strcmp(g->gpu[k].node.path, dev))
                return error_set(err, -EINVAL, "config gpus[%zu]: %s is listed twice", i, dev);
        g->n++;
    }
    if (ctl && !json_is_array(ctl))
        return error_set(err, -EINVAL, "config gpu_control: must be a list of device paths");
    json_array_foreach(ctl, i, e) {
        if (!json_is_string(e) || json_string_value(e)[0] != '/')
            return error_set(err, -EINVAL, "config gpu_control[%zu]: must be an absolute path", i);
        if (add_ctl(g, json_string_value(e), err) < 0)
            return err->code;
    }
    return 0;
}

/* /proc/driver/nvidia/gpus/<bus id>/information: "GPU UUID:" and "Bus Location:" of minor. */
static void proc_info(const char *root, gpu *p) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/proc/driver/nvidia/gpus", root);
    _cleanup_(closedirp) DIR *dp = opendir(dir);
    for (struct dirent *de; dp && (de = readdir(dp));) {
        char path[PATH_MAX + 300];
        _cleanup_free_ char *s = NULL;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/information", dir, de->d_name);
        if (file_read_all(path, 65536, &s, NULL) < 0)
            continue;
        const char *m = strstr(s, "Device Minor:");
        if (!m || strtoul(m + 13, NULL, 10) != p->node.minor)
            continue;
        const char *u = strstr(s, "GPU UUID:");
        if (u) {
            u += 9;
            while (*u == ' ' || *u == '\t')
                u++;
            size_t n =
                strspn(u, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
            if (n && n <= POLICY_GPU_UUID_MAX)
                snprintf(p->uuid, sizeof(p->uuid), "%.*s", (int)n, u);
        }
        snprintf(p->bus_id, sizeof(p->bus_id), "%s", de->d_name);
    }
}

/* Discovery under root ("" is the host): ROOT/dev/nvidia[0-9]*, the control nodes. */
static int discover(struct sd_gpus *g, const char *root, error_rec *err) {
    char dev[PATH_MAX], path[PATH_MAX + 300];
    snprintf(dev, sizeof(dev), "%s/dev", root);
    _cleanup_(closedirp) DIR *dp = opendir(dev);
    for (struct dirent *de; dp && (de = readdir(dp)) && g->n < MAX_GPUS;) {
        const char *d = de->d_name;
        if (strncmp(d, "nvidia", 6) != 0 || !d[6] || strspn(d + 6, "0123456789") != strlen(d + 6))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dev, d);
        gpu *p = &g->gpu[g->n];
        if (node_fill(&p->node, path, d, err) < 0)
            continue;
        snprintf(p->uuid, sizeof(p->uuid), "GPU-%u-%u", p->node.major, p->node.minor);
        proc_info(root, p);
        g->n++;
    }
    if (!g->n)
        return 0;
    static const char *const ctl[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                      "nvidia-modeset"};
    for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) {
        snprintf(path, sizeof(path), "%s/%s", dev, ctl[i]);
        if (access(path, F_OK) == 0)
            add_ctl(g, path, err);
    }
    snprintf(path, sizeof(path), "%s/nvidia-caps", dev);
    _cleanup_(closedirp) DIR *caps = opendir(path);
    for (struct dirent *de; caps && (de = readdir(caps));) {
        char p[PATH_MAX + 600];
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/nvidia-caps/%s", dev, de->d_name);
        add_ctl(g, p, err);
    }
    return 0;
}

static bool driver_file(const char *base) {
    return !strncmp(base, "libcuda.so", 10) || !strncmp(base, "libnvidia-", 10) ||
           !strncmp(base, "libcudadebugger.so", 18) || !strncmp(base, "libnvcuvid.so", 13);
}

/* root + src (a driver's file as seen under the driver root) to be bound at dst (or at alt, for
 * an image that lacks dst's directory; alt may be NULL). */
static void add_bind(struct sd_gpus *g, const char *root, const char *src, const char *dst,
                     const char *alt) {
    for (size_t i = 0; i < g->n_binds; i++)
        if (!strcmp(g->binds[i].path, dst))
            return;
    char full[PATH_MAX];
    if (g->n_binds >= MAX_BINDS ||
        (size_t)snprintf(full, sizeof(full), "%s%s", root, src) >= sizeof(full))
        return;
    char *s = strdup(full), *p = strdup(dst), *a = alt ? strdup(alt) : NULL;
    if (!s || !p || (alt && !a)) {
        free(s);
        free(p);
        free(a);
        return;
    }
    g->binds[g->n_binds].alt = a;
    g->binds[g->n_binds].src = s, g->binds[g->n_binds++].path = p;
}

/* The file path (under root) names once its symlinks are followed inside root, into real. */
static bool real_in_root(const char *root, const char *path, char *real, size_t len) {
    char cur[PATH_MAX], full[PATH_MAX + 64], link[PATH_MAX];
    snprintf(cur, sizeof(cur), "%s", path);
    for (int hop = 0; hop < 16; hop++) {
        snprintf(full, sizeof(full), "%s%s", root, cur);
        struct stat st;
        if (lstat(full, &st) < 0)
            return false;
        if (!S_ISLNK(st.st_mode))
            return snprintf(real, len, "%s", cur) < (int)len && S_ISREG(st.st_mode);
        ssize_t n = readlink(full, link, sizeof(link) - 1);
        if (n <= 0)
            return false;
        link[n] = 0;
        if (link[0] == '/')
            snprintf(cur, sizeof(cur), "%s", link);
        else {
            char *slash = strrchr(cur, '/');
            char dir[PATH_MAX];
            snprintf(dir, sizeof(dir), "%.*s", (int)(slash - cur), cur);
            snprintf(cur, sizeof(cur), "%s/%s", dir, link);
        }
    }
    return false;
}

/* Where a sandbox's loader looks without a cache: Debian's and Ubuntu's multiarch directory,
 * else (an image without it: RHEL, Fedora, UBI) /usr/lib64, as the toolkit picks per image; and
 * the tag `ldconfig -p` gives this machine's own libraries. */
#if defined(__x86_64__)
#define LIB_DIR "/usr/lib/x86_64-linux-gnu"
#define LIB_TAG "libc6,x86-64"
#elif defined(__aarch64__)
#define LIB_DIR "/usr/lib/aarch64-linux-gnu"
#define LIB_TAG "libc6,AArch64"
#else /* unknown here: every library at the host's paths, as for another architecture's */
#define LIB_DIR "/usr/lib"
#define LIB_TAG "-"
#endif
#define LIB_ALT "/usr/lib64"

/* One `ldconfig -p` line ("\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1"):
 * a driver library of this machine's architecture is bound in LIB_DIR (LIB_ALT) under its name
 * and under the name of the file it resolves to, wherever the host keeps it; another
 * architecture's (32-bit) at the host's paths, where an image of that layout looks. */
static void add_lib(struct sd_gpus *g, const char *root, char *line) {
    char *arrow = strstr(line, "=> "), *name = line, *tag = strchr(line, '('), *end;
    while (isspace((unsigned char)*name))
        name++;
    size_t n = strcspn(name, " (");
    if (!arrow || !tag || tag > arrow || !(end = strchr(tag, ')')) || end > arrow || n == 0 ||
        n > 200)
        return;
    bool native = (size_t)(end - tag - 1) >= strlen(LIB_TAG) &&
                  !strncmp(tag + 1, LIB_TAG, strlen(LIB_TAG)) &&
                  (tag[1 + strlen(LIB_TAG)] == ')' || tag[1 + strlen(LIB_TAG)] == ',');
    name[n] = 0;
    if (!driver_file(name))
        return;
    arrow += 3;
    arrow[strcspn(arrow, "\n")] = 0;
    char real[PATH_MAX], dst[PATH_MAX + 256], alt[PATH_MAX + 256];
    if (arrow[0] != '/' || !real_in_root(root, arrow, real, sizeof(real)))
        return;
    if (!native) {
        add_bind(g, root, real, arrow, NULL); /* the name programs open, and the file it names */
        add_bind(g, root, real, real, NULL);
        return;
    }
    const char *names[] = {name, strrchr(real, '/') + 1};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        snprintf(dst, sizeof(dst), LIB_DIR "/%s", names[i]);
        snprintf(alt, sizeof(alt), LIB_ALT "/%s", names[i]);
        add_bind(g, root, real, dst, alt);
    }
}

/* A driver tool: the first of /usr/bin, the driver's own bin directory (drv_bin) and the
 * daemon's PATH that holds it (under root), bound at /usr/bin in the sandbox, as the toolkit
 * does (a driver in /usr/local/nvidia/{lib64,bin} included). */
static void add_tool(struct sd_gpus *g, const char *root, const char *drv_bin, const char *tool) {
    const char *path = getenv("PATH");
    char dirs[4096], file[PATH_MAX + 128], real[PATH_MAX], full[2 * PATH_MAX], dst[PATH_MAX + 128];
    char *save = NULL;
    snprintf(dirs, sizeof(dirs), "/usr/bin:%s:%s", drv_bin, path ? path : "");
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(file, sizeof(file), "%s/%s", d, tool);
        if (d[0] != '/' || !real_in_root(root, file, real, sizeof(real)))
            continue;
        snprintf(full, sizeof(full), "%s%s", root, real);
        if (access(full, X_OK) == 0) {
            snprintf(dst, sizeof(dst), "/usr/bin/%s", tool);
            add_bind(g, root, real, dst, NULL);
            return;
        }
    }
}

/* The driver's user-space files, as the NVIDIA container toolkit finds them: the ld.so cache's
 * libcuda.so*, libnvidia-*.so* (`ldconfig -p`; under a driver root, its etc/ld.so.cache) and
 * the tools. At start-up only. root: "" (the host) or the driver root (--gpu-root). */
static void find_binds(struct sd_gpus *g, const char *root) {
    char cmd[PATH_MAX + 64] = "ldconfig -p 2>/dev/null";
    if (*root && !strchr(root, '\'') &&
        (size_t)snprintf(cmd, sizeof(cmd), "ldconfig -p -C '%s/etc/ld.so.cache' 2>/dev/null",
                         root) >= sizeof(cmd))
        return;
    FILE *f = *root && strchr(root, '\'') ? NULL : popen(cmd, "re");
    char line[1024];
    while (f && fgets(line, sizeof(line), f))
        add_lib(g, root, line);
    if (f)
        pclose(f);
    /* the driver's bin directory beside its library directory: DIR/lib64/libcuda.so.1 -> DIR/bin */
    char drv_bin[PATH_MAX] = "";
    for (size_t i = 0; i < g->n_binds && !drv_bin[0]; i++) {
        const char *src = g->binds[i].src + strlen(root), *slash = strrchr(src, '/');
        if (strcmp(g->binds[i].path, LIB_DIR "/libcuda.so.1") != 0 || !slash)
            continue;
        snprintf(drv_bin, sizeof(drv_bin), "%.*s", (int)(slash - src), src);
        char *up = strrchr(drv_bin, '/');
        if (up)
            snprintf(up, sizeof(drv_bin) - (size_t)(up - drv_bin), "/bin");
    }
    static const char *const bins[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                       "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};
    for (size_t i = 0; i < ARRAY_SIZE(bins); i++)
        add_tool(g, root, drv_bin, bins[i]);
}

/* Each GPU's memory, where the inventory has none, from the nvidia-smi found for the binds (a
 * root-owned file that only root may change): `--query-gpu=uuid,memory.total` lines
 * "GPU-..., 143771" (MiB). At start-up only, at most ~12 s: a driver that hangs nvidia-smi in
 * the kernel must not hold the daemon's start (its `timeout` wrapper is killed, not waited for). */
static void smi_memory(struct sd_gpus *g) {
    const char *smi = NULL;
    bool need = false;
    for (size_t i = 0; i < g->n; i++)
        need = need || !g->gpu[i].memory;
    for (size_t i = 0; i < g->n_binds && !smi; i++)
        if (!strcmp(g->binds[i].path, "/usr/bin/nvidia-smi"))
            smi = g->binds[i].src;
    struct stat st;
    if (!need || !smi || stat(smi, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022))
        return;
    char *argv[] = {"timeout",
                    "-k",
                    "1",
                    "10",
                    (char *)smi,
                    "--query-gpu=uuid,memory.total",
                    "--format=csv,noheader,nounits",
                    NULL};
    char out[4096];
    int status; /* past its time, the lines it printed whole are still used */
    capture_run(argv, environ, false, 12000, out, sizeof(out), &status);
    for (char *line = out, *next; (next = strchr(line, '\n')); line = next) { /* whole lines */
        *next++ = 0;
        char *comma = strchr(line, ','), *endp;
        if (!comma)
            continue;
        *comma = 0;
        unsigned long long mib = strtoull(comma + 1, &endp, 10);
        for (size_t i = 0; i < g->n && endp != comma + 1 && mib > 0 && mib < (1ull << 32); i++)
            if (!strcmp(g->gpu[i].uuid, line) && !g->gpu[i].memory)
                g->gpu[i].memory = (uint64_t)mib << 20;
    }
}

int sd_gpu_init(sd_daemon *d, error_rec *err) {
    struct sd_gpus *g = calloc(1, sizeof(*g));
    if (!g)
        return error_set(err, -ENOMEM, "out of memory");
    d->gpus = g;
    int r = d->cfg.gpus ? from_config(g, d->cfg.gpus, d->cfg.gpu_control, err)
                        : discover(g, d->cfg.gpu_root ? d->cfg.gpu_root : "", err);
    if (r < 0)
        return r;
    if (g->n) {
        find_binds(g, d->cfg.gpu_root ? d->cfg.gpu_root : "");
        smi_memory(g);
    }
    if (g->n)
        log_info("gpus total=%zu control_nodes=%zu driver_files=%zu", g->n, g->n_ctl, g->n_binds);
    return 0;
}

void sd_gpu_done(sd_daemon *d) {
    if (!d->gpus)
        return;
    for (size_t i = 0; i < d->gpus->n_binds; i++) {
        free(d->gpus->binds[i].src);
        free(d->gpus->binds[i].path);
        free(d->gpus->binds[i].alt);
    }
    free(TAKE_PTR(d->gpus));
}

unsigned sd_gpu_total(const sd_daemon *d) {
    return d->gpus ? (unsigned)d->gpus->n : 0;
}

unsigned sd_gpu_free(const sd_daemon *d) {
    unsigned n = 0;
    for (size_t i = 0; d->gpus && i < d->gpus->n; i++)
        n += !d->gpus->gpu[i].owner[0];
    return n;
}

static gpu *find(const sd_daemon *d, const char *uuid) {
    for (size_t i = 0; d->gpus && uuid && i < d->gpus->n; i++)
        if (!strcmp(d->gpus->gpu[i].uuid, uuid))
            return &d->gpus->gpu[i];
    return NULL;
}

int sd_gpu_reserve(sd_daemon *d, policy_create *c, error_rec *err) {
    if (!c->gpus)
        return 0;
    unsigned total = sd_gpu_total(d), nfree = sd_gpu_free(d);
    if (c->gpu_uuids) {
        size_t i;
        json_t *e;
        json_array_foreach(c->gpu_uuids, i, e) {
            gpu *p = find(d, json_string_value(e));
            if (!p)
                return error_set(err, -ENODEV, "gpus[%zu]: no GPU %s on this node", i,
                                 json_string_value(e));
            if (p->owner[0])
                return error_set(err, -ENODEV, "gpus[%zu]: GPU %s is in use", i, p->uuid);
        }
        return 0;
    }
    if (nfree < c->gpus)
        return error_set(err, -ENODEV, "gpus: %u asked, %u of %u free on this node", c->gpus, nfree,
                         total);
    json_t *pick = json_array();
    for (size_t i = 0; pick && i < d->gpus->n && json_array_size(pick) < c->gpus; i++)
        if (!d->gpus->gpu[i].owner[0])
            json_array_append_new(pick, json_string(d->gpus->gpu[i].uuid));
    if (!pick)
        return error_set(err, -ENOMEM, "out of memory");
    c->gpu_uuids = pick;
    return 0;
}

int sd_gpu_claim(sd_sandbox *sb, error_rec *err) {
    size_t i;
    json_t *e;
    json_array_foreach(sb->spec.gpu_uuids, i, e) {
        gpu *p = find(sb->d, json_string_value(e));
        if (!p || (p->owner[0] && strcmp(p->owner, sb->id) != 0)) {
            sd_gpu_release(sb);
            return error_set(err, -ENODEV, "gpus: GPU %s is %s", json_string_value(e),
                             p ? "held by another sandbox" : "not on this node");
        }
        snprintf(p->owner, sizeof(p->owner), "%s", sb->id);
    }
    return 0;
}

void sd_gpu_release(sd_sandbox *sb) {
    for (size_t i = 0; sb->d->gpus && i < sb->d->gpus->n; i++)
        if (!strcmp(sb->d->gpus->gpu[i].owner, sb->id))
            sb->d->gpus->gpu[i].owner[0] = 0;
}

static json_t *node_json(const gpu_node *n) {
    return json_pack("{s:s,s:s,s:i,s:i}", "path", n->path, "name", n->name, "major", (int)n->major,
                     "minor", (int)n->minor);
}

json_t *sd_gpu_spec_json(const sd_sandbox *sb) {
    const struct sd_gpus *g = sb->d->gpus;
    if (!sb->spec.gpus || !sb->spec.gpu_uuids || !g)
        return NULL;
    json_t *devs = json_array(), *binds = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(sb->spec.gpu_uuids, i, e) {
        gpu *p = find(sb->d, json_string_value(e));
        if (p)
            json_array_append_new(devs, node_json(&p->node));
    }
    for (i = 0; i < g->n_ctl; i++)
        json_array_append_new(devs, node_json(&g->ctl[i]));
    for (i = 0; i < g->n_binds; i++)
        json_array_append_new(binds, json_pack("{s:s,s:s,s:s*}", "source", g->binds[i].src, "path",
                                               g->binds[i].path, "alt", g->binds[i].alt));
    return json_pack("{s:o,s:o}", "devices", devs, "binds", binds);
}

void sd_gpu_env(const sd_sandbox *sb, json_t *env) {
    if (!sb->spec.gpus || !sb->spec.gpu_uuids || !json_is_array(env))
        return;
    char list[MAX_GPUS * (POLICY_GPU_UUID_MAX + 1) + 1] = "";
    size_t i, len = 0;
    json_t *e;
    json_array_foreach(sb->spec.gpu_uuids, i, e) {
        int n =
            snprintf(list + len, sizeof(list) - len, "%s%s", i ? "," : "", json_string_value(e));
        if (n > 0 && (size_t)n < sizeof(list) - len)
            len += (size_t)n;
    }
    static const char *const keys[] = {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"};
    for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
        size_t kl = strlen(keys[k]);
        for (size_t j = json_array_size(env); j-- > 0;) { /* ours win over the image's */
            const char *s = json_string_value(json_array_get(env, j));
            if (s && !strncmp(s, keys[k], kl) && s[kl] == '=')
                json_array_remove(env, j);
        }
        char kv[sizeof(list) + 32];
        snprintf(kv, sizeof(kv), "%s=%s", keys[k], list);
        json_array_append_new(env, json_string(kv));
    }
}

json_t *sd_gpu_info_json(const sd_daemon *d) {
    json_t *devs = json_array();
    for (size_t i = 0; d->gpus && i < d->gpus->n; i++) {
        const gpu *p = &d->gpus->gpu[i];
        json_array_append_new(
            devs, json_pack("{s:s,s:s,s:s*,s:o,s:s*}", "uuid", p->uuid, "device", p->node.path,
                            "bus_id", p->bus_id[0] ? p->bus_id : NULL, "memory",
                            p->memory ? json_integer((json_int_t)p->memory) : json_null(),
                            "sandbox", p->owner[0] ? p->owner : NULL));
    }
    return json_pack("{s:i,s:i,s:o}", "total", (int)sd_gpu_total(d), "free", (int)sd_gpu_free(d),
                     "devices", devs);
}
