/* sbx-shim commands: exit codes and signals, env/cwd/stdin, shell, timeouts that take down a
 * whole process tree (setsid'd grandchild included), kill, concurrency, bad protocol input. */
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "tests/lib/shim_driver.h"
#include "tests/lib/test.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static shimdrv drv;
static void cleanup(void) {
    shimdrv_destroy(&drv);
}

/* A sandbox of the native class, or of the gvisor class with runsc. */
static shimdrv *start_class(const char *runsc) {
    test_require_root();
    atexit(cleanup);
    shimdrv_opts o = {.runsc = runsc};
    int r = shimdrv_start(&drv, &o);
    CHECK_MSG(r == 0, "shim start: %d %s", r, drv.start_error);
    return &drv;
}

static shimdrv *start(void) {
    return start_class(NULL);
}

TEST(shim_exec_results) {
    shimdrv *d = start();
    shimdrv_result res;
    const char *argv[] = {"sh", "-c", "kill -TERM $$", NULL};
    CHECK_OK(shimdrv_exec(d, argv, NULL, &res));
    CHECK_STREQ(res.reason, "signaled");
    CHECK_EQ(res.signal, SIGTERM);
    CHECK_EQ(res.exit_code, 128 + SIGTERM);
    shimdrv_result_free(&res);
    /* env: the spec's, overridden and extended by the request's; cwd; stdin */
    const char *env[] = {"HOME=/tmp", "FOO=bar", NULL};
    const char *argv2[] = {"sh", "-c", "echo $HOME $FOO $LANG; pwd; cat", NULL};
    shimdrv_exec_opts o = {.env = env, .cwd = "/usr", .stdin_data = "from stdin\n"};
    CHECK_OK(shimdrv_exec(d, argv2, &o, &res));
    CHECK_STREQ(res.out, "/tmp bar C.UTF-8\n/usr\nfrom stdin\n");
    CHECK_EQ(res.exit_code, 0);
    shimdrv_result_free(&res);
    /* argv is not a shell line unless shell is true */
    const char *argv3[] = {"echo", "$HOME;", "x", NULL};
    CHECK_OK(shimdrv_exec(d, argv3, NULL, &res));
    CHECK_STREQ(res.out, "$HOME; x\n");
    shimdrv_result_free(&res);
    /* a missing program or cwd is an error reply, not an exit */
    const char *argv4[] = {"no-such-program", NULL};
    CHECK_EQ(shimdrv_exec(d, argv4, NULL, &res), -ENOENT);
    CHECK_MSG(strstr(res.start_error, "no-such-program"), "%s", res.start_error);
    shimdrv_result_free(&res);
    shimdrv_exec_opts o2 = {.cwd = "/nonexistent"};
    CHECK_EQ(shimdrv_exec(d, argv3, &o2, &res), -ENOENT); /* the cwd is named, not the program */
    CHECK_MSG(strstr(res.start_error, "chdir /nonexistent: No such file"), "%s", res.start_error);
    shimdrv_result_free(&res);
    o2.cwd = "/etc/passwd";
    CHECK_EQ(shimdrv_exec(d, argv3, &o2, &res), -ENOTDIR);
    CHECK_MSG(strstr(res.start_error, "chdir /etc/passwd: Not a directory"), "%s", res.start_error);
    shimdrv_result_free(&res);
    /* big output streams through */
    CHECK_EQ(shimdrv_sh(d, "head -c 3000000 /dev/zero", &res), 0);
    CHECK_EQ(res.out_len, 3000000);
    shimdrv_result_free(&res);
}

/* A command starts with every signal at SIG_DFL and none blocked, though init ignores SIGPIPE
 * and blocks SIGCHLD (the command resets only what init changed: exec.c's init_sigs). */
TEST(shim_command_starts_with_default_signals) {
    shimdrv *d = start();
    for (int round = 0; round < 2; round++) { /* the second on a reused reaper stack */
        shimdrv_result res;
        const char *argv[] = {"cat", "/proc/self/status", NULL};
        CHECK_OK(shimdrv_exec(d, argv, NULL, &res));
        CHECK_EQ(res.exit_code, 0);
        const char *want[] = {"SigBlk:\t0000000000000000\n", "SigIgn:\t0000000000000000\n",
                              "SigCgt:\t0000000000000000\n"};
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
            CHECK_MSG(res.out && strstr(res.out, want[i]), "no '%.6s' of 0 in: %s", want[i],
                      res.out ? res.out : "(none)");
        shimdrv_result_free(&res);
    }
}

/* The OOM score a child of this process ends with after writing 0 to its own. */
static int oom_score_after_reset(void) {
    FILE *p = popen("echo 0 2>/dev/null >/proc/self/oom_score_adj; cat /proc/self/oom_score_adj",
                    "re"); /* (echo: the shell's builtin, for its own score) */
    CHECK(p != NULL);
    int v = 1;
    CHECK_EQ(fscanf(p, "%d", &v), 1);
    CHECK_EQ(pclose(p), 0);
    return v;
}

