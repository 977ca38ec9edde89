/* The image store (images.c) and the import of archives into it (image_import.c).
 *
 * On disk, under <state-dir>/images/:
 *   layers/<diff_id hex>/   one unpacked layer in overlayfs form (read-only lower directory),
 *                           shared by every image that has it
 *   meta/<name:tag>.json    one image: name, digest, format, layers (bottom first), env,
 *                           workdir, entrypoint, cmd, size, created
 *   tmp/                    uploads and imports in progress (emptied at start)
 * An import unpacks into tmp/ and then renames the new layers into layers/ and writes the meta
 * file last, so an image appears whole under its name or not at all. Directory images from the
 * config file ("images": {"NAME": "/path"}) are listed too but are never stored or deleted. */
#pragma once

#include "sandboxd/core/sandbox.h"
#include "common/spec.h"
#include "sandboxd/core/image_archive.h"

static inline void img_json_freep(json_t **j) {
    json_decref(*j);
}

typedef struct sd_image {
    struct sd_image *next;
    char *name;     /* NAME:TAG */
    char *dir_path; /* a directory image from the config file, else NULL */
    json_t *meta;   /* the API object */
} sd_image;

#define SD_IMAGES_MAX_IMPORTS 2 /* imports at once (libuv has 4 worker threads) */

typedef struct sd_images {
    char root[PATH_MAX]; /* <state-dir>/images */
    sd_image *list;
    uint64_t max_archive, max_unpacked;
    struct img_job *jobs; /* imports in flight */
    uv_mutex_t lock;      /* the jobs' layers: their workers add, the loop reads (layer_used) */
} sd_images;

/* Store start-up: directories, tmp/ emptied, meta files and config directory images loaded. */
int sd_images_init(sd_daemon *d, error_rec *err);
void sd_images_done(sd_daemon *d);
sd_image *sd_images_find(sd_daemon *d, const char *name);
/* For a create: 0 when name is "host" or a known image, else -ENOENT with a message. */
int sd_images_check(sd_daemon *d, const char *name, error_rec *err);
/* The spec's image for a sandbox of image `name`: host, dir or layers (bottom first). */
int sd_images_spec_fill(sd_daemon *d, const char *name, struct shim_spec *s, error_rec *err);
/* The environment of a sandbox (["K=V", ...]): the defaults (common/spec.h), overridden by the
 * image's Env, overridden by create_env (an object of strings, or NULL). */
json_t *sd_images_env_json(sd_daemon *d, const char *name, json_t *create_env);
/* Whether image `name` ("host" or a store NAME:TAG) has `path` (absolute), as its sandboxes see
 * it (a store image's layers from the top; a whiteout there hides the lower ones'); exec: an
 * executable file. True for a name not in the store (its create says so), and when a link
 * leads into another layer. */
bool sd_images_has_path(sd_daemon *d, const char *name, const char *path, bool exec);
/* The default cwd of commands: the image's WorkingDir when it exists in the image, else NULL. */
const char *sd_images_workdir(sd_daemon *d, const char *name);

/* Sandboxes (warm pool entries included) of image name that are not ended (who: one of them).
 * Pool templates are the caller's to check (core/pool.h sd_pool_uses_image). */
bool sd_images_in_use(sd_daemon *d, const char *name, char *who, size_t len);
json_t *sd_images_to_json(const sd_image *im);
json_t *sd_images_list_json(sd_daemon *d);
/* -ENOENT, -EBUSY (a sandbox uses it, or a config directory image), or 0: the name is gone and the
 * layers no other image uses are removed. */
int sd_images_delete(sd_daemon *d, const char *name, error_rec *err);

/* An import finished: r < 0 with err, or 0 with the new image. */
typedef void (*sd_image_done_fn)(void *ud, int r, const error_rec *err, sd_image *img);
/* Import the archive in upload (a file in tmp/, taken over) as name on a worker thread; done
 * is called on the loop thread. NULL with err (-EEXIST: the name exists or is being imported;
 * -EBUSY: SD_IMAGES_MAX_IMPORTS are running) when it cannot start. The returned job's ud may be
 * cleared (the client went away). */
struct img_job *sd_images_import(sd_daemon *d, const char *name, char *upload, bool strip_setuid,
                                 sd_image_done_fn done, void *ud, error_rec *err);

/* A commit's new layer (core/commit.c): layer_dir (in tmp/) becomes layers/<hex> and name an
 * image of base's layers plus it, whose workspace/ and tmp/ seed its sandboxes. -EEXIST (name
 * taken), -ENOENT (base gone) or an store error; on failure layer_dir is the caller's. */
int sd_images_add_commit(sd_daemon *d, const char *name, const char *base, const char *layer_dir,
                         const char *hex, uint64_t size, const char *from, error_rec *err);

/* HTTP uploads to POST /v1/images are written to a temp file as they arrive (api/http.c). */
int sd_images_upload_open(sd_daemon *d, char **ret_path, uint64_t *ret_max);

/* ---- image_import.c: the worker side, no daemon state ---- */

typedef struct img_layer {
    char diff_id[IMG_DIGEST_HEX + 1];
    char *tmp_dir; /* unpacked here (to rename into layers/), NULL: already in the store */
    uint64_t size;
} img_layer;

typedef struct img_job {
    struct img_job *next;
    sd_daemon *d;
    uv_work_t work_req;
    void (*done)(void *ud, int r, const error_rec *err, sd_image *img);
    void *ud;
    char *name, *upload, *work; /* work: tmp/import-XXXX */
    char layers_dir[PATH_MAX];
    img_budget budget;
    /* results */
    int status;
    error_rec err;
    json_t *meta;
    /* Written by the worker under *lock (the store's), which the loop thread takes to read
     * them while the job runs; after it (import_done) they are the loop thread's alone. */
    uv_mutex_t *lock;
    img_layer *layers;
    size_t n_layers;
} img_job;

/* Run on a worker thread: read job->upload, verify, unpack the layers that are not in
 * layers_dir yet into job->work, fill meta/layers. On failure removes what it made. */
void img_import_run(img_job *job);
/* HTTP status for an import error code. */
unsigned img_import_status(int code);
