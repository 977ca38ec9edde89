/* Network suite for sandboxd/net*.c: every case builds a private world and never touches the
 * host's network. The test process unshares its own network and mount namespaces (it becomes
 * the "host": sd_net's table, veths and NAT live there), binds a test /etc/hosts, and starts an
 * "internet" netns (tests/network/world.sh) with fake metadata servers, allowed / denied hosts.
 * Stand-in sandboxes are `sleep` processes in fresh network namespaces. Every child gets
 * PR_SET_PDEATHSIG, so nothing outlives the case even when it is killed. */
#include "tests/network/world.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

static sd_net_sandbox *setup(const char *id, pid_t pid, const char *network) {
    json_error_t je;
    json_t *j = json_loads(network, JSON_DECODE_ANY, &je);
    CHECK(j);
    policy_egress *pol = NULL;
    sd_net_sandbox *s = NULL;
    error_rec err = {0};
    CHECK_MSG(policy_egress_parse(j, &pol, &err) == 0, "%s", err.message);
    json_decref(j);
    CHECK_MSG(sd_net_resolve(net, pol, &err) == 0, "resolve: %s", err.message);
    CHECK_MSG(sd_net_sandbox_setup(net, id, pid, pol, &s, &err) == 0, "setup %s: %s", id,
              err.message);
    policy_egress_free(pol);
    return s;
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
    error_rec err = {0};
    CHECK_OK(policy_egress_parse(j, &pol, &err));
    CHECK(sd_net_resolve(net, pol, &err) < 0);
    CHECK_MSG(strstr(err.message, "network.allow[1]"), "%s", err.message);
    policy_egress_free(pol);
    json_decref(j);
    CHECK_OK(sd_net_sandbox_teardown(net, s));
    sd_net_sandbox_free(s);
    expect_clean();
}

/* A UDP socket on 0.0.0.0:port in this netns (the host's): what host services bind. */
static int udp_listen(int port) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    CHECK_MSG(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
    return fd;
}

/* One UDP datagram to dst:port from pid's netns, with SO_BROADCAST (no privilege needed). */
static void udp_send(pid_t in, const char *dst, int port) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "nsenter -t %d -n python3 -c 'import socket,sys;s=socket.socket(2,2);"
             "s.setsockopt(socket.SOL_SOCKET,socket.SO_BROADCAST,1);"
             "s.sendto(b\"x\",(sys.argv[1],int(sys.argv[2])))' %s %d",
             (int)in, dst, port);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
}

/* How many datagrams reach fd within ms milliseconds (stopping at max). */
static int udp_received(int fd, int ms, int max) {
    int n = 0;
    char buf[64];
    for (struct pollfd p = {.fd = fd, .events = POLLIN}; n < max && poll(&p, 1, ms) > 0;)
        while (recv(fd, buf, sizeof(buf), 0) >= 0)
            n++;
    return n;
}

/* Broadcasts are not host addresses (fib type broadcast, not local), yet the host delivers
 * them: a host service on 0.0.0.0 must hear nothing from a sandbox, in open mode (the host
 * interface's directed broadcast) or with an allow entry covering 255.255.255.255. */
TEST_T(net_no_broadcast_to_host, 60) {
    world_up(NULL);
    pid_t po = sandbox_proc(), pa = sandbox_proc();
    sd_net_sandbox *so = setup("sb-bc-open", po, "\"open\"");
    sd_net_sandbox *sa =
        setup("sb-bc-allow", pa, "{\"allow\":[\"255.255.255.255:5599\",\"198.51.100.0/24\"]}");
    int fd = udp_listen(5599);
    udp_send(inet_pid, "198.51.100.255", 5599); /* control: the host hears a broadcast */
    CHECK_EQ(udp_received(fd, 2000, 1), 1);
    udp_send(po, "198.51.100.255", 5599);
    udp_send(pa, "255.255.255.255", 5599);
    udp_send(pa, "198.51.100.255", 5599);
    CHECK_EQ(udp_received(fd, 700, 3), 0);
    json_t *io = sd_net_sandbox_to_json(so), *ia = sd_net_sandbox_to_json(sa);
    CHECK(last_denied_has(io, "198.51.100.255", 5599)); /* sent, and denied by the filter */
    CHECK(last_denied_has(ia, "255.255.255.255", 5599));
    CHECK(last_denied_has(ia, "198.51.100.255", 5599));
    json_decref(io);
    json_decref(ia);
    close(fd);
    CHECK_OK(sd_net_sandbox_teardown(net, so));
    CHECK_OK(sd_net_sandbox_teardown(net, sa));
    sd_net_sandbox_free(so);
    sd_net_sandbox_free(sa);
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
    uint64_t d = 0; /* the host's sandbox chain is no longer reached: all from the guard */
    CHECK_OK(sd_net_sandbox_denied(s, &d));
    CHECK_EQ(d, 3);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "nsenter -t %d -n nft list table inet sandboxd_guard", (int)p);
    o = shell(cmd);
    CHECK_MSG(strstr(o, "ipv4 counter packets 2 ") && strstr(o, "ipv6 counter packets 1 "),
              "guard counters:\n%s", o);
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
    error_rec err = {0};
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
TEST_PASS_T(net_cycles_leave_nothing, 120, "plain") { /* (once: tests/README.md) */
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
/* Many live sandboxes at once: distinct addresses, the last one works like the first, and
 * reading the counters does not grow with their number. Prints timings (not asserted). */
TEST_T(net_many_live_sandboxes, 120) {
    world_up(NULL);
    enum { N = 64 };
    static sd_net_sandbox *s[N];
    static pid_t pids[N];
    uint64_t setup_us = 0, read_first = 0, read_last = 0;
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf(id, sizeof(id), "sb-live-%d", i);
        pids[i] = sandbox_proc();
        uint64_t t0 = now_mono_us();
        s[i] = setup(id, pids[i], "\"open\"");
        setup_us += now_mono_us() - t0;
        uint64_t d = 0, t1 = now_mono_us();
        int reads = i == 0 || i == N - 1 ? 20 : 1;
        for (int k = 0; k < reads; k++)
            CHECK_OK(sd_net_sandbox_denied(s[i], &d));
        CHECK_EQ(d, 0);
        if (i == 0)
            read_first = (now_mono_us() - t1) / 20;
        if (i == N - 1)
            read_last = (now_mono_us() - t1) / 20;
    }
    char *n = shell("ip -o link show type veth | grep -c ' sbx'");
    CHECK_EQ(atoi(n), N);
    free(n);
    n = shell("ip -4 -o addr show | grep -c ' 10.200.'");
    CHECK_EQ(atoi(n), N);
    free(n);
    expect_ok(pids[N - 1], "203.0.113.10", 80);
    expect_denied(pids[N - 1], "169.254.169.254", 80);
    expect_denied(pids[N - 1], "10.200.0.2", 80); /* sandbox 0 */
    uint64_t d = 0;
    CHECK_OK(sd_net_sandbox_denied(s[N - 1], &d));
    CHECK_EQ(d, 2);
    uint64_t t0 = now_mono_us();
    for (int i = 0; i < N; i++) {
        CHECK_OK(sd_net_sandbox_teardown(net, s[i]));
        sd_net_sandbox_free(s[i]);
    }
    printf("%d live: setup avg %.2f ms; counter read %.2f ms (1 live) vs %.2f ms (%d live); "
           "teardown avg %.2f ms\n",
           N, setup_us / 1e3 / N, read_first / 1e3, read_last / 1e3, N,
           (now_mono_us() - t0) / 1e3 / N);
    expect_clean();
}

