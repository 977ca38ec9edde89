/* Init's exec service, the per-command reaper and the command (see exec.h). Everything after a
 * fork or clone uses only async-signal-safe calls. A plain command's reaper runs on init's own
 * memory (spawn_shared), a grading one's is forked. */
#include "shim/exec.h"

#include "common/macro.h"
#include "common/fdutil.h"
#include "shim/grading.h"
#include "shim/exec_path.h"
#include "shim/init.h"
#include "shim/proctree.h"
#include "shim/rawsys.h"
#include "shim/seccomp.h"
#include "shim/sigdisp.h"

#include <stdbool.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

/* A reaper's exit code: 0 (it reported the end), 1 (it reported a failed start), 2 (it could
 * not report the end), with this bit when it left children behind, which are init's now. */
#define REAPER_LEFT 4
#define MAX_ARGS (4096 + 2) /* argv and env entries: the API's 4096 (policy), and "sh -c" */

struct reaper {
    uint64_t id;
    pid_t pid;
    pid_t sid;   /* its command's session where init knows it, else 0 (is_cmd_session) */
    void *stack; /* a reaper on init's memory (spawn_shared): its stack; NULL when forked */
};

bool shim_exec_grading;
static uint32_t exec_type; /* the request's type, for the reaper started for it */

static struct reaper *reapers;
static size_t n_reapers, cap_reapers;

/* ---- the command ---- */

static size_t str_len(const char *s) {
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

/* The next command's terminal size (SHIM_IPC_TTY), 0 for none: set by init before its reaper. */
static unsigned tty_rows, tty_cols;

/* The command being started, for init while it waits on a reaper of its memory (wait_release):
 * set by the kernel before the command first runs (CLONE_PARENT_SETTID). */
static volatile pid_t start_cmd;

/* The command is started as vfork's child is: it shares our memory until it execs or exits, so
 * a failure is reported by storing errno here before _exit. */
static volatile int exec_errno;
/* What failed when it was not the exec, for the message's "what" (else argv[0]): the working
 * directory ("chdir CWD") or the command's file ("write NAME"). */
enum { FAILED_EXEC, FAILED_CWD, FAILED_FILE };
static volatile int exec_failed_at;

/* The command's file (SHIM_IPC_FILE), NULL when none: set by init before it starts the reaper;
 * points into init's message buffer, which the reaper and the command read (a forked reaper its
 * copy; one on init's memory while init waits for it). */
static const char *file_name, *file_data;
static size_t file_len;

/* Write the command's file in its working directory, as the command's user (a shell's `>`).
 * O_NONBLOCK: a FIFO put there fails the start (ENXIO, or EAGAIN once full) instead of holding
 * it, and init with it on the shared-memory path (wait_release); a regular file ignores it. */
static int write_file(void) {
    int fd =
        open(file_name, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0)
        return -errno;
    int r = fd_write_all(fd, file_data, file_len);
    if (close(fd) < 0 && r == 0 && errno != EINTR)
        r = -errno;
    return r;
}

static _Noreturn void fail_exec(int e) {
    exec_errno = e ? e : EIO;
    _exit(127);
}

/* The signals that init does not leave at SIG_DFL (bit s-1 for signal s): what it ignores
 * (SIGPIPE, the shim's SIGHUP, glibc's own 32 and 33, which the daemon's posix_spawn left
 * ignored) and a sanitizer's handlers; read once when init starts serving, and init changes none
 * later. A command resets these, and only these, before its exec (a handler of init's must not
 * run in it on init's memory, and an ignored signal would stay ignored across the exec): a
 * system call each, not one per signal. A relaying reaper (forked: its own copy) adds SIGHUP. */
static uint64_t init_sigs;

static _Noreturn void command_main(int fds[3], const char *cwd, char **argv, char **envp,
                                   const struct sock_fprog *prog) {
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s <= 64; s++)
        if (init_sigs & SHIM_SIG_BIT(s))
            shim_sigdisp_default(s);
    if (tty_rows && shim_exec_tty_relay) { /* the reaper leads the session: the foreground job */
        signal(SIGTTOU, SIG_IGN);
        if (setpgid(0, 0) < 0 || tcsetpgrp(fds[0], getpid()) < 0)
            fail_exec(errno);
        signal(SIGTTOU, SIG_DFL);
    } else {
        setsid();
        if (tty_rows && ioctl(fds[0], TIOCSCTTY, 0) < 0) /* the terminal becomes the session's */
            fail_exec(errno);
    }
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int i = 0; i < 3; i++)
        if (dup2(fds[i], i) < 0)
            fail_exec(errno);
    int cr = shim_exec_cloexec_from(3); /* (fds[] are 0..2 now) */
    if (cr < 0)
        fail_exec(-cr);
    if (chdir(cwd) < 0) {
        exec_failed_at = FAILED_CWD;
        fail_exec(errno);
    }
    if (file_name) {
        int r = write_file();
        if (r < 0) {
            exec_failed_at = FAILED_FILE;
            fail_exec(-r);
        }
    }
    /* The seccomp filter is init's, inherited (init.c, step seccomp): not loaded per command. */
    fail_exec(-shim_exec_search(argv, envp));
}

