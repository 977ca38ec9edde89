/* The private channel between sbx-shim and the sandbox's init (a SOCK_SEQPACKET socketpair made
 * before the fork). Fixed binary records, not part of the daemon protocol; only async-signal-safe
 * calls are used so that the reaper and command processes may send too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define SHIM_IPC_MAX (160 * 1024)

enum shim_ipc_type {
    SHIM_IPC_GO = 1,   /* shim -> init: continue start-up */
    SHIM_IPC_USERNS,   /* init -> shim: user namespace made, please write the id maps */
    SHIM_IPC_READY,    /* init -> shim: sandbox built (pausable, an image's overlay: 1 fd, its
                        * upper directory, which the shim keeps on SHIM_UPPER_FD) */
    SHIM_IPC_ERROR,    /* init -> shim: a = errno, data = "step <name>: message" */
    SHIM_IPC_EXEC,     /* shim -> init: id, a = argc, b = envc, data = cwd\0argv..\0env..\0, 3 fds
                        * (and a file with SHIM_IPC_FILE, below) */
    SHIM_IPC_KILL,     /* shim -> init: id, a = signal (whole process tree) */
    SHIM_IPC_STARTED,  /* reaper -> shim: id, a = pid in the sandbox */
    SHIM_IPC_EXECFAIL, /* reaper -> shim: id, a = errno, data = what failed */
    SHIM_IPC_EXIT,     /* reaper/init -> shim: id, a = wait status, b = 1 when the reaper died */
    SHIM_IPC_EXEC_GRADER, /* shim -> init: as SHIM_IPC_EXEC, run as the grader (grading only) */
    SHIM_IPC_EXEC_HELPER, /* shim -> init: as SHIM_IPC_EXEC for sbx-as-agent: the agent user,
                           * and whatever the command leaves running is killed when it exits */
    SHIM_IPC_PARKED,      /* init -> shim: a spare's init made its namespaces, waits for a dir */
    SHIM_IPC_BUILD,       /* shim -> init: data = the sandbox's directory: build it */
    SHIM_IPC_PAUSE,       /* shim -> init (pausable, no command running): listen on
                           * SHIM_IPC_PAUSE_ADDR, answer PAUSED, close this channel and wait
                           * for the shim (this one after a failed pause, or a restored
                           * sandbox's) to connect there; then READY on the new channel */
    SHIM_IPC_PAUSED,      /* init -> shim: listening; a = errno when it cannot pause */
    SHIM_IPC_LAYER,       /* shim -> init (pausable), before USERNS's go-ahead: a = an index
                           * into spec.h layer_mounts (a layer, the seed's, a volume), 1 fd: a
                           * detached id-mapped mount of it */
};

/* The abstract Unix address (in the sandbox's network namespace) a pausing init listens on;
 * it takes only a peer outside the sandbox's pid namespace (SO_PEERCRED pid 0). */
#define SHIM_IPC_PAUSE_ADDR "sbx-init-pause"
/* That address into *a; returns its length (for bind and connect). */
socklen_t shim_ipc_pause_addr(struct sockaddr_un *a);

/* Or'ed into an exec type (EXEC, EXEC_GRADER, EXEC_HELPER): the command gets a terminal; data
 * starts with rows(2) cols(2), then as the type says; the reaper's STARTED carries the
 * terminal's master side. */
#define SHIM_IPC_TTY 0x100u
/* Or'ed into an exec type: a file for the command comes after env (name\0, then its bytes to
 * the end of data). The command's own process writes it, after its chdir and before its exec,
 * as a shell's `>` would (created or truncated, 0666 less the umask), so that a program and
 * its source need no shell between them (SandboxFusion's /run_code). */
#define SHIM_IPC_FILE 0x200u
/* An exec type without the flags above. */
#define SHIM_IPC_EXEC_KIND(type) ((type) & ~(SHIM_IPC_TTY | SHIM_IPC_FILE))
/* type is an exec (EXEC, EXEC_GRADER, EXEC_HELPER), with or without flags. */
static inline bool shim_ipc_is_exec(uint32_t type) {
    type = SHIM_IPC_EXEC_KIND(type);
    return type == SHIM_IPC_EXEC || type == SHIM_IPC_EXEC_GRADER || type == SHIM_IPC_EXEC_HELPER;
}

typedef struct shim_ipc_msg {
    uint32_t type;
    int32_t a, b;
    uint32_t len; /* of data */
    uint64_t id;
    char data[];
} shim_ipc_msg;

/* Returns 0 or -errno. */
int shim_ipc_send(int fd, uint32_t type, uint64_t id, int32_t a, int32_t b, const void *data,
                  size_t len, const int *fds, size_t n_fds);
/* buf must hold SHIM_IPC_MAX bytes. Received fds (up to 3) land in fds. Returns 0, -ECONNRESET
 * on EOF, -EAGAIN, or -EPROTO for a short record (fds closed). */
int shim_ipc_recv(int fd, shim_ipc_msg *buf, int fds[3], size_t *n_fds);
/* The same without waiting: -EAGAIN when nothing is there (the shim's event loop). */
int shim_ipc_recv_nowait(int fd, shim_ipc_msg *buf, int fds[3], size_t *n_fds);
