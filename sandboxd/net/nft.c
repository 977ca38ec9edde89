/* libnftables helpers: apply a JSON document as one transaction, run a listing command and
 * parse its JSON, read one sandbox's denied counter and "last denied" sets. */
#include "sandboxd/net/internal.h"

#include "common/fdutil.h"

#include <dirent.h>
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The descriptors open now, as a bitmap of the first 4096. */
static void open_fds(uint8_t map[512]) {
    memset(map, 0, 512);
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (fd > 0 && fd < 4096 && fd != dirfd(d))
            map[fd / 8] |= (uint8_t)(1u << (fd % 8));
    }
    if (d)
        closedir(d);
}

/* libnftables opens its netlink socket without SOCK_CLOEXEC and does not expose it: mark
 * every descriptor that nft_ctx_new added, so that no shim inherits it. */
int sd_net_nft_new(struct nft_ctx **ret, error_rec *err) {
    uint8_t before[512], after[512];
    open_fds(before);
    struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    open_fds(after);
    for (int fd = 3; fd < 4096; fd++)
        if ((after[fd / 8] & ~before[fd / 8]) & (1u << (fd % 8)))
            fd_set_cloexec(fd, 1);
    if (!ctx)
        return error_set(err, -ENOMEM, "nft_ctx_new failed");
    if (nft_ctx_buffer_output(ctx) < 0 || nft_ctx_buffer_error(ctx) < 0) {
        nft_ctx_free(ctx);
        return error_set(err, -ENOMEM, "nft: cannot buffer output");
    }
    nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
    *ret = ctx;
    return 0;
}

void sd_net_nft_free(struct nft_ctx *ctx) {
    if (ctx)
        nft_ctx_free(ctx);
}

/* The first line of libnftables' error buffer: enough to name the failing command. */
static int nft_fail(error_rec *err, struct nft_ctx *ctx, const char *what) {
    const char *e = nft_ctx_get_error_buffer(ctx);
    const char *nl = e ? strchr(e, '\n') : NULL;
    int len = e ? (nl ? (int)(nl - e) : (int)strlen(e)) : 0;
    return error_set(err, -EIO, "nft %s: %.*s", what, len, e ? e : "");
}

int sd_net_nft_apply(struct nft_ctx *ctx, json_t *doc, error_rec *err) {
    char *buf = json_dumps(doc, JSON_COMPACT);
    if (!buf)
        return error_set(err, -ENOMEM, "out of memory");
    int r = nft_run_cmd_from_buffer(ctx, buf);
    free(buf);
    return r != 0 ? nft_fail(err, ctx, "apply") : 0;
}

int sd_net_nft_list(struct nft_ctx *ctx, const char *cmd, json_t **ret, error_rec *err) {
    if (nft_run_cmd_from_buffer(ctx, cmd) != 0)
        return nft_fail(err, ctx, cmd);
    json_error_t je;
    json_t *j = json_loads(nft_ctx_get_output_buffer(ctx), 0, &je);
    if (!j)
        return error_set(err, -EPROTO, "nft %s: unparsable output: %s", cmd, je.text);
    *ret = j;
    return 0;
}

/* The denied counter is a set of {nfproto} elements with counters (policy/egress_nft.c). */
static int read_counter(struct nft_ctx *ctx, const char *table, const char *name, uint64_t *count) {
    char cmd[160];
    json_t *j = NULL;
    snprintf(cmd, sizeof(cmd), "list set inet %s %s", table, name);
    int r = sd_net_nft_list(ctx, cmd, &j, NULL);
    if (r < 0)
        return r;
    json_t *items = json_object_get(j, "nftables"), *it, *el;
    size_t i, k;
    r = -ENOENT;
    json_array_foreach(items, i, it) {
        json_t *set = json_object_get(it, "set");
        if (set)
            r = 0;
        json_array_foreach(json_object_get(set, "elem"), k, el) {
            json_t *c = json_object_get(json_object_get(el, "elem"), "counter");
            *count += (uint64_t)json_integer_value(json_object_get(c, "packets"));
        }
    }
    json_decref(j);
    return r;
}

/* One set element {"elem":{"val":{"concat":[addr, proto, port]},"expires":N,...}} ->
 * {"dst","proto","port"?,"expires_in"}. */
static json_t *last_entry(json_t *el) {
    json_t *e = json_object_get(el, "elem");
    json_t *cc = json_object_get(json_object_get(e, "val"), "concat");
    if (!json_is_array(cc) || json_array_size(cc) != 3)
        return NULL;
    json_t *proto = json_array_get(cc, 1);
    json_t *o = json_pack("{s:O,s:O,s:O}", "dst", json_array_get(cc, 0), "proto", proto,
                          "expires_in", json_object_get(e, "expires"));
    if (o && json_is_string(proto) &&
        (!strcmp(json_string_value(proto), "tcp") || !strcmp(json_string_value(proto), "udp")))
        json_object_set(o, "port", json_array_get(cc, 2));
    return o;
}

static int read_last(struct nft_ctx *ctx, const char *table, const char *name, json_t *last) {
    char cmd[160];
    json_t *j = NULL;
    snprintf(cmd, sizeof(cmd), "list set inet %s %s", table, name);
    int r = sd_net_nft_list(ctx, cmd, &j, NULL);
    if (r < 0)
        return r;
    json_t *items = json_object_get(j, "nftables"), *it, *el;
    size_t i, k;
    json_array_foreach(items, i, it) {
        json_t *elems = json_object_get(json_object_get(it, "set"), "elem");
        json_array_foreach(elems, k, el) {
            json_t *o = last_entry(el);
            if (o)
                json_array_append_new(last, o);
        }
    }
    json_decref(j);
    return 0;
}

int sd_net_nft_read_denied(struct nft_ctx *ctx, const char *table, const policy_egress_sandbox *ps,
                           uint64_t *count, json_t *last) {
    char name[64];
    policy_egress_nft_counter_name(ps, name, sizeof(name));
    int r = read_counter(ctx, table, name, count);
    for (int v = 4; r >= 0 && last && v <= 6; v += 2) {
        policy_egress_nft_last_set_name(ps, v, name, sizeof(name));
        r = read_last(ctx, table, name, last);
    }
    return r;
}

bool sd_net_nft_exists(struct nft_ctx *ctx, const char *table, const policy_egress_sandbox *ps) {
    char name[64];
    uint64_t count = 0;
    policy_egress_nft_counter_name(ps, name, sizeof(name));
    return read_counter(ctx, table, name, &count) == 0;
}