/* ---- the reaper: a subreaper for one command's process tree ---- */

static pid_t cmd_pid;
static int cmd_status;
static bool cmd_done;

static void reap_children(void) {
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (p == cmd_pid) {
            cmd_status = st;
            cmd_done = true;
        }
}

static bool reaped(void) {
    reap_children();
    return cmd_done;
}

void (*shim_exec_tty_relay)(int, int, int, pid_t, const sigset_t *, bool (*)(void));
const struct shim_exec_track *shim_exec_track;

/* The slave side of master m: TIOCGPTPEER, or (gVisor has no TIOCGPTPEER) /dev/pts/<TIOCGPTN>. */
static int tty_peer(int m) {
    int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC), n;
    if (s >= 0 || errno != ENOTTY || ioctl(m, TIOCGPTN, &n) < 0)
        return s;
    char path[32] = "/dev/pts/", digits[12];
    size_t k = 0, o = 9;
    do
        digits[k++] = (char)('0' + n % 10);
    while ((n /= 10) > 0 && k < sizeof(digits));
    while (k > 0)
        path[o++] = digits[--k];
    path[o] = '\0';
    return open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
}

/* A terminal from the sandbox's own devpts instance: its slave side replaces the command's three
 * descriptors; returns the master side (for the daemon). Failures are reported and end the
 * reaper. With shim_exec_tty_relay, fds[0] (the relay's socket) goes to *relay instead. */
static int tty_open(int ipc, uint64_t id, int fds[3], int *relay) {
    int m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC), unlock = 0;
    struct winsize ws = {.ws_row = (unsigned short)tty_rows, .ws_col = (unsigned short)tty_cols};
    int slave = -1;
    const char *step = "open /dev/pts/ptmx";
    if (m >= 0 && ioctl(m, TIOCSPTLCK, &unlock) < 0)
        step = "unlock the terminal";
    else if (m >= 0 && ioctl(m, TIOCSWINSZ, &ws) < 0)
        step = "set the terminal's size";
    else if (m >= 0 && (slave = tty_peer(m)) < 0)
        step = "open the terminal's slave side";
    if (slave < 0) {
        int en = errno;
        shim_ipc_send(ipc, SHIM_IPC_EXECFAIL, id, en, 0, step, str_len(step), NULL, 0);
        _exit(1);
    }
    for (int i = 0; i < 3; i++) {
        if (i == 0 && shim_exec_tty_relay)
            *relay = fds[0];
        else
            close(fds[i]);
        fds[i] = slave;
    }
    return m;
}

/* What did not start (exec_failed_at): "chdir CWD", "write NAME" or argv[0] cut to buf; length. */
static size_t failed_what(char *buf, size_t size, const char *cwd, const char *argv0) {
    const char *pre = exec_failed_at == FAILED_CWD    ? "chdir "
                      : exec_failed_at == FAILED_FILE ? "write "
                                                      : "";
    const char *name = exec_failed_at == FAILED_CWD    ? cwd
                       : exec_failed_at == FAILED_FILE ? file_name
                                                       : argv0;
    size_t p = str_len(pre), n = MIN(str_len(name), size - p);
    memcpy(buf, pre, p);
    memcpy(buf + p, name, n);
    return p + n;
}

