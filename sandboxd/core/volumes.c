/* Named volumes (see volumes.h): the table, their records, the create and delete jobs (the
 * disk work on libuv's worker threads: core/volume_disk.c) and who uses which. */
#include "sandboxd/core/volumes.h"

#include "common/fdutil.h"
#include "common/timeutil.h"
#include "policy/volumes.h"
#include "sandboxd/core/state.h"
#include "sandboxd/core/volume_disk.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef enum { VOL_CREATING, VOL_READY, VOL_DELETING, VOL_BROKEN } vol_state;

struct sd_volume {
    sd_volume *next;
    char name[POLICY_VOLUME_NAME_MAX + 1];
    uint64_t size;
    char created[40];
    vol_state state;
    char message[ERROR_MSG_MAX]; /* VOL_BROKEN: why it is not mounted */
};

typedef struct sd_volumes {
    char dir[PATH_MAX]; /* <state-dir>/volumes */
    sd_volume *list;
    struct vol_job *jobs;
} sd_volumes;

typedef struct vol_job {
    uv_work_t w;
    struct vol_job *next;
    sd_daemon *d;
    sd_volume *v;
    bool del;
    int r;
    error_rec err;
    sd_volume_done_fn done;
    void *ud;
} vol_job;

static const char kind[] = "volumes"; /* the records' folder (core/state.h) */

