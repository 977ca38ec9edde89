/* Walking a tree the host does not trust (a sandbox's root, a snapshot of one) without letting
 * it steer the walker: every component is opened with openat2(RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH), one at a time, and checked with fstat/statx before
 * anything is read or changed. Only regular files and directories are ever opened for reading
 * or writing (a device, FIFO or socket is looked at through an O_PATH descriptor only, which
 * runs no driver code and cannot block); changes are made only on the mounts the caller named
 * (the sandbox's writable layer: never a bind-mounted host node, /dev, /proc) and only to
 * nodes owned by the caller's uid range. Errors: -ELOOP a symlink, -EXDEV another mount,
 * -EPERM a node of the wrong type or owner, -ENOTDIR, -ENOENT as usual. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define SAFEPATH_MAX_MOUNTS 8

typedef struct safepath {
    int root;                          /* directory fd of the tree's root (borrowed) */
    uint64_t mnt[SAFEPATH_MAX_MOUNTS]; /* mount ids that may be changed (and read) */
    size_t n_mnt;
    bool read_ro_mounts;  /* reads may also enter other read-only mounts (never proc, sysfs) */
    uid_t uid_lo, uid_hi; /* nodes changed must be owned by [uid_lo, uid_hi); 0, 0: any */
} safepath;

/* root: a directory fd; writable: paths under root (e.g. "/", "/workspace") whose mounts may
 * be changed; a missing one, or one that is a symlink, is left out. */
int safepath_init(safepath *sp, int root, const char *const *writable, size_t n);

/* The mount id of fd (statx STATX_MNT_ID). */
int safepath_mnt_id(int fd, uint64_t *ret);
/* Whether fd (of stat st) may be read (write false) or changed (write true): its mount and, for
 * changes, its owner. Returns 0, -EXDEV or -EPERM. */
int safepath_allowed(const safepath *sp, int fd, const struct stat *st, bool write);

/* An O_RDONLY|O_DIRECTORY fd of the directory at path ("/a/b", relative to the root), every
 * component checked; create: make missing ones (mode 0755, owned by uid:uid). */
int safepath_dir(const safepath *sp, const char *path, bool write, bool create, uid_t uid,
                 int *ret_fd);
/* An O_RDONLY|O_DIRECTORY fd of the directory name in dir (not a symlink; no mount checks). */
int safepath_dir_at(int dir, const char *name, int *ret_fd);
/* An O_PATH fd of name in dir (never followed: a symlink gives the link itself) and its stat. */
int safepath_node(int dir, const char *name, int *ret_fd, struct stat *ret_st);
/* Open what an O_PATH fd refers to (through /proc/self/fd: the same inode, no second lookup).
 * Only for regular files and directories the caller has checked. */
int safepath_reopen(int path_fd, int flags, int *ret_fd);

/* Write side, atomically: a file is written whole under no name (O_TMPFILE; where the file
 * system has none, a hidden temporary name in dir) and only then put in place of name by
 * renameat within dir, so a failure leaves the old node as it was and a reader of the old file
 * keeps it whole. What name holds may be replaced if it is a regular file, symlink, FIFO or
 * socket the range owns on an allowed mount (never followed, opened or changed: the rename
 * replaces the node itself); a directory is -EISDIR, a device -EPERM. */
#define SAFEPATH_TMP_NAME 64
typedef struct safepath_file {
    int fd;                      /* O_WRONLY */
    char tmp[SAFEPATH_TMP_NAME]; /* its name in dir while it has one ("" for O_TMPFILE) */
} safepath_file;
/* A new empty file of mode and uid:uid in dir (checked with safepath_dir(write)), to become
 * name; name is checked now (and again at the commit). */
int safepath_file_new(const safepath *sp, int dir, const char *name, mode_t mode, uid_t uid,
                      safepath_file *ret);
/* Put f in place of name (f's fd is closed either way; on failure nothing of f is left). */
int safepath_file_commit(const safepath *sp, int dir, const char *name, safepath_file *f);
/* Drop f: closed, its temporary name (if any) removed. */
void safepath_file_discard(int dir, safepath_file *f);
/* Make name in dir a hard link of fd (a regular file): linked under a temporary name first,
 * then renamed over name, so the old node stays until the new one is there; nothing to do
 * when name is that file already. */
int safepath_link_over(const safepath *sp, int fd, int dir, const char *name);
/* Make name in dir a symlink to target owned by uid:uid, the same way (made under a temporary
 * name, renamed over name). */
int safepath_symlink_over(const safepath *sp, const char *target, int dir, const char *name,
                          uid_t uid);
/* Rename tmp over name (both in dir, names without '/'), if name may be replaced; on failure
 * tmp is removed. */
int safepath_replace(const safepath *sp, int dir, const char *tmp, const char *name);

/* Copy size bytes of a regular file in to out (both at offset 0), keeping holes as holes
 * (SEEK_DATA/SEEK_HOLE); out is truncated to size. Never reads past size. */
int safepath_copy_sparse(int in, int out, uint64_t size);