struct command_args {
    int *fds;
    const char *cwd;
    char **argv, **envp;
    const struct sock_fprog *prog;
};

static int command_entry(void *arg) {
    const struct command_args *a = arg;
    command_main(a->fds, a->cwd, a->argv, a->envp, a->prog);
}

/* The reaper's start: its credentials and terminal, then the command. Sends STARTED
 * and returns the command's pid, or reports why it did not start and exits 1. *master (a
 * terminal's master side, -1 for none) and, with shim_exec_tty_relay, *relay and *tty stay open
 * for the caller. */
static pid_t reaper_start(int ipc, uint64_t id, int fds[3], const char *cwd, char **argv,
                          char **envp, const struct sock_fprog *prog, int *master, int *relay,
                          int *tty) {
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    if (shim_exec_grading) {
        int r = shim_grading_become(exec_type == SHIM_IPC_EXEC_GRADER);
        if (r < 0) {
            shim_ipc_send(ipc, SHIM_IPC_EXECFAIL, id, -r, 0, "credentials", 11, NULL, 0);
            _exit(1);
        }
    }
    *relay = -1; /* gvisor: the host terminal's socket */
    *master = tty_rows ? tty_open(ipc, id, fds, relay) : -1; /* as the command's user */
    *tty = -1; /* gvisor: the reaper leads the terminal's session, to find its foreground */
    if (*relay >= 0 && (setsid() < 0 || ioctl(fds[0], TIOCSCTTY, 0) < 0 ||
                        (*tty = fcntl(fds[0], F_DUPFD_CLOEXEC, 3)) < 0)) {
        int en = errno;
        shim_ipc_send(ipc, SHIM_IPC_EXECFAIL, id, en, 0, "terminal", 8, NULL, 0);
        _exit(1);
    }
    if (*relay >= 0) { /* the terminal's hang-up is the command's, not the reaper's */
        signal(SIGHUP, SIG_IGN);
        init_sigs |= SHIM_SIG_BIT(SIGHUP); /* (a forked reaper's copy) */
    }
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL); /* (init's already: the reaper's wait relies on it) */
    exec_errno = 0;
    exec_failed_at = FAILED_EXEC;
    start_cmd = 0;
    /* vfork's clone (no page-table copy: the command only execs or _exits), on a stack of its own
     * as posix_spawn's, with its pid in start_cmd before it runs */
    char cmd_stack[48 * 1024] __attribute__((aligned(16)));
    struct command_args ca = {fds, cwd, argv, envp, prog};
    pid_t pid =
        clone(command_entry, cmd_stack + sizeof(cmd_stack),
              CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, &ca, (pid_t *)&start_cmd);
    int fe = errno;
#ifdef __SANITIZE_ADDRESS__
    ASAN_UNPOISON_MEMORY_REGION(cmd_stack, sizeof(cmd_stack)); /* the command left its frames */
#endif
    for (int i = 0; i < (*master >= 0 ? 1 : 3); i++)
        close(fds[i]);
    if (pid < 0) {
        shim_ipc_send(ipc, SHIM_IPC_EXECFAIL, id, fe, 0, "fork", 4, NULL, 0);
        _exit(1);
    }
    if (exec_errno) {
        char what[160];
        size_t n = failed_what(what, sizeof(what), cwd, argv[0]);
        shim_ipc_send(ipc, SHIM_IPC_EXECFAIL, id, exec_errno, 0, what, n, NULL, 0);
        start_cmd = 0; /* (it has exited: its pid is about to be free) */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        _exit(1);
    }
    bool pass = *master >= 0 && *relay < 0;
    shim_ipc_send(ipc, SHIM_IPC_STARTED, id, pid, 0, NULL, 0, pass ? master : NULL, pass ? 1 : 0);
    return pid;
}