sd_volume *sd_volume_find(sd_daemon *d, const char *name) {
    for (sd_volume *v = d->volumes ? d->volumes->list : NULL; v; v = v->next)
        if (strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

static void unlink_vol(sd_daemon *d, sd_volume *v) {
    for (sd_volume **pp = &d->volumes->list; *pp; pp = &(*pp)->next)
        if (*pp == v) {
            *pp = v->next;
            break;
        }
    free(v);
}

static sd_volume *add_vol(sd_daemon *d, const char *name, uint64_t size, const char *created) {
    sd_volume *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    snprintf(v->name, sizeof(v->name), "%s", name);
    snprintf(v->created, sizeof(v->created), "%s", created);
    v->size = size;
    v->next = d->volumes->list;
    d->volumes->list = v;
    return v;
}

/* ---- start-up ---- */

/* A record that cannot be read: its data stays (nothing of it is removed, the record neither),
 * listed as broken so it can be seen and deleted; a valid record restores it at a restart. */
static void load_broken(sd_daemon *d, const char *name, const char *why) {
    char img[PATH_MAX], mnt[PATH_MAX];
    sd_vdisk_paths(d->volumes->dir, name, img, mnt, sizeof(img));
    struct stat st;
    sd_volume *v = add_vol(d, name, stat(img, &st) == 0 ? (uint64_t)st.st_size : 0, "");
    if (!v) /* not known: the sweep keeps its image anyway, since its record is there */
        return;
    v->state = VOL_BROKEN;
    snprintf(v->message, sizeof(v->message),
             "its record %s.json cannot be read (%s): its data is kept; put the record right and "
             "restart the daemon, or delete the volume",
             name, why);
    log_error("volume=%s error=\"%s\"", name, v->message);
}

static void load_record(sd_daemon *d, const char *id, json_t *j, const char *why) {
    const char *name = json_string_value(json_object_get(j, "name"));
    json_t *size = json_object_get(j, "size");
    const char *created = json_string_value(json_object_get(j, "created"));
    if (!policy_volume_name_ok(id)) { /* not the daemon's: left alone, and its image too */
        log_warn("ignoring state file=%s/%s.json: not a volume's name", d->volumes->dir, id);
        return;
    }
    if (!why && (!name || strcmp(name, id) != 0))
        why = "its name is not the file's";
    else if (!why && (!json_is_integer(size) || json_integer_value(size) <= 0))
        why = "its size is not a number of bytes";
    sd_volume *v = why ? NULL : add_vol(d, name, (uint64_t)json_integer_value(size), created ?: "");
    error_rec err = {0};
    if (why || !v) {
        load_broken(d, id, why ?: "out of memory");
    } else if (sd_vdisk_mount(d->volumes->dir, name, &err) < 0) {
        v->state = VOL_BROKEN;
        snprintf(v->message, sizeof(v->message), "cannot mount it: %s", err.message);
        log_error("volume=%s error=\"%s\"", name, v->message);
    } else {
        v->state = VOL_READY;
    }
}

/* An image or mount point is the volume's while the volume or its record exists; else it is
 * what an interrupted create (the record is written last) or delete (removed first) left. */
static bool known(void *ud, const char *name) {
    sd_daemon *d = ud;
    char rec[PATH_MAX + 300];
    snprintf(rec, sizeof(rec), "%s/%s.json", d->volumes->dir, name);
    return sd_volume_find(d, name) != NULL || access(rec, F_OK) == 0 || errno != ENOENT;
}

int sd_volumes_init(sd_daemon *d, error_rec *err) {
    d->volumes = calloc(1, sizeof(*d->volumes));
    if (!d->volumes)
        return error_set(err, -ENOMEM, "out of memory");
    snprintf(d->volumes->dir, sizeof(d->volumes->dir), "%s/%s", d->cfg.state_dir, kind);
    int r = mkdir_p(d->volumes->dir, 0700);
    if (r < 0)
        return error_set_errno(err, r, "mkdir %s", d->volumes->dir);
    sd_state_foreach_keep(d, kind, load_record);
    sd_vdisk_sweep(d->volumes->dir, known, d);
    return 0;
}

/* ---- jobs ---- */

static void job_work(uv_work_t *w) {
    vol_job *j = w->data;
    const char *dir = j->d->volumes->dir;
    if (j->del)
        sd_vdisk_remove(dir, j->v->name);
    else
        j->r = sd_vdisk_make(dir, j->v->name, j->v->size, &j->err);
}

static int save_record(sd_daemon *d, const sd_volume *v) {
    json_t *rec = json_pack("{s:s,s:I,s:s}", "name", v->name, "size", (json_int_t)v->size,
                            "created", v->created);
    return rec ? sd_state_write(d, kind, v->name, rec, true) : -ENOMEM;
}

static void job_after(uv_work_t *w, int status) {
    vol_job *j = w->data;
    sd_daemon *d = j->d;
    for (vol_job **pp = &d->volumes->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    int r = j->r;
    if (!j->del && r >= 0 && (r = save_record(d, j->v)) < 0) {
        error_set_errno(&j->err, r, "cannot save the volume's record");
        sd_vdisk_remove(d->volumes->dir, j->v->name); /* quick: an empty volume */
    }
    sd_volume *v = j->v;
    if (j->del || r < 0) {
        log_info("volume %s name=%s%s%s", j->del ? "deleted" : "create failed", v->name,
                 r < 0 ? " error=" : "", r < 0 ? j->err.message : "");
        unlink_vol(d, v);
        v = NULL;
    } else {
        v->state = VOL_READY;
        log_info("volume created name=%s size=%llu", v->name, (unsigned long long)v->size);
    }
    if (j->done)
        j->done(j->ud, r < 0 ? &j->err : NULL, v);
    free(j);
}

static int start_job(sd_daemon *d, sd_volume *v, bool del, sd_volume_done_fn done, void *ud,
                     void **ret_job, error_rec *err) {
    vol_job *j = calloc(1, sizeof(*j));
    if (!j)
        return error_set(err, -ENOMEM, "out of memory");
    *j = (vol_job){.d = d, .v = v, .del = del, .done = done, .ud = ud};
    j->w.data = j;
    int r = uv_queue_work(d->loop, &j->w, job_work, job_after);
    if (r < 0) {
        free(j);
        return error_set(err, -EIO, "cannot start the volume's work: %s", uv_strerror(r));
    }
    j->next = d->volumes->jobs;
    d->volumes->jobs = j;
    *ret_job = j;
    return 0;
}

void sd_volumes_forget(sd_daemon *d, void *job) {
    for (vol_job *j = d->volumes->jobs; j; j = j->next)
        if (j == job)
            j->done = NULL;
}

int sd_volume_create(sd_daemon *d, const char *name, uint64_t size, sd_volume_done_fn done,
                     void *ud, void **ret_job, error_rec *err) {
    if (sd_volume_find(d, name))
        return error_set(err, -EEXIST, "name: volume %s exists", name);
    struct statvfs fs;
    if (statvfs(d->volumes->dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < size)
        return error_set(err, -EDQUOT,
                         "size: %llu bytes do not fit in the %llu bytes free in the daemon's "
                         "state directory",
                         (unsigned long long)size,
                         (unsigned long long)((uint64_t)fs.f_bavail * fs.f_frsize));
    char created[40];
    time_format_rfc3339(now_real_ms(), created, sizeof(created));
    sd_volume *v = add_vol(d, name, size, created);
    if (!v)
        return error_set(err, -ENOMEM, "out of memory");
    v->state = VOL_CREATING;
    int r = start_job(d, v, false, done, ud, ret_job, err);
    if (r < 0)
        unlink_vol(d, v);
    return r;
}

/* ---- users ---- */

/* The entry of sb's create naming volume name, or NULL. */
static json_t *use_of(const sd_sandbox *sb, const char *name) {
    size_t i;
    json_t *e;
    json_array_foreach(sb->spec.volumes, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return e;
    }
    return NULL;
}

/* The first sandbox (not ended) using name (writable only: only a writable use), or NULL. */
static sd_sandbox *user_of(sd_daemon *d, const char *name, bool writable_only) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        json_t *e = sb->state == SD_ENDED ? NULL : use_of(sb, name);
        if (e && (!writable_only || !json_is_true(json_object_get(e, "read_only"))))
            return sb;
    }
    return NULL;
}

int sd_volume_delete(sd_daemon *d, const char *name, sd_volume_done_fn done, void *ud,
                     void **ret_job, error_rec *err) {
    sd_volume *v = sd_volume_find(d, name);
    sd_sandbox *sb = v ? user_of(d, name, false) : NULL;
    if (!v || v->state == VOL_DELETING)
        return error_set(err, -ENOENT, "volume %s not found", name);
    if (v->state == VOL_CREATING)
        return error_set(err, -EBUSY, "volume %s is being created", name);
    if (sb)
        return error_set(err, -EBUSY, "volume %s is in use by sandbox %s", name, sb->id);
    vol_state was = v->state;
    v->state = VOL_DELETING;
    sd_state_unlink(d, kind, name); /* gone from here on: a restart sweeps what is left */
    int r = start_job(d, v, true, done, ud, ret_job, err);
    if (r < 0) {
        v->state = was;
        (void)save_record(d, v);
    }
    return r;
}

int sd_volumes_check(sd_daemon *d, json_t *volumes, unsigned count, error_rec *err) {
    size_t i;
    json_t *e;
    json_array_foreach(volumes, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        bool ro = json_is_true(json_object_get(e, "read_only"));
        sd_volume *v = sd_volume_find(d, name);
        sd_sandbox *sb = v ? user_of(d, name, ro) : NULL;
        if (!v || v->state == VOL_DELETING)
            return error_set(err, -ENOENT,
                             "volumes[%zu].name: volume %s not found (create it with POST "
                             "/v1/volumes)",
                             i, name);
        if (v->state != VOL_READY)
            return error_set(err, -EBUSY, "volumes[%zu].name: volume %s is %s", i, name,
                             v->state == VOL_CREATING ? "still being created" : v->message);
        if (sb)
            return error_set(err, -EBUSY,
                             "volumes[%zu]: volume %s is in use by sandbox %s%s: a writable "
                             "volume is used by one sandbox at a time",
                             i, name, sb->id, ro ? " (writable)" : "");
        if (!ro && count > 1)
            return error_set(err, -EBUSY,
                             "volumes[%zu]: volume %s is writable and %u sandboxes would share "
                             "it: a writable volume is used by one sandbox at a time",
                             i, name, count);
    }
    return 0;
}

json_t *sd_volumes_spec_json(const sd_sandbox *sb) {
    if (!sb->spec.volumes || json_array_size(sb->spec.volumes) == 0)
        return NULL;
    json_t *arr = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(sb->spec.volumes, i, e) {
        char img[PATH_MAX], mnt[PATH_MAX];
        sd_vdisk_paths(sb->d->volumes->dir, json_string_value(json_object_get(e, "name")), img, mnt,
                       sizeof(img));
        json_array_append_new(arr, json_pack("{s:s,s:O,s:O}", "src", mnt, "dst",
                                             json_object_get(e, "path"), "ro",
                                             json_object_get(e, "read_only")));
    }
    return arr;
}

/* ---- the API's view ---- */

json_t *sd_volume_json(sd_daemon *d, const sd_volume *v) {
    static const char *const states[] = {"creating", "ready", "deleting", "error"};
    json_t *users = json_array();
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        json_t *e = sb->state == SD_ENDED ? NULL : use_of(sb, v->name);
        if (e)
            json_array_append_new(users, json_pack("{s:s,s:O,s:O}", "sandbox", sb->id, "path",
                                                   json_object_get(e, "path"), "read_only",
                                                   json_object_get(e, "read_only")));
    }
    json_t *j =
        json_pack("{s:s,s:I,s:I,s:s,s:s,s:o}", "name", v->name, "size", (json_int_t)v->size, "used",
                  (json_int_t)(v->state == VOL_READY ? sd_vdisk_used(d->volumes->dir, v->name) : 0),
                  "created", v->created, "state", states[v->state], "in_use_by", users);
    if (j && v->state == VOL_BROKEN)
        json_object_set_new(j, "message", json_string(v->message));
    return j;
}

json_t *sd_volumes_list_json(sd_daemon *d) {
    json_t *arr = json_array();
    for (sd_volume *v = d->volumes->list; v; v = v->next)
        if (v->state != VOL_DELETING)
            json_array_append_new(arr, sd_volume_json(d, v));
    return arr;
}
