/* The atomic-file writer: write a temporary file next to path, then rename(2) over it. Readers
 * (and a restarted process) see the old or the new content, never a mix.
 * file_write_atomic is also durable (fsync of the file and of its directory).
 * file_replace_nosync is not: after a power loss the file may be old, empty or missing. For
 * files that are worthless after a host crash (run-dir files on tmpfs, per-sandbox state whose
 * sandbox dies with the host) it saves the two fsyncs. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Both return 0 or -errno; on failure the temporary file is removed and path is unchanged. */
int file_write_atomic(const char *path, const void *buf, size_t len, mode_t mode);
int file_replace_nosync(const char *path, const void *buf, size_t len, mode_t mode);
