/* Grading sandboxes: the grader user, its directory and socket, the helper's bind mount and the
 * credentials of init and the reapers (see grading.h). */
#include "shim/grading.h"

#include "common/fdutil.h"
#include "shim/rootfs.h"

#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MS_SAFE (MS_NOSUID | MS_NODEV)
#define AGENT_HOST_DIR "agent" /* <dir>/agent on the host */

int shim_grading_socket(const char *dir, const shim_spec *spec, int *ret_fd, error_rec *err) {
    uid_t g = spec->uid_base + SHIM_GRADER_UID;
    char d[4200];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(d, sizeof(d), "%s/" AGENT_HOST_DIR, dir);
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" SHIM_AGENT_SOCK, d);
    if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
        return error_set(err, -ENAMETOOLONG, "agent socket path too long: %s", d);
    if ((mkdir(d, 0700) < 0 && errno != EEXIST) || chown(d, g, g) < 0 || chmod(d, 0700) < 0)
        return error_set_errno(err, negative_errno(), "prepare %s", d);
    unlink(sa.sun_path);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "socket");
    mode_t old = umask(0077);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || chown(sa.sun_path, g, g) < 0 || listen(fd, 16) < 0)
        return error_set_errno(err, negative_errno(), "listen on %s", sa.sun_path);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* data/NAME (mode, owner) on the sandbox's disk, bound onto root/TARGET. */
static int data_dir(const char *staging, const char *name, const char *target, mode_t mode,
                    uid_t uid, error_rec *err) {
    char data[4200], src[4300], dst[4300];
    snprintf(data, sizeof(data), "%s/data", staging);
    int r = shim_rootfs_ensure_dir(data, name, mode, uid, err);
    if (r < 0)
        return r;
    snprintf(src, sizeof(src), "%s/%s", data, name);
    snprintf(dst, sizeof(dst), "%s/root%s", staging, target);
    return shim_rootfs_bind(src, dst, MS_SAFE, err);
}

static int mount_points(const char *root, uid_t ruid, error_rec *err) {
    char home[4200], sbx[4200];
    snprintf(home, sizeof(home), "%s/home", root);
    snprintf(sbx, sizeof(sbx), "%s/.sbx", root);
    int r;
    if ((r = shim_rootfs_ensure_dir(root, "grader", 0700, ruid, err)) < 0 ||
        (r = shim_rootfs_ensure_dir(root, "home", 0755, ruid, err)) < 0 ||
        (r = shim_rootfs_ensure_dir(home, "agent", 0700, ruid, err)) < 0 ||
        (r = shim_rootfs_ensure_dir(home, "grader", 0700, ruid, err)) < 0 ||
        (r = shim_rootfs_ensure_dir(root, ".sbx", 0755, ruid, err)) < 0 ||
        (r = shim_rootfs_ensure_dir(sbx, "bin", 0755, ruid, err)) < 0 ||
        (r = shim_rootfs_ensure_dir(sbx, "run", 0700, ruid, err)) < 0)
        return r;
    return 0;
}

int shim_grading_rootfs(const shim_spec *spec, const char *staging, const char *dir,
                        error_rec *err) {
    uid_t ruid = spec->uid_base, a = ruid + SHIM_SANDBOX_UID, g = ruid + SHIM_GRADER_UID;
    char root[4200], helper[PATH_MAX + 32], dst[4300], run[4200];
    snprintf(root, sizeof(root), "%s/root", staging);
    int r = shim_rootfs_helper_path(SHIM_AS_AGENT, helper, sizeof(helper), err);
    if (r < 0 || (r = mount_points(root, ruid, err)) < 0 ||
        (r = data_dir(staging, "grader", SHIM_GRADING_DIR, 0700, g, err)) < 0 ||
        (r = data_dir(staging, "home-agent", SHIM_AGENT_HOME, 0700, a, err)) < 0 ||
        (r = data_dir(staging, "home-grader", SHIM_GRADER_HOME, 0700, g, err)) < 0)
        return r;
    snprintf(dst, sizeof(dst), "%s" SHIM_GRADING_BIN "/" SHIM_AS_AGENT, root);
    _cleanup_close_ int fd = open(dst, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0555);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "create %s", dst);
    if ((r = shim_rootfs_bind(helper, dst, MS_RDONLY | MS_SAFE, err)) < 0)
        return r;
    snprintf(run, sizeof(run), "%s/" AGENT_HOST_DIR, dir); /* the agent socket's (on the host) */
    snprintf(dst, sizeof(dst), "%s" SHIM_AGENT_SOCK_DIR, root);
    return shim_rootfs_bind(run, dst, MS_SAFE | MS_NOEXEC, err);
}

static int capset_raw(uint64_t caps) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2] = {
        {.effective = (uint32_t)caps, .permitted = (uint32_t)caps, .inheritable = 0},
        {.effective = (uint32_t)(caps >> 32), .permitted = (uint32_t)(caps >> 32)}};
    return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

int shim_grading_init_credentials(error_rec *err) {
    if (prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS |
                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
              0, 0, 0) < 0)
        return error_set_errno(err, negative_errno(), "securebits");
    gid_t g = SHIM_SANDBOX_UID, proc = SHIM_PROC_GID;
    if (setgroups(1, &proc) < 0 || setresgid(g, g, g) < 0 ||
        setresuid(SHIM_SANDBOX_UID, SHIM_SANDBOX_UID, SHIM_SANDBOX_UID) < 0)
        return error_set_errno(err, negative_errno(), "switch to uid/gid %u", SHIM_SANDBOX_UID);
    uint64_t keep = (1ull << CAP_SETUID) | (1ull << CAP_SETGID) | (1ull << CAP_KILL);
    int r = capset_raw(keep);
    if (r < 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        return error_set_errno(err, r < 0 ? r : negative_errno(), "keep setuid/setgid/kill");
    return 0;
}

int shim_grading_become(bool grader) {
    uid_t u = grader ? SHIM_GRADER_UID : SHIM_SANDBOX_UID;
    if (setgroups(0, NULL) < 0 || setresgid(u, u, u) < 0 || setresuid(u, u, u) < 0)
        return -errno;
    return capset_raw(0);
}
