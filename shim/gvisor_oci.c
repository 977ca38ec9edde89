/* The OCI runtime spec runsc runs a gvisor-class sandbox from (see gvisor.h): the root built by
 * init, the sandbox's /tmp and /workspace as shared binds (files the host writes are seen at
 * once), gVisor's own /proc, /dev and /sys, and the runner bound read-only at
 * SHIM_GVISOR_INIT_PATH. The runner starts as gVisor's root with the few capabilities it needs
 * to make its cgroups, chroot their keeper (shim/gvinit/cmd_cgroup.h) and drop to the sandbox
 * user (shim/gvinit/sbx_gvisor_init.c). */
#include "shim/gvisor.h"

#include <stdio.h>
#include <string.h>

static json_t *mnt(const char *dst, const char *type, const char *src, const char *opts) {
    json_t *o = json_array();
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", opts);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(o, json_string(t));
    return json_pack("{s:s,s:s,s:s,s:o}", "destination", dst, "type", type, "source", src,
                     "options", o);
}

static json_t *mounts(const char *staging) {
    char tmp[4200], ws[4200], init[4200], statx[4200];
    snprintf(tmp, sizeof(tmp), "%s/data/tmp", staging);
    snprintf(ws, sizeof(ws), "%s/data/workspace", staging);
    snprintf(init, sizeof(init), "%s/gv/init", staging);
    snprintf(statx, sizeof(statx), "%s/gv/statx.so", staging);
    return json_pack(
        "[o,o,o,o,o,o,o,o,o]", mnt("/proc", "proc", "proc", "nosuid,noexec,nodev"),
        mnt("/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k"),
        mnt("/dev/pts", "devpts", "devpts", "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620"),
        mnt("/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k"),
        mnt("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"),
        mnt("/tmp", "bind", tmp, "rbind,nosuid,nodev"),
        mnt("/workspace", "bind", ws, "rbind,nosuid,nodev"),
        mnt(SHIM_GVISOR_INIT_PATH, "bind", init, "bind,ro,nosuid,nodev"),
        mnt(SHIM_GVISOR_STATX_PATH, "bind", statx, "bind,ro,nosuid,nodev"));
}

json_t *shim_gvisor_oci(const shim_spec *spec, const char *staging) {
    char root[4200];
    snprintf(root, sizeof(root), "%s/root", staging);
    json_t *caps = json_pack("[s,s,s,s,s,s]", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP",
                             "CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_SYS_CHROOT");
    json_t *process =
        json_pack("{s:b,s:{s:i,s:i},s:[s],s:[s],s:s,s:{s:O,s:O,s:O},s:b}", "terminal", 0, "user",
                  "uid", 0, "gid", 0, "args", SHIM_GVISOR_INIT_PATH, "env",
                  "PATH=/usr/local/bin:/usr/bin:/bin", "cwd", "/", "capabilities", "bounding", caps,
                  "effective", caps, "permitted", caps, "noNewPrivileges", 0);
    json_decref(caps);
    return json_pack("{s:s,s:o,s:{s:s,s:b},s:s,s:o,s:{s:[{s:s},{s:s},{s:s},{s:s}]}}", "ociVersion",
                     "1.0.0", "process", process, "root", "path", root, "readonly", 0, "hostname",
                     spec->hostname, "mounts", mounts(staging), "linux", "namespaces", "type",
                     "pid", "type", "ipc", "type", "uts", "type", "mount");
}
