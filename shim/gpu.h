/* A GPU sandbox's devices (the spec's "gpus", common/spec.h): its allocated NVIDIA nodes and
 * the control nodes bound into its /dev, and the device cgroup that lets it open only those
 * and the default set (v1: the devices controller's deny/allow lists; v2: shim/devbpf.c).
 * A sandbox without "gpus" is left as it was. */
#pragma once

#include "common/spec.h"
#include "shim/cgroup.h"

/* Bind each GPU node into dev (the sandbox's /dev tmpfs, before the pivot); root_uid owns
 * the directories made. Each bound node is checked to be the character device the spec says. */
int shim_gpu_dev(const shim_spec *spec, const char *dev, uid_t root_uid, error_rec *err);
/* Restrict the (created, still empty) cgroup to the default nodes plus the spec's GPU nodes. */
int shim_gpu_cgroup(shim_cgroup *cg, const shim_spec *spec, error_rec *err);
