/* Named volumes (docs/API.md "Volumes"): the node's volumes and who uses them.
 *
 * On disk, under <state-dir>/volumes/ (mode 0700):
 *   <name>.json   the record (name, size, created_ms), written last at create, first removed
 *                 at delete (durable): a volume exists exactly when its record does (one that
 *                 cannot be read is kept, and so is its data: the volume is listed as broken)
 *   <name>.img    a sparse file holding an ext4 file system of the volume's size: the size
 *                 limit (a full volume is ENOSPC inside the sandbox)
 *   <name>.mnt/   its mount (loop device, nosuid, nodev), kept while the volume exists and
 *                 across daemon restarts; each sandbox gets an id-mapped bind of it
 *                 (shim/volumes.c), so every sandbox shares the one file system
 * Who uses a volume is not stored: it is the sandboxes that are not ended and whose create
 * names it (their spec's "volumes", kept in their records), so any end frees it and a restart
 * knows it again from the records. A writable use excludes every other; read-only uses share. */
#pragma once

#include "sandboxd/core/sandbox.h"

typedef struct sd_volume sd_volume;

/* At start-up, before restore: read the records, mount what is not mounted, remove what no
 * record names (an interrupted create or delete). A volume that cannot be mounted, or whose
 * record cannot be read (its record and data are kept), is listed with its error and refused
 * to creates; it can be deleted. */
int sd_volumes_init(sd_daemon *d, error_rec *err);

/* Done callbacks: err NULL on success; v is the new volume (create). */
typedef void (*sd_volume_done_fn)(void *ud, const error_rec *err, sd_volume *v);

/* Make volume name of size bytes on a worker thread (mkfs, mount), then answer done.
 * -EEXIST: the name is taken; -EDQUOT: the state directory has less free space than size.
 * ret_job: for sd_volumes_forget (the client left); the job goes on. */
int sd_volume_create(sd_daemon *d, const char *name, uint64_t size, sd_volume_done_fn done,
                     void *ud, void **ret_job, error_rec *err);
/* Remove volume name and its data (the answer through done): -ENOENT, or -EBUSY while a
 * sandbox uses it or it is being made or removed. */
int sd_volume_delete(sd_daemon *d, const char *name, sd_volume_done_fn done, void *ud,
                     void **ret_job, error_rec *err);
/* The waiter of job went away: done is not called. */
void sd_volumes_forget(sd_daemon *d, void *job);

sd_volume *sd_volume_find(sd_daemon *d, const char *name);
/* {"name","size","used","created_at","state"[,"message"],"in_use_by":[{"sandbox","path",
 * "read_only"}]} */
json_t *sd_volume_json(sd_daemon *d, const sd_volume *v);
json_t *sd_volumes_list_json(sd_daemon *d);

/* Admission of `count` sandboxes with these volumes (a create's "volumes", or NULL): each
 * must exist and be ready (-ENOENT naming it), a writable one unused by any other sandbox and
 * count 1, a read-only one not used writable (-EBUSY naming the sandbox that holds it). */
int sd_volumes_check(sd_daemon *d, json_t *volumes, unsigned count, error_rec *err);
/* The shim spec's "volumes" for sb ([{"src","dst","ro"}]), or NULL for none. */
json_t *sd_volumes_spec_json(const sd_sandbox *sb);
