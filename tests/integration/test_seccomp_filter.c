/* The compiled seccomp profile on real processes: each case forks a child, installs the BPF
 * program the daemon would write (policy_seccomp_compile_file -> policy_seccomp_read_bpf ->
 * shim_seccomp_apply_bpf) and checks what the kernel answers: EPERM for the known-dangerous
 * calls, ENOSYS for the unknown, SIGSYS for the 32-bit and x32 ABIs, and that bash, python3,
 * cc, git and make still work. Needs no root. */
#include "common/fdutil.h"
#include "policy/seccomp.h"
#include "shim/seccomp.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/kcmp.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#define SYS_cachestat_nr 451 /* real since Linux 6.5, not in the allow-list */
#define CHILD_SETUP_FAILED 250

static void *bpf;
static size_t bpf_len;

/* Compile the profile the way the daemon does and read it back the way the shim does. */
static void load_program(void) {
    if (bpf)
        return;
    const char *src = getenv("SBX_SRC_DIR");
    char json[512], out[512];
    snprintf(json, sizeof(json), "%s/policy/seccomp.json", src ? src : ".");
    snprintf(out, sizeof(out), "%s/seccomp.bpf", test_tmpdir());
    error_rec err = {0};
    int r = policy_seccomp_compile_file(json, out, &err);
    CHECK_MSG(r == 0, "compile %s: %s", json, err.message);
    r = policy_seccomp_read_bpf(out, &bpf, &bpf_len, &err);
    CHECK_MSG(r == 0, "read back: %s", err.message);
}

/* Run fn in a child, under the filter when `filtered`; returns the raw wait status. The
 * child's exit code is what fn returns (an errno value, 0 for success). */
