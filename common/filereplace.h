/* The atomic-file writer: write a temporary file next to path, then rename(2) over it. Readers
 * (and a restarted process) see the old or the new content, never a mix.
 * file_write_atomic is also durable (fsync of the file and of its directory).
 * file_replace_nosync is not: after a power loss the file may be old, empty or missing. For
 * files that are worthless after a host crash (run-dir files on tmpfs, per-sandbox state whose
 * sandbox dies with the host) it saves the two fsyncs.
 * file_rewrite_nosync is file_replace_nosync for records that are rewritten often: an existing
 * file of at most one page is overwritten in place by one pwrite(2) of one page (the new
 * content, padded with spaces to the old length: JSON readers skip them), which a crash of the
 * writer cannot tear and which allocates no inode (on ext4 the temporary file's inode
 * allocation was most of the daemon's CPU in a create/delete loop). A new file, or one
 * larger than a page, goes through file_replace_nosync. Readers running at the same moment
 * may see a mix; after a power loss the file may be torn. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Both return 0 or -errno; on failure the temporary file is removed and path is unchanged. */
int file_write_atomic(const char *path, const void *buf, size_t len, mode_t mode);
int file_replace_nosync(const char *path, const void *buf, size_t len, mode_t mode);
int file_rewrite_nosync(const char *path, const void *buf, size_t len, mode_t mode);
