/* A paused sandbox's checkpoint as one tar stream, for its move to another node of the fleet
 * (ckpt_archive.c): the sandbox's record first (sandbox.json), then the checkpoint directory as
 * it is (owners, modes, times). Pure file work, no daemon state: it runs on a worker thread. */
#pragma once

#include "common/error.h"

#include <jansson.h>

#define SD_CKPT_RECORD "sandbox.json"
/* The one extended attribute a checkpoint carries: an image's upper directory's opaque
 * directories (shim/pause.h, a pausable overlay's userxattr). */
#define SD_CKPT_XATTR "user.overlay.opaque"

/* Write the tar to out: record (the sandbox's state record, core/state.h) as SD_CKPT_RECORD,
 * then every node under dir: directories, regular files, symlinks, FIFOs and 0/0 character
 * devices (overlayfs whiteouts); sockets and other devices are left out; a directory's
 * SD_CKPT_XATTR goes along. */
int sd_ckpt_pack(const char *dir, json_t *record, int out, error_rec *err);

/* Read such a tar from in into the empty directory dir (absolute, no symlink in it). The first
 * member must be the record (returned in *ret_record); every other member is checked before it
 * is written: a clean relative path, a directory, regular file, symlink, FIFO or 0/0 character
 * device, no setuid or setgid bit, no hard link, no extended attribute but a directory's
 * SD_CKPT_XATTR, owned by root or by the record's uid slot (core/registry.h). -EINVAL names the
 * member that is refused; -ENOSPC and others: the disk. */
int sd_ckpt_unpack(int in, const char *dir, json_t **ret_record, error_rec *err);