/* A forked reaper: its own copy of init's memory. */
static _Noreturn void reaper_main(int ipc, uint64_t id, int fds[3], const char *cwd, char **argv,
                                  char **envp, const struct sock_fprog *prog) {
    int master, relay, tty;
    cmd_pid = reaper_start(ipc, id, fds, cwd, argv, envp, prog, &master, &relay, &tty);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (relay >= 0)
        shim_exec_tty_relay(master, tty, relay, cmd_pid, &set, reaped);
    if (master >= 0)
        close(master);
    for (;;) {
        siginfo_t si;
        if (!cmd_done)
            sigwaitinfo(&set, &si);
        reap_children();
        if (cmd_done) {
            if (exec_type == SHIM_IPC_EXEC_HELPER) { /* sbx-as-agent: nothing stays behind */
                shim_proctree_signal(getpid(), SIGKILL);
                reap_children();
            }
            shim_ipc_send(ipc, SHIM_IPC_EXIT, id, cmd_status, 0, NULL, 0, NULL, 0);
            pid_t w;
            while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
                ;
            _exit(w == 0 ? REAPER_LEFT : 0);
        }
    }
}

#ifdef SHIM_RAW_SYSCALL
/* ---- the reaper on init's own memory ---- */

/* A process of its own costs most of an exec's round trip on a VM where making and dropping an
 * address space is dear (docs/BENCHMARKS.md, "Issue 28 goal 4: the reaper on init's memory").
 * So the reaper of a plain command is a clone(CLONE_VM) of init on a stack of its own: it shares
 * init's memory, its globals and message buffer, and also glibc's thread data, errno included
 * (glibc still takes init for single-threaded: nothing here may malloc or use stdio). init
 * therefore waits (wait_release) while the reaper starts the command with ordinary calls; then
 * the reaper closes `release`, and from there on it makes only raw system calls (rawsys.h),
 * which write no memory of init's: it reaps, and reports the command's end. */
/* The start needs ~64 KiB (48 the command's stack, reaper_start); a stack's lowest page guards. */
#define REAPER_STACK (128 * 1024)
#define START_LIMIT_S 5 /* wait_release */

struct shared_args {
    int ipc, release, close_too[2];
    uint64_t id;
    int *fds;
    const char *cwd;
    char **argv, **envp;
    const struct sock_fprog *prog;
};

/* Reap until cmd ends, report its end, exit: with raw system calls only, and no sanitizer's
 * code (it would use init's thread data). cmd stays our child until reaped here; SIGCHLD is
 * blocked, so one that came before the wait is pending. Exits 2 (init then reports for us)
 * when the end cannot be sent. */
__attribute__((no_sanitize_address)) static _Noreturn void reaper_wait_raw(int ipc, uint64_t id,
                                                                           pid_t cmd) {
    const uint64_t chld = 1ull << (SIGCHLD - 1); /* the kernel's sigset_t */
    int code = 2;
    for (bool done = false; !done;) {
        shim_raw_syscall(SYS_rt_sigtimedwait, (long)&chld, 0, 0, sizeof(chld));
        int st;
        long p;
        while (!done && (p = shim_raw_syscall(SYS_wait4, -1, (long)&st, WNOHANG, 0)) != 0) {
            done = p < 0; /* (cannot happen: cmd is ours, and WNOHANG is not interrupted) */
            if (p != cmd)
                continue;
            shim_ipc_msg exit_msg = {.type = SHIM_IPC_EXIT, .a = st, .id = id};
            long n = shim_raw_syscall(SYS_write, ipc, (long)&exit_msg, sizeof(exit_msg), 0);
            code = n == (long)sizeof(exit_msg) ? 0 : 2;
            done = true;
        }
    }
    long w;
    while ((w = shim_raw_syscall(SYS_wait4, -1, 0, WNOHANG, 0)) > 0)
        ;
    code |= w == 0 ? REAPER_LEFT : 0; /* (0: a child, none ended) */
    for (;;)
        shim_raw_syscall(SYS_exit_group, code, 0, 0, 0);
}

/* The fault signals for which init has handlers (a sanitizer's, which its own sigaction would
 * keep): a reaper that took one would run it on init's memory. Reset with the kernel's call. */
static void reset_fault_handlers(void) {
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
        if (init_sigs & SHIM_SIG_BIT(sigs[i]))
            shim_sigdisp_default(sigs[i]);
}

