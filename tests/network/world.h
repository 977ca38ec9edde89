/* Shared by the network suite's programs (header-only, static): the private world (own
 * netns + mount ns, test /etc/hosts, an "internet" netns with fake metadata servers), child
 * processes with PR_SET_PDEATHSIG, TCP probes and shell helpers. See tests/network/test_net.c. */
#pragma once
#pragma GCC diagnostic ignored "-Wunused-function"

#include "sandboxd/net/net.h"
#include "tests/lib/test.h"

#include "common/fdutil.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHILDREN 512
static pid_t children[MAX_CHILDREN];
static size_t n_children;
static pid_t inet_pid;
static sd_net *net;

static void kill_child(pid_t pid) {
    for (size_t i = 0; i < n_children; i++)
        if (children[i] == pid) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            children[i] = children[--n_children];
            return;
        }
}

static void cleanup(void) {
    while (n_children)
        kill_child(children[n_children - 1]);
    sd_net_free(net);
}

/* fork + exec argv with the parent-death signal set; new_netns: in a fresh network namespace;
 * out: the read end of a pipe on the child's stdout. */
static pid_t spawn(char *const argv[], bool new_netns, int *out) {
    int p[2] = {-1, -1};
    if (out)
        CHECK(pipe2(p, O_CLOEXEC) == 0);
    CHECK(n_children < MAX_CHILDREN);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (new_netns && unshare(CLONE_NEWNET) < 0)
            _exit(126);
        if (out)
            dup2(p[1], 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    children[n_children++] = pid;
    if (out) {
        close(p[1]);
        *out = p[0];
    }
    return pid;
}

/* Wait until pid's netns is no longer ours (its unshare ran). */
static void wait_netns(pid_t pid) {
    struct stat self, other;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
    CHECK(stat("/proc/self/ns/net", &self) == 0);
    for (int i = 0; i < 2000; i++) {
        if (stat(path, &other) == 0 && other.st_ino != self.st_ino)
            return;
        usleep(1000);
    }
    CHECK_MSG(false, "pid %d never got its own netns", (int)pid);
}

static pid_t sandbox_proc(void) {
    char *argv[] = {"sleep", "3600", NULL};
    pid_t pid = spawn(argv, true, NULL);
    wait_netns(pid);
    char cmd[64]; /* like sbx-shim: lo up (the guard's resets travel over it) */
    snprintf(cmd, sizeof(cmd), "nsenter -t %d -n ip link set lo up", (int)pid);
    CHECK(system(cmd) == 0);
    return pid;
}

static const char *netpeer(void) {
    static char path[512];
    const char *src = getenv("SBX_SRC_DIR");
    snprintf(path, sizeof(path), "%s/tests/network/netpeer.py", src ? src : ".");
    return path;
}

/* Start `netpeer.py serve PORTS` (in pid's netns, or ours when pid is 0); wait for "ready". */
static void serve(pid_t in, const char *ports) {
    char pidbuf[16], portbuf[64];
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int)in);
    snprintf(portbuf, sizeof(portbuf), "%s", ports);
    char *argv_ns[] = {"nsenter",         "-t",    pidbuf,  "-n", "/usr/bin/python3",
                       (char *)netpeer(), "serve", portbuf, NULL};
    int out = -1;
    spawn(in ? argv_ns : argv_ns + 4, false, &out);
    char buf[16] = {0};
    CHECK_MSG(read(out, buf, sizeof(buf) - 1) > 0 && strncmp(buf, "ready", 5) == 0,
              "peer server on %s did not start", ports);
    /* `out` stays open (CLOEXEC) until the case ends: the server never sees a broken pipe */
}

typedef struct probe_result {
    char kind[16];
    int ms;
    char rest[160];
} probe_result;

