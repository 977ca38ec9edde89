/* A GPU sandbox's devices (the spec's "gpus", common/spec.h): its allocated NVIDIA nodes and
 * the control nodes bound into its /dev, the driver's user-space files bound read-only into
 * its image, and the device cgroup that lets it open only those nodes and the default set
 * (v1: the devices controller's deny/allow lists; v2: shim/devbpf.c). A sandbox without
 * "gpus" is left as it was. */
#pragma once

#include "common/spec.h"
#include "shim/cgroup.h"

/* Bind each GPU node into dev (the sandbox's /dev tmpfs, before the pivot); root_uid owns
 * the directories made. Each bound node is checked to be the character device the spec says. */
int shim_gpu_dev(const shim_spec *spec, const char *dev, uid_t root_uid, error_rec *err);
/* Bind each of the spec's gpus.binds ({"source": host file, "path": where in the sandbox,
 * "alt": where instead when the image lacks path's directory, optional}) read-only (nosuid,
 * nodev) into root (the sandbox's root before the pivot) for an image of the store or a
 * directory, where the NVIDIA container toolkit puts them (/usr/lib/x86_64-linux-gnu/libcuda.so.1,
 * or /usr/lib64/libcuda.so.1 in an image without the multiarch directory; /usr/bin/nvidia-smi). The
 * image's directories are followed inside root (openat2 RESOLVE_IN_ROOT, never out of its mount);
 * missing ones are made (owned by root_uid); an image's own file there is covered, its symlink
 * replaced. The host image is left alone: its /usr is the host's. */
int shim_gpu_binds(const shim_spec *spec, const char *root, uid_t root_uid, error_rec *err);
/* Restrict the (created, still empty) cgroup to the default nodes plus the spec's GPU nodes. */
int shim_gpu_cgroup(shim_cgroup *cg, const shim_spec *spec, error_rec *err);
