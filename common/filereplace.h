/* Replacing a small file atomically without making it durable: write a temporary file next to
 * it, then rename(2) over it. Readers (and a restarted process) see the old or the new content,
 * never a mix; after a power loss the file may be old, empty or missing. For files that are
 * worthless after a host crash (run-dir files on tmpfs, per-sandbox state whose sandbox dies
 * with the host) this saves the two fsyncs of file_write_atomic (common/fdutil.h). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Returns 0 or -errno; on failure the temporary file is removed and path is unchanged. */
int file_replace_nosync(const char *path, const void *buf, size_t len, mode_t mode);