/* Init and every command run at 0, whatever the shim had (docs/SECURITY.md, "OOM choice"). */
TEST(shim_command_oom_score) {
    FILE *f = fopen("/proc/self/oom_score_adj", "we"); /* (raising needs no privilege) */
    CHECK(f != NULL);
    CHECK(fputs("500", f) >= 0);
    CHECK_EQ(fclose(f), 0); /* the shim starts at 500: init must bring it down */
    /* (the premise: nothing here keeps a process from lowering 500 to 0, as init must) */
    CHECK_EQ(oom_score_after_reset(), 0);
    shimdrv *d = start();
    for (int round = 0; round < 2; round++) { /* the second on a reused reaper stack */
        shimdrv_result res;
        const char *argv[] = {
            "sh", "-c", "cat /proc/1/oom_score_adj /proc/$$/oom_score_adj /proc/self/oom_score_adj",
            NULL};
        CHECK_OK(shimdrv_exec(d, argv, NULL, &res));
        CHECK_EQ(res.exit_code, 0);
        CHECK_STREQ(res.out, "0\n0\n0\n"); /* init, the command, its child */
        shimdrv_result_free(&res);
    }
}

TEST(shim_timeout_kills_whole_tree) {
    shimdrv *d = start();
    const char *argv[] = {"sh", "-c",
                          "setsid sh -c 'sleep 1000' & "
                          "sh -c 'sleep 1001 & sleep 1002' & "
                          "sleep 1003",
                          NULL};
    shimdrv_exec_opts o = {.timeout_ms = 500};
    shimdrv_result res;
    uint64_t t0 = now_mono_ms();
    CHECK_OK(shimdrv_exec(d, argv, &o, &res));
    CHECK_STREQ(res.reason, "command_timeout");
    CHECK_EQ(res.signal, SIGKILL);
    CHECK_MSG(now_mono_ms() - t0 < 5000, "took %llu ms", (unsigned long long)(now_mono_ms() - t0));
    shimdrv_result_free(&res);
    int code;
    char *out = shimdrv_sh_out(d, "cat /proc/[0-9]*/comm | grep -c sleep", &code);
    CHECK_MSG(strcmp(out, "0\n") == 0, "sleep processes left: %s", out);
    free(out);
}

/* The command's parent is its reaper: stopping it must not defeat the timeout (gVisor: the
 * reaper is resumed before its command's cgroup is signalled, shim/gvinit/cmd_cgroup.c). */
static void timeout_survives_a_stopped_reaper(const char *runsc) {
    shimdrv *d = start_class(runsc);
    const char *argv[] = {"sh", "-c", "kill -STOP $PPID; sleep 1000", NULL};
    shimdrv_exec_opts o = {.timeout_ms = 300};
    shimdrv_result res;
    CHECK_OK(shimdrv_exec(d, argv, &o, &res));
    CHECK_STREQ(res.reason, "command_timeout");
    shimdrv_result_free(&res);
    int code;
    char *out = shimdrv_sh_out(d, "cat /proc/[0-9]*/comm | grep -c sleep", &code);
    CHECK_MSG(strcmp(out, "0\n") == 0, "sleep processes left: %s", out);
    free(out);
}

TEST(shim_timeout_survives_a_stopped_reaper) {
    timeout_survives_a_stopped_reaper(NULL);
}

TEST_T(gvisor_shim_timeout_survives_a_stopped_reaper, 90) {
    timeout_survives_a_stopped_reaper(shimdrv_runsc());
}

TEST(shim_background_process_survives_its_command) {
    shimdrv *d = start();
    shimdrv_result res;
    /* a daemonized child outlives its command but stays in the sandbox */
    CHECK_EQ(shimdrv_sh(d,
                        "setsid sleep 1000 </dev/null >/dev/null 2>&1 & "
                        "until cat /proc/[0-9]*/comm 2>/dev/null | grep -qx sleep; do :; done",
                        &res),
             0);
    shimdrv_result_free(&res);
    int code;
    char *out = shimdrv_sh_out(d, "cat /proc/[0-9]*/comm | grep -c sleep", &code);
    CHECK_STREQ(out, "1\n");
    free(out);
}

/* The sandbox's sleeps, "sleep ARG" a line, sorted. */
static char *sleeps(shimdrv *d) {
    int code;
    return shimdrv_sh_out(d,
                          "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; "
                          "done | grep '^sleep' | sort",
                          &code);
}

/* What a running command double-forked (its orphans, which gVisor's kernel, without a
 * subreaper, gives to init at once) is part of the tree that its kill or timeout signals; what
 * left its session on purpose and what another command left behind are not. */
