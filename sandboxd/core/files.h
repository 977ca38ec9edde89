/* The files API's work, done off the event loop: a worker process per request (forked from
 * the daemon, moved into the sandbox's memory cgroup so that what it writes is charged to the
 * sandbox) runs one of the operations below against the sandbox's root through the safe
 * walker (common/safepath.h), and reports one error record when it is done. */
#pragma once

#include "common/error.h"
#include "common/safepath.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#define SD_FILES_MAX_DEPTH 4096

/* The safe walker for a sandbox: root is /proc/<init>/root; the writable layer is the mounts
 * of "/", "/workspace" and "/tmp"; changes only to nodes owned by [uid_base, uid_base+65536). */
int sd_files_safepath(int root, uid_t uid_base, safepath *ret);

/* Who owns what a PUT makes: the agent (uid_base + 1000); in a grading sandbox every path under
 * /grader is the grader's (uid_base + 1001; (uid_t)-1 elsewhere), chosen per path (per entry of
 * a tar put at / too: docs/GRPO.md). */
typedef struct sd_files_owners {
    uid_t agent, grader;
} sd_files_owners;

/* Operations (run in the worker; they block and may take long). room: bytes the sandbox's
 * memory may still take (its files live in memory): more data is refused (-EFBIG) up front. */
/* src: a file holding the data (a spooled request body), read from its start with pread or
 * lseek (the archive is read twice: checked whole before anything is written). */
int sd_files_write(const safepath *sp, const char *path, int src, uint64_t len, mode_t mode,
                   const sd_files_owners *o, uint64_t room, error_rec *err);
int sd_files_untar(const safepath *sp, const char *dest, int src, const sd_files_owners *o,
                   uint64_t room, error_rec *err);
/* A tar of the directory dirfd (entries relative to it) written to out as it is made; every
 * file's data is read up to the size its header promised, never more. */
int sd_files_tar(const safepath *sp, int dirfd, int out, error_rec *err);

/* On the loop: open path for reading. A regular file: *ret_fd (O_RDONLY) and *ret_size; a
 * directory: *ret_fd (O_RDONLY|O_DIRECTORY) and *ret_is_dir. Symlinks, devices, FIFOs and
 * sockets are refused (-ELOOP, -EPERM) without being opened. */
int sd_files_open_read(const safepath *sp, const char *path, int *ret_fd, uint64_t *ret_size,
                       bool *ret_is_dir, error_rec *err);

/* The worker process. fn runs in the child (after it joined the memory cgroup directory
 * memcg, when not NULL) with the descriptors in keep[] kept open (all others are closed); done
 * runs on the loop with fn's error record (or one saying how the worker died). */
typedef struct sd_files_worker sd_files_worker;
typedef int (*sd_files_fn)(void *ud, error_rec *err);
typedef void (*sd_files_done_fn)(void *ud, const error_rec *err);
int sd_files_worker_start(uv_loop_t *loop, const char *memcg, const int *keep, size_t n_keep,
                          sd_files_fn fn, void *fn_ud, sd_files_done_fn done, void *done_ud,
                          sd_files_worker **ret, error_rec *err);
/* How many bytes the memory cgroup dir may still charge (limit - usage; UINT64_MAX: no limit). */
int sd_files_memcg_room(const char *dir, uint64_t *ret);
/* The request went away: kill the worker (done is still called, once it is gone). */
void sd_files_worker_cancel(sd_files_worker *w);