static int run_probe(int (*fn)(void), int filtered) {
    load_program();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (filtered && shim_seccomp_apply_bpf(bpf, bpf_len) < 0)
            _exit(CHILD_SETUP_FAILED);
        _exit(fn());
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

#define CHECK_PROBE(fn, expected_errno)                                                            \
    do {                                                                                           \
        int _st = run_probe(fn, 1);                                                                \
        CHECK_MSG(WIFEXITED(_st), "%s: child died of signal %d", #fn,                              \
                  WIFSIGNALED(_st) ? WTERMSIG(_st) : -1);                                          \
        CHECK_MSG(WEXITSTATUS(_st) == (expected_errno),                                            \
                  "%s under the filter: got %d (%s), want %d", #fn, WEXITSTATUS(_st),              \
                  strerror(WEXITSTATUS(_st)), (expected_errno));                                   \
    } while (0)

/* errno of a raw syscall result: 0 on success. */
static int err_of(long r) {
    return r < 0 ? errno : 0;
}

/* ---- namespaces and mounts ---- */

static int p_unshare_user(void) {
    return err_of(unshare(CLONE_NEWUSER));
}
static int p_unshare_net(void) {
    return err_of(unshare(CLONE_NEWNET));
}
static int p_unshare_files(void) {
    return err_of(unshare(CLONE_FILES | CLONE_FS));
}
static int p_clone_newuser(void) {
    long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    return err_of(r);
}
static int p_setns(void) {
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    return fd < 0 ? CHILD_SETUP_FAILED : err_of(setns(fd, CLONE_NEWNET));
}
static int p_mount(void) {
    return err_of(mount("none", "/tmp", "tmpfs", 0, NULL));
}
static int p_umount(void) {
    return err_of(umount2("/proc", MNT_DETACH));
}
static int p_pivot_root(void) {
    return err_of(syscall(SYS_pivot_root, "/tmp", "/tmp"));
}
static int p_fsopen(void) {
    return err_of(syscall(SYS_fsopen, "tmpfs", 0));
}

TEST(user_namespace_eperm) {
    CHECK_PROBE(p_unshare_user, EPERM);
    CHECK_PROBE(p_unshare_net, EPERM);
    CHECK_PROBE(p_clone_newuser, EPERM);
    CHECK_PROBE(p_setns, EPERM);
    /* Docker allows unshare only with CAP_SYS_ADMIN: EPERM even without namespace flags. */
    CHECK_PROBE(p_unshare_files, EPERM);
    int st = run_probe(p_unshare_files, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unfiltered unshare: status %d", st);
}

/* clone by flags, both ways: Docker's mask 0x7e020000 (every CLONE_NEW* flag) must be clear. */
static int clone_errno(unsigned long flags) {
    long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    if (r < 0)
        return errno;
    int st;
    return waitpid((pid_t)r, &st, 0) == r && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
static int p_clone_plain(void) {
    return clone_errno(0);
}
static int p_clone_files(void) {
    return clone_errno(CLONE_FILES | CLONE_FS);
}
static int p_clone_newns(void) {
    return clone_errno(CLONE_NEWNS);
}
static int p_clone_newpid(void) {
    return clone_errno(CLONE_NEWPID);
}
static int p_clone_newcgroup(void) {
    return clone_errno(CLONE_NEWCGROUP);
}

TEST(clone_flags) {
    CHECK_PROBE(p_clone_plain, 0);
    CHECK_PROBE(p_clone_files, 0);
    CHECK_PROBE(p_clone_newns, EPERM);
    CHECK_PROBE(p_clone_newpid, EPERM);
    CHECK_PROBE(p_clone_newcgroup, EPERM);
}

TEST(mount_eperm) {
    CHECK_PROBE(p_mount, EPERM);
    CHECK_PROBE(p_umount, EPERM);
    CHECK_PROBE(p_pivot_root, EPERM);
    CHECK_PROBE(p_fsopen, EPERM);
}

/* ---- kernel attack surface ---- */

static int p_keyctl(void) {
    return err_of(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}
static int p_add_key(void) {
    return err_of(syscall(SYS_add_key, "user", "sbx", "x", 1, KEY_SPEC_PROCESS_KEYRING));
}
static int p_bpf(void) {
    return err_of(syscall(SYS_bpf, 0, NULL, 0));
}
static int p_perf(void) {
    return err_of(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}
static int p_io_uring(void) {
    struct io_uring_params params;
    memset(&params, 0, sizeof(params));
    return err_of(syscall(SYS_io_uring_setup, 4, &params));
}
static int p_userfaultfd(void) {
    return err_of(syscall(SYS_userfaultfd, O_CLOEXEC));
}

TEST(keyctl_eperm) {
    CHECK_PROBE(p_keyctl, EPERM);
    CHECK_PROBE(p_add_key, EPERM);
}

TEST(bpf_eperm) {
    CHECK_PROBE(p_bpf, EPERM);
}

TEST(perf_event_open_eperm) {
    CHECK_PROBE(p_perf, EPERM);
}

TEST(io_uring_eperm) {
    CHECK_PROBE(p_io_uring, EPERM);
}

TEST(userfaultfd_eperm) {
    CHECK_PROBE(p_userfaultfd, EPERM);
}

/* ---- sockets ---- */

static int sock_errno(long domain, int type, int proto) {
    long fd = syscall(SYS_socket, domain, type | SOCK_CLOEXEC, proto);
    if (fd < 0)
        return errno;
    close((int)fd);
    return 0;
}
static int p_vsock(void) {
    return sock_errno(AF_VSOCK, SOCK_STREAM, 0);
}
static int p_vsock_high_bits(void) { /* the kernel truncates to int: still AF_VSOCK */
    return sock_errno((long)((1ull << 32) | AF_VSOCK), SOCK_STREAM, 0);
}
static int p_packet(void) {
    return sock_errno(AF_PACKET, SOCK_DGRAM, 0);
}
static int p_alg(void) { /* Docker's other refused family */
    return sock_errno(38 /* AF_ALG */, SOCK_SEQPACKET, 0);
}
static int p_alg_high_bits(void) { /* 64-bit > 40 (Docker's rule allows it), int 38 to the kernel */
    return sock_errno((long)((1ull << 32) | 38), SOCK_SEQPACKET, 0);
}
static int p_key(void) {
    return sock_errno(15 /* AF_KEY */, SOCK_RAW, 2 /* PF_KEY_V2 */);
}
static int p_bluetooth(void) { /* neither allowed nor named: the default */
    return sock_errno(31 /* AF_BLUETOOTH */, SOCK_STREAM, 0);
}
static int p_netlink_audit(void) {
    return sock_errno(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */);
}
static int p_netlink_route(void) {
    return sock_errno(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
}
static int p_inet6(void) {
    return sock_errno(AF_INET6, SOCK_STREAM, 0);
}
static int p_unix(void) {
    int sv[2];
    char c = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return errno;
    if (write(sv[0], "u", 1) != 1 || read(sv[1], &c, 1) != 1 || c != 'u')
        return EIO;
    return sock_errno(AF_UNIX, SOCK_DGRAM, 0);
}
/* A TCP round trip over loopback: socket, bind, listen, connect, accept, send, recv. */
static int p_inet_tcp(void) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0)
        return errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) < 0)
        return errno;
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
        return errno;
    int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    char buf[4] = {0};
    if (s < 0 || send(c, "tcp", 3, 0) != 3 || recv(s, buf, 3, MSG_WAITALL) != 3)
        return errno ? errno : EIO;
    return strcmp(buf, "tcp") == 0 ? 0 : EIO;
}

TEST(socket_vsock_eperm) {
    CHECK_PROBE(p_vsock, EPERM);
    CHECK_PROBE(p_vsock_high_bits, EPERM);
    CHECK_PROBE(p_packet, EPERM);
    CHECK_PROBE(p_alg, EPERM);
    CHECK_PROBE(p_alg_high_bits, EPERM);
    CHECK_PROBE(p_key, EPERM);
    CHECK_PROBE(p_netlink_audit, EPERM);
    CHECK_PROBE(p_bluetooth, ENOSYS);
}

TEST(socket_inet_unix_allowed) {
    CHECK_PROBE(p_inet_tcp, 0);
    CHECK_PROBE(p_inet6, 0);
    CHECK_PROBE(p_unix, 0);
    CHECK_PROBE(p_netlink_route, 0);
}

/* ---- the default action and clone3 ---- */

static int p_nonexistent(void) {
    return err_of(syscall(1000));
}
static int p_kcmp(void) { /* real, harmless, not in the allow-list */
    pid_t me = getpid();
    return err_of(syscall(SYS_kcmp, me, me, KCMP_VM, 0, 0));
}
static int p_cachestat(void) {
    return err_of(syscall(SYS_cachestat_nr, -1, NULL, NULL, 0));
}
static int p_clone3(void) {
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.exit_signal = SIGCHLD;
    long r = syscall(SYS_clone3, &ca, sizeof(ca));
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return err_of(r);
}

TEST(unknown_syscall_enosys) {
    CHECK_PROBE(p_nonexistent, ENOSYS);
    CHECK_PROBE(p_kcmp, ENOSYS);
    CHECK_PROBE(p_cachestat, ENOSYS);
    /* Controls: without the filter kcmp succeeds, so the ENOSYS above is the filter's. */
    int st = run_probe(p_kcmp, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unfiltered kcmp: status %d", st);
}

TEST(clone3_enosys) {
    CHECK_PROBE(p_clone3, ENOSYS);
    int st = run_probe(p_clone3, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unfiltered clone3: status %d", st);
}

/* ---- personality, prctl, ptrace ---- */

/* personality: Docker's five values work, everything else is EPERM. Each probe sets a value
 * and restores PER_LINUX. */
static int personality_errno(unsigned long v) {
    if (syscall(SYS_personality, v) < 0)
        return errno;
    return syscall(SYS_personality, (unsigned long)PER_LINUX) < 0 ? errno : 0;
}
static int p_personality_allowed(void) {
    static const unsigned long ok[] = {PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32,
                                       0xffffffff};
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
        if (personality_errno(ok[i]) != 0)
            return 100 + (int)i;
    return prctl(PR_SET_NAME, "sbx-probe", 0, 0, 0) < 0 ? errno : 0;
}
static int p_personality_no_aslr(void) {
    return personality_errno(ADDR_NO_RANDOMIZE);
}
static int p_personality_linux_no_aslr(void) {
    return personality_errno(PER_LINUX | ADDR_NO_RANDOMIZE);
}
static int p_personality_rie(void) {
    return personality_errno(READ_IMPLIES_EXEC);
}
static int p_personality_linux32_no_aslr(void) {
    return personality_errno(PER_LINUX32 | ADDR_NO_RANDOMIZE);
}
static int p_personality_high_bits(void) { /* the kernel truncates to ADDR_NO_RANDOMIZE */
    return personality_errno(0x100000000UL | ADDR_NO_RANDOMIZE);
}
static int p_personality_query_high_bits(void) { /* truncated to 0: PER_LINUX */
    return personality_errno(0x100000000UL);
}

TEST(personality_docker_values) {
    CHECK_PROBE(p_personality_allowed, 0);
    CHECK_PROBE(p_personality_query_high_bits, 0);
    CHECK_PROBE(p_personality_no_aslr, EPERM);
    CHECK_PROBE(p_personality_linux_no_aslr, EPERM);
    CHECK_PROBE(p_personality_linux32_no_aslr, EPERM);
    CHECK_PROBE(p_personality_rie, EPERM);
    CHECK_PROBE(p_personality_high_bits, EPERM);
    /* Control: without the filter the kernel allows it, so the EPERM above is the filter's. */
    int st = run_probe(p_personality_no_aslr, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unfiltered personality: status %d", st);
}

/* ptrace is allowed (gdb, strace): a traced grandchild stops and is continued. */
static int p_ptrace(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
            _exit(errno);
        raise(SIGSTOP);
        _exit(0);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return EIO;
    if (!WIFSTOPPED(st)) /* PTRACE_TRACEME failed: pass its errno up */
        return WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
    if (ptrace(PTRACE_CONT, pid, NULL, NULL) < 0)
        return errno;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : EIO;
}

TEST(ptrace_allowed) {
    CHECK_PROBE(p_ptrace, 0);
}

/* ---- foreign ABIs ---- */

static int p_int80_getpid(void) {
    long r;
    signal(SIGSEGV, SIG_DFL); /* the kernel's verdict, not a sanitizer's report of it */
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L /* i386 getpid */) : "memory");
    return r == getpid() ? 0 : 1;
}
static int p_x32_getpid(void) {
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(39L | 0x40000000L /* __X32_SYSCALL_BIT | getpid */)
                     : "rcx", "r11", "memory");
    return r == -ENOSYS ? ENOSYS : 0;
}

static void check_killed_by_sigsys(int st, const char *what) {
    CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "%s: want SIGSYS, got %s %d", what,
              WIFSIGNALED(st) ? "signal" : "exit",
              WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* Where the kernel has no 32-bit emulation (CONFIG_IA32_EMULATION off, or ia32_emulation=0),
 * int $0x80 is a #GP (SIGSEGV) before seccomp sees it: no 32-bit syscall can run in a sandbox
 * either way, and that is what is checked then (the filter's own rule for the ABI cannot be
 * reached on such a kernel, which this says on stderr). */
TEST(x86_32_abi_killed) {
    int st = run_probe(p_int80_getpid, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        check_killed_by_sigsys(run_probe(p_int80_getpid, 1), "int $0x80");
        return;
    }
    fprintf(stderr,
            "NOTE: this kernel has no 32-bit x86 emulation (int $0x80 unfiltered: status "
            "%d): checking only that it cannot run under the filter either\n",
            st);
    CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "unfiltered int $0x80: status %d", st);
    int fst = run_probe(p_int80_getpid, 1);
    CHECK_MSG(WIFSIGNALED(fst) && (WTERMSIG(fst) == SIGSEGV || WTERMSIG(fst) == SIGSYS),
              "filtered int $0x80 was not stopped: status %d", fst);
}

TEST(x32_abi_killed) {
    int st = run_probe(p_x32_getpid, 0);
    CHECK_MSG(WIFEXITED(st), "unfiltered x32 call died: %d", st); /* works or ENOSYS */
    check_killed_by_sigsys(run_probe(p_x32_getpid, 1), "x32 syscall");
}

/* ---- real workloads under the filter ---- */

/* bash -c script in the case's temp dir with a clean environment; returns its output. */
static char *run_workload(const char *script, int *ret_status) {
    load_program();
    const char *dir = test_tmpdir();
    char outpath[512], home[600];
    snprintf(outpath, sizeof(outpath), "%s/workload.out", dir);
    snprintf(home, sizeof(home), "HOME=%s", dir);
    char *const argv[] = {"bash", "-c", (char *)script, NULL};
    char *const envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", home, "LC_ALL=C",
                          "GIT_CONFIG_NOSYSTEM=1", NULL};
    int out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(out >= 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
            chdir(dir) < 0 || shim_seccomp_apply_bpf(bpf, bpf_len) < 0)
            _exit(CHILD_SETUP_FAILED);
        execve("/bin/bash", argv, envp);
        _exit(127);
    }
    close(out);
    CHECK(waitpid(pid, ret_status, 0) == pid);
    char *text;
    CHECK_OK(file_read_all(outpath, 1 << 20, &text, NULL));
    return text;
}

