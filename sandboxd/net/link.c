/* libnl-route-3 helpers for sandbox networking: veth pairs, addresses, default routes, link
 * listing. Each takes the netlink socket of the namespace to act in. */
#include "sandboxd/net/internal.h"

#include "common/fdutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_addr.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <stdlib.h>
#include <string.h>

static int nlerr(int e) {
    switch (-e) {
    case NLE_EXIST:
        return -EEXIST;
    case NLE_NODEV:
    case NLE_OBJ_NOTFOUND:
        return -ENODEV;
    case NLE_PERM:
        return -EPERM;
    case NLE_NOMEM:
        return -ENOMEM;
    case NLE_INVAL:
        return -EINVAL;
    case NLE_BUSY:
        return -EBUSY;
    default:
        return -EIO;
    }
}

static int fail(error_rec *err, int e, const char *what, const char *ifname) {
    return error_set(err, nlerr(e), "%s %s: %s", what, ifname, nl_geterror(e));
}

int sd_net_nl_open(struct nl_sock **ret, error_rec *err) {
    struct nl_sock *sk = nl_socket_alloc();
    if (!sk)
        return error_set(err, -ENOMEM, "out of memory");
    int r = nl_connect(sk, NETLINK_ROUTE);
    if (r < 0) {
        nl_socket_free(sk);
        return error_set(err, nlerr(r), "netlink connect: %s", nl_geterror(r));
    }
    fd_set_cloexec(nl_socket_get_fd(sk), 1);
    *ret = sk;
    return 0;
}

void sd_net_nl_close(struct nl_sock *sk) {
    if (sk)
        nl_socket_free(sk);
}

int sd_net_link_veth(struct nl_sock *sk, const char *host_if, int nsfd, const char *peer_if,
                     error_rec *err) {
    struct rtnl_link *link = rtnl_link_veth_alloc();
    if (!link)
        return error_set(err, -ENOMEM, "out of memory");
    struct rtnl_link *peer = rtnl_link_veth_get_peer(link);
    rtnl_link_set_name(link, host_if);
    rtnl_link_set_name(peer, peer_if);
    rtnl_link_set_ns_fd(peer, nsfd);
    int r = rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL);
    rtnl_link_put(peer);
    rtnl_link_put(link);
    return r < 0 ? fail(err, r, "create veth", host_if) : 0;
}

int sd_net_link_delete(struct nl_sock *sk, const char *ifname) {
    struct rtnl_link *link = rtnl_link_alloc();
    if (!link)
        return -ENOMEM;
    rtnl_link_set_name(link, ifname);
    int r = rtnl_link_delete(sk, link);
    rtnl_link_put(link);
    return r < 0 ? nlerr(r) : 0;
}

int sd_net_link_up(struct nl_sock *sk, const char *ifname, error_rec *err) {
    struct rtnl_link *link = NULL, *change = rtnl_link_alloc();
    int r = rtnl_link_get_kernel(sk, 0, ifname, &link);
    if (r >= 0 && change) {
        rtnl_link_set_flags(change, IFF_UP);
        r = rtnl_link_change(sk, link, change, 0);
    } else if (!change)
        r = -NLE_NOMEM;
    if (link)
        rtnl_link_put(link);
    if (change)
        rtnl_link_put(change);
    return r < 0 ? fail(err, r, "set up", ifname) : 0;
}

static struct nl_addr *to_nl_addr(const policy_cidr *c, unsigned plen) {
    struct nl_addr *a = nl_addr_build(c->family, c->addr, c->family == AF_INET ? 4 : 16);
    if (a)
        nl_addr_set_prefixlen(a, (int)plen);
    return a;
}

int sd_net_link_addr(struct nl_sock *sk, const char *ifname, const policy_cidr *addr, unsigned plen,
                     error_rec *err) {
    struct rtnl_link *link = NULL;
    int r = rtnl_link_get_kernel(sk, 0, ifname, &link);
    if (r < 0)
        return fail(err, r, "find", ifname);
    int ifindex = rtnl_link_get_ifindex(link);
    rtnl_link_put(link);
    struct rtnl_addr *ra = rtnl_addr_alloc();
    struct nl_addr *local = to_nl_addr(addr, plen);
    if (!ra || !local) {
        rtnl_addr_put(ra);
        nl_addr_put(local);
        return error_set(err, -ENOMEM, "out of memory");
    }
    rtnl_addr_set_ifindex(ra, ifindex);
    rtnl_addr_set_local(ra, local);
    if (addr->family == AF_INET6)
        rtnl_addr_set_flags(ra, IFA_F_NODAD);
    r = rtnl_addr_add(sk, ra, 0);
    nl_addr_put(local);
    rtnl_addr_put(ra);
    return r < 0 ? fail(err, r, "add address on", ifname) : 0;
}

