/* sbx-shim resource limits from inside a real sandbox: pids, memory (OOM kill reported),
 * disk (ENOSPC), cpu quota, and the stats message. The pids and memory limits also run under
 * gVisor (gvisor_<case>; shim/gvisor.h): the fork bomb meets the same EAGAIN inside; running
 * out of memory ends the whole sandbox there, reported as such. */
#include "common/fdutil.h"
#include "shim/cgroup.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static shimdrv drv;
static void cleanup(void) {
    shimdrv_destroy(&drv);
}

static shimdrv *start(const shimdrv_opts *o) {
    test_require_root();
    atexit(cleanup);
    int r = shimdrv_start(&drv, o);
    CHECK_MSG(r == 0, "shim start: %d %s", r, drv.start_error);
    return &drv;
}

/* runsc NULL: native. The bomb forks until EAGAIN, says how far it got, then kills its own
 * process group: its time depends on the machine's fork speed (native: 5 ms to 20 ms a fork+exec
 * seen on 2-core VMs; under gVisor ~30 ms to 200 ms, a ptrace round trip each), so no timeout is
 * raced: the command's timeout is only a backstop. (A timeout killing a whole tree:
 * test_shim_exec's shim_timeout_kills_whole_tree.) Under gVisor the limit is 64 processes (the
 * same EAGAIN, a quarter of the forks); each process costs ~2 MiB of host memory (its stub and
 * threads, in the sandbox's cgroup): 1 GiB leaves room. */
static void fork_bomb(const char *runsc) {
    uint64_t pids = runsc ? 64 : 256;
    shimdrv_opts so = {.runsc = runsc, .memory = runsc ? 1ull << 30 : 0, .pids = pids};
    shimdrv *d = start(&so);
    const char *argv[] = {"python3", "-c",
                          "import os\n"
                          "n = 0\n"
                          "try:\n"
                          "    while True:\n"
                          "        if os.fork() == 0:\n"
                          "            os.execv('/bin/sleep', ['sleep', '1000'])\n"
                          "        n += 1\n"
                          "except OSError as e:\n"
                          "    print(n, e.errno, flush=True)\n"
                          "os.killpg(0, 9)\n",
                          NULL};
    shimdrv_exec_opts o = {.timeout_ms = runsc ? 150000 : 90000};
    shimdrv_result res;
    CHECK_OK(shimdrv_exec(d, argv, &o, &res));
    int forked = -1, err = -1;
    sscanf(res.out, "%d %d", &forked, &err);
    /* init (gVisor: the runner), the reaper, python and its children: most of the limit (200
     * of 256, as before the gVisor case had its own limit) */
    CHECK_MSG(forked >= (int)(pids * 25 / 32) && forked <= (int)pids - 3, "forked %d (stdout %s)",
              forked, res.out);
    CHECK_EQ(err, 11); /* EAGAIN */
    CHECK_STREQ(res.reason, "signaled");
    shimdrv_result_free(&res);
    /* the whole tree is gone within a second (a killed process may still be exiting when the
     * command's result comes): the sandbox is usable again */
    int code, procs = -1;
    char *out = NULL;
    int most = runsc ? 6 : 5; /* (gVisor: and the commands' cgroups' keeper, cmd_cgroup.h) */
    for (int i = 0; i < 20 && (procs < 0 || procs > most); i++) {
        if (out)
            usleep(50 * 1000);
        free(out);
        out = shimdrv_sh_out(d, "ls /proc | grep -c '^[0-9]'; echo ok", &code);
        CHECK_EQ(code, 0);
        procs = atoi(out);
    }
    CHECK_MSG(procs <= most && strstr(out, "ok"), "after the bomb: %s", out);
    free(out);
}

TEST_T(shim_fork_bomb_stops_at_pids_limit, 120) {
    fork_bomb(NULL);
}

/* (runsc's forks are slow; the plain pass only: the sanitized shim's part is the one above's) */
TEST_PASS_T(gvisor_shim_fork_bomb_stops_at_pids_limit, 180, "plain") {
    fork_bomb(shimdrv_runsc());
}

/* gVisor's memory is its Sentry's, in the sandbox's cgroup: the OOM killer ends the sandbox. The
 * shim says why (the daemon ends it oom_killed, and its running commands with it); what the
 * command saw meanwhile (/proc/meminfo) was the limit. */