static void kill_takes_orphans(const char *runsc) {
    shimdrv *d = start_class(runsc);
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "(sleep 1000 </dev/null >/dev/null 2>&1 &)", &res), 0); /* kept */
    shimdrv_result_free(&res);
    const char *argv[] = {"sh", "-c",
                          "(sleep 1001 </dev/null >/dev/null 2>&1 &); "
                          "(sleep 1002 </dev/null >/dev/null 2>&1 &); exec sleep 1003",
                          NULL};
    for (int sig = SIGTERM; sig; sig = sig == SIGTERM ? SIGKILL : 0) {
        shimdrv_pending pe;
        CHECK_OK(shimdrv_exec_start(d, argv, NULL, &pe));
        char *out = NULL;
        for (int i = 0; i < 200; i++) { /* until its orphans and the command itself run */
            free(out);
            out = sleeps(d);
            if (strcmp(out, "sleep 1000 \nsleep 1001 \nsleep 1002 \nsleep 1003 \n") == 0)
                break;
            usleep(50 * 1000);
        }
        free(out);
        json_t *reply = NULL;
        CHECK_OK(shimdrv_request(
            d, json_pack("{s:s, s:O, s:i}", "type", "kill", "xid", pe.xid, "signal", sig), &reply));
        json_decref(reply);
        CHECK_OK(shimdrv_exec_finish(d, &pe, &res));
        CHECK_EQ(res.signal, sig);
        shimdrv_result_free(&res);
        for (int i = 0; i < 100; i++) { /* (a SIGTERM's end is not at once) */
            out = sleeps(d);
            if (strcmp(out, "sleep 1000 \n") == 0)
                break;
            free(out);
            out = NULL;
            usleep(50 * 1000);
        }
        if (!out)
            out = sleeps(d);
        CHECK_MSG(strcmp(out, "sleep 1000 \n") == 0, "signal %d: sleeps left: %s", sig, out);
        free(out);
    }
}

TEST(shim_kill_takes_orphans) {
    kill_takes_orphans(NULL);
}

TEST_T(gvisor_shim_kill_takes_orphans, 90) {
    kill_takes_orphans(shimdrv_runsc());
}

/* Without a subreaper a running command's orphans are init's children from the start, beside
 * what ended commands left: they stay their command's while it runs. Another command that kills
 * its own reaper does not take them, another's ordinary end does not keep them, and their own
 * command's end by its reaper's kill takes them with the rest of its tree. */
static void orphans_of_a_running_command(const char *runsc) {
    shimdrv *d = start_class(runsc);
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "mkfifo /tmp/go", &res), 0);
    shimdrv_result_free(&res);
    const char *argv[] = {"sh", "-c",
                          "(sleep 1000 </dev/null >/dev/null 2>&1 &); echo up; read x </tmp/go; "
                          "sleep 1; kill -9 $PPID; sleep 5; echo still-here",
                          NULL};
    shimdrv_pending pe;
    CHECK_OK(shimdrv_exec_start(d, argv, NULL, &pe));
    char up[4] = "";
    for (size_t got = 0; got < 3;) { /* (sleep 1000 is init's or about to be) */
        struct pollfd pf = {.fd = pe.out, .events = POLLIN};
        ssize_t k = poll(&pf, 1, 10000) == 1 ? read(pe.out, up + got, 3 - got) : 0;
        CHECK_MSG(k > 0, "no 'up' from the command: %s", up);
        got += (size_t)k;
    }
    const char *killer[] = {"sh", "-c", "sleep 0.2; kill -9 $PPID; sleep 5", NULL};
    CHECK_OK(shimdrv_exec(d, killer, NULL, &res));
    CHECK_EQ(res.signal, SIGKILL);
    shimdrv_result_free(&res);
    char *out = NULL;
    for (int i = 0; i < 40; i++) { /* (until it runs sleep: it may not have yet) */
        free(out);
        out = sleeps(d);
        if (strcmp(out, "sleep 1000 \n") == 0)
            break;
        usleep(50 * 1000);
    }
    CHECK_MSG(strcmp(out, "sleep 1000 \n") == 0, "after another's reaper was killed: %s", out);
    free(out);
    /* an ordinary end, then (not in the same instant: proctree.h) it kills its reaper */
    CHECK_EQ(shimdrv_sh(d, "echo go >/tmp/go", &res), 0);
    shimdrv_result_free(&res);
    CHECK_OK(shimdrv_exec_finish(d, &pe, &res));
    CHECK_EQ(res.signal, SIGKILL);
    CHECK_STREQ(res.message, "the command's reaper was killed");
    CHECK_MSG(!strstr(res.out, "still-here"), "out: %s", res.out);
    shimdrv_result_free(&res);
    out = sleeps(d);
    CHECK_MSG(strcmp(out, "") == 0, "after its own reaper was killed: %s", out);
    free(out);
}

