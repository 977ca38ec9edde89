/* The sandbox's filesystem, built by init (still host root, in its new mount namespace) before
 * it enters the user namespace: a tmpfs of `disk` bytes holding the writable layer, the image
 * (host /usr read-only, or an overlay of an image directory), a generated /etc, /workspace and
 * /tmp, a fresh masked /proc, a minimal /dev, then pivot_root. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

#include <sys/types.h>

/* Each function is one named start-up step; `staging` is an empty directory on the host. */
int shim_rootfs_prepare(const shim_spec *spec, const char *staging, error_rec *err);
/* Parts of it a restore (shim/pause.c) uses alone: the writable layer's tmpfs on staging (its
 * disk's size and inodes), and the masks' small read-only tmpfs on staging/mask (an empty file
 * `file` and an empty directory `dir`; its path in mask). */
int shim_rootfs_mount_disk(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_make_mask(const char *staging, char *mask, size_t len, error_rec *err);
/* An image's (dir or layers) overlay on root, over staging/upper and staging/work (which
 * exist); the upper directory kept on SHIM_UPPER_FD (rootfs.c keep_upper). */
int shim_rootfs_overlay(const shim_spec *spec, const char *staging, const char *root,
                        error_rec *err);
/* /etc: the accounts and the host's files the image needs (etc_base), then the sandbox's own
 * names: hostname, hosts, resolv.conf (etc_names). */
int shim_rootfs_etc_base(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_etc_names(const shim_spec *spec, const char *staging, error_rec *err);
/* Only the accounts (passwd, group, nsswitch.conf), replaced: a root built ahead for a grading
 * sandbox (two users). */
int shim_rootfs_etc_accounts(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_proc(const shim_spec *spec, const char *staging, error_rec *err);
/* A /proc mounted by shim_rootfs_proc for a sandbox that is not grading, made a grading one's
 * (hidepid=2 and the group that sees every process: a remount). */
int shim_rootfs_proc_grading(const shim_spec *spec, const char *staging, error_rec *err);
/* /dev: its tmpfs, nodes and links (dev_tree), then its devpts and shm (dev_mounts). */
int shim_rootfs_dev_tree(const shim_spec *spec, const char *staging, error_rec *err);
int shim_rootfs_dev_mounts(const shim_spec *spec, const char *staging, error_rec *err);
/* A pausable sandbox's init runs sbx-shim again from inside it (shim/init.c, step_reexec): the
 * host's binary (exe_tree: a detached bind of it the shim made, moved here), read-only and
 * executable, on root/SHIM_INIT_BINARY, in /dev's tmpfs. */
#define SHIM_INIT_BINARY "/dev/.sbx-init"
int shim_rootfs_init_binary(const char *staging, int exe_tree, error_rec *err);
/* An image's pausable sandbox has no host /usr: a dynamically linked sbx-shim (the sanitized
 * build's) needs its loader and libraries there. The host directory that holds them all
 * (libdir: one directory, else -ENOTSUP) is bound read-only on root/SHIM_INIT_LIBS (init_libs,
 * lib_tree: a detached bind of it the shim made), and init runs sbx-shim through that loader
 * (loader: its file name there). A static sbx-shim (the default build) needs none: libdir
 * leaves dir and loader empty. */
#define SHIM_INIT_LIBS "/dev/.sbx-lib"
int shim_rootfs_libdir(char *dir, size_t len, char *loader, size_t llen, error_rec *err);
int shim_rootfs_init_libs(const char *staging, int lib_tree, error_rec *err);
/* Where a pausable sandbox's init (in its own user namespace from the start, so it can reach
 * only what every user can) mounts the writable layer, in its own mount namespace; also where a
 * restore puts it back (shim/pause.c). An empty directory every Debian host has, reachable by
 * anyone; the host's own /mnt is not touched. */
#define SHIM_PAUSABLE_STAGING "/mnt"
/* A root built ahead by a spare's init (shim/init.c) for a host-image sandbox with ids from
 * `from` (prepare, etc_base, proc and dev_tree) becomes spec's: its disk's size and inodes
 * set, and every file owned by from's range moved to spec->uid_base's (the caller adds what a
 * grading sandbox has more: shim/init.c). */
int shim_rootfs_adopt(const shim_spec *spec, const char *staging, uid_t from, error_rec *err);
int shim_rootfs_seal(const char *staging, error_rec *err);
int shim_rootfs_pivot(const char *staging, error_rec *err);
/* Helpers shared with shim/grading.c: make root/name a real directory (mode, owner uid:uid;
 * (uid_t)-1 keeps the owner), and bind src onto tgt with flags applied to the new mount. */
int shim_rootfs_ensure_dir(const char *root, const char *name, mode_t mode, uid_t uid,
                           error_rec *err);
int shim_rootfs_bind(const char *src, const char *tgt, unsigned long flags, error_rec *err);
/* Bind mask over each of proc/names[0..n) that exists, without a stat of each first (/proc
 * lookups are not free): one missing on this kernel is left out, one that is not of the mask's
 * type (ENOTDIR: a file where a directory was expected, or the other way) gets other. */
int shim_rootfs_mask(const char *proc, const char *const *names, size_t n, const char *mask,
                     const char *other, error_rec *err);
/* A helper binary shipped next to sbx-shim (sbx-as-agent, sbx-gvisor-init): its path in buf. */
int shim_rootfs_helper_path(const char *name, char *buf, size_t len, error_rec *err);