__attribute__((no_sanitize_address)) static int reaper_shared(void *arg) {
    const struct shared_args *a = arg; /* on init's stack: read before the release only */
    int ipc = a->ipc, release = a->release, fds[3] = {a->fds[0], a->fds[1], a->fds[2]};
    uint64_t id = a->id;
    close(a->close_too[0]);
    close(a->close_too[1]);
    reset_fault_handlers();
    int master, relay, tty;
    pid_t cmd =
        reaper_start(ipc, id, fds, a->cwd, a->argv, a->envp, a->prog, &master, &relay, &tty);
    if (master >= 0) /* (no relay on this path) */
        close(master);
    shim_raw_syscall(SYS_close, release, 0, 0, 0);
    reaper_wait_raw(ipc, id, cmd);
}

/* Until the reaper releases init: closes its end of fd, or ends. The command before its exec
 * holds a copy too, which its exec or exit closes only after it has left this memory, so the
 * reaper's stack is free for another once init has reaped the reaper. The start takes
 * microseconds; should something in the sandbox (its user's) stop the reaper or the command
 * meanwhile, they are continued each second and killed after START_LIMIT_S, so that init goes
 * back to its requests (a kill, a timeout) within that. Raw calls: they run beside the start. */
__attribute__((no_sanitize_address)) static void wait_release(int fd, pid_t pid) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (int s = 1;;) {
        struct timespec second = {1, 0}; /* (ppoll leaves what remains of it there) */
        long n = shim_raw_syscall(SYS_ppoll, (long)&p, 1, (long)&second, 0);
        if (n > 0)
            return;
        if (n == -EINTR)
            continue;
        if (n < 0) /* (it worked in spawn_shared's probe: not expected) */
            shim_raw_syscall(SYS_nanosleep, (long)&second, 0, 0, 0);
        long sig = s++ < START_LIMIT_S ? SIGCONT : SIGKILL;
        pid_t cmd = start_cmd;
        shim_raw_syscall(SYS_kill, pid, sig, 0, 0);
        if (cmd > 0)
            shim_raw_syscall(SYS_kill, cmd, sig, 0, 0);
    }
}

/* Ended reapers' stacks, kept for the next: mapping a stack and its guard and unmapping it (a TLB
 * shootdown on a memory two processes share) cost more than the rest of the spawn. */
static void *spare_stacks[4];
static size_t n_spare_stacks;