TEST(shim_orphans_of_a_running_command) {
    orphans_of_a_running_command(NULL);
}

TEST_T(gvisor_shim_orphans_of_a_running_command, 90) {
    orphans_of_a_running_command(shimdrv_runsc());
}

/* A command that kills its own reaper (same user) ends with it: its tree, reparented to init,
 * is killed (what it had daemonized too), before the exit is reported; what an earlier command
 * deliberately left behind stays, and so does what that one double-forks later (it comes to
 * init in its session). */
static void killed_reaper_takes_its_command_down(const char *runsc) {
    shimdrv *d = start_class(runsc);
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d,
                        "setsid sh -c 'sleep 0.2; (sleep 1002 &); exec sleep 1000' "
                        "</dev/null >/dev/null 2>&1 & "
                        "until cat /proc/[0-9]*/comm 2>/dev/null | grep -qx sleep; do :; done",
                        &res),
             0);
    shimdrv_result_free(&res);
    usleep(400 * 1000); /* sleep 1002 is init's now */
    const char *argv[] = {"sh", "-c",
                          "(setsid sleep 1001 </dev/null >/dev/null 2>&1 &); sleep 0.3; "
                          "kill -9 $PPID; sleep 5; echo still-here",
                          NULL};
    shimdrv_exec_opts o = {.timeout_ms = 2000};
    CHECK_OK(shimdrv_exec(d, argv, &o, &res));
    CHECK_STREQ(res.reason, "signaled");
    CHECK_EQ(res.signal, SIGKILL);
    CHECK_STREQ(res.message, "the command's reaper was killed");
    CHECK_MSG(!strstr(res.out, "still-here"), "out: %s", res.out);
    shimdrv_result_free(&res);
    char *out = sleeps(d);
    CHECK_MSG(strcmp(out, "sleep 1000 \nsleep 1002 \n") == 0, "sleeps left: %s", out);
    free(out);
    /* at once: the kill races the reaper's start report */
    const char *argv2[] = {"sh", "-c", "kill -9 $PPID; sleep 5", NULL};
    int r = shimdrv_exec(d, argv2, &o, &res);
    CHECK_MSG(r != 0 || res.signal == SIGKILL, "r=%d reason=%s", r, res.reason);
    shimdrv_result_free(&res);
    out = sleeps(d);
    CHECK_MSG(strcmp(out, "sleep 1000 \nsleep 1002 \n") == 0, "sleeps left: %s", out);
    free(out);
}

TEST(shim_killed_reaper_takes_its_command_down) {
    killed_reaper_takes_its_command_down(NULL);
}

/* (without a subreaper: what the earlier commands left came to init while they ran) */
TEST_T(gvisor_shim_killed_reaper_takes_its_command_down, 90) {
    killed_reaper_takes_its_command_down(shimdrv_runsc());
}

/* Whether a child of the host's process ppid has a command line holding needle (its arguments
 * joined by NULs, as needle may be). */
static bool has_child(int ppid, const char *needle, size_t len) {
    DIR *dir = opendir("/proc");
    bool found = false;
    for (struct dirent *e; dir && !found && (e = readdir(dir));) {
        char path[300], buf[4096];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        if (!p || atoi(p + 4) != ppid) /* ") S PPID" */
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        f = fopen(path, "r");
        n = f ? fread(buf, 1, sizeof(buf), f) : 0;
        if (f)
            fclose(f);
        found = memmem(buf, n, needle, len) != NULL;
    }
    if (dir)
        closedir(dir);
    return found;
}

/* A command's ordinary end and another's reaper's death reaped together (init stopped while
 * both happen): the first one's leftovers are kept, and the second one's tree, init's too by
 * then, is killed all the same (it was kept with them: 'sleep 1004' and 'sleep 5' stayed). */
