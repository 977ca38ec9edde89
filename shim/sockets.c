/* Ending the sockets of a pausing sandbox that are bound to its network's address (shim/sockets.h):
 * one NETLINK_SOCK_DIAG socket made in init's network namespace lists its TCP and UDP sockets
 * (SOCK_DIAG_BY_FAMILY) and destroys those whose local address is neither loopback nor a
 * wildcard (SOCK_DESTROY); then its veth goes (libnl-route-3 over a NETLINK_ROUTE socket made
 * there too). */
#include "shim/sockets.h"

#include "common/grow.h"
#include "common/macro.h"
#include "shim/ports.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 r;
} diag_req;

/* Loopback or a wildcard: what a restore binds again whatever the new veth's address. */
static bool local_kept(uint8_t family, const uint32_t a[4]) {
    if (family == AF_INET)
        return a[0] == 0 || (ntohl(a[0]) >> 24) == 127;
    static const uint8_t any[16], lo[16] = {[15] = 1}, v4[12] = {[10] = 0xff, [11] = 0xff};
    const uint8_t *b = (const uint8_t *)a;
    return !memcmp(b, any, 16) || !memcmp(b, lo, 16) ||
           (!memcmp(b, v4, 12) && (b[12] == 127 || !memcmp(b + 12, any, 4)));
}

/* The sockets of (family, protocol) to end, appended to *ids. TIME_WAIT and SYN_RECV entries
 * belong to no process (CRIU does not see them). */
static int list_bound(int nl, uint8_t family, uint8_t protocol, struct inet_diag_sockid **ids,
                      size_t *n, size_t *cap) {
    diag_req q = {.nlh = {.nlmsg_len = sizeof(q),
                          .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                          .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                          .nlmsg_seq = 1},
                  .r = {.sdiag_family = family,
                        .sdiag_protocol = protocol,
                        .idiag_states = ~((1u << TCP_TIME_WAIT) | (1u << TCP_SYN_RECV))}};
    if (send(nl, &q, sizeof(q), 0) < 0)
        return negative_errno();
    static char buf[32768] __attribute__((aligned(NLMSG_ALIGNTO))); /* (a dump's part fits) */
    for (;;) {
        ssize_t len = recv(nl, buf, sizeof(buf), 0);
        if (len < 0 && errno == EINTR)
            continue;
        if (len < 0)
            return negative_errno();
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
             h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE)
                return 0;
            if (h->nlmsg_type == NLMSG_ERROR)
                return ((struct nlmsgerr *)NLMSG_DATA(h))->error ?: -EPROTO;
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                return -EPROTO;
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            if (local_kept(m->idiag_family, m->id.idiag_src))
                continue;
            if (grow_reserve((void **)ids, cap, *n + 1, sizeof(**ids)) < 0)
                return -ENOMEM;
            (*ids)[(*n)++] = m->id;
        }
    }
}

static int destroy(int nl, uint8_t family, uint8_t protocol, const struct inet_diag_sockid *id) {
    diag_req q = {
        .nlh = {.nlmsg_len = sizeof(q),
                .nlmsg_type = SOCK_DESTROY,
                .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
                .nlmsg_seq = 2},
        .r = {.sdiag_family = family, .sdiag_protocol = protocol, .idiag_states = ~0u, .id = *id}};
    if (send(nl, &q, sizeof(q), 0) < 0)
        return negative_errno();
    char buf[512] __attribute__((aligned(NLMSG_ALIGNTO)));
    ssize_t len;
    while ((len = recv(nl, buf, sizeof(buf), 0)) < 0 && errno == EINTR)
        ;
    if (len < 0)
        return negative_errno();
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (!NLMSG_OK(h, len) || h->nlmsg_type != NLMSG_ERROR ||
        h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
        return -EPROTO;
    int e = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
    return e == -ENOENT ? 0 : e; /* (it ended meanwhile) */
}

int shim_sockets_end_outside(pid_t init_pid, error_rec *err) {
    static const struct {
        uint8_t family, protocol;
    } kinds[] = {{AF_INET, IPPROTO_TCP},
                 {AF_INET6, IPPROTO_TCP},
                 {AF_INET, IPPROTO_UDP},
                 {AF_INET6, IPPROTO_UDP}};
    _cleanup_close_ int nl = -1; /* (never the host's: shim_socket_in_netns refuses it) */
    int r = shim_socket_in_netns(init_pid, AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG, &nl, err);
    if (r < 0)
        return r;
    int ended = 0;
    for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
        _cleanup_free_ struct inet_diag_sockid *ids = NULL;
        size_t n = 0, cap = 0;
        if ((r = list_bound(nl, kinds[k].family, kinds[k].protocol, &ids, &n, &cap)) < 0 &&
            r != -ENOENT) /* (no UDP diag module: nothing to list) */
            return error_set_errno(err, r, "list the sandbox's sockets");
        for (size_t i = 0; i < n; i++, ended++)
            if ((r = destroy(nl, kinds[k].family, kinds[k].protocol, &ids[i])) < 0)
                return error_set_errno(err, r,
                                       r == -EOPNOTSUPP
                                           ? "end a socket bound to the sandbox's network address "
                                             "(this kernel cannot: CONFIG_INET_DIAG_DESTROY)"
                                           : "end a socket bound to the sandbox's network address");
    }
    return ended;
}

/* Deletes l when it is a veth (its pair goes with it); other links (loopback, a kernel's
 * fallback tunnels) are CRIU's to carry. 1: deleted, 0: not a veth or gone meanwhile. */
static int veth_delete(struct nl_sock *sk, struct rtnl_link *l) {
    const char *kind = rtnl_link_get_type(l);
    if (!kind || strcmp(kind, "veth") != 0)
        return 0;
    int r = rtnl_link_delete(sk, l);
    return r == -NLE_OBJ_NOTFOUND || r == -NLE_NODEV ? 0 : r < 0 ? r : 1;
}

int shim_sockets_remove_links(pid_t init_pid, error_rec *err) {
    int fd = -1; /* (never the host's: shim_socket_in_netns refuses it) */
    int r = shim_socket_in_netns(init_pid, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, &fd, err);
    if (r < 0)
        return r;
    struct nl_sock *sk = nl_socket_alloc();
    struct nl_cache *cache = NULL;
    struct sockaddr_nl self = {.nl_family = AF_NETLINK}; /* (its port: the kernel's choice) */
    if (!sk || bind(fd, (struct sockaddr *)&self, sizeof(self)) < 0) {
        r = sk ? negative_errno() : -ENOMEM;
        if (sk)
            nl_socket_free(sk);
        close(fd);
        return error_set_errno(err, r, "netlink socket in the sandbox's network namespace");
    }
    if ((r = nl_socket_set_fd(sk, NETLINK_ROUTE, fd)) < 0)
        close(fd); /* (else sk owns it) */
    if (r >= 0)
        r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache);
    int removed = 0;
    for (struct nl_object *o = r >= 0 ? nl_cache_get_first(cache) : NULL; o && r >= 0;
         o = nl_cache_get_next(o))
        if ((r = veth_delete(sk, (struct rtnl_link *)o)) > 0)
            removed++;
    nl_cache_free(cache);
    nl_socket_free(sk);
    if (r < 0)
        return error_set(err, -EIO, "remove the sandbox's veth: %s", nl_geterror(r));
    return removed;
}
