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
    int ipc;               /* init's end of the shim <-> init socketpair */
    struct sock_fprog prog;
    bool parked; /* a spare's init: spec, staging and prog come with SHIM_IPC_BUILD (init.c) */
} shim_init_ctx;

/* main's argv area, overwritten with "sbx-init" in the sandbox (no host path in /proc/1). */
extern char *shim_init_title;
extern size_t shim_init_title_len;

/* Runs in the child right after fork; never returns. */
_Noreturn void shim_init_main(shim_init_ctx *ctx);
