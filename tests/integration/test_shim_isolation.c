/* sbx-shim isolation layers, each observed from inside a real sandbox: user, capabilities,
 * no_new_privs, seccomp, namespaces, filesystem, environment and descriptors. Every case runs
 * in both isolation classes (ISO_TEST): native, and gvisor_<case> under gVisor's runsc
 * (shim/gvisor.h), where a probe's answer differs only where gVisor's kernel legitimately
 * differs (said at each place). */
#include "common/fdutil.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

static shimdrv drv;
static char marker_tmp[128], marker_root[128];
static const char *runsc; /* the gvisor class: runsc's path; NULL: native */

/* Each case twice: NAME (native) and gvisor_NAME (runsc from PATH; a loud skip without it,
 * which CI counts as a failure: tests/deps.sh installs it). */
#define ISO_TEST(name)                                                                             \
    static void name##_body(void);                                                                 \
    TEST(name) {                                                                                   \
        name##_body();                                                                             \
    }                                                                                              \
    TEST_T(gvisor_##name, 90) {                                                                    \
        use_gvisor();                                                                              \
        name##_body();                                                                             \
    }                                                                                              \
    static void name##_body(void)

static void mounts_nosuid_nodev(shimdrv *d);

static void use_gvisor(void) {
    runsc = shimdrv_runsc();
}

static void cleanup(void) {
    shimdrv_destroy(&drv);
    if (marker_tmp[0])
        unlink(marker_tmp);
    if (marker_root[0])
        unlink(marker_root);
}

static shimdrv *start(void) {
    test_require_root();
    atexit(cleanup);
    shimdrv_opts o = {.runsc = runsc};
    int r = shimdrv_start(&drv, &o);
    CHECK_MSG(r == 0, "shim start: %d %s", r, drv.start_error);
    return &drv;
}

/* Run cmd; check it exits 0 and return stdout. */
static char *run_ok(shimdrv *d, const char *cmd) {
    int code;
    char *out = shimdrv_sh_out(d, cmd, &code);
    CHECK_MSG(code == 0, "`%s` exited %d, stdout: %s", cmd, code, out);
    return out;
}

static int run_code(shimdrv *d, const char *cmd) {
    int code;
    free(shimdrv_sh_out(d, cmd, &code));
    return code;
}

ISO_TEST(shim_user_is_1000) {
    shimdrv *d = start();
    char *out = run_ok(d, "id -u; id -g; id -G; id -un");
    CHECK_STREQ(out, "1000\n1000\n1000\nsandbox\n");
    free(out);
    /* the host sees the sandbox user as uid_base + 1000, never root */
    char p[64], *status = NULL;
    snprintf(p, sizeof(p), "/proc/%d/status", d->init_pid);
    CHECK_OK(file_read_all(p, 1 << 16, &status, NULL));
    unsigned ruid = 0;
    sscanf(strstr(status, "Uid:"), "Uid:\t%u", &ruid);
    CHECK_MSG(ruid >= 2000000u + 1000u, "host uid of init is %u", ruid);
    free(status);
}

ISO_TEST(shim_capabilities_empty) {
    shimdrv *d = start();
    char *out = run_ok(d, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' "
                          "/proc/self/status");
    if (runsc) /* gVisor's /proc/PID/status has no CapAmb and NoNewPrivs lines (asked below) */
        CHECK_STREQ(out, "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
                         "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nSeccomp:\t2\n");
    else
        CHECK_STREQ(out, "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
                         "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                         "CapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n");
    free(out);
    /* no_new_privs, asked of the kernel itself (PR_GET_NO_NEW_PRIVS) */
    out = run_ok(d, "python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(39,0,0,0,0))'");
    CHECK_STREQ(out, "1\n");
    free(out);
}

ISO_TEST(shim_namespaces_differ) {
    shimdrv *d = start();
    static const char *const ns[] = {"user", "pid", "mnt", "net", "ipc", "uts", "cgroup", "time"};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        char cmd[128], host[128] = "", p[64];
        snprintf(p, sizeof(p), "/proc/self/ns/%s", ns[i]);
        ssize_t n = readlink(p, host, sizeof(host) - 1);
        if (n < 0 && strcmp(ns[i], "time") == 0)
            continue;
        CHECK(n > 0);
        host[n] = '\0';
        snprintf(cmd, sizeof(cmd), "readlink /proc/self/ns/%s", ns[i]);
        if (runsc && run_code(d, cmd) != 0)
            continue; /* gVisor shows net, pid and user only: its kernel is not the host's */
        char *out = run_ok(d, cmd);
        out[strcspn(out, "\n")] = '\0';
        CHECK_MSG(strncmp(out, ns[i], strlen(ns[i])) == 0, "%s: %s", ns[i], out);
        CHECK_MSG(strcmp(out, host) != 0, "namespace %s is the host's (%s)", ns[i], host);
        free(out);
    }
    /* no cgroup path but the namespace's root (gVisor shows only its own groups: the pids one,
     * which holds the process limit, and the command's, c<ID>: sbx-gvisor-init) */
    char *out =
        run_ok(d, "hostname; grep -v ':/$' /proc/self/cgroup | sed 's/c[0-9]*$/cID/' || true");
    char want[128];
    snprintf(want, sizeof(want), "%s\n%s", d->id, runsc ? "2:job:/run/cID\n1:pids:/sandbox\n" : "");
    CHECK_STREQ(out, want);
    free(out);
    /* only loopback, and it is up */
    out = run_ok(d, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
                    "cat /sys/class/net/lo/operstate 2>/dev/null || true");
    CHECK_STREQ(out, "lo\n");
    free(out);
    CHECK_EQ(run_code(d, "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); "
                         "s.listen(); c=socket.create_connection(s.getsockname()); print(1)'"),
             0);
}