static void check_workload(const char *script, const char *want) {
    int st;
    char *text = run_workload(script, &st);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "`%s` under the filter: status %d, output:\n%s", script, st, text);
    CHECK_MSG(strcmp(text, want) == 0, "`%s`: output \"%s\", want \"%s\"", script, text, want);
    free(text);
}

static void write_file(const char *name, const char *content) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", test_tmpdir(), name);
    CHECK_OK(file_write_atomic(path, content, strlen(content), 0644));
}

TEST(workload_bash_pipe) {
    check_workload("echo hi | cat", "hi\n");
}

TEST_T(workload_python_threads_subprocess, 120) {
    write_file(
        "probe.py",
        "import asyncio, subprocess, threading\n"
        "out = []\n"
        "ts = [threading.Thread(target=lambda i=i: out.append(i * i)) for i in range(4)]\n"
        "[t.start() for t in ts]\n"
        "[t.join() for t in ts]\n"
        "sub = subprocess.run(['echo', 'sub'], capture_output=True, text=True, check=True)\n"
        "async def main():\n"
        "    p = await asyncio.create_subprocess_exec('cat', stdin=asyncio.subprocess.PIPE,\n"
        "                                             stdout=asyncio.subprocess.PIPE)\n"
        "    o, _ = await p.communicate(b'async')\n"
        "    return o.decode()\n"
        "print(sorted(out), sub.stdout.strip(), asyncio.run(main()))\n");
    check_workload("python3 probe.py", "[0, 1, 4, 9] sub async\n");
}

