/* The image store (see images.h): loading it, naming images for creates and specs, committing
 * imports atomically, deleting images and the layers nobody else uses. Runs on the loop thread;
 * the slow parts (unpacking, removing trees) run on libuv's worker threads. */
#include "sandboxd/core/images.h"

#include "common/archive.h"
#include "common/fdutil.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "policy/image_name.h"
#include "sandboxd/core/image_workdir.h"
#include "sandboxd/core/registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define DEFAULT_MAX_ARCHIVE (8ull << 30)
#define DEFAULT_MAX_UNPACKED (32ull << 30)

static void image_free(sd_image *im) {
    if (!im)
        return;
    free(im->name);
    free(im->dir_path);
    json_decref(im->meta);
    free(im);
}

static int image_add(sd_images *s, const char *name, const char *dir, json_t *meta) {
    sd_image *im = calloc(1, sizeof(*im));
    if (!im || !(im->name = strdup(name)) || (dir && !(im->dir_path = strdup(dir)))) {
        image_free(im);
        json_decref(meta);
        return -ENOMEM;
    }
    im->meta = meta;
    im->next = s->list;
    s->list = im;
    return 0;
}

static void sub(const sd_images *s, char *buf, size_t len, const char *a, const char *b) {
    snprintf(buf, len, "%s/%s%s%s", s->root, a, b ? "/" : "", b ? b : "");
}

static int load_meta(sd_images *s) {
    char dir[PATH_MAX + 16];
    sub(s, dir, sizeof(dir), "meta", NULL);
    DIR *dp = opendir(dir);
    if (!dp)
        return -errno;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char p[PATH_MAX + 300];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        json_t *m = json_load_file(p, 0, NULL);
        const char *name = json_string_value(json_object_get(m, "name"));
        if (!name || !json_is_array(json_object_get(m, "layers"))) {
            log_warn("image store: ignoring unreadable %s", p);
            json_decref(m);
            continue;
        }
        if (image_add(s, name, NULL, m) < 0) {
            closedir(dp);
            return -ENOMEM;
        }
    }
    closedir(dp);
    return 0;
}

