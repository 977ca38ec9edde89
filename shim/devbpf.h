/* cgroup v2 device access: a BPF_PROG_TYPE_CGROUP_DEVICE program, assembled by hand from an
 * allow-list of character devices and loaded with the bpf(2) syscall (no libbpf), as crun and
 * runc do. Every other device open or mknod in the cgroup gets EPERM. */
#pragma once

#include "common/error.h"

#include <stddef.h>
#include <stdint.h>

#define SHIM_DEVBPF_ANY UINT32_MAX /* a minor of SHIM_DEVBPF_ANY matches every minor */
#define SHIM_DEVBPF_MAX_RULES 96

typedef struct shim_devbpf_rule {
    uint32_t major, minor; /* character devices only */
} shim_devbpf_rule;

/* The default nodes of a sandbox's /dev: null zero full random urandom tty ptmx, pts/N. */
extern const shim_devbpf_rule shim_devbpf_defaults[];
extern const size_t shim_devbpf_n_defaults;

/* Load a program allowing rules[0..n) and attach it to the cgroup directory cg_dir
 * (BPF_F_ALLOW_MULTI). The attachment lives as long as the cgroup. */
int shim_devbpf_attach(const char *cg_dir, const shim_devbpf_rule *rules, size_t n, error_rec *err);