TEST(shim_killed_reaper_beside_an_ordinary_end) {
    shimdrv *d = start();
    const char *argv_a[] = {"sh", "-c",
                            "(sleep 1003 </dev/null >/dev/null 2>&1 &); "
                            "until grep -q '^State:.T' /proc/1/status; do sleep 0.01; done",
                            NULL};
    const char *argv_b[] = {"sh", "-c",
                            "sleep 1004 & until grep -q '^State:.T' /proc/1/status; do sleep "
                            "0.01; done; kill -9 $PPID; sleep 5; echo still-here",
                            NULL};
    shimdrv_exec_opts o = {.timeout_ms = 10000};
    shimdrv_pending pa, pb;
    CHECK_OK(shimdrv_exec_start(d, argv_a, &o, &pa));
    CHECK_OK(shimdrv_exec_start(d, argv_b, &o, &pb));
    CHECK(kill(d->init_pid, SIGSTOP) == 0);
    bool both = false; /* a's leftover and b's command are init's children, unreaped */
    for (int i = 0; i < 500 && !both; i++) {
        usleep(10 * 1000);
        both = has_child(d->init_pid,
                         "sleep\0"
                         "1003",
                         11) &&
               has_child(d->init_pid, "kill -9 $PPID", 13);
    }
    kill(d->init_pid, SIGCONT);
    CHECK_MSG(both, "the two ends did not come while init was stopped");
    shimdrv_result res;
    CHECK_OK(shimdrv_exec_finish(d, &pa, &res));
    CHECK_STREQ(res.reason, "exited");
    shimdrv_result_free(&res);
    CHECK_OK(shimdrv_exec_finish(d, &pb, &res));
    CHECK_STREQ(res.message, "the command's reaper was killed");
    CHECK_MSG(!strstr(res.out, "still-here"), "out: %s", res.out);
    shimdrv_result_free(&res);
    char *out = sleeps(d);
    CHECK_MSG(strcmp(out, "sleep 1003 \n") == 0, "sleeps left: %s", out);
    free(out);
}

/* command_timeout only for a command the timeout's kill ended: one that exited as it fired
 * keeps its own end. */
TEST(shim_timeout_reason_is_the_kill) {
    shimdrv *d = start();
    const char *argv[] = {"sh", "-c", "exit 3", NULL}; /* it ends in about a millisecond */
    int timeouts = 0, exits = 0;
    for (int i = 0; i < 400; i++) {
        shimdrv_exec_opts o = {.timeout_ms = 1 + (uint64_t)i % 4};
        shimdrv_result res;
        CHECK_OK(shimdrv_exec(d, argv, &o, &res));
        if (strcmp(res.reason, "command_timeout") == 0) {
            CHECK_MSG(res.signal == SIGKILL, "command_timeout with exit %d signal %d",
                      res.exit_code, res.signal);
            timeouts++;
        } else {
            CHECK_STREQ(res.reason, "exited");
            CHECK_EQ(res.exit_code, 3);
            exits++;
        }
        shimdrv_result_free(&res);
    }
    fprintf(stderr, "%d timeouts, %d exits\n", timeouts, exits);
}

/* Init's channel to the shim (fd 3) is close-on-exec: no command inherits it. */
TEST(shim_init_channel_is_cloexec) {
    shimdrv *d = start();
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/fdinfo/3", d->init_pid);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "%s: %s", path, strerror(errno));
    unsigned long flags = 0;
    while (fgets(buf, sizeof(buf), f))
        sscanf(buf, "flags: %lo", &flags);
    fclose(f);
    CHECK_MSG(flags & O_CLOEXEC, "init's fd 3 flags %lo", flags);
    int code;
    char *out = shimdrv_sh_out(d, "ls /proc/self/fd | sort -n | tr '\\n' ' '", &code);
    CHECK_MSG(strcmp(out, "0 1 2 3 ") == 0, "a command's descriptors: %s", out); /* 3: ls's dir */
    free(out);
}

TEST(shim_kill_message) {
    shimdrv *d = start();
    const char *argv[] = {"sleep", "1000", NULL};
    shimdrv_pending pe;
    CHECK_OK(shimdrv_exec_start(d, argv, NULL, &pe));
    CHECK(pe.pid > 1);
    json_t *reply = NULL;
    CHECK_OK(shimdrv_request(
        d, json_pack("{s:s, s:O, s:i}", "type", "kill", "xid", pe.xid, "signal", SIGTERM), &reply));
    CHECK_STREQ(shimproto_type(reply), "ok");
    json_decref(reply);
    shimdrv_result res;
    CHECK_OK(shimdrv_exec_finish(d, &pe, &res));
    CHECK_STREQ(res.reason, "signaled");
    CHECK_EQ(res.signal, SIGTERM);
    shimdrv_result_free(&res);
}

TEST(shim_concurrent_commands) {
    shimdrv *d = start();
    enum { N = 8 };
    shimdrv_pending pe[N];
    uint64_t t0 = now_mono_ms();
    for (int i = 0; i < N; i++) {
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "sleep 1; echo %d", i);
        const char *argv[] = {"sh", "-c", cmd, NULL};
        CHECK_OK(shimdrv_exec_start(d, argv, NULL, &pe[i]));
    }
    json_t *hello = NULL;
    CHECK_OK(shimdrv_request(d, json_pack("{s:s}", "type", "hello"), &hello));
    CHECK_EQ(json_array_size(json_object_get(hello, "running")), N);
    json_decref(hello);
    for (int i = N - 1; i >= 0; i--) {
        shimdrv_result res;
        CHECK_OK(shimdrv_exec_finish(d, &pe[i], &res));
        CHECK_EQ(atoi(res.out), i);
        CHECK_EQ(res.exit_code, 0);
        shimdrv_result_free(&res);
    }
    uint64_t took = now_mono_ms() - t0;
    CHECK_MSG(took < 1000 * N / 2, "%d one-second commands took %llu ms", N,
              (unsigned long long)took);
}

