/* Descriptor and file helpers: CLOEXEC/nonblocking flags, whole-file reads; atomic writes
 * (file_write_atomic) come from common/filereplace.h. */
#pragma once

#include "common/filereplace.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int fd_set_cloexec(int fd, int on);
int fd_set_nonblock(int fd, int on);
/* Write all of buf, retrying on EINTR/short writes. Returns 0 or -errno. */
int fd_write_all(int fd, const void *buf, size_t len);
/* Read until EOF into a NUL-terminated malloc'd buffer, at most max bytes (else -EFBIG). */
int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len);
int file_read_all(const char *path, size_t max, char **ret, size_t *ret_len);
/* Read the unsigned number in the knob file dir/knob (cgroupfs, sysfs); "max" reads as
 * UINT64_MAX. -EINVAL when it holds no number. */
int file_read_knob_u64(const char *dir, const char *knob, uint64_t *ret);
/* Write a small string to a file that already exists (sysfs/cgroupfs/procfs knobs). */
int file_write_str(const char *path, const char *s);
/* mkdir -p with mode for each created component. */
int mkdir_p(const char *path, mode_t mode);
/* Remove a directory tree without following symlinks. Missing path is not an error. */
int rm_rf(const char *path);
