/* Work inside one sandbox's network namespace: a short-lived helper thread setns()es into it
 * (the network namespace is per thread), opens its own netlink and nftables sockets there,
 * configures the sandbox end of the veth and the guard table, or reads the guard counters.
 * The daemon's own threads never change namespace. */
#include "sandboxd/net/internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

typedef struct ns_job {
    const sd_net_sandbox *s;
    sd_net *n;
    int (*fn)(struct ns_job *job, struct nl_sock *sk, struct nft_ctx *nft);
    uint64_t count;
    json_t *last;
    error_rec err;
    int r;
} ns_job;

static void *ns_thread(void *arg) {
    ns_job *job = arg;
    struct nl_sock *sk = NULL;
    struct nft_ctx *nft = NULL;
    if (setns(job->s->nsfd, CLONE_NEWNET) < 0) {
        job->r = error_set_errno(&job->err, negative_errno(), "setns into the sandbox netns");
        return NULL;
    }
    job->r = sd_net_nl_open(&sk, &job->err);
    if (job->r >= 0)
        job->r = sd_net_nft_new(&nft, &job->err);
    if (job->r >= 0)
        job->r = job->fn(job, sk, nft);
    sd_net_nft_free(nft);
    sd_net_nl_close(sk);
    return NULL;
}

static int ns_run(ns_job *job) {
    pthread_t t;
    int r = pthread_create(&t, NULL, ns_thread, job);
    if (r != 0)
        return error_set(&job->err, -r, "cannot start the netns helper thread");
    pthread_join(t, NULL);
    return job->r;
}

static int configure(ns_job *job, struct nl_sock *sk, struct nft_ctx *nft) {
    const sd_net_sandbox *s = job->s;
    const char *eth = POLICY_EGRESS_GUARD_IFNAME;
    error_rec *err = &job->err;
    int r = sd_net_link_addr(sk, eth, &s->addr4, 30, err);
    if (r >= 0 && s->addr6.family)
        r = sd_net_link_addr(sk, eth, &s->addr6, 64, err);
    if (r >= 0)
        r = sd_net_link_up(sk, eth, err);
    if (r >= 0)
        r = sd_net_link_default_route(sk, eth, &s->gw4, err);
    if (r >= 0 && s->gw6.family)
        r = sd_net_link_default_route(sk, eth, &s->gw6, err);
    if (r >= 0 && job->n->guard) {
        policy_egress_sandbox ps;
        sd_net_sandbox_facts(s, &ps);
        json_t *doc = policy_egress_nft_guard(&job->n->host, &ps, s->pol);
        r = sd_net_nft_apply(nft, doc, err);
        json_decref(doc);
        if (r < 0)
            error_prefix(err, "guard table");
    }
    return r;
}

int sd_net_ns_configure(sd_net *n, const sd_net_sandbox *s, error_rec *err) {
    ns_job job = {.s = s, .n = n, .fn = configure};
    int r = ns_run(&job);
    if (r < 0 && err)
        *err = job.err;
    return r;
}

static int read_denied(ns_job *job, struct nl_sock *sk, struct nft_ctx *nft) {
    policy_egress_sandbox ps;
    sd_net_sandbox_facts(job->s, &ps);
    return sd_net_nft_read_denied(nft, POLICY_EGRESS_GUARD_TABLE, &ps, &job->count, job->last);
}

int sd_net_ns_read_denied(const sd_net_sandbox *s, uint64_t *count, json_t *last) {
    ns_job job = {.s = s, .fn = read_denied, .last = last};
    int r = ns_run(&job);
    if (r >= 0)
        *count += job.count;
    return r;
}