/* Each command's reaper reports its own command's end, not one before it (a plain command's
 * reaper shares init's memory: shim/exec.c, spawn_shared), in turn and at once; the orphans it
 * adopts are reaped as they end, not kept as zombies until the command ends. */
TEST(shim_each_reaper_reports_its_own_command) {
    shimdrv *d = start();
    shimdrv_result res;
    for (int i = 0; i < 6; i++) {
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "sleep 0.%d; echo %d; exit %d", 1 + i % 2, i, 10 + i);
        const char *argv[] = {"sh", "-c", cmd, NULL};
        uint64_t t0 = now_mono_ms();
        CHECK_OK(shimdrv_exec(d, argv, NULL, &res));
        CHECK_EQ(res.exit_code, 10 + i);
        CHECK_EQ(atoi(res.out), i);
        CHECK_MSG(now_mono_ms() - t0 >= 100, "exec %d ended after %llu ms", i,
                  (unsigned long long)(now_mono_ms() - t0));
        shimdrv_result_free(&res);
    }
    shimdrv_pending pe[3];
    for (int i = 0; i < 3; i++) {
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "sleep 0.%d; exit %d", 3 - i, 20 + i);
        const char *argv[] = {"sh", "-c", cmd, NULL};
        CHECK_OK(shimdrv_exec_start(d, argv, NULL, &pe[i]));
    }
    for (int i = 0; i < 3; i++) {
        CHECK_OK(shimdrv_exec_finish(d, &pe[i], &res));
        CHECK_EQ(res.exit_code, 20 + i);
        shimdrv_result_free(&res);
    }
    /* 300 orphans (each sleep's shell exits at once) end while their command runs on: the
     * sandbox's 256 processes are not used up by zombies */
    CHECK_EQ(
        shimdrv_sh(d,
                   "i=0; while [ $i -lt 300 ]; do (sleep 0.01 &); i=$((i+1)); done; sleep 0.3; "
                   "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l",
                   &res),
        0);
    CHECK_STREQ(res.out, "0\n");
    shimdrv_result_free(&res);
}

/* A sandbox whose user keeps stopping its own new processes does not hold init: a command
 * whose start (up to its exec; here a PATH of 50000 empty entries, each an execve of ./true)
 * cannot finish is continued, then killed after 5 s (shim/exec.c, wait_release), and the
 * timeout of the command that stops it is carried out right after. */
TEST(shim_stopped_start_does_not_hold_init) {
    shimdrv *d = start();
    const char *stopper[] = {"sh", "-c",
                             "while :; do for p in /proc/[0-9]*; do p=${p#/proc/}; "
                             "[ \"$p\" -gt $$ ] && kill -s STOP \"$p\" 2>/dev/null; done; done",
                             NULL};
    static char path[5 + 50000 + 16] = "PATH=";
    memset(path + 5, ':', 50000);
    strcpy(path + 5 + 50000, "/usr/bin");
    const char *env[] = {path, NULL}, *t[] = {"true", NULL};
    shimdrv_exec_opts oa = {.timeout_ms = 1500}, ob = {.env = env};
    shimdrv_pending a, b;
    CHECK_OK(shimdrv_exec_start(d, stopper, &oa, &a));
    usleep(300 * 1000);
    uint64_t t0 = now_mono_ms();
    int rs = shimdrv_exec_start(d, t, &ob, &b); /* answered once init has given up on it */
    uint64_t held = now_mono_ms() - t0;
    shimdrv_result ra, rb;
    CHECK_MSG(rs == -EIO && strstr(b.start_error, "died before it started"), "start: %d %s", rs,
              b.start_error);
    shimdrv_exec_finish(d, &b, &rb);
    shimdrv_result_free(&rb);
    CHECK_MSG(held >= 4000 && held < 9000, "the stopped start was answered after %llu ms",
              (unsigned long long)held);
    CHECK_OK(shimdrv_exec_finish(d, &a, &ra));
    CHECK_STREQ(ra.reason, "command_timeout");
    shimdrv_result_free(&ra);
    uint64_t took = now_mono_ms() - t0;
    CHECK_MSG(took < held + 3000, "the stopper's timeout came %llu ms after the start's answer",
              (unsigned long long)(took - held));
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "echo ok", &res), 0);
    CHECK_STREQ(res.out, "ok\n");
    shimdrv_result_free(&res);
}

