/* Import of one archive (see images.h), run on a worker thread: the format is told from the
 * archive's names (docker save: manifest.json; OCI layout: oci-layout + index.json; anything
 * else: a rootfs tarball), every blob is checked against the digest that names it, every
 * layer's uncompressed content against the config's diff_ids, and the layers not yet in the
 * store are unpacked into the job's work directory. */
#include "sandboxd/core/images.h"
#include "sandboxd/core/image_workdir.h"

#include "common/fdutil.h"
#include "policy/limits.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

#define IMG_JSON_MAX (4u << 20)

#define bad(err, fmt, arg) error_set(err, -EINVAL, fmt, arg)

static json_t *load_json(const img_member *m, const char *what, error_rec *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = file_read_all(m->file, IMG_JSON_MAX, &buf, &len);
    if (r < 0) {
        error_set_errno(err, r == -EFBIG ? -EINVAL : r, "image: read %s", what);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(buf, len, 0, &je);
    if (!j)
        error_set(err, -EINVAL, "image: %s is not valid JSON: %s", what, je.text);
    return j;
}

/* "sha256:<64 hex>" -> the hex part, or NULL. */
static const char *digest_hex(json_t *v) {
    const char *s = json_string_value(v);
    if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + IMG_DIGEST_HEX)
        return NULL;
    for (const char *p = s + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return NULL;
    return s + 7;
}

/* Whether the store, or one of this import's first n layers, has layer hex. */
static bool in_store(img_job *j, const char *hex, size_t n) {
    char p[PATH_MAX + 80];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", j->layers_dir, hex);
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
        return true;
    for (size_t i = 0; i < n; i++)
        if (strcmp(j->layers[i].diff_id, hex) == 0)
            return true;
    return false;
}

/* Make l the job's layer i (i == n_layers: appended) under the store's lock, since the loop
 * thread reads the list meanwhile (images.c: a layer a running import uses is not deleted).
 * check: when the store has l's layer, the entry says so (no tmp_dir; the caller's stays its
 * own) and 1 is returned, decided in the same lock: an image delete either removed the layer
 * before (then it is unpacked here) or sees this import use it and keeps it. -ENOMEM. */
static int put_layer(img_job *j, size_t i, img_layer l, bool check) {
    uv_mutex_lock(j->lock);
    int r = check && in_store(j, l.diff_id, i) ? 1 : 0;
    img_layer *v = i < j->n_layers ? j->layers : realloc(j->layers, (i + 1) * sizeof(*v));
    if (!v) {
        r = -ENOMEM;
    } else {
        j->layers = v;
        if (r == 1)
            l.tmp_dir = NULL;
        v[i] = l;
        j->n_layers = i < j->n_layers ? j->n_layers : i + 1;
    }
    uv_mutex_unlock(j->lock);
    return r;
}

/* Unpack (or, when the store has it, only hash) one layer; expect: its diff_id hex or NULL. */
static int add_layer(img_job *j, const char *blob, const char *expect, error_rec *err) {
    size_t i = j->n_layers;
    img_layer l = {0};
    snprintf(l.diff_id, sizeof(l.diff_id), "%s", expect ? expect : "");
    int skip = put_layer(j, i, l, expect != NULL); /* listed (and held, if reused) from here */
    if (skip < 0)
        return error_set(err, -ENOMEM, "out of memory");
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/l%zu", j->work, i);
    _cleanup_close_ int fd = -1;
    if (!skip) { /* on failure, what it made is removed with work/ */
        if (mkdir(dir, 0755) < 0 ||
            (fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
            return error_set_errno(err, negative_errno(), "image: create %s", dir);
        if (!(l.tmp_dir = strdup(dir)))
            return error_set(err, -ENOMEM, "out of memory");
    }
    int r = img_unpack_layer(blob, fd, &j->budget, l.diff_id, &l.size, err);
    if (r >= 0 && expect && strcmp(l.diff_id, expect) != 0)
        r = error_set(err, -EINVAL,
                      "image: layer %zu: its content has sha256:%s, the config says sha256:%s "
                      "(digest mismatch)",
                      i + 1, l.diff_id, expect);
    if (put_layer(j, i, l, r >= 0 && !expect) == 1) { /* even on failure: job_free frees it */
        rm_rf(dir);
        free(l.tmp_dir);
    }
    return r;
}

static int config_fields(img_job *j, json_t *cfg, error_rec *err) {
    json_t *c = json_object_get(cfg, "config");
    json_t *env = json_object_get(c, "Env"), *wd = json_object_get(c, "WorkingDir");
    int r = policy_limits_check_image_env(env, err); /* it goes with every command */
    if (r < 0)
        return r;
    if (wd && !json_is_string(wd))
        return bad(err, "image: config: %s has the wrong type", "WorkingDir");
    const char *w = wd ? json_string_value(wd) : "";
    if (*w && (w[0] != '/' || strstr(w, "/../") || strlen(w) > 1024))
        return bad(err, "image: config WorkingDir \"%s\" is not a clean absolute path", w);
    json_t *ep = json_object_get(c, "Entrypoint"), *cmd = json_object_get(c, "Cmd");
    json_object_set_new(j->meta, "env", env ? json_deep_copy(env) : json_array());
    json_object_set_new(j->meta, "workdir", json_string(w));
    json_object_set_new(j->meta, "entrypoint",
                        json_is_array(ep) ? json_deep_copy(ep) : json_null());
    json_object_set_new(j->meta, "cmd", json_is_array(cmd) ? json_deep_copy(cmd) : json_null());
    return 0;
}

static json_t *diff_ids(json_t *cfg, size_t want, error_rec *err) {
    json_t *ids = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
    if (!json_is_array(ids) || json_array_size(ids) != want) {
        error_set(err, -EINVAL, "image: config rootfs.diff_ids lists %zu layers, the manifest %zu",
                  json_array_size(ids), want);
        return NULL;
    }
    return ids;
}

static int layers_from(img_job *j, const img_members *ms, json_t *paths, json_t *ids, bool oci,
                       error_rec *err) {
    size_t i;
    json_t *v;
    json_array_foreach(paths, i, v) {
        const char *expect = digest_hex(json_array_get(ids, i));
        if (!expect)
            return error_set(err, -EINVAL,
                             "image: config rootfs.diff_ids[%zu] is not a sha256 digest", i);
        if (!oci && !json_is_string(v))
            return bad(err, "image: manifest.json %s: layer is not a path", "Layers");
        char path[PATH_MAX];
        const char *hex = oci ? digest_hex(json_object_get(v, "digest")) : NULL;
        if (oci && !hex)
            return bad(err, "image: manifest layer %s: digest is not sha256:<hex>", "descriptor");
        snprintf(path, sizeof(path), oci ? "blobs/sha256/%s" : "%s",
                 oci ? hex : json_string_value(v));
        const img_member *m = json_string_value(v) || oci ? img_members_find(ms, path) : NULL;
        if (!m)
            return bad(err, "image: layer %s is missing from the archive", path);
        json_t *size = json_object_get(v, "size");
        if (!hex && strncmp(path, "blobs/sha256/", 13) == 0)
            hex = path + 13;
        if (hex && strcmp(hex, m->sha256) != 0)
            return error_set(err, -EINVAL, "image: layer %s has sha256:%s (digest mismatch)", path,
                             m->sha256);
        if (oci && (!json_is_integer(size) || (uint64_t)json_integer_value(size) != m->size))
            return bad(err, "image: layer %s: size differs from its descriptor", path);
        int r = add_layer(j, m->file, expect, err);
        if (r < 0)
            return r;
    }
    return 0;
}

static int import_docker(img_job *j, const img_members *ms, error_rec *err) {
    _cleanup_(img_json_freep) json_t *man =
        load_json(img_members_find(ms, "manifest.json"), "manifest.json", err);
    if (!man)
        return err->code;
    json_t *m0 = json_array_get(man, 0);
    const char *cpath = json_string_value(json_object_get(m0, "Config"));
    json_t *layers = json_object_get(m0, "Layers");
    if (!cpath || !json_is_array(layers))
        return bad(err, "image: manifest.json: %s", "expected [{\"Config\":..,\"Layers\":[..]}]");
    const img_member *cm = img_members_find(ms, cpath);
    if (!cm)
        return bad(err, "image: config %s is missing from the archive", cpath);
    /* classic layout: "<hex>.json"; OCI-style docker save: "blobs/sha256/<hex>" */
    const char *named = strncmp(cpath, "blobs/sha256/", 13) == 0 ? cpath + 13 : cpath;
    if (strncmp(named, cm->sha256, IMG_DIGEST_HEX) != 0)
        return error_set(err, -EINVAL, "image: config %s has sha256:%s (digest mismatch)", cpath,
                         cm->sha256);
    _cleanup_(img_json_freep) json_t *cfg = load_json(cm, cpath, err);
    json_t *ids = cfg ? diff_ids(cfg, json_array_size(layers), err) : NULL;
    if (!ids)
        return err->code;
    char dg[80];
    snprintf(dg, sizeof(dg), "sha256:%s", cm->sha256);
    json_object_set_new(j->meta, "digest", json_string(dg));
    json_object_set_new(j->meta, "format", json_string("docker"));
    int r = config_fields(j, cfg, err);
    return r < 0 ? r : layers_from(j, ms, layers, ids, false, err);
}

/* The blob a descriptor names, checked against its digest and size. */
static const img_member *blob(const img_members *ms, json_t *desc, const char *what,
                              error_rec *err) {
    const char *hex = digest_hex(json_object_get(desc, "digest"));
    json_t *size = json_object_get(desc, "size");
    char path[100];
    if (!hex) {
        bad(err, "image: %s: digest is not sha256:<hex>", what);
        return NULL;
    }
    snprintf(path, sizeof(path), "blobs/sha256/%s", hex);
    const img_member *m = img_members_find(ms, path);
    if (!m)
        bad(err, "image: %s is missing from the archive", path);
    else if (strcmp(m->sha256, hex) != 0)
        error_set(err, -EINVAL, "image: %s has sha256:%s (digest mismatch)", path, m->sha256);
    else if (!json_is_integer(size) || (uint64_t)json_integer_value(size) != m->size)
        bad(err, "image: %s: size differs from its descriptor", path);
    else
        return m;
    return NULL;
}

static const char *host_arch(void) {
    struct utsname u;
    if (uname(&u) < 0)
        return "amd64";
    return strcmp(u.machine, "x86_64") == 0    ? "amd64"
           : strcmp(u.machine, "aarch64") == 0 ? "arm64"
                                               : "unknown";
}

/* From an index: the one manifest, else the one for linux on this host's architecture, else the
 * first without a platform (`docker save` lists one per tag); one for other platforms only is
 * refused, as `docker pull` does, rather than run binaries this host cannot execute. */
static json_t *pick_manifest(json_t *index, error_rec *err) {
    json_t *list = json_object_get(index, "manifests"), *d, *any = NULL;
    size_t i;
    char others[256] = "";
    if (!json_is_array(list) || json_array_size(list) == 0) {
        bad(err, "image: %s has no manifests", "index.json");
        return NULL;
    }
    if (json_array_size(list) == 1)
        return json_array_get(list, 0);
    json_array_foreach(list, i, d) {
        json_t *p = json_object_get(d, "platform");
        const char *os = json_string_value(json_object_get(p, "os"));
        const char *arch = json_string_value(json_object_get(p, "architecture"));
        if (!p && !any)
            any = d;
        if (os && arch && strcmp(os, "linux") == 0 && strcmp(arch, host_arch()) == 0)
            return d;
        size_t n = strlen(others);
        if (p && n < sizeof(others) - 1)
            snprintf(others + n, sizeof(others) - n, "%s%.32s/%.32s", n ? ", " : "", os ? os : "?",
                     arch ? arch : "?");
    }
    if (!any)
        error_set(err, -EINVAL, "image: the index has no manifest for linux/%s (only %s)",
                  host_arch(), others);
    return any;
}

static bool is_index(json_t *desc, json_t *doc) {
    const char *mt = json_string_value(json_object_get(desc, "mediaType"));
    if (!mt)
        mt = json_string_value(json_object_get(doc, "mediaType"));
    return (mt && (strcmp(mt, "application/vnd.oci.image.index.v1+json") == 0 ||
                   strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0)) ||
           (!json_object_get(doc, "config") && json_object_get(doc, "manifests"));
}

static int import_oci(img_job *j, const img_members *ms, error_rec *err) {
    _cleanup_(img_json_freep) json_t *layout =
        load_json(img_members_find(ms, "oci-layout"), "oci-layout", err);
    if (!layout)
        return err->code;
    if (!json_is_string(json_object_get(layout, "imageLayoutVersion")))
        return bad(err, "image: %s lacks imageLayoutVersion", "oci-layout");
    _cleanup_(img_json_freep) json_t *doc =
        load_json(img_members_find(ms, "index.json"), "index.json", err);
    const img_member *mm = NULL;
    for (int depth = 0; doc && depth < 3; depth++) {
        json_t *desc = pick_manifest(doc, err);
        if (!desc || !(mm = blob(ms, desc, "manifest", err)))
            return err->code;
        json_t *next = load_json(mm, "the manifest", err);
        bool idx = next && is_index(desc, next);
        json_decref(doc);
        doc = next;
        if (!idx)
            break;
        mm = NULL;
    }
    if (!doc || !mm)
        return doc ? bad(err, "image: %s nest too deep", "indexes") : err->code;
    json_t *layers = json_object_get(doc, "layers");
    const img_member *cm = blob(ms, json_object_get(doc, "config"), "config", err);
    if (!cm)
        return err->code;
    if (!json_is_array(layers))
        return bad(err, "image: the manifest %s", "lists no layers");
    _cleanup_(img_json_freep) json_t *cfg = load_json(cm, "the config", err);
    json_t *ids = cfg ? diff_ids(cfg, json_array_size(layers), err) : NULL;
    if (!ids)
        return err->code;
    char dg[80];
    snprintf(dg, sizeof(dg), "sha256:%s", mm->sha256);
    json_object_set_new(j->meta, "digest", json_string(dg));
    json_object_set_new(j->meta, "format", json_string("oci"));
    int r = config_fields(j, cfg, err);
    return r < 0 ? r : layers_from(j, ms, layers, ids, true, err);
}

static int import_rootfs(img_job *j, error_rec *err) {
    int r = add_layer(j, j->upload, NULL, err);
    if (r < 0)
        return r;
    char dg[80];
    snprintf(dg, sizeof(dg), "sha256:%s", j->layers[0].diff_id);
    json_object_set_new(j->meta, "digest", json_string(dg));
    json_object_set_new(j->meta, "format", json_string("rootfs"));
    json_object_set_new(j->meta, "env", json_array());
    json_object_set_new(j->meta, "workdir", json_string(""));
    json_object_set_new(j->meta, "entrypoint", json_null());
    json_object_set_new(j->meta, "cmd", json_null());
    return 0;
}

/* The root of layer i (top: n_layers - 1), O_RDONLY, or -1 (img_layers_view's open_root). */
static int layer_root(void *ud, size_t i) {
    img_job *j = ud;
    char root[PATH_MAX + 80];
    if (j->layers[i].tmp_dir)
        snprintf(root, sizeof(root), "%s", j->layers[i].tmp_dir);
    else
        snprintf(root, sizeof(root), "%s/%s", j->layers_dir, j->layers[i].diff_id);
    return open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int import(img_job *j, error_rec *err) {
    char mdir[PATH_MAX + 16];
    snprintf(mdir, sizeof(mdir), "%s/members", j->work);
    if (mkdir(mdir, 0700) < 0)
        return error_set_errno(err, negative_errno(), "image: create %s", mdir);
    img_members ms = {0};
    int r = img_members_save(j->upload, mdir, &j->budget, &ms, err);
    if (r == 1)
        r = import_rootfs(j, err);
    else if (r == 0 && img_members_find(&ms, "index.json") && img_members_find(&ms, "oci-layout"))
        r = import_oci(j, &ms, err);
    else if (r == 0 && img_members_find(&ms, "manifest.json"))
        r = import_docker(j, &ms, err);
    else if (r == 0)
        r = bad(err, "image: %s", "the archive has neither manifest.json nor index.json");
    img_members_done(&ms);
    rmdir(mdir);
    if (r < 0)
        return r;
    const char *wd = json_string_value(json_object_get(j->meta, "workdir"));
    /* an imported image seeds nothing: its sandboxes' /workspace and /tmp start empty */
    img_layers_view v = {.n = j->n_layers, .open_root = layer_root, .ud = j, .seed = j->n_layers};
    json_object_set_new(j->meta, "workdir_exists",
                        json_boolean(wd && *wd && img_workdir_exists(&v, wd)));
    return 0;
}

void img_import_run(img_job *j) {
    j->meta = json_object();
    j->status = j->meta ? import(j, &j->err) : error_set(&j->err, -ENOMEM, "out of memory");
    unlink(j->upload);
    if (j->status < 0)
        rm_rf(j->work);
}

unsigned img_import_status(int code) {
    switch (code) {
    case -EINVAL:
        return 400;
    case -EEXIST:
        return 409;
    case -EFBIG:
        return 413;
    case -ENOSPC:
    case -EDQUOT:
        return 507;
    default:
        return 500;
    }
}