TEST_T(gvisor_shim_memory_hog_ends_sandbox, 90) {
    shimdrv_opts so = {.memory = 128ull << 20, .runsc = shimdrv_runsc()};
    shimdrv *d = start(&so);
    int code;
    char *out = shimdrv_sh_out(d, "grep MemTotal /proc/meminfo", &code);
    CHECK_MSG(code == 0 && strstr(out, " 131072 kB"), "meminfo: %s", out);
    free(out);
    const char *argv[] = {"python3", "-c",
                          "b = []\n"
                          "while True: b.append(bytearray(1 << 20))\n",
                          NULL};
    shimdrv_result res;
    CHECK_EQ(shimdrv_exec(d, argv, NULL, &res), -ECONNRESET); /* init is gone, and the shim */
    shimdrv_result_free(&res);
    json_t *ev = NULL;
    CHECK_OK(shimdrv_wait_event(d, "dead", 20000, &ev));
    CHECK_MSG(strcmp(json_string_value(json_object_get(ev, "reason")), "oom") == 0 &&
                  strstr(json_string_value(json_object_get(ev, "message")), "out of memory"),
              "dead: %s", json_dumps(ev, 0));
    json_decref(ev);
}

TEST(shim_memory_hog_is_oom_killed) {
    shimdrv_opts so = {.memory = 64ull << 20};
    shimdrv *d = start(&so);
    const char *argv[] = {"python3", "-c",
                          "b = []\n"
                          "while True: b.append(bytearray(1 << 20))\n",
                          NULL};
    shimdrv_result res;
    CHECK_OK(shimdrv_exec(d, argv, NULL, &res));
    CHECK_STREQ(res.reason, "oom_killed");
    CHECK_EQ(res.signal, 9);
    shimdrv_result_free(&res);
    json_t *ev = NULL;
    CHECK_OK(shimdrv_wait_event(d, "oom", 5000, &ev));
    CHECK(json_integer_value(json_object_get(ev, "oom_kills")) >= 1);
    json_decref(ev);
    json_t *st = NULL;
    CHECK_OK(shimdrv_request(d, json_pack("{s:s}", "type", "stats"), &st));
    CHECK(json_integer_value(json_object_get(st, "oom_kills")) >= 1);
    CHECK(json_integer_value(json_object_get(st, "mem_peak_bytes")) >= 48ll << 20);
    CHECK(json_integer_value(json_object_get(st, "mem_peak_bytes")) <= 64ll << 20);
    json_decref(st);
    /* a killed command is not the sandbox: it keeps working */
    int code;
    free(shimdrv_sh_out(d, "true", &code));
    CHECK_EQ(code, 0);
}

TEST(shim_disk_full_is_enospc) {
    shimdrv_opts so = {.disk = 8ull << 20};
    shimdrv *d = start(&so);
    shimdrv_result res;
    CHECK(shimdrv_sh(d, "dd if=/dev/zero of=/workspace/big bs=1M count=32", &res) != 0);
    CHECK_MSG(strstr(res.err, "No space left on device"), "stderr: %s", res.err);
    shimdrv_result_free(&res);
    /* /tmp shares the same writable layer */
    CHECK(shimdrv_sh(d, "dd if=/dev/zero of=/tmp/more bs=1M count=1", &res) != 0);
    shimdrv_result_free(&res);
    json_t *st = NULL;
    CHECK_OK(shimdrv_request(d, json_pack("{s:s}", "type", "stats"), &st));
    json_int_t used = json_integer_value(json_object_get(st, "disk_used_bytes"));
    CHECK_MSG(used >= 7ll << 20 && used <= 8ll << 20, "disk_used_bytes %lld", (long long)used);
    json_decref(st);
    CHECK_EQ(shimdrv_sh(d, "rm /workspace/big && echo x > /workspace/small", &res), 0);
    shimdrv_result_free(&res);
}

/* The path of hierarchy line l of a /proc/PID/cgroup file ("N:controllers:path") if its
 * controller list holds ctrl (v1) or it is the v2 line (ctrl NULL), into out. */