ISO_TEST(shim_blocked_syscalls) {
    shimdrv *d = start();
    CHECK(run_code(d, "unshare -U true") != 0);
    CHECK(run_code(d, "unshare -r true") != 0);
    CHECK(run_code(d, "mount -t tmpfs none /tmp") != 0);
    CHECK(run_code(d, "python3 -c 'import os,ctypes; l=ctypes.CDLL(None); "
                      "exit(0 if l.unshare(0x10000000)==0 else 1)'") == 1);
    /* still perfectly usable */
    CHECK_EQ(run_code(d, "true"), 0);
}

ISO_TEST(shim_host_invisible) {
    test_require_root();
    snprintf(marker_tmp, sizeof(marker_tmp), "/tmp/sbx-marker-%d", (int)getpid());
    snprintf(marker_root, sizeof(marker_root), "/root/sbx-marker-%d", (int)getpid());
    CHECK_OK(file_write_atomic(marker_tmp, "secret", 6, 0644));
    CHECK_OK(file_write_atomic(marker_root, "secret", 6, 0644));
    setenv("SBX_HOST_SECRET", "hunter2", 1);
    shimdrv *d = start();
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls %s %s", marker_tmp, marker_root);
    CHECK(run_code(d, cmd) != 0);
    char *out = run_ok(d, "env");
    CHECK_MSG(!strstr(out, "SBX_HOST_SECRET") && !strstr(out, "hunter2"), "env: %s", out);
    CHECK(strstr(out, "HOME=/workspace"));
    free(out);
    /* no inherited descriptors: 0, 1, 2 and the one ls opens */
    out = run_ok(d, "ls /proc/self/fd");
    CHECK_STREQ(out, "0\n1\n2\n3\n");
    free(out);
    /* /proc shows only the sandbox: init (1), the reaper, sh, ls and grep (gVisor: and the
     * keeper of the commands' cgroups, shim/gvinit/cmd_cgroup.h) */
    out = run_ok(d, "ls /proc | grep -c '^[0-9]'");
    CHECK_MSG(atoi(out) <= (runsc ? 6 : 5), "%s processes visible", out);
    free(out);
    out = run_ok(d, "cat /proc/1/cmdline | tr '\\0' ' '");
    CHECK_MSG(!strstr(out, d->dir), "init's command line shows the host path: %s", out);
    free(out);
    out = run_ok(d, "ls -A /sys/kernel 2>/dev/null | wc -l"); /* gVisor: an empty directory */
    CHECK_STREQ(out, "0\n");
    free(out);
    out = run_ok(d, "cat /etc/passwd; cat /etc/hostname");
    CHECK(strstr(out, "sandbox:x:1000:1000"));
    CHECK(!strstr(out, "_apt") && !strstr(out, "systemd"));
    free(out);
}