static int load_config(sd_daemon *d, sd_images *s, error_rec *err) {
    json_t *lim = d->cfg.image_import, *v;
    int r;
    s->max_archive = DEFAULT_MAX_ARCHIVE;
    s->max_unpacked = DEFAULT_MAX_UNPACKED;
    if (lim && !json_is_object(lim))
        return error_set(err, -EINVAL, "config image_import: must be an object");
    if ((v = json_object_get(lim, "max_archive")) &&
        (r = policy_parse_size(v, "image_import.max_archive", &s->max_archive, err)) < 0)
        return r;
    if ((v = json_object_get(lim, "max_unpacked")) &&
        (r = policy_parse_size(v, "image_import.max_unpacked", &s->max_unpacked, err)) < 0)
        return r;
    const char *k;
    json_object_foreach(d->cfg.images, k, v) {
        char name[POLICY_IMAGE_NAME_MAX];
        const char *path = json_string_value(v);
        struct stat st;
        if ((r = policy_image_name(k, "config images", name, err)) < 0)
            return r;
        if (!path || path[0] != '/' || stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
            return error_set(err, -EINVAL, "config images.%s: must be an existing directory", k);
        if (sd_images_find(d, name))
            return error_set(err, -EINVAL, "config images.%s: the store has an image %s", k, name);
        json_t *m = json_pack("{s:s,s:s,s:s}", "name", name, "format", "dir", "path", path);
        if (!m || image_add(s, name, path, m) < 0)
            return error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int sd_images_init(sd_daemon *d, error_rec *err) {
    sd_images *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    int r = uv_mutex_init(&s->lock);
    if (r < 0) {
        free(s);
        return error_set(err, -ENOMEM, "image store: %s", uv_strerror(r));
    }
    d->images = s;
    snprintf(s->root, sizeof(s->root), "%s/images", d->cfg.state_dir);
    char p[PATH_MAX + 16];
    static const char *const dirs[] = {"layers", "meta", "tmp"};
    sub(s, p, sizeof(p), "tmp", NULL);
    rm_rf(p); /* uploads and imports that a previous run did not finish */
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        sub(s, p, sizeof(p), dirs[i], NULL);
        if ((r = mkdir_p(p, 0700)) < 0)
            return error_set_errno(err, r, "image store: mkdir %s", p);
    }
    r = load_meta(s);
    if (r < 0)
        return error_set_errno(err, r, "image store: read %s/meta", s->root);
    return load_config(d, s, err);
}

void sd_images_done(sd_daemon *d) {
    sd_images *s = d->images;
    if (!s)
        return;
    while (s->list) {
        sd_image *im = s->list;
        s->list = im->next;
        image_free(im);
    }
    uv_mutex_destroy(&s->lock); /* after the loop: no import runs */
    free(s);
    d->images = NULL;
}

sd_image *sd_images_find(sd_daemon *d, const char *name) {
    for (sd_image *im = d->images ? d->images->list : NULL; im; im = im->next)
        if (strcmp(im->name, name) == 0)
            return im;
    return NULL;
}

int sd_images_check(sd_daemon *d, const char *name, error_rec *err) {
    if (strcmp(name, "host") == 0 || sd_images_find(d, name))
        return 0;
    return error_set(err, -ENOENT, "image: %s not found (import it with POST /v1/images)", name);
}

int sd_images_spec_fill(sd_daemon *d, const char *name, shim_spec *s, error_rec *err) {
    sd_image *im = strcmp(name, "host") ? sd_images_find(d, name) : NULL;
    if (!im && strcmp(name, "host") != 0) /* never another image than the one asked for */
        return error_set(err, -ENOENT, "image %s is not in the store", name);
    if (!im) {
        s->image_type = SHIM_IMAGE_HOST;
        return 0;
    }
    if (im->dir_path) {
        s->image_type = SHIM_IMAGE_DIR;
        s->image_path = strdup(im->dir_path);
        return s->image_path ? 0 : error_set(err, -ENOMEM, "out of memory");
    }
    json_t *layers = json_object_get(im->meta, "layers"), *l;
    size_t i, n = 0;
    if (!(s->layers = calloc(json_array_size(layers) + 1, sizeof(char *))))
        return error_set(err, -ENOMEM, "out of memory");
    s->image_type = SHIM_IMAGE_LAYERS;
    json_array_foreach(layers, i, l) {
        const char *dg = json_string_value(json_object_get(l, "digest"));
        char p[PATH_MAX + 100];
        if (!dg || strlen(dg) < 8)
            continue;
        sub(d->images, p, sizeof(p), "layers", dg + 7);
        /* a layer repeated higher up already gives the same files: keep its top copy */
        for (size_t k = 0; k < n; k++)
            if (strcmp(s->layers[k], p) == 0) {
                free(s->layers[k]);
                memmove(&s->layers[k], &s->layers[k + 1], (n - k) * sizeof(char *));
                n--;
                break;
            }
        if (!(s->layers[n] = strdup(p)))
            return error_set(err, -ENOMEM, "out of memory");
        s->n_layers = ++n;
    }
    /* commits (core/commit.c): the top layer's workspace/ and tmp/ seed /workspace and /tmp,
     * which the sandbox mounts over the image's; a fork's own seed (set later) wins */
    const char *seed = json_string_value(json_object_get(im->meta, "seed"));
    if (seed && strlen(seed) == 7 + IMG_DIGEST_HEX) {
        char p[PATH_MAX + 100];
        sub(d->images, p, sizeof(p), "layers", seed + 7);
        if (!(s->seed_path = strdup(p)))
            return error_set(err, -ENOMEM, "out of memory");
        s->seed_uid_base = 0; /* store layers hold the image's own ids */
    }
    return 0;
}

json_t *sd_images_env_json(sd_daemon *d, const char *name, json_t *create_env) {
    json_t *env = json_object(), *e, *arr = json_array();
    for (size_t i = 0; spec_default_env[i]; i++) {
        const char *kv = spec_default_env[i], *eq = strchr(kv, '=');
        char k[64];
        snprintf(k, sizeof(k), "%.*s", (int)(eq - kv), kv);
        json_object_set_new(env, k, json_string(eq + 1));
    }
    sd_image *im = sd_images_find(d, name);
    size_t i;
    json_array_foreach(im ? json_object_get(im->meta, "env") : NULL, i, e) {
        const char *kv = json_string_value(e), *eq = kv ? strchr(kv, '=') : NULL;
        if (eq && eq != kv) /* (NAME=VALUE: checked at import, policy_limits_check_image_env) */
            json_object_setn_new(env, kv, (size_t)(eq - kv), json_string(eq + 1));
    }
    json_object_update(env, create_env);
    spec_env_append(arr, env);
    json_decref(env);
    return arr;
}

/* Whether the tree at root has path (absolute): 1 an executable file (!exec: anything), or a
 * symbolic link into another layer (the sandbox may well resolve it); 0 something there hides
 * it (a whiteout; exec: a directory or another file); -1 nothing there. Links resolve inside
 * root (RESOLVE_IN_ROOT), never on the host. */
static int probe_root(const char *root, const char *path, bool exec) {
    _cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    struct stat st;
    if (rfd < 0)
        return -1;
    _cleanup_close_ int fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
    if (fd < 0) {
        how.flags |= O_NOFOLLOW;
        _cleanup_close_ int lfd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
        return lfd >= 0 && fstat(lfd, &st) == 0 && S_ISLNK(st.st_mode) ? 1 : -1;
    }
    if (fstat(fd, &st) < 0)
        return -1;
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) /* a whiteout */
        return 0;
    return !exec || (S_ISREG(st.st_mode) && (st.st_mode & 0111)) ? 1 : 0;
}

bool sd_images_has_path(sd_daemon *d, const char *name, const char *path, bool exec) {
    if (strcmp(name, "host") == 0) /* the host's own files, its links too: /run_code's default */
        return access(path, exec ? X_OK : F_OK) == 0;
    sd_image *im = sd_images_find(d, name);
    if (!im)
        return true;
    if (im->dir_path)
        return probe_root(im->dir_path, path, exec) == 1;
    json_t *layers = json_object_get(im->meta, "layers");
    for (size_t i = json_array_size(layers); i-- > 0;) { /* the top layer first */
        const char *dg = json_string_value(json_object_get(json_array_get(layers, i), "digest"));
        char p[PATH_MAX + 100];
        if (!dg || strlen(dg) < 8)
            continue;
        sub(d->images, p, sizeof(p), "layers", dg + 7);
        int r = probe_root(p, path, exec);
        if (r >= 0)
            return r == 1;
    }
    return false;
}

const char *sd_images_workdir(sd_daemon *d, const char *name) {
    sd_image *im = sd_images_find(d, name);
    if (!im || !json_is_true(json_object_get(im->meta, "workdir_exists")))
        return NULL;
    const char *w = json_string_value(json_object_get(im->meta, "workdir"));
    return w && *w ? w : NULL;
}

int sd_images_upload_open(sd_daemon *d, char **ret_path, uint64_t *ret_max) {
    sd_images *s = d->images;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/tmp/upload-XXXXXX", s->root);
    int fd = mkostemp(p, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (!(*ret_path = strdup(p))) {
        unlink(p);
        close(fd);
        return -ENOMEM;
    }
    *ret_max = s->max_archive;
    return fd;
}

/* ---- users of an image ---- */

bool sd_images_in_use(sd_daemon *d, const char *name, char *who, size_t len) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->state != SD_ENDED && strcmp(sb->spec.image, name) == 0) {
            snprintf(who, len, "sandbox %s", sb->id);
            return true;
        }
    return false;
}