static bool cgroup_line_path(const char *l, const char *ctrl, char *out, size_t n) {
    const char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return false;
    char list[128];
    snprintf(list, sizeof(list), ",%.*s,", (int)(c2 - c1 - 1), c1 + 1);
    char word[32];
    snprintf(word, sizeof(word), ",%s,", ctrl ? ctrl : "");
    if (ctrl ? !strstr(list, word) : strcmp(list, ",,") != 0)
        return false;
    snprintf(out, n, "%.*s", (int)strcspn(c2 + 1, "\n"), c2 + 1);
    return true;
}

/* init is in the sandbox's cgroup of every controller the shim uses (v1: it moves itself there,
 * writing "0" to each `tasks` file, before the shim lets it go on; v2: the shim moves it). */
TEST(shim_init_in_every_cgroup) {
    shimdrv *d = start(&(shimdrv_opts){0});
    int ver;
    const char *parent = shimdrv_cgroup_parent(&ver);
    shim_cgroup *cg = NULL;
    CHECK_OK(shim_cgroup_open(ver, parent, d->id, false, &cg, NULL));
    char path[64], suffix[128];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", d->init_pid);
    snprintf(suffix, sizeof(suffix), "/%s", d->id);
    _cleanup_free_ char *lines = NULL;
    CHECK_OK(file_read_all(path, 65536, &lines, NULL));
    for (size_t i = 0; i < (ver == 1 ? cg->n : 1); i++) {
        const char *ctrl = ver == 1 ? cg->ctrls[i] : NULL;
        bool found = false;
        for (const char *l = lines; l && *l && !found;
             l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            char p[1024];
            if (!cgroup_line_path(l, ctrl, p, sizeof(p)))
                continue;
            found = true;
            size_t pl = strlen(p), sl = strlen(suffix);
            CHECK_MSG(pl >= sl && strcmp(p + pl - sl, suffix) == 0, "%s: init is in %s",
                      ctrl ? ctrl : "v2", p);
        }
        CHECK_MSG(found, "no %s line in %s", ctrl ? ctrl : "v2", lines);
    }
    CHECK(ver != 1 || cg->n >= 2); /* memory and pids at least */
    shim_cgroup_free(cg);
}

TEST(shim_cpu_quota_and_stats) {
    shimdrv_opts so = {.cpu = 0.5, .pids = 100};
    shimdrv *d = start(&so);
    int ver;
    const char *parent = shimdrv_cgroup_parent(&ver);
    shim_cgroup *cg = NULL;
    CHECK_OK(shim_cgroup_open(ver, parent, d->id, false, &cg, NULL));
    char path[4200];
    _cleanup_free_ char *q = NULL, *pm = NULL;
    if (ver == 1) {
        char mnt[512];
        CHECK_OK(shim_cgroup_v1_mount("cpu", mnt, sizeof(mnt)));
        snprintf(path, sizeof(path), "%s/%s/%s/cpu.cfs_quota_us", mnt, parent, d->id);
        CHECK_OK(file_read_all(path, 64, &q, NULL));
        CHECK_STREQ(q, "50000\n");
        CHECK_OK(shim_cgroup_v1_mount("pids", mnt, sizeof(mnt)));
        snprintf(path, sizeof(path), "%s/%s/%s/pids.max", mnt, parent, d->id);
    } else {
        snprintf(path, sizeof(path), "%s/%s/cpu.max", parent, d->id);
        CHECK_OK(file_read_all(path, 64, &q, NULL));
        CHECK_STREQ(q, "50000 100000\n");
        snprintf(path, sizeof(path), "%s/%s/pids.max", parent, d->id);
    }
    CHECK_OK(file_read_all(path, 64, &pm, NULL));
    CHECK_STREQ(pm, "100\n");
    shim_cgroup_free(cg);
    /* a busy loop of 1 s wall time gets at most half a CPU (less when the machine is busy) */
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "timeout 1 sh -c 'while :; do :; done'; true", &res), 0);
    shimdrv_result_free(&res);
    json_t *st = NULL;
    CHECK_OK(shimdrv_request(d, json_pack("{s:s}", "type", "stats"), &st));
    json_int_t cpu = json_integer_value(json_object_get(st, "cpu_usec"));
    CHECK_MSG(cpu > 0 && cpu <= 800000, "cpu_usec %lld", (long long)cpu);
    CHECK(json_integer_value(json_object_get(st, "pids")) >= 1);
    CHECK(json_integer_value(json_object_get(st, "mem_bytes")) > 0);
    json_decref(st);
}