ISO_TEST(shim_filesystem) {
    shimdrv *d = start();
    CHECK(run_code(d, "touch /usr/x") != 0);
    CHECK(run_code(d, "echo x >> /etc/passwd") != 0);
    CHECK(run_code(d, "touch /x") != 0);
    CHECK(run_code(d, "mkdir /etc/y") != 0);
    CHECK_EQ(run_code(d, "touch /workspace/a /tmp/b && test \"$(pwd)\" = /workspace && "
                         "test \"$(stat -c %u:%g /workspace)\" = 1000:1000"),
             0);
    /* masked /proc entries (every one the host has: files read empty, directories list
     * nothing) and read-only /proc/sys */
    static const char *const masked[] = {
        "kcore",       "keys",        "latency_stats", "timer_list",   "timer_stats",
        "sched_debug", "kmsg",        "interrupts",    "kallsyms",     "sysrq-trigger",
        "config.gz",   "vmallocinfo", "slabinfo",      "pagetypeinfo", "kpagecount",
        "kpageflags",  "kpagecgroup", "iomem",         "ioports",      "acpi",
        "scsi",        "asound",      "firmware",      "driver",       "pressure"};
    int n_masked = 0;
    for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
        char host[64], cmd[160];
        struct stat st;
        snprintf(host, sizeof(host), "/proc/%s", masked[i]);
        if (lstat(host, &st) < 0 || (runsc && S_ISDIR(st.st_mode)))
            continue; /* gVisor's /proc is the sentry's own */
        if (S_ISDIR(st.st_mode))
            snprintf(cmd, sizeof(cmd), "ls -A /proc/%s | wc -l", masked[i]);
        else
            snprintf(cmd, sizeof(cmd), "cat /proc/%s 2>/dev/null | wc -c", masked[i]);
        char *out = run_ok(d, cmd);
        CHECK_MSG(strcmp(out, "0\n") == 0, "/proc/%s is not masked: %s", masked[i], out);
        free(out);
        n_masked++;
    }
    CHECK(n_masked >= 10);
    char *out =
        run_ok(d, "echo 1 > /proc/sys/kernel/printk 2>/dev/null && echo written || echo ro; "
                  "echo 1 > /proc/sysrq-trigger 2>/dev/null && echo written || echo ro");
    CHECK_STREQ(out, "ro\nro\n");
    free(out);
    /* minimal /dev; nosuid,nodev everywhere */
    out = run_ok(d, "ls /dev | tr '\\n' ' '");
    if (runsc) /* gVisor's own /dev: its fuse is the sentry's (mounting needs CAP_SYS_ADMIN) */
        CHECK_STREQ(out,
                    "fd full fuse null ptmx pts random shm stderr stdin stdout tty urandom zero ");
    else
        CHECK_STREQ(out, "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero ");
    free(out);
    out = run_ok(d, "head -c 4 /dev/zero | wc -c; echo hi > /dev/null && echo ok");
    CHECK_STREQ(out, "4\nok\n");
    free(out);
    /* gVisor's /proc/mounts lists no nosuid/nodev; its device nodes are the sentry's own (no
     * host device is reachable) and setuid is moot under no_new_privs (checked above) */
    if (!runsc)
        mounts_nosuid_nodev(d);
    /* programs work: compiler alternatives, python, dynamic linking */
    CHECK_EQ(run_code(d, "cd /tmp && printf 'int main(){return 7;}' > t.c && cc t.c -o t && ./t"),
             7);
}

static void mounts_nosuid_nodev(shimdrv *d) {
    char *out = run_ok(d, "awk '$2 !~ /^\\/dev\\/(null|zero|full|random|urandom|tty)$/ && "
                          "$4 !~ /nosuid/ {print}' /proc/mounts");
    CHECK_MSG(out[0] == '\0', "mounts without nosuid: %s", out);
    free(out);
    out = run_ok(d, "awk '$1 !~ /^(devpts|udev|devtmpfs)$/ && $2 !~ /^\\/dev\\// && $4 !~ /nodev/ "
                    "{print}' /proc/mounts");
    CHECK_MSG(out[0] == '\0', "mounts without nodev: %s", out);
    free(out);
}

ISO_TEST(shim_ephemeral) {
    test_require_root();
    atexit(cleanup);
    shimdrv_opts o = {.runsc = runsc};
    CHECK_OK(shimdrv_start(&drv, &o));
    CHECK_EQ(run_code(&drv, "echo data > /workspace/keep && echo data > /tmp/keep"), 0);
    CHECK_EQ(shimdrv_shutdown(&drv), 0);
    shimdrv_destroy(&drv);
    memset(&drv, 0, sizeof(drv));
    CHECK_OK(shimdrv_start(&drv, &o));
    CHECK(run_code(&drv, "ls /workspace/keep") != 0);
    CHECK(run_code(&drv, "ls /tmp/keep") != 0);
}

/* Which kernel the sandbox sees: the host's in the native class, gVisor's own (another version,
 * its own /proc/version) in the gvisor class; the kernel log is closed to it in both. */
ISO_TEST(shim_kernel_view) {
    shimdrv *d = start();
    struct utsname u;
    CHECK_OK(uname(&u) < 0 ? -errno : 0);
    char *out = run_ok(d, "uname -r");
    out[strcspn(out, "\n")] = '\0';
    if (runsc)
        CHECK_MSG(strcmp(out, u.release) != 0, "gVisor sandbox sees the host kernel %s", out);
    else
        CHECK_STREQ(out, u.release);
    free(out);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "grep -c '%s' /proc/version", u.release);
    CHECK_EQ(run_code(d, cmd), runsc ? 1 : 0); /* grep: 1 = no line names the host's kernel */
    CHECK(run_code(d, "dmesg") != 0);
    CHECK_EQ(run_code(d, "python3 -c 'import ctypes,sys; b=ctypes.create_string_buffer(4096); "
                         "sys.exit(0 if ctypes.CDLL(None).klogctl(3,b,4096) < 0 else 1)'"),
             0);
}
