/* The sandbox's PID 1: finishes building the sandbox from the inside (namespaces, filesystem,
 * credentials), then serves exec/kill requests from the shim, reaps every orphan, and runs each
 * command under its own reaper so that a timeout or kill reaches the command's whole tree. */
#pragma once

#include "common/spec.h"

#include <linux/filter.h>

typedef struct shim_cgroup shim_cgroup;

typedef struct shim_init_ctx {
    const shim_spec *spec;
    const shim_cgroup *cg; /* v1: init joins it itself, first of all (shim_cgroup_join_self) */
    const char *staging;   /* host directory to mount the sandbox's tmpfs on */
    const char *dir;       /* the sandbox's directory (a grading sandbox's agent socket) */
    int ipc;               /* init's end of the shim <-> init socketpair */
    struct sock_fprog prog;
    bool parked; /* a spare's init: spec, staging and prog come with SHIM_IPC_BUILD (init.c) */
    const char *park_root; /* a spare's init: where it builds a host image's root ahead */
    /* init.c's own: the root built ahead, the host's mount namespace until the hand-off, and
     * whether the sandbox takes that root */
    bool root_parked, root_ahead;
    int host_mnt;
    int exe_tree;       /* pausable: a detached bind of sbx-shim (shim/rootfs.h init_binary) */
    int lib_tree;       /* pausable, an image: its libraries' directory (shim/rootfs.h init_libs) */
    const char *loader; /* and the loader's file name in it (NULL: no lib_tree) */
} shim_init_ctx;

/* The ids a root built ahead is made with, until a sandbox's replace them: below the first
 * sandbox's range (sandboxd's slots start at 100000), never a sandbox's. */
#define SHIM_PARK_UID_BASE (100000u - SHIM_UID_RANGE)

/* main's argv area, overwritten with "sbx-init" in the sandbox (no host path in /proc/1). */
extern char *shim_init_title;
extern size_t shim_init_title_len;

/* Runs in the child right after fork; never returns. */
_Noreturn void shim_init_main(shim_init_ctx *ctx);
/* Init's descriptors: the channel to the shim; a pausable init's sbx-shim (and, an image's, its
 * libraries) to bind (until its /dev is built), then across its exec (SHIM_INIT_AGAIN) its
 * seccomp program. */
#define SHIM_INIT_IPC_FD 3
#define SHIM_INIT_EXE_FD 4
#define SHIM_INIT_BPF_FD 4
#define SHIM_INIT_LIB_FD 5
/* `sbx-init init-again TIMES`, run by a pausable sandbox's init from inside it (init.c,
 * step_reexec): the rest of init's steps, then its service; never returns. */
#define SHIM_INIT_AGAIN "init-again"
_Noreturn void shim_init_again(const char *times_so_far);
