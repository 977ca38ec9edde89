/* The cgroup v2 device program (shim/devbpf.c) on a real kernel: a cgroup v2 directory (the
 * unified hierarchy: /sys/fs/cgroup on a pure v2 host, /sys/fs/cgroup/unified on a hybrid one)
 * gets the program; a child joins it and opens stand-in nodes (mknod on a tmpfs in a private
 * mount namespace, major 195 like nvidia: no driver here, so an allowed open gives ENXIO and a
 * refused one EPERM). The host's /dev is never touched. Skips loudly where the kernel refuses
 * BPF_PROG_TYPE_CGROUP_DEVICE. */
#include "shim/devbpf.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static char cg[256], mnt[64];

static void cleanup(void) {
    if (cg[0])
        rmdir(cg);
    if (mnt[0]) {
        umount2(mnt, MNT_DETACH);
        rmdir(mnt);
    }
}

static const char *v2_root(void) {
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
        return "/sys/fs/cgroup";
    if (access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0)
        return "/sys/fs/cgroup/unified";
    return NULL;
}

/* errno of open(path) by a new process in cg (0: it opened) */
static int open_in_cgroup(const char *path) {
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char procs[300], me[32];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
        snprintf(me, sizeof(me), "%d", (int)getpid());
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        int e = fd < 0 || write(fd, me, strlen(me)) < 0 ? 1000 + errno : 0;
        if (!e) {
            int d = open(path, O_RDWR | O_CLOEXEC);
            e = d < 0 ? errno : 0;
        }
        if (write(pfd[1], &e, sizeof(e)) < 0)
            _exit(2);
        _exit(0);
    }
    close(pfd[1]);
    int e = -1;
    CHECK(read(pfd[0], &e, sizeof(e)) == sizeof(e));
    close(pfd[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(e < 1000, "joining %s failed: %s", cg, strerror(e - 1000));
    return e;
}

TEST(devbpf_allows_only_the_listed_nodes) {
    test_require_root();
    const char *root = v2_root();
    if (!root)
        SKIP("no cgroup v2 hierarchy mounted: the v2 device program cannot be tried here");
    atexit(cleanup);
    CHECK(unshare(CLONE_NEWNS) == 0);
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    snprintf(mnt, sizeof(mnt), "/tmp/sbx-devbpf.%d", (int)getpid());
    CHECK(mkdir(mnt, 0700) == 0);
    CHECK(mount("sbx-devbpf", mnt, "tmpfs", 0, "size=64k,mode=0700") == 0);
    char n0[128], n1[128], nul[128];
    snprintf(n0, sizeof(n0), "%s/nvidia0", mnt);
    snprintf(n1, sizeof(n1), "%s/nvidia1", mnt);
    snprintf(nul, sizeof(nul), "%s/null", mnt);
    CHECK(mknod(n0, S_IFCHR | 0666, makedev(195, 0)) == 0);
    CHECK(mknod(n1, S_IFCHR | 0666, makedev(195, 1)) == 0);
    CHECK(mknod(nul, S_IFCHR | 0666, makedev(1, 3)) == 0);
    snprintf(cg, sizeof(cg), "%s/sbx-devbpf-test.%d", root, (int)getpid());
    CHECK(mkdir(cg, 0755) == 0);
    /* before: nothing refuses (ENXIO for both stand-ins: no driver) */
    CHECK_EQ(open_in_cgroup(n1), ENXIO);
    shim_devbpf_rule rules[SHIM_DEVBPF_MAX_RULES];
    size_t n = 0;
    for (; n < shim_devbpf_n_defaults; n++)
        rules[n] = shim_devbpf_defaults[n];
    rules[n++] = (shim_devbpf_rule){195, 0};
    error_rec err = {0};
    int r = shim_devbpf_attach(cg, rules, n, &err);
    if (r == -EINVAL || r == -EPERM || r == -ENOSYS || r == -EOPNOTSUPP)
        SKIP("the kernel refused the cgroup device program: %s", err.message);
    CHECK_MSG(r == 0, "attach: %s", err.message);
    CHECK_EQ(open_in_cgroup(n0), ENXIO); /* allowed: reaches the (absent) driver */
    CHECK_EQ(open_in_cgroup(n1), EPERM); /* not listed: the program refuses */
    CHECK_EQ(open_in_cgroup(nul), 0);    /* the default set: /dev/null works */
    /* a 136:* rule (any minor) is matched on the major alone */
    char pts[128];
    snprintf(pts, sizeof(pts), "%s/pts7", mnt);
    CHECK(mknod(pts, S_IFCHR | 0666, makedev(136, 7)) == 0);
    CHECK(open_in_cgroup(pts) != EPERM);
}

TEST(devbpf_refuses_too_many_rules) {
    shim_devbpf_rule rules[SHIM_DEVBPF_MAX_RULES + 1] = {0};
    error_rec err = {0};
    CHECK_EQ(shim_devbpf_attach("/nonexistent", rules, SHIM_DEVBPF_MAX_RULES + 1, &err), -E2BIG);
}