int sd_net_link_default_route(struct nl_sock *sk, const char *ifname, const policy_cidr *gw,
                              error_rec *err) {
    struct rtnl_link *link = NULL;
    int r = rtnl_link_get_kernel(sk, 0, ifname, &link);
    if (r < 0)
        return fail(err, r, "find", ifname);
    int ifindex = rtnl_link_get_ifindex(link);
    rtnl_link_put(link);
    struct rtnl_route *route = rtnl_route_alloc();
    struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
    struct nl_addr *dst = nl_addr_alloc(16),
                   *via = to_nl_addr(gw, gw->family == AF_INET ? 32 : 128);
    if (!route || !nh || !dst || !via) {
        rtnl_route_put(route);
        rtnl_route_nh_free(nh);
        nl_addr_put(dst);
        nl_addr_put(via);
        return error_set(err, -ENOMEM, "out of memory");
    }
    nl_addr_set_family(dst, gw->family);
    nl_addr_set_prefixlen(dst, 0);
    rtnl_route_set_family(route, (uint8_t)gw->family);
    rtnl_route_set_dst(route, dst);
    rtnl_route_nh_set_ifindex(nh, ifindex);
    rtnl_route_nh_set_gateway(nh, via);
    rtnl_route_add_nexthop(route, nh); /* the route owns nh now */
    r = rtnl_route_add(sk, route, NLM_F_CREATE);
    nl_addr_put(dst);
    nl_addr_put(via);
    rtnl_route_put(route);
    return r < 0 ? fail(err, r, "add default route on", ifname) : 0;
}

struct addr4_walk {
    int ifindex;
    policy_cidr *ret;
    bool found;
};

static void addr4_cb(struct nl_object *o, void *arg) {
    struct addr4_walk *w = arg;
    struct rtnl_addr *a = (struct rtnl_addr *)o;
    struct nl_addr *l = rtnl_addr_get_local(a);
    if (w->found || rtnl_addr_get_ifindex(a) != w->ifindex || !l ||
        nl_addr_get_family(l) != AF_INET)
        return;
    w->ret->family = AF_INET;
    memcpy(w->ret->addr, nl_addr_get_binary_addr(l), 4);
    w->ret->len = 32;
    w->found = true;
}

int sd_net_link_addr4(struct nl_sock *sk, const char *ifname, policy_cidr *ret) {
    struct rtnl_link *link = NULL;
    int r = rtnl_link_get_kernel(sk, 0, ifname, &link);
    if (r < 0)
        return nlerr(r);
    struct nl_cache *cache = NULL;
    policy_cidr c = {0};
    struct addr4_walk w = {rtnl_link_get_ifindex(link), &c, false};
    rtnl_link_put(link);
    r = rtnl_addr_alloc_cache(sk, &cache);
    if (r < 0)
        return nlerr(r);
    nl_cache_foreach(cache, addr4_cb, &w);
    nl_cache_free(cache);
    if (!w.found)
        return -ENOENT;
    *ret = c;
    return 0;
}

void sd_net_strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

struct list_walk {
    const char *prefix;
    char **v;
    size_t n;
    int r;
};

static void list_cb(struct nl_object *o, void *arg) {
    struct list_walk *w = arg;
    struct rtnl_link *l = (struct rtnl_link *)o;
    const char *name = rtnl_link_get_name(l), *type = rtnl_link_get_type(l);
    if (w->r < 0 || !name || !type || strcmp(type, "veth") != 0 ||
        strncmp(name, w->prefix, strlen(w->prefix)) != 0)
        return;
    char **nv = realloc(w->v, (w->n + 2) * sizeof(*nv));
    if (!nv || !(nv[w->n] = strdup(name))) {
        if (nv)
            w->v = nv;
        w->r = -ENOMEM;
        return;
    }
    w->v = nv;
    w->v[++w->n] = NULL;
}

int sd_net_link_list(struct nl_sock *sk, const char *prefix, char ***ret) {
    struct nl_cache *cache = NULL;
    int r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache);
    if (r < 0)
        return nlerr(r);
    struct list_walk w = {prefix, calloc(1, sizeof(char *)), 0, 0};
    if (!w.v)
        w.r = -ENOMEM;
    else
        nl_cache_foreach(cache, list_cb, &w);
    nl_cache_free(cache);
    if (w.r < 0) {
        sd_net_strv_free(w.v);
        return w.r;
    }
    *ret = w.v;
    return 0;
}
