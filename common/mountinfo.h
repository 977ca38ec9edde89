/* Reading /proc/self/mountinfo: one callback per mount (its mount point, file system type and
 * super options). Used by the shim to find cgroup hierarchies and submounts. */
#pragma once

/* cb gets each mount's (mount point, fstype, super options, ud); a non-zero return stops the
 * walk. Returns 0 (also when cb stopped it with > 0), cb's negative return, or -errno. Mount
 * points come unescaped (the kernel's \040 is a space again); one longer than 511 bytes is cut. */
int mountinfo_walk(int (*cb)(const char *mnt, const char *fstype, const char *opts, void *ud),
                   void *ud);
/* The kernel's escapes in a mountinfo field (' ', '\t', '\n' and '\\' written as \ooo) undone,
 * in place. */
void mountinfo_unescape(char *s);