static void expect_error(shimdrv *d, const char *raw, size_t len, const int *fds, size_t nf,
                         int want_errno) {
    CHECK(send(d->sock, raw, len, 0) == (ssize_t)len || fds);
    (void)fds;
    (void)nf;
    json_t *m = NULL;
    CHECK_OK(shimdrv_wait_event(d, "error", 5000, &m));
    CHECK_MSG(json_integer_value(json_object_get(m, "errno")) == want_errno, "%s: errno %lld", raw,
              (long long)json_integer_value(json_object_get(m, "errno")));
    json_decref(m);
}

TEST(shim_bad_protocol_input) {
    shimdrv *d = start();
    static const struct {
        const char *raw;
        int err;
    } cases[] = {
        {"not json", EPROTO},
        {"[1,2]", EPROTO},
        {"{\"type\":\"hello\"}", EPROTO},
        {"{\"v\":2,\"type\":\"hello\"}", EPROTO},
        {"{\"v\":1,\"type\":\"frobnicate\",\"seq\":1}", EOPNOTSUPP},
        {"{\"v\":1,\"type\":7}", EPROTO},
        {"{\"v\":1,\"type\":\"exec\",\"seq\":2,\"xid\":\"a\",\"argv\":[\"true\"]}", EBADF},
        {"{\"v\":1,\"type\":\"exec\",\"seq\":3}", EINVAL},
        {"{\"v\":1,\"type\":\"exec\",\"seq\":3,\"xid\":{}}", EINVAL},
        {"{\"v\":1,\"type\":\"kill\",\"seq\":4,\"xid\":\"nope\",\"signal\":9}", ESRCH},
        {"{\"v\":1,\"type\":\"kill\",\"seq\":4,\"xid\":\"nope\",\"signal\":999}", EINVAL},
        {"{\"v\":1,\"type\":\"kill\",\"seq\":4}", EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(d, cases[i].raw, strlen(cases[i].raw), NULL, 0, cases[i].err);
    /* exec with fds but a bad argv, env or cwd */
    static const char *const bad_exec[] = {
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[]}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[1]}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"a\\u0000b\"]}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"env\":[\"NOEQ\"]"
        "}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"cwd\":\"rel\"}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"timeout_ms\":-1}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"file\":\"x\"}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"file\":"
        "{\"name\":\"\",\"data\":\"\"}}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"file\":"
        "{\"name\":\"a\",\"data\":1}}",
        "{\"v\":1,\"type\":\"exec\",\"seq\":5,\"xid\":\"b\",\"argv\":[\"true\"],\"file\":"
        "{\"name\":\"a\",\"data\":\"\",\"mode\":420}}",
    };
    for (size_t i = 0; i < sizeof(bad_exec) / sizeof(bad_exec[0]); i++) {
        int fds[3] = {0, 1, 2};
        json_t *msg = json_loads(bad_exec[i], JSON_ALLOW_NUL, NULL);
        CHECK(msg);
        json_object_del(msg, "v");
        CHECK_OK(shimproto_send(d->sock, msg, fds, 3));
        json_decref(msg);
        json_t *m = NULL;
        CHECK_OK(shimdrv_wait_event(d, "error", 5000, &m));
        /* a NUL inside a JSON string is already refused by the decoder */
        CHECK_EQ(json_integer_value(json_object_get(m, "errno")), i == 2 ? EPROTO : EINVAL);
        json_decref(m);
    }
    /* an oversized packet */
    size_t big = SHIMPROTO_MSG_MAX + 100;
    char *buf = malloc(big);
    memset(buf, ' ', big);
    buf[0] = '{';
    buf[big - 1] = '}';
    expect_error(d, buf, big, NULL, 0, EPROTO);
    free(buf);
    /* a connection that goes away mid-way changes nothing */
    int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    close(c);
    /* and the shim still serves */
    shimdrv_result res;
    CHECK_EQ(shimdrv_sh(d, "echo alive", &res), 0);
    CHECK_STREQ(res.out, "alive\n");
    shimdrv_result_free(&res);
}

/* exec's "file": written by the command's own process in its cwd before its exec, as its user,
 * byte for byte (created, or truncated when it is there); a failure is an error reply naming it
 * and nothing runs. */