static void *stack_get(void) {
    if (n_spare_stacks > 0)
        return spare_stacks[--n_spare_stacks];
    char *stack = mmap(NULL, REAPER_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return NULL;
    if (mprotect(stack, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) < 0) {
        munmap(stack, REAPER_STACK);
        return NULL;
    }
    return stack;
}

/* The reaper that ran on stack has exited: nothing runs on it any more. */
static void stack_put(void *stack) {
#ifdef __SANITIZE_ADDRESS__
    ASAN_UNPOISON_MEMORY_REGION(stack, REAPER_STACK); /* a noreturn path leaves redzones */
#endif
    if (n_spare_stacks < ARRAY_SIZE(spare_stacks))
        spare_stacks[n_spare_stacks++] = stack;
    else
        munmap(stack, REAPER_STACK);
}

/* Start the reaper on init's memory; returns when it has started the command (or failed to).
 * Fails before anything started (no pipe, stack or clone: the caller forks instead). */
static int spawn_shared(struct shared_args *a, pid_t *ret_pid, void **ret_stack) {
    int rel[2];
    if (pipe2(rel, O_CLOEXEC) < 0)
        return -errno;
    static long ppoll_works = 1; /* 1: not tried yet (a profile without ppoll: fork instead) */
    struct pollfd probe = {.fd = rel[0], .events = POLLIN};
    struct timespec zero = {0, 0};
    if (ppoll_works == 1)
        ppoll_works = shim_raw_syscall(SYS_ppoll, (long)&probe, 1, (long)&zero, 0);
    if (ppoll_works < 0) {
        close(rel[0]);
        close(rel[1]);
        return (int)ppoll_works;
    }
    char *stack = stack_get();
    a->release = rel[1];
    a->close_too[0] = rel[0];
    start_cmd = 0; /* (the last start's, until this reaper gets to reset it) */
    pid_t pid = stack ? clone(reaper_shared, stack + REAPER_STACK, CLONE_VM | SIGCHLD, a) : -1;
    int r = !stack ? -ENOMEM : pid < 0 ? -errno : 0;
    shim_raw_syscall(SYS_close, rel[1], 0, 0, 0); /* (beside the reaper's start: raw) */
    if (r == 0)
        wait_release(rel[0], pid);
    close(rel[0]);
    if (r < 0) {
        if (stack)
            stack_put(stack);
        return r;
    }
    *ret_pid = pid;
    *ret_stack = stack;
    return 0;
}
#endif

/* ---- init's loop ---- */

/* "cwd\0argv...\0env...\0" split into vectors into data; SHIM_IPC_FILE's name and bytes: file_*. */
static int unpack(shim_ipc_msg *m, char **cwd, char **argv, char **envp) {
    bool file = m->type & SHIM_IPC_FILE;
    size_t want = 1 + (size_t)m->a + (size_t)m->b + file, got = 0, off = 0;
    if (m->a < 1 || m->b < 0 || m->a > MAX_ARGS || m->b > MAX_ARGS)
        return -EINVAL;
    char *vec[2 * MAX_ARGS + 2];
    for (; off < m->len && got < want; got++) {
        size_t n = strnlen(m->data + off, m->len - off);
        if (off + n == m->len) /* not NUL-terminated */
            return -EINVAL;
        vec[got] = m->data + off;
        off += n + 1;
    }
    if (got != want || (file && !vec[want - 1][0]))
        return -EINVAL;
    file_name = file ? vec[want - 1] : NULL;
    file_data = file ? m->data + off : NULL;
    file_len = file ? m->len - off : 0;
    *cwd = vec[0];
    memcpy(argv, vec + 1, sizeof(char *) * (size_t)m->a);
    argv[m->a] = NULL;
    memcpy(envp, vec + 1 + m->a, sizeof(char *) * (size_t)m->b);
    envp[m->b] = NULL;
    return 0;
}

static void start_exec(int ipc, int sfd, shim_ipc_msg *m, int fds[3], size_t nf,
                       const struct sock_fprog *prog) {
    static char *argv[MAX_ARGS + 1], *envp[MAX_ARGS + 1];
    char *cwd;
    tty_rows = tty_cols = 0;
    if ((m->type & SHIM_IPC_TTY) && m->len > 4) { /* rows(2) cols(2), then as the type says */
        unsigned char *p = (unsigned char *)m->data;
        tty_rows = (unsigned)p[0] << 8 | p[1];
        tty_cols = (unsigned)p[2] << 8 | p[3];
        memmove(m->data, m->data + 4, m->len - 4);
        m->len -= 4;
    }
    int r = nf == 3 ? unpack(m, &cwd, argv, envp) : -EBADF;
    if (r == 0 && n_reapers == cap_reapers) {
        size_t nc = cap_reapers ? cap_reapers * 2 : 16;
        struct reaper *nr = realloc(reapers, nc * sizeof(*nr));
        if (nr) {
            reapers = nr;
            cap_reapers = nc;
        } else
            r = -ENOMEM;
    }
    exec_type = SHIM_IPC_EXEC_KIND(m->type);
    pid_t pid = -1, sid = 0;
    void *stack = NULL;
    bool track = r == 0 && shim_exec_track && (r = shim_exec_track->enter(m->id)) == 0;
#ifdef SHIM_RAW_SYSCALL
    /* Forked as before: a grading sandbox's reaper, which takes another user's credentials (its
     * memory is then no longer init's: SECURITY.md, "Commands and their process trees"); the
     * helper's, which kills its tree after the command; and one that relays a terminal. */
    if (r == 0 && !shim_exec_grading && exec_type != SHIM_IPC_EXEC_HELPER &&
        !(tty_rows && shim_exec_tty_relay)) {
        struct shared_args a = {.ipc = ipc,
                                .close_too[1] = sfd,
                                .id = m->id,
                                .fds = fds,
                                .cwd = cwd,
                                .argv = argv,
                                .envp = envp,
                                .prog = prog};
        if (spawn_shared(&a, &pid, &stack) < 0) /* e.g. a profile without CLONE_VM: fork */
            pid = -1;
        else
            sid = start_cmd; /* (the command leads its session; 0 when it did not start) */
    }
#endif
    if (r == 0 && pid < 0 && (pid = fork()) == 0) {
        close(sfd);
        reaper_main(ipc, m->id, fds, cwd, argv, envp, prog);
    } else if (r == 0 && !stack && tty_rows && shim_exec_tty_relay)
        sid = pid; /* a relaying reaper leads its command's session (another forked one: 0) */
    if (r == 0 && pid < 0)
        r = -errno;
    if (track)
        shim_exec_track->leave();
    for (size_t i = 0; i < nf; i++)
        close(fds[i]);
    if (r < 0) {
        shim_ipc_send(ipc, SHIM_IPC_EXECFAIL, m->id, -r, 0, "start", 5, NULL, 0);
        return;
    }
    reapers[n_reapers++] = (struct reaper){.id = m->id, .pid = pid, .sid = sid, .stack = stack};
}

/* A track's cgroup holds the whole tree and its sessions: each of them is signalled once. */
static void kill_exec(shim_ipc_msg *m) {
    for (size_t i = 0; i < n_reapers; i++)
        if (reapers[i].id == m->id && m->a > 0 && m->a < NSIG &&
            (!shim_exec_track || shim_exec_track->signal(m->id, reapers[i].pid, m->a) < 0))
            shim_proctree_signal(reapers[i].pid, m->a);
}

/* No subreaper here (gVisor's kernel: PR_SET_CHILD_SUBREAPER is EINVAL): what a command leaves
 * behind comes to init while it runs, so every ordinary end of a reaper keeps init's orphans
 * (but those of the commands still running: proctree.h). */
static bool no_subreaper;

static bool is_reaper(pid_t p) {
    for (size_t i = 0; i < n_reapers; i++)
        if (reapers[i].pid == p)
            return true;
    return false;
}

/* The sessions of the commands whose reapers reap_all's batch found killed: to kill, not keep. */
static pid_t killed_sids[8];
static size_t n_killed;

/* A session init knows to be a command's still (proctree.h): a reaper's not reaped yet (alive,
 * or ended and reaped in a later batch), or, while reap_all keeps, one killed in its batch. */
static bool is_cmd_session(pid_t sid) {
    for (size_t i = 0; i < n_reapers + n_killed && sid > 0; i++)
        if ((i < n_reapers ? reapers[i].sid : killed_sids[i - n_reapers]) == sid)
            return true;
    return false;
}

/* Reap what has ended. A reaper that left children (REAPER_LEFT) gave init its command's
 * leftovers, kept (and so did a kept process that ended); one that did not exit 0/1 died before
 * reporting (killed by its command): its command's tree, init's now, is killed first (proctree.h),
 * then init reports for it. The leftovers of a batch are kept before any tree is killed, but
 * those in the sessions of the batch's killed commands. */
static void reap_all(int ipc) {
    for (bool full = true; full;) {
        uint64_t dead[8];
        int dead_st[8];
        size_t n_dead = 0;
        bool left = false;
        int st;
        pid_t p;
        while (n_dead < ARRAY_SIZE(dead) && (p = waitpid(-1, &st, WNOHANG)) > 0) {
            size_t i = 0;
            while (i < n_reapers && reapers[i].pid != p)
                i++;
            if (i == n_reapers) { /* a kept one's children are init's now: kept too */
                left |= shim_proctree_forget(p);
                continue;
            }
            int code = WIFEXITED(st) ? WEXITSTATUS(st) & ~REAPER_LEFT : -1;
            left |= WIFEXITED(st) &&
                    ((WEXITSTATUS(st) & REAPER_LEFT) || (no_subreaper && (code == 0 || code == 1)));
            if (shim_exec_track)
                shim_exec_track->end(reapers[i].id, code != 0 && code != 1);
            if (code != 0 && code != 1) {
                dead_st[n_dead] = code == 2 ? 2 << 8 : st; /* (REAPER_LEFT off) */
                killed_sids[n_killed++] = reapers[i].sid;
                dead[n_dead++] = reapers[i].id;
            }
#ifdef SHIM_RAW_SYSCALL
            if (reapers[i].stack)
                stack_put(reapers[i].stack);
#endif
            reapers[i] = reapers[--n_reapers];
        }
        if (left)
            shim_proctree_keep_orphans(is_reaper, is_cmd_session);
        n_killed = 0; /* (theirs to kill now) */
        if (n_dead)
            shim_proctree_kill_orphans(is_reaper, is_cmd_session);
        for (size_t k = 0; k < n_dead; k++)
            shim_ipc_send(ipc, SHIM_IPC_EXIT, dead[k], dead_st[k], 1, NULL, 0, NULL, 0);
        full = n_dead == ARRAY_SIZE(dead);
    }
}

/* A connection on lfd from outside the sandbox's pid namespace (its pid reads 0 here); anything
 * else that connects is turned away. Reaps meanwhile. -errno when waiting fails. */
static int accept_shim(int lfd, int sfd) {
    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return -errno;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            bool left = false; /* (no reaper while paused) */
            for (pid_t c; (c = waitpid(-1, NULL, WNOHANG)) > 0;)
                left |= shim_proctree_forget(c);
            if (left)
                shim_proctree_keep_orphans(is_reaper, is_cmd_session);
        }
        if (!p[0].revents)
            continue;
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        struct ucred cr;
        socklen_t l = sizeof(cr);
        if (c >= 0 && getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 && cr.pid == 0)
            return c;
        if (c >= 0)
            close(c);
    }
}