/* Connect from pid's netns (0: ours) to host:port; one line from netpeer.py probe. */
static probe_result probe(pid_t in, const char *host, int port) {
    char cmd[768], line[256] = {0};
    snprintf(cmd, sizeof(cmd), "%s%.0d%s /usr/bin/python3 %s probe %s %d 2",
             in ? "nsenter -t " : "", (int)in, in ? " -n" : "", netpeer(), host, port);
    FILE *f = popen(cmd, "r");
    CHECK(f);
    CHECK_MSG(fgets(line, sizeof(line), f), "no output from: %s", cmd);
    pclose(f);
    probe_result r = {0};
    CHECK(sscanf(line, "%15s %d %159[^\n]", r.kind, &r.ms, r.rest) >= 2);
    return r;
}

static void expect_ok(pid_t in, const char *host, int port) {
    probe_result r = probe(in, host, port);
    CHECK_MSG(strcmp(r.kind, "ok") == 0, "%s:%d from %d: %s %d %s (wanted ok)", host, port, (int)in,
              r.kind, r.ms, r.rest);
    CHECK_MSG(strstr(r.rest, "hello"), "%s:%d: odd reply %s", host, port, r.rest);
}

/* Denied: refused at once (tcp reset), never a timeout. */
static void expect_denied(pid_t in, const char *host, int port) {
    probe_result r = probe(in, host, port);
    CHECK_MSG(strcmp(r.kind, "refused") == 0 || strcmp(r.kind, "error") == 0,
              "%s:%d from %d: %s %d %s (wanted a fast refusal)", host, port, (int)in, r.kind, r.ms,
              r.rest);
    CHECK_MSG(r.ms < 1000, "%s:%d: denial took %d ms", host, port, r.ms); /* (a timeout: 2 s) */
}

/* Enter a private world: own netns + mount ns, a test /etc/hosts, the internet netns; then
 * sd_net_init(cfg) unless no_net (the daemon owns the table then). */
static void world_up_opt(const sd_net_config *cfg, bool no_net) {
    test_require_root();
    atexit(cleanup);
    CHECK_MSG(unshare(CLONE_NEWNET | CLONE_NEWNS) == 0, "unshare: %s", strerror(errno));
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    char hosts[512];
    snprintf(hosts, sizeof(hosts), "%s/hosts", test_tmpdir());
    const char *h = "127.0.0.1 localhost\n203.0.113.20 named.test\n169.254.169.254 meta.test\n";
    CHECK_OK(file_write_atomic(hosts, h, strlen(h), 0644));
    CHECK(mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL) == 0);
    char *argv[] = {"sleep", "3600", NULL};
    inet_pid = spawn(argv, true, NULL);
    wait_netns(inet_pid);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "bash %s/tests/network/world.sh %d",
             getenv("SBX_SRC_DIR") ? getenv("SBX_SRC_DIR") : ".", (int)inet_pid);
    CHECK_MSG(system(cmd) == 0, "world.sh failed");
    serve(inet_pid, "80");
    serve(inet_pid, "8080");
    serve(0, "7777"); /* stands for the daemon's TCP port on the host */
    error_rec err = {0};
    if (!no_net)
        CHECK_MSG(sd_net_init(&net, cfg, &err) == 0, "sd_net_init: %s", err.message);
}

static void world_up(const sd_net_config *cfg) {
    world_up_opt(cfg, false);
}

static char *shell(const char *cmd) {
    FILE *f = popen(cmd, "r");
    CHECK(f);
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = 0;
    pclose(f);
    return buf;
}

static const char *jstr(json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

/* Nothing of ours is left: no sandbox veth, no sandbox chain, an empty dispatch map. */
static void expect_clean(void) {
    char *links = shell("ip -o link show type veth | grep -c ' sbx' || true");
    CHECK_MSG(atoi(links) == 0, "%s sandbox veths left", links);
    free(links);
    char *t = shell("nft list table inet sandboxd");
    CHECK_MSG(!strstr(t, "chain sbx") && !strstr(t, "counter sbx") && !strstr(t, "set sbx"),
              "sandbox objects left:\n%s", t);
    free(t);
    char *m = shell("nft list map inet sandboxd ifmap");
    CHECK_MSG(strstr(m, "ifmap") && !strstr(m, "elements"), "map elements left:\n%s", m);
    free(m);
}