TEST_T(workload_cc_compile_run, 120) {
    write_file("hello.c", "#include <stdio.h>\n"
                          "#include <pthread.h>\n"
                          "static void *f(void *a) { puts(a); return 0; }\n"
                          "int main(void) { pthread_t t; pthread_create(&t, 0, f, \"hello cc\");\n"
                          "  return pthread_join(t, 0); }\n");
    check_workload("cc -O1 -pthread -o hello hello.c && ./hello", "hello cc\n");
}

TEST_T(workload_git_commit, 120) {
    check_workload("git init -q repo && cd repo && echo x > f && git add f && "
                   "git -c user.name=sbx -c user.email=sbx@example.invalid commit -qm init && "
                   "git log --format=%s",
                   "init\n");
}

TEST_T(workload_make, 120) {
    write_file("Makefile", "all: out.txt\n\tcat out.txt\n"
                           "out.txt:\n\techo made > $@\n");
    check_workload("make -s", "made\n");
}

/* The filter is inherited across execve: a tool run by bash still cannot make a namespace. */
TEST(workload_filter_inherited) {
    check_workload("unshare --user true 2>/dev/null; echo rc=$?; "
                   "python3 -c 'import socket; socket.socket(40, socket.SOCK_STREAM)' 2>&1 | "
                   "tail -n1",
                   "rc=1\nPermissionError: [Errno 1] Operation not permitted\n");
}