json_t *sd_images_to_json(const sd_image *im) {
    return json_deep_copy(im->meta);
}

json_t *sd_images_list_json(sd_daemon *d) {
    json_t *a = json_array();
    for (sd_image *im = d->images->list; im; im = im->next)
        json_array_append_new(a, sd_images_to_json(im));
    return a;
}

/* ---- removing trees off the loop ---- */

typedef struct trash_op {
    uv_work_t w;
    char path[PATH_MAX + 100];
} trash_op;

static void trash_work(uv_work_t *w) {
    rm_rf(((trash_op *)w->data)->path);
}
static void trash_done(uv_work_t *w, int status) {
    free(w->data);
}

/* Move path into tmp/ now (so nothing sees it any more) and remove it on a worker. */
static void trash(sd_daemon *d, const char *path) {
    trash_op *t = calloc(1, sizeof(*t));
    if (!t)
        return;
    char id[32];
    sd_random_id("trash-", id, sizeof(id));
    snprintf(t->path, sizeof(t->path), "%s/tmp/%s", d->images->root, id);
    if (rename(path, t->path) < 0) {
        snprintf(t->path, sizeof(t->path), "%s", path);
    }
    t->w.data = t;
    if (uv_queue_work(d->loop, &t->w, trash_work, trash_done) < 0) {
        rm_rf(t->path);
        free(t);
    }
}

