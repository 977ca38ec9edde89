/* A process's whole tree inside the sandbox, found by walking /proc (see proctree.h). Only
 * async-signal-safe calls; /proc is read with raw getdents64. */
#include "shim/proctree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 8192

/* ppid and session from /proc/PID/stat ("pid (comm) S ppid pgrp session ..."); a zombie
 * (state Z) gives ppid -1. */
static long parse_ppid(const char *stat, pid_t *sid) {
    const char *p = strrchr(stat, ')');
    if (!p || p[1] != ' ' || !p[2] || p[3] != ' ' || p[2] == 'Z')
        return -1;
    long v[3] = {0, 0, 0}; /* ppid, pgrp, session */
    p += 4;
    for (int f = 0; f < 3; f++, p += *p == ' ') {
        for (; *p >= '0' && *p <= '9'; p++)
            v[f] = v[f] * 10 + (*p - '0');
        if (*p != ' ')
            break;
    }
    *sid = (pid_t)v[2];
    return v[0];
}

static long parse_long(const char *s) {
    long v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

/* Read (pid, ppid, session) of every live process in the sandbox (zombies get ppid -1). */
static size_t proc_table(pid_t *pids, pid_t *ppids, pid_t *sids, size_t max) {
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    size_t n = 0;
    char dbuf[8192];
    long got;
    while ((got = syscall(SYS_getdents64, dfd, dbuf, sizeof(dbuf))) > 0) {
        for (long off = 0; off < got;) {
            struct dirent64 *d = (struct dirent64 *)(dbuf + off);
            off += d->d_reclen;
            long pid = parse_long(d->d_name);
            if (pid <= 0 || n >= max)
                continue;
            char path[64] = "/proc/", stat[512];
            size_t l = 0;
            while (d->d_name[l] && l < 20)
                l++;
            memcpy(path + 6, d->d_name, l);
            memcpy(path + 6 + l, "/stat", 6);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t k = read(fd, stat, sizeof(stat) - 1);
            close(fd);
            if (k <= 0)
                continue;
            stat[k] = '\0';
            pids[n] = (pid_t)pid;
            ppids[n] = (pid_t)parse_ppid(stat, &sids[n]);
            n++;
        }
    }
    close(dfd);
    return n;
}

static pid_t pids[MAX_PROCS], ppids[MAX_PROCS], sids[MAX_PROCS];
static bool in[MAX_PROCS];

/* The sessions of root's tree (shim_proctree_signal), or of the running commands
 * (running_sessions), the caller's own left out. Where there is no subreaper (gVisor's kernel
 * answers PR_SET_CHILD_SUBREAPER with EINVAL) a process whose parent ends while the command
 * runs goes to init at once, out of the reaper's tree: it is still the command's by its session
 * (each command leads one), unless it left it (setsid). As many as there can be commands among
 * the processes read (a reaper and its command each). */
#define MAX_SESSIONS (MAX_PROCS / 2)
static pid_t sessions[MAX_SESSIONS];
static size_t n_sessions;
static bool follow;   /* sessions are followed (not by shim_proctree_kill_orphans) */
static pid_t own_sid; /* the caller's (0: its leader is outside the pid namespace) */

static bool in_sessions(pid_t sid) {
    for (size_t i = 0; i < n_sessions && sid > 0; i++)
        if (sessions[i] == sid)
            return true;
    return false;
}

static void add_session(pid_t sid) {
    if (sid > 0 && sid != own_sid && n_sessions < MAX_SESSIONS && !in_sessions(sid))
        sessions[n_sessions++] = sid;
}

/* Mark every live descendant of root (none for root 0), of what is marked already among the n
 * read and, while sessions are followed, every process of their sessions but root and the caller;
 * signal the marked. Returns how many were signalled. */
static size_t signal_marked(size_t n, pid_t root, int sig) {
    size_t hit = 0;
    pid_t self = getpid();
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            if (in[i] || ppids[i] <= 0 || pids[i] == self)
                continue;
            bool parent_in =
                ppids[i] == root || (follow && pids[i] != root && in_sessions(sids[i]));
            for (size_t k = 0; !parent_in && k < n; k++)
                parent_in = in[k] && pids[k] == ppids[i];
            if (parent_in) {
                in[i] = grew = true;
                if (follow)
                    add_session(sids[i]);
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (in[i] && kill(pids[i], sig) == 0)
            hit++;
    return hit;
}

/* Signal every live descendant of root; returns how many were signalled. */
static size_t tree_signal_once(pid_t root, int sig) {
    size_t n = proc_table(pids, ppids, sids, MAX_PROCS);
    memset(in, 0, sizeof(in));
    return signal_marked(n, root, sig);
}

/* Signal root's whole tree (root is a reaper: a subreaper, so nothing escapes it while it
 * lives; without one, its sessions' members too). For SIGKILL, repeat until nothing is left alive:
 * a killed process cannot fork again and whatever was forked meanwhile is caught in the next round.
 * Run by init, which the sandbox cannot stop or kill, so a command that stops its own reaper still
 * dies. */
void shim_proctree_signal(pid_t root, int sig) {
    kill(root, SIGCONT);
    n_sessions = 0; /* (kept across the rounds: what the first found may have no member left) */
    follow = true;
    own_sid = getsid(0);
    if (sig != SIGKILL) {
        tree_signal_once(root, sig);
        return;
    }
    for (int round = 0; round < 500; round++) {
        if (tree_signal_once(root, SIGKILL) == 0)
            return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- init's children that are no reaper ---- */

/* The kept: init's children left by a command, and their sessions (a kept process's
 * descendants that come to init later, when their parent below it ends, are in its session
 * unless they left it). */
static struct kept_proc { pid_t pid, sid; } * kept;
static size_t n_kept, cap_kept;
static bool kept_lost; /* one could not be recorded: kill none (shim_proctree_kill_orphans) */

/* The sessions of the running commands among the n read, into sessions[]: a reaper's child's
 * (its command leads one) and a reaper's own (a relaying reaper leads its command's). Where
 * there is no subreaper, what such a command double-forks is init's child while the command
 * runs: its command's still, neither kept nor killed with another command's tree. */
static void running_sessions(size_t n, bool (*is_reaper)(pid_t)) {
    n_sessions = 0;
    own_sid = getsid(0);
    for (size_t i = 0; i < n; i++)
        if (ppids[i] > 0 && sids[i] != own_sid && (is_reaper(pids[i]) || is_reaper(ppids[i])))
            add_session(sids[i]);
}

static bool is_kept(pid_t pid, pid_t sid) {
    for (size_t i = 0; i < n_kept; i++)
        if (kept[i].pid == pid || (sid > 0 && kept[i].sid == sid))
            return true;
    return false;
}

void shim_proctree_keep_orphans(bool (*is_reaper)(pid_t), bool (*is_cmd_session)(pid_t)) {
    size_t n = proc_table(pids, ppids, sids, MAX_PROCS);
    pid_t self = getpid();
    running_sessions(n, is_reaper);
    for (size_t i = 0; i < n; i++) {
        if (ppids[i] != self || is_reaper(pids[i]) || is_kept(pids[i], 0) || in_sessions(sids[i]) ||
            is_cmd_session(sids[i]))
            continue;
        if (n_kept == cap_kept) {
            size_t nc = cap_kept ? cap_kept * 2 : 16;
            struct kept_proc *nk = realloc(kept, nc * sizeof(*nk));
            if (!nk) {
                kept_lost = true;
                return;
            }
            kept = nk;
            cap_kept = nc;
        }
        kept[n_kept++] = (struct kept_proc){pids[i], sids[i]};
    }
}

bool shim_proctree_forget(pid_t pid) {
    for (size_t i = 0; i < n_kept; i++)
        if (kept[i].pid == pid) {
            kept[i] = kept[--n_kept];
            return true;
        }
    return false;
}

void shim_proctree_kill_orphans(bool (*is_reaper)(pid_t), bool (*is_cmd_session)(pid_t)) {
    pid_t self = getpid();
    follow = false;
    for (int round = 0; round < 500 && !kept_lost; round++) {
        size_t n = proc_table(pids, ppids, sids, MAX_PROCS);
        running_sessions(n, is_reaper);
        for (size_t i = 0; i < n; i++)
            in[i] = ppids[i] == self && !is_reaper(pids[i]) && !is_kept(pids[i], sids[i]) &&
                    !in_sessions(sids[i]) && !is_cmd_session(sids[i]);
        if (signal_marked(n, 0, SIGKILL) == 0)
            return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}