/* Restart with another pool: the veth's old address is outside it, so the sandbox is plumbed
 * again; a pid in the daemon's own netns is refused; bad configs are refused by name. */
TEST_T(net_restore_new_pool_and_bad_input, 60) {
    world_up(NULL);
    pid_t p = sandbox_proc();
    sd_net_sandbox *s = setup("sb-repool", p, "\"open\"");
    sd_net_sandbox_free(s);
    sd_net_free(net);
    net = NULL;
    error_rec err = {0};
    sd_net_config cfg = {.pool4 = "10.201.0.0/16", .pool6 = ""};
    CHECK_MSG(sd_net_init(&net, &cfg, &err) == 0, "%s", err.message);
    policy_egress *pol = NULL;
    json_t *open = json_string("open");
    CHECK_OK(policy_egress_parse(open, &pol, &err));
    json_decref(open);
    sd_net_restore_entry e = {"sb-repool", p, pol};
    sd_net_sandbox *back = NULL;
    CHECK_MSG(sd_net_restore(net, &e, 1, &back, &err) == 0, "%s", err.message);
    json_t *info = sd_net_sandbox_to_json(back);
    CHECK_STREQ(jstr(info, "ipv4"), "10.201.0.2");
    CHECK(!json_object_get(info, "ipv6"));
    json_decref(info);
    expect_ok(p, "203.0.113.10", 80);
    expect_denied(p, "169.254.169.254", 80);
    /* our own netns is never plumbed */
    sd_net_sandbox *self = NULL;
    CHECK(sd_net_sandbox_setup(net, "sb-self", getpid(), pol, &self, &err) == -EINVAL);
    CHECK_MSG(strstr(err.message, "shares the daemon's network namespace"), "%s", err.message);
    CHECK_OK(sd_net_sandbox_teardown(net, back));
    sd_net_sandbox_free(back);
    policy_egress_free(pol);
    expect_clean();
    CHECK_OK(sd_net_destroy_table(net, &err)); /* an orderly shutdown removes the table */
    char *t = shell("nft list tables");
    CHECK_MSG(!strstr(t, "sandboxd"), "%s", t);
    free(t);
    const sd_net_config bad[] = {
        {.pool4 = "10.0.0.0/30"}, {.pool4 = "fd00::/64"},
        {.pool6 = "fd00::/64"},   {.ifprefix = "toolong"},
        {.table = "Bad-Name"},    {.dns = (const char *const[]){"x", NULL}}};
    const char *names[] = {"pool4", "pool4", "pool6", "prefix", "table", "dns[0]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        sd_net *n2 = NULL;
        CHECK(sd_net_init(&n2, &bad[i], &err) == -EINVAL);
        CHECK_MSG(strstr(err.message, names[i]), "%s lacks %s", err.message, names[i]);
    }
}

/* Every descriptor sd_net keeps open is close-on-exec (libnftables' socket included). */
TEST_T(net_descriptors_cloexec, 30) {
    world_up(NULL);
    pid_t p = sandbox_proc();
    sd_net_sandbox *s = setup("sb-fds", p, "\"open\"");
    json_decref(sd_net_sandbox_to_json(s));
    char *o = shell("for f in /proc/$PPID/fdinfo/*; do fd=${f##*/}; [ $fd -gt 2 ] || continue; "
                    "fl=$(awk '/^flags/{print $2}' $f); "
                    "[ $(( 0$fl & 02000000 )) -eq 0 ] && echo \"fd $fd: $(readlink "
                    "/proc/$PPID/fd/$fd)\"; done; true");
    /* the popen shell's parent is this process; the runner's log/stdin fds are 0-2 */
    CHECK_MSG(!strstr(o, "socket:"), "sockets without O_CLOEXEC:\n%s", o);
    free(o);
    CHECK_OK(sd_net_sandbox_teardown(net, s));
    sd_net_sandbox_free(s);
}