/* Whether an image or a running import uses layer hex; the lock held (the imports' workers
 * add to their lists meanwhile). */
static bool layer_used(sd_daemon *d, const char *hex) {
    for (sd_image *im = d->images->list; im; im = im->next) {
        json_t *l;
        size_t i;
        json_array_foreach(json_object_get(im->meta, "layers"), i, l) {
            const char *dg = json_string_value(json_object_get(l, "digest"));
            if (dg && strncmp(dg, "sha256:", 7) == 0 && strcmp(dg + 7, hex) == 0)
                return true;
        }
    }
    for (img_job *j = d->images->jobs; j; j = j->next)
        for (size_t i = 0; i < j->n_layers; i++)
            if (strcmp(j->layers[i].diff_id, hex) == 0)
                return true;
    return false;
}

/* Remove layers/<hex> unless it is used, in one lock with the check: a running import that
 * decides to reuse the layer (image_import.c put_layer) does so before or after, never between. */
static void trash_unused(sd_daemon *d, const char *hex) {
    char p[PATH_MAX + 100];
    uv_mutex_lock(&d->images->lock);
    if (!layer_used(d, hex)) {
        sub(d->images, p, sizeof(p), "layers", hex);
        trash(d, p);
    }
    uv_mutex_unlock(&d->images->lock);
}

int sd_images_delete(sd_daemon *d, const char *name, error_rec *err) {
    sd_images *s = d->images;
    sd_image **pp = &s->list, *im;
    while ((im = *pp) && strcmp(im->name, name) != 0)
        pp = &im->next;
    char who[64];
    if (!im)
        return error_set(err, -ENOENT, "image %s not found", name);
    if (im->dir_path)
        return error_set(err, -EBUSY, "image %s is a directory from the config file", name);
    if (sd_images_in_use(d, name, who, sizeof(who)))
        return error_set(err, -EBUSY, "image %s is in use by %s", name, who);
    char p[PATH_MAX + 300];
    snprintf(p, sizeof(p), "%s/meta/%s.json", s->root, name);
    if (unlink(p) < 0 && errno != ENOENT)
        return error_set_errno(err, negative_errno(), "image store: remove %s", p);
    *pp = im->next;
    json_t *l;
    size_t i;
    json_array_foreach(json_object_get(im->meta, "layers"), i, l) {
        const char *dg = json_string_value(json_object_get(l, "digest"));
        if (dg && strncmp(dg, "sha256:", 7) == 0 && strlen(dg) == 7 + IMG_DIGEST_HEX)
            trash_unused(d, dg + 7);
    }
    log_info("image deleted name=%s", name);
    image_free(im);
    return 0;
}

/* ---- imports ---- */

static void job_free(img_job *j) {
    for (size_t i = 0; i < j->n_layers; i++)
        free(j->layers[i].tmp_dir);
    free(j->layers);
    json_decref(j->meta);
    free(j->name);
    free(j->upload);
    if (j->work)
        rmdir(j->work);
    free(j->work);
    free(j);
}

static void job_unlink(sd_images *s, img_job *j) {
    for (img_job **pp = &s->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            return;
        }
}