/* SHIM_IPC_PAUSE (ipc.h): the channel to the shim is a socketpair made on the host, which CRIU
 * cannot carry; the shim reaches init again through a socket of the sandbox's own. Returns the
 * new channel (as SHIM_INIT_IPC_FD) or exits. */
static int pause_wait(int ipc, int sfd) {
    struct sockaddr_un a;
    socklen_t al = shim_ipc_pause_addr(&a);
    int lfd = n_reapers ? -EBUSY : socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (lfd == -1)
        lfd = -errno;
    if (lfd >= 0 && (bind(lfd, (struct sockaddr *)&a, al) < 0 || listen(lfd, 4) < 0)) {
        int e = errno;
        close(lfd);
        lfd = -e;
    }
    /* Dumpable while paused: CRIU, as the sandbox's root, reads init through /proc; a restored
     * init's memory is the host's user namespace's (CRIU made it), so init.c's step_reexec
     * alone does not suffice after the first resume. */
    if (lfd >= 0 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) {
        int e = errno;
        close(lfd);
        lfd = -e;
    }
    shim_ipc_send(ipc, SHIM_IPC_PAUSED, 0, lfd < 0 ? -lfd : 0, 0, NULL, 0, NULL, 0);
    if (lfd < 0)
        return ipc; /* not paused: the shim goes on on this channel */
    close(ipc);
    int c = accept_shim(lfd, sfd);
    close(lfd);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        _exit(1);
    if (c < 0 || dup2(c, SHIM_INIT_IPC_FD) < 0)
        _exit(1);
    if (c != SHIM_INIT_IPC_FD)
        close(c);
    fd_set_cloexec(SHIM_INIT_IPC_FD, 1);
    if (shim_ipc_send(SHIM_INIT_IPC_FD, SHIM_IPC_READY, 0, 0, 0, NULL, 0, NULL, 0) < 0)
        _exit(1);
    return SHIM_INIT_IPC_FD;
}

_Noreturn void shim_exec_serve(int ipc, const struct sock_fprog *prog, shim_ipc_msg *buf) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    init_sigs = shim_sigdisp_changed(); /* (after the last disposition init sets) */
    int sub = 0;
    no_subreaper = prctl(PR_GET_CHILD_SUBREAPER, &sub, 0, 0, 0) < 0;
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        _exit(1);
    for (;;) {
        struct pollfd p[2] = {{.fd = ipc, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            _exit(1);
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) > 0)
                ;
            reap_all(ipc);
        }
        if (!p[0].revents)
            continue;
        int fds[3];
        size_t nf = 0;
        int r = shim_ipc_recv(ipc, buf, fds, &nf);
        if (r == -ECONNRESET)
            _exit(0);
        if (r < 0)
            continue;
        if (shim_ipc_is_exec(buf->type))
            start_exec(ipc, sfd, buf, fds, nf, prog);
        else {
            for (size_t i = 0; i < nf; i++)
                close(fds[i]);
            if (buf->type == SHIM_IPC_KILL)
                kill_exec(buf);
            else if (buf->type == SHIM_IPC_PAUSE)
                ipc = pause_wait(ipc, sfd);
        }
    }
}
