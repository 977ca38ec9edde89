/* Installing a compiled seccomp program (policy/seccomp.h builds it) on the calling process:
 * the one step of the seccomp policy that changes the caller, so it lives in the shim. */
#pragma once

#include <stddef.h>

/* Set no_new_privs and install the program on the calling thread. Async-signal-safe (only
 * prctl and seccomp), for use between fork and exec. Returns 0 or -errno (-EINVAL for a length
 * that is not a non-empty multiple of 8 bytes of at most 4096 instructions). */
int shim_seccomp_apply_bpf(const void *bpf, size_t len);