/* On the loop thread: move the new layers into layers/, then write the name. */
static int commit(sd_daemon *d, img_job *j, error_rec *err) {
    sd_images *s = d->images;
    char p[PATH_MAX + 300];
    uint64_t total = 0;
    json_t *layers = json_array();
    json_object_set_new(j->meta, "layers", layers);
    if (sd_images_find(d, j->name))
        return error_set(err, -EEXIST, "image %s already exists", j->name);
    for (size_t i = 0; i < j->n_layers; i++) {
        img_layer *l = &j->layers[i];
        sub(s, p, sizeof(p), "layers", l->diff_id);
        if (l->tmp_dir && rename(l->tmp_dir, p) < 0 && errno != EEXIST && errno != ENOTEMPTY)
            return error_set_errno(err, negative_errno(), "image store: move layer into %s", p);
        struct stat st;
        if (stat(p, &st) < 0)
            return error_set(err, -EAGAIN,
                             "image store: layer sha256:%s was deleted during the import; import "
                             "again",
                             l->diff_id);
        char dg[80];
        snprintf(dg, sizeof(dg), "sha256:%s", l->diff_id);
        json_array_append_new(layers,
                              json_pack("{s:s,s:I}", "digest", dg, "size", (json_int_t)l->size));
        total += l->size;
    }
    char created[40];
    time_format_rfc3339(now_real_ms(), created, sizeof(created));
    json_object_set_new(j->meta, "name", json_string(j->name));
    json_object_set_new(j->meta, "created", json_string(created));
    json_object_set_new(j->meta, "size", json_integer((json_int_t)total));
    _cleanup_free_ char *text = json_dumps(j->meta, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(p, sizeof(p), "%s/meta/%s.json", s->root, j->name);
    int r = text ? file_write_atomic(p, text, strlen(text), 0600) : -ENOMEM;
    if (r < 0)
        return error_set_errno(err, r, "image store: write %s", p);
    return image_add(s, j->name, NULL, json_incref(j->meta));
}

static void import_work(uv_work_t *w) {
    img_import_run(w->data);
}

static void import_done(uv_work_t *w, int status) {
    img_job *j = w->data;
    sd_daemon *d = j->d;
    job_unlink(d->images, j);
    error_rec err = j->err;
    int r = j->status;
    if (r >= 0 && (r = commit(d, j, &err)) < 0) {
        for (size_t i = 0; i < j->n_layers; i++) /* layers no image holds (this one failed) */
            if (j->layers[i].tmp_dir)
                trash_unused(d, j->layers[i].diff_id);
        trash(d, j->work);
    } else if (r >= 0 && j->work && rmdir(j->work) < 0 && errno == ENOTEMPTY) {
        trash(d, j->work); /* a layer another import stored first (commit): this copy goes */
    }
    if (r < 0)
        log_warn("image import failed name=%s error=\"%s\"", j->name, err.message);
    else
        log_info("image imported name=%s layers=%zu", j->name, j->n_layers);
    if (j->done)
        j->done(j->ud, r, &err, r < 0 ? NULL : sd_images_find(d, j->name));
    job_free(j);
}

img_job *sd_images_import(sd_daemon *d, const char *name, char *upload, bool strip_setuid,
                          sd_image_done_fn done, void *ud, error_rec *err) {
    sd_images *s = d->images;
    img_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->name = strdup(name))) {
        free(j);
        unlink(upload), free(upload);
        error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    j->upload = upload;
    j->d = d, j->done = done, j->ud = ud;
    j->lock = &s->lock;
    j->budget = (img_budget){.unpacked_max = s->max_unpacked, .strip_setuid = strip_setuid};
    sub(s, j->layers_dir, sizeof(j->layers_dir), "layers", NULL);
    char p[PATH_MAX + 32];
    int r = -EEXIST;
    unsigned running = 0;
    for (img_job *o = s->jobs; o; o = o->next, running++)
        if (strcmp(o->name, name) == 0)
            goto fail;
    if (running >= SD_IMAGES_MAX_IMPORTS) { /* each holds a worker thread */
        r = error_set(err, -EBUSY, "%u imports are running: try again later", running);
        goto fail;
    }
    if (sd_images_find(d, name))
        goto fail;
    snprintf(p, sizeof(p), "%s/tmp/import-XXXXXX", s->root);
    if ((r = libarchive_load(err)) < 0)
        goto fail;
    if (!mkdtemp(p) || !(j->work = strdup(p))) {
        r = error_set_errno(err, negative_errno(), "image store: mkdir %s", p);
        goto fail;
    }
    j->work_req.data = j;
    if ((r = uv_queue_work(d->loop, &j->work_req, import_work, import_done)) < 0) {
        error_set(err, -EIO, "cannot queue the import: %s", uv_strerror(r));
        goto fail;
    }
    j->next = s->jobs;
    s->jobs = j;
    return j;
fail:
    if (r == -EEXIST)
        error_set(err, -EEXIST, "image %s already exists or is being imported", name);
    unlink(j->upload);
    job_free(j);
    return NULL;
}

