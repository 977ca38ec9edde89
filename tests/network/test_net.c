/* Network suite for sandboxd/net*.c: every case builds a private world and never touches the
 * host's network. The test process unshares its own network and mount namespaces (it becomes
 * the "host": sd_net's table, veths and NAT live there), binds a test /etc/hosts, and starts an
 * "internet" netns (tests/network/world.sh) with fake metadata servers, allowed / denied hosts.
 * Stand-in sandboxes are `sleep` processes in fresh network namespaces. Every child gets
 * PR_SET_PDEATHSIG, so nothing outlives the case even when it is killed. */
#include "sandboxd/net.h"
#include "tests/lib/test.h"

#include "common/fdutil.h"
#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHILDREN 64
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
    CHECK_MSG(r.ms < 100, "%s:%d: denial took %d ms", host, port, r.ms);
}

/* Enter a private world: own netns + mount ns, a test /etc/hosts, the internet netns. */
static void world_up(const sd_net_config *cfg) {
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
    sbx_error err = {0};
    CHECK_MSG(sd_net_init(&net, cfg, &err) == 0, "sd_net_init: %s", err.message);
}

static sd_net_sandbox *setup(const char *id, pid_t pid, const char *network) {
    json_error_t je;
    json_t *j = json_loads(network, JSON_DECODE_ANY, &je);
    CHECK(j);
    policy_egress *pol = NULL;
    sd_net_sandbox *s = NULL;
    sbx_error err = {0};
    CHECK_MSG(policy_egress_parse(j, &pol, &err) == 0, "%s", err.message);
    json_decref(j);
    CHECK_MSG(sd_net_resolve(net, pol, &err) == 0, "resolve: %s", err.message);
    CHECK_MSG(sd_net_sandbox_setup(net, id, pid, pol, &s, &err) == 0, "setup %s: %s", id,
              err.message);
    policy_egress_free(pol);
    return s;
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

static const char *jstr(json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static bool last_denied_has(json_t *info, const char *dst, int port) {
    json_t *last = json_object_get(info, "last_denied"), *e;
    size_t i;
    json_array_foreach(last, i, e) {
        if (strcmp(jstr(e, "dst"), dst) == 0 &&
            json_integer_value(json_object_get(e, "port")) == port)
            return true;
    }
    return false;
}

TEST_T(net_open_reaches_internet_not_metadata, 90) {
    world_up(NULL);
    pid_t p1 = sandbox_proc(), p2 = sandbox_proc();
    sd_net_sandbox *s1 = setup("sb-open-1", p1, "\"open\"");
    sd_net_sandbox *s2 = setup("sb-open-2", p2, "\"open\"");
    expect_ok(0, "169.254.169.254", 80); /* the world works: the host reaches its metadata */
    expect_ok(0, "fd00:ec2::254", 80);
    expect_ok(p1, "203.0.113.10", 80);
    expect_ok(p1, "203.0.113.20", 8080);
    expect_ok(p1, "2001:db8:2::10", 80);
    const char *denied[][2] = {{"169.254.169.254", "80"}, {"169.254.170.2", "80"},
                               {"fd00:ec2::254", "80"},   {"198.51.100.1", "7777"},
                               {"10.9.9.9", "80"},        {"10.200.0.1", "7777"}};
    for (size_t i = 0; i < sizeof(denied) / sizeof(*denied); i++)
        expect_denied(p1, denied[i][0], atoi(denied[i][1]));
    /* another sandbox, over IPv4 and IPv6 */
    json_t *i2 = sd_net_sandbox_to_json(s2);
    serve(p2, "9000");
    expect_ok(p2, jstr(i2, "ipv4"), 9000); /* it listens */
    expect_denied(p1, jstr(i2, "ipv4"), 9000);
    expect_denied(p1, jstr(i2, "ipv6"), 9000);
    json_t *i1 = sd_net_sandbox_to_json(s1);
    char *dump = json_dumps(i1, 0);
    CHECK_STREQ(jstr(i1, "mode"), "open");
    CHECK_MSG(json_integer_value(json_object_get(i1, "denied")) >= 8, "%s", dump);
    CHECK_MSG(last_denied_has(i1, "169.254.169.254", 80), "%s", dump);
    CHECK_MSG(last_denied_has(i1, "fd00:ec2::254", 80), "%s", dump);
    uint64_t d2 = 99;
    CHECK_OK(sd_net_sandbox_denied(s2, &d2));
    CHECK_EQ(d2, 0);
    free(dump);
    json_decref(i1);
    json_decref(i2);
    CHECK_OK(sd_net_sandbox_teardown(net, s1));
    CHECK_OK(sd_net_sandbox_teardown(net, s1)); /* idempotent */
    CHECK_OK(sd_net_sandbox_teardown(net, s2));
    sd_net_sandbox_free(s1);
    sd_net_sandbox_free(s2);
    expect_clean();
}

TEST_T(net_allow_list, 60) {
    world_up(NULL);
    pid_t p = sandbox_proc();
    sd_net_sandbox *s =
        setup("sb-allow", p, "{\"allow\":[\"203.0.113.10:80\",\"named.test\",\"10.9.9.9:8080\"]}");
    expect_ok(p, "203.0.113.10", 80);
    expect_denied(p, "203.0.113.10", 8080); /* port not listed */
    expect_ok(p, "203.0.113.20", 80);       /* named.test, resolved by the daemon */
    expect_ok(p, "203.0.113.20", 8080);
    expect_ok(p, "10.9.9.9", 8080); /* a private range, explicitly allowed */
    expect_denied(p, "10.9.9.9", 80);
    expect_denied(p, "2001:db8:2::10", 80);
    expect_denied(p, "169.254.169.254", 80);
    expect_denied(p, "fd00:ec2::254", 80);
    expect_denied(p, "198.51.100.1", 7777);
    json_t *info = sd_net_sandbox_to_json(s);
    CHECK_STREQ(jstr(info, "mode"), "allow");
    CHECK_EQ(json_array_size(json_object_get(info, "allow")), 3);
    CHECK(json_integer_value(json_object_get(info, "denied")) >= 6);
    CHECK(last_denied_has(info, "203.0.113.10", 8080));
    json_decref(info);
    /* a name that resolves only to metadata is refused with a message naming it */
    json_t *j = json_loads("{\"allow\":[\"1.1.1.1\",\"meta.test\"]}", 0, NULL);
    policy_egress *pol = NULL;
    sbx_error err = {0};
    CHECK_OK(policy_egress_parse(j, &pol, &err));
    CHECK(sd_net_resolve(net, pol, &err) < 0);
    CHECK_MSG(strstr(err.message, "network.allow[1]"), "%s", err.message);
    policy_egress_free(pol);
    json_decref(j);
    CHECK_OK(sd_net_sandbox_teardown(net, s));
    sd_net_sandbox_free(s);
    expect_clean();
}

TEST_T(net_none_is_loopback_only, 60) {
    world_up(NULL);
    pid_t p = sandbox_proc();
    sd_net_sandbox *s = setup("sb-none", p, "\"none\"");
    CHECK(sd_net_sandbox_ifname(s) == NULL);
    probe_result r = probe(p, "203.0.113.10", 80);
    CHECK_MSG(strcmp(r.kind, "ok") != 0 && strcmp(r.kind, "timeout") != 0, "%s", r.kind);
    r = probe(p, "169.254.169.254", 80);
    CHECK_MSG(strcmp(r.kind, "ok") != 0, "%s", r.kind);
    json_t *info = sd_net_sandbox_to_json(s);
    CHECK_STREQ(jstr(info, "mode"), "none");
    CHECK(!json_object_get(info, "interface"));
    json_decref(info);
    CHECK_OK(sd_net_sandbox_teardown(net, s));
    sd_net_sandbox_free(s);
    expect_clean();
}

/* The guard table inside the sandbox netns holds on its own: remove the host layer. */
TEST_T(net_guard_layer_alone, 60) {
    world_up(NULL);
    pid_t p = sandbox_proc();
    sd_net_sandbox *s = setup("sb-guard", p, "\"open\"");
    char *o = shell("nft flush chain inet sandboxd forward && nft flush chain inet sandboxd input "
                    "&& echo flushed");
    CHECK_MSG(strstr(o, "flushed"), "%s", o);
    free(o);
    expect_ok(p, "203.0.113.10", 80);
    expect_denied(p, "169.254.169.254", 80);
    expect_denied(p, "fd00:ec2::254", 80);
    expect_denied(p, "10.9.9.9", 80);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "nsenter -t %d -n nft list counters", (int)p);
    o = shell(cmd);
    CHECK_MSG(strstr(o, "packets 3 "), "guard counter:\n%s", o);
    free(o);
    CHECK_OK(sd_net_sandbox_teardown(net, s));
    sd_net_sandbox_free(s);
}

/* A restarted daemon: the table is replaced (fail closed), then sd_net_restore re-adds the
 * live sandboxes' chains and drops veths nobody claims. */
TEST_T(net_restore_after_restart, 60) {
    world_up(NULL);
    pid_t p = sandbox_proc(), q = sandbox_proc();
    sd_net_sandbox *s = setup("sb-keep", p, "\"open\"");
    sd_net_sandbox *gone = setup("sb-gone", q, "\"open\"");
    char keep_if[16], keep_ip[64];
    snprintf(keep_if, sizeof(keep_if), "%s", sd_net_sandbox_ifname(s));
    json_t *info = sd_net_sandbox_to_json(s);
    snprintf(keep_ip, sizeof(keep_ip), "%s", jstr(info, "ipv4"));
    json_decref(info);
    sd_net_sandbox_free(s); /* the daemon exits: memory only, the kernel keeps everything */
    sd_net_sandbox_free(gone);
    sd_net_free(net);
    net = NULL;
    sbx_error err = {0};
    CHECK_MSG(sd_net_init(&net, NULL, &err) == 0, "%s", err.message);
    expect_denied(p, "203.0.113.10", 80); /* fail closed until restored */
    policy_egress *pol = NULL;
    json_t *open = json_string("open");
    CHECK_OK(policy_egress_parse(open, &pol, &err));
    json_decref(open);
    sd_net_restore_entry e = {"sb-keep", p, pol};
    sd_net_sandbox *back = NULL;
    CHECK_MSG(sd_net_restore(net, &e, 1, &back, &err) == 0, "%s", err.message);
    CHECK_STREQ(sd_net_sandbox_ifname(back), keep_if);
    info = sd_net_sandbox_to_json(back);
    CHECK_STREQ(jstr(info, "ipv4"), keep_ip);
    json_decref(info);
    expect_ok(p, "203.0.113.10", 80);
    expect_denied(p, "169.254.169.254", 80);
    char *links = shell("ip -o link show type veth | grep -c ' sbx' || true");
    CHECK_MSG(atoi(links) == 1, "%s veths (wanted only the restored one)", links);
    free(links);
    /* a new sandbox must not get the restored one's addresses */
    pid_t r = sandbox_proc();
    sd_net_sandbox *fresh = setup("sb-new", r, "\"open\"");
    info = sd_net_sandbox_to_json(fresh);
    CHECK(strcmp(jstr(info, "ipv4"), keep_ip) != 0);
    json_decref(info);
    expect_ok(r, "203.0.113.10", 80);
    CHECK_OK(sd_net_sandbox_teardown(net, fresh));
    CHECK_OK(sd_net_sandbox_teardown(net, back));
    sd_net_sandbox_free(fresh);
    sd_net_sandbox_free(back);
    policy_egress_free(pol);
    expect_clean();
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Many create/destroy cycles leave nothing behind; prints setup latency (not asserted). */
TEST_T(net_cycles_leave_nothing, 120) {
    world_up(NULL);
    enum { N = 200 };
    static uint64_t us[N];
    uint64_t start = now_mono_us();
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf(id, sizeof(id), "sb-cycle-%d", i);
        pid_t p = sandbox_proc();
        uint64_t t0 = now_mono_us();
        sd_net_sandbox *s = setup(id, p, i % 2 ? "\"open\"" : "{\"allow\":[\"203.0.113.10:80\"]}");
        us[i] = now_mono_us() - t0;
        CHECK_OK(sd_net_sandbox_teardown(net, s));
        sd_net_sandbox_free(s);
        kill_child(p);
    }
    double secs = (double)(now_mono_us() - start) / 1e6;
    qsort(us, N, sizeof(*us), cmp_u64);
    printf("net cycles: %d in %.2f s (%.1f/s); setup p50 %.2f ms p99 %.2f ms\n", N, secs, N / secs,
           (double)us[N / 2] / 1000, (double)us[N * 99 / 100] / 1000);
    expect_clean();
    /* and the pool gives the first slot again */
    pid_t p = sandbox_proc();
    sd_net_sandbox *s = setup("sb-after", p, "\"open\"");
    json_t *info = sd_net_sandbox_to_json(s);
    CHECK_STREQ(jstr(info, "ipv4"), "10.200.0.2");
    json_decref(info);
    expect_ok(p, "203.0.113.10", 80);
    CHECK_OK(sd_net_sandbox_teardown(net, s));
    sd_net_sandbox_free(s);
}