TEST(shim_exec_file) {
    shimdrv *d = start();
    shimdrv_result res;
    static const char data[] = "s = '%s %d \\n $HOME `id` $(id) \\'\" \xc3\xa9 \xf0\x9f\x98\x80'\n"
                               "no final newline";
    const char *argv[] = {"sh", "-c",
                          "cat main.py; echo; stat -c '%u %a' main.py; pwd; "
                          "printf '%o\\n' $((0666 & ~$(umask))); id -u",
                          NULL};
    shimdrv_exec_opts o = {.cwd = "/tmp", .file_name = "main.py", .file_data = data};
    CHECK_OK(shimdrv_exec(d, argv, &o, &res));
    char want[512];
    snprintf(want, sizeof(want), "%s\n", data);
    CHECK_MSG(strncmp(res.out, want, strlen(want)) == 0, "%s", res.out);
    unsigned uid, mode, want_mode, id;
    char cwd[64];
    CHECK_EQ(sscanf(res.out + strlen(want), "%u %o %63s %o %u", &uid, &mode, cwd, &want_mode, &id),
             5);
    CHECK_EQ(uid, id); /* the command's user, the sandbox's */
    CHECK_EQ(id, 1000);
    CHECK_EQ(mode, want_mode);
    CHECK_STREQ(cwd, "/tmp");
    shimdrv_result_free(&res);
    /* a file that is there is truncated; argv's program is started with it (here wc) */
    CHECK_EQ(shimdrv_sh(d, "head -c 5000 /dev/zero >/tmp/t.py", &res), 0);
    shimdrv_result_free(&res);
    static char big[40000];
    memset(big, 'x', sizeof(big) - 1);
    const char *wc[] = {"wc", "-c", "t.py", NULL};
    shimdrv_exec_opts o2 = {.cwd = "/tmp", .file_name = "t.py", .file_data = "short"};
    CHECK_OK(shimdrv_exec(d, wc, &o2, &res));
    CHECK_STREQ(res.out, "5 t.py\n");
    shimdrv_result_free(&res);
    o2.file_data = big;
    CHECK_OK(shimdrv_exec(d, wc, &o2, &res));
    CHECK_STREQ(res.out, "39999 t.py\n");
    shimdrv_result_free(&res);
    /* where it cannot be written: an error reply naming it, and the program does not run */
    const char *mark[] = {"touch", "/tmp/ran", NULL};
    shimdrv_exec_opts o3 = {.cwd = "/tmp", .file_name = "nodir/x.py", .file_data = "x"};
    CHECK_EQ(shimdrv_exec(d, mark, &o3, &res), -ENOENT);
    CHECK_MSG(strstr(res.start_error, "write nodir/x.py"), "%s", res.start_error);
    shimdrv_result_free(&res);
    o3.file_name = "/tmp";
    CHECK_EQ(shimdrv_exec(d, mark, &o3, &res), -EISDIR);
    CHECK_MSG(strstr(res.start_error, "write /tmp: Is a directory"), "%s", res.start_error);
    shimdrv_result_free(&res);
    /* a FIFO there fails the start instead of holding it (and init) until a reader comes */
    CHECK_EQ(shimdrv_sh(d, "mkfifo /tmp/fifo.py", &res), 0);
    shimdrv_result_free(&res);
    o3.file_name = "fifo.py";
    CHECK_EQ(shimdrv_exec(d, mark, &o3, &res), -ENXIO);
    CHECK_MSG(strstr(res.start_error, "write fifo.py"), "%s", res.start_error);
    shimdrv_result_free(&res);
    CHECK_EQ(shimdrv_sh(d, "test -e /tmp/ran", &res), 1);
    shimdrv_result_free(&res);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Round trip of `true` through the shim next to a plain posix_spawn + waitpid of it. Prints
 * the numbers; asserts only that every command ran. */
TEST(shim_exec_round_trip) {
    shimdrv *d = start();
    enum { N = 200 };
    static uint64_t shim_us[N], local_us[N];
    const char *argv[] = {"true", NULL};
    for (int i = 0; i < N; i++) {
        shimdrv_result res;
        uint64_t a = now_mono_us();
        CHECK_OK(shimdrv_exec(d, argv, NULL, &res));
        shim_us[i] = now_mono_us() - a;
        CHECK_EQ(res.exit_code, 0);
        CHECK_STREQ(res.reason, "exited");
        shimdrv_result_free(&res);
    }
    extern char **environ;
    for (int i = 0; i < N; i++) {
        pid_t pid;
        int st;
        char *av[] = {"/usr/bin/true", NULL};
        uint64_t a = now_mono_us();
        CHECK_EQ(posix_spawn(&pid, av[0], NULL, NULL, av, environ), 0);
        CHECK_EQ(waitpid(pid, &st, 0), pid);
        local_us[i] = now_mono_us() - a;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    qsort(shim_us, N, sizeof(shim_us[0]), cmp_u64);
    qsort(local_us, N, sizeof(local_us[0]), cmp_u64);
    fprintf(stderr,
            "exec `true` round trip over %d runs: shim p50 %.2f ms p99 %.2f ms; "
            "local fork+exec+wait p50 %.2f ms p99 %.2f ms\n",
            N, shim_us[N / 2] / 1000.0, shim_us[N * 99 / 100] / 1000.0, local_us[N / 2] / 1000.0,
            local_us[N * 99 / 100] / 1000.0);
}