/* ---- commits (core/commit.c) ---- */

/* A store image's layers (its meta's, bottom first) for img_layers_view's open_root. */
typedef struct {
    const sd_images *s;
    json_t *layers;
} store_layers;

static int store_layer_root(void *ud, size_t i) {
    const store_layers *l = ud;
    const char *dg = json_string_value(json_object_get(json_array_get(l->layers, i), "digest"));
    char p[PATH_MAX + 100];
    if (!dg || strlen(dg) < 8)
        return -1;
    sub(l->s, p, sizeof(p), "layers", dg + 7);
    return open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Whether the WorkingDir of a commit's image m (its layers in the store, the top one its seed)
 * is a directory where its sandboxes run: the new layer may have made or removed it, or (below
 * /workspace or /tmp) the seed may hold it. */
static bool commit_workdir_exists(const sd_images *s, json_t *m) {
    const char *wd = json_string_value(json_object_get(m, "workdir"));
    store_layers l = {s, json_object_get(m, "layers")};
    size_t n = json_array_size(l.layers);
    img_layers_view v = {.n = n, .open_root = store_layer_root, .ud = &l, .seed = n - 1};
    return wd && *wd && n > 0 && img_workdir_exists(&v, wd);
}

int sd_images_add_commit(sd_daemon *d, const char *name, const char *base, const char *layer_dir,
                         const char *hex, uint64_t size, const char *from, error_rec *err) {
    sd_images *s = d->images;
    sd_image *b = sd_images_find(d, base);
    if (!b || b->dir_path)
        return error_set(err, -ENOENT, "image %s is no longer in the store", base);
    if (sd_images_find(d, name))
        return error_set(err, -EEXIST, "name: image %s already exists", name);
    char p[PATH_MAX + 300], dg[80], created[40];
    sub(s, p, sizeof(p), "layers", hex);
    if (rename(layer_dir, p) < 0)
        return error_set_errno(err, negative_errno(), "image store: move layer into %s", p);
    _cleanup_(img_json_freep) json_t *m = json_deep_copy(b->meta);
    json_t *layers = m ? json_object_get(m, "layers") : NULL;
    snprintf(dg, sizeof(dg), "sha256:%s", hex);
    time_format_rfc3339(now_real_ms(), created, sizeof(created));
    json_int_t total = json_integer_value(json_object_get(m, "size")) + (json_int_t)size;
    if (!layers ||
        json_array_append_new(layers,
                              json_pack("{s:s,s:I}", "digest", dg, "size", (json_int_t)size)) < 0 ||
        json_object_set_new(m, "name", json_string(name)) < 0 ||
        json_object_set_new(m, "digest", json_string(dg)) < 0 ||
        json_object_set_new(m, "seed", json_string(dg)) < 0 ||
        json_object_set_new(m, "committed_from", json_string(from)) < 0 ||
        json_object_set_new(m, "created", json_string(created)) < 0 ||
        json_object_set_new(m, "size", json_integer(total)) < 0 ||
        json_object_set_new(m, "workdir_exists", json_boolean(commit_workdir_exists(s, m))) < 0) {
        trash_unused(d, hex); /* in the store's lock, as every removal of a layer */
        return error_set(err, -ENOMEM, "out of memory");
    }
    _cleanup_free_ char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    char mp[PATH_MAX + 300];
    snprintf(mp, sizeof(mp), "%s/meta/%s.json", s->root, name);
    int r = text ? file_write_atomic(mp, text, strlen(text), 0600) : -ENOMEM;
    if (r < 0) {
        trash_unused(d, hex);
        return error_set_errno(err, r, "image store: write %s", mp);
    }
    if ((r = image_add(s, name, NULL, json_incref(m))) < 0)
        return error_set(err, r, "out of memory");
    log_info("image committed name=%s from=%s base=%s", name, from, base);
    return 0;
}
