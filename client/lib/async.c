/* libsbx's asynchronous API: every sbx_async_* call becomes one operation on the libuv-driven
 * HTTP engine (http_async.c); its callback runs on the loop. Create places the sandbox by free
 * capacity (refreshing GET /v1/info asynchronously when stale) and falls back to the next
 * endpoint on 503 or connection failure. */
#include "client/lib/http_async.h"
#include "client/lib/internal.h"

#include "common/timeutil.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* Freed when the user has called sbx_async_free and no operation holds it any more. */
struct sbx_async {
    sbx_client *client;
    struct uv_loop_s *loop;
    sbxi_http_async *engine;
    size_t ops;
    unsigned refs;
    bool closed;
    struct uv_loop_s *own_loop; /* sbx_async_new_standalone's: freed with the handle */
    bool in_run;                /* inside sbx_async_run (a callback may free the handle) */
    sbx_err refused;            /* why the latest call was refused (sbx_async_submit_error) */
};

/* The latest call's refusal, kept on the handle: its code is returned. */
#define REFUSE(as, rc, ...) sbxi_err_set(&(as)->refused, (rc), 0, "", __VA_ARGS__)

enum op_kind {
    OP_CREATE,
    OP_FORK,
    OP_EXEC,
    OP_READ,
    OP_GET_ARCHIVE,
    OP_INSPECT,
    OP_STATUS,
    OP_LEASE,
    OP_DONE,
    OP_PORT /* a request through the port proxy: the server's answer, any status */
};

typedef struct op {
    sbx_async *as;
    enum op_kind kind;
    size_t ep;
    void (*fn)(void); /* the caller's callback, of the type its kind says (CB) */
    void *ud;
    long timeout_ms; /* the request's own limit (sbxi_async_port_request_within); 0: none */
    /* create */
    char *body, *idem;
    size_t *order, k, n_order, info_pending;
    sbx_err last;
    bool retried; /* the keyed create went once more to the same endpoint (sbxi_create_failed) */
    /* exec */
    bool streaming;
    sbxi_exec_stream st;
} op;

typedef struct info_req {
    op *parent;
    size_t ep;
} info_req;

static void as_unref(sbx_async *as) {
    if (--as->refs == 0)
        free(as);
}

sbx_code sbx_async_new(sbx_client *client, struct uv_loop_s *loop, sbx_async **ret, sbx_err *err) {
    if (!client || !loop || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client, loop or ret is NULL");
    sbx_async *as = calloc(1, sizeof(*as));
    if (!as)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    if (sbxi_http_async_new(loop, &as->engine) < 0) {
        free(as);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "cannot create the HTTP engine");
    }
    as->client = client;
    as->loop = loop;
    as->refs = 1;
    *ret = as;
    return SBX_OK;
}

/* Most rounds of its own loop sbx_async_free runs to let the closed handles go. */
#define OWN_LOOP_CLOSE_ROUNDS 1000

sbx_code sbx_async_new_standalone(sbx_client *client, sbx_async **ret, sbx_err *err) {
    if (!client || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "client or ret is NULL");
    uv_loop_t *loop = malloc(sizeof(*loop));
    if (!loop || uv_loop_init(loop) < 0) {
        free(loop);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "cannot make an event loop");
    }
    sbx_code rc = sbx_async_new(client, loop, ret, err);
    if (rc != SBX_OK) {
        uv_loop_close(loop);
        free(loop);
        return rc;
    }
    (*ret)->own_loop = loop;
    return SBX_OK;
}

int sbx_async_fd(const sbx_async *as) {
    return as && as->own_loop ? uv_backend_fd(as->own_loop) : -1;
}

int sbx_async_timeout_ms(const sbx_async *as) {
    return as && as->own_loop ? uv_backend_timeout(as->own_loop) : -1;
}

static void own_loop_close(uv_loop_t *loop);

void sbx_async_run(sbx_async *as) {
    if (!as || !as->own_loop || as->closed || as->in_run) /* (never the loop inside itself) */
        return;
    uv_loop_t *own = as->own_loop;
    as->refs++; /* freed by a callback: it stays until the round is over */
    as->in_run = true;
    uv_run(own, UV_RUN_NOWAIT);
    as->in_run = false;
    bool closed = as->closed;
    as_unref(as);
    if (closed) /* sbx_async_free was called in the round: its loop goes now */
        own_loop_close(own);
}

/* The own loop goes once its handles are closed; one still held (an sbx_process not freed) keeps
 * it, and the loop is then left allocated rather than freed under it. */
static void own_loop_close(uv_loop_t *loop) {
    for (int i = 0; i < OWN_LOOP_CLOSE_ROUNDS && uv_loop_alive(loop); i++)
        uv_run(loop, UV_RUN_NOWAIT);
    if (uv_loop_close(loop) == 0)
        free(loop);
}

void sbx_async_free(sbx_async *as) {
    if (!as || as->closed)
        return;
    as->closed = true;
    uv_loop_t *own = as->in_run ? NULL : as->own_loop; /* else sbx_async_run closes it */
    sbxi_http_async_free(as->engine); /* in-flight operations are called back with SBX_E_IO */
    as_unref(as);
    if (own)
        own_loop_close(own);
}

struct uv_loop_s *sbxi_async_loop(const sbx_async *as) {
    return as->loop;
}

size_t sbx_async_pending(const sbx_async *as) {
    return as ? as->ops : 0;
}

sbx_code sbx_async_submit_error(const sbx_async *as, sbx_err *ret) {
    sbx_err e = as ? as->refused : (sbx_err){0};
    if (ret)
        *ret = e;
    return e.code;
}

/* Every call that starts a request begins here: the handle and the callback, and the handle's
 * last refusal cleared. */
static sbx_code check_handle(sbx_async *as, bool has_cb) {
    if (!as)
        return SBX_E_INVALID;
    as->refused = (sbx_err){0};
    if (as->closed)
        return REFUSE(as, SBX_E_INVALID, "the async handle was freed (sbx_async_free)");
    return has_cb ? SBX_OK : REFUSE(as, SBX_E_INVALID, "the callback is NULL");
}

/* The callback as its kind's type, and any callback as the generic one op_new stores. */
#define CB(o, type) ((type)(o)->fn)
#define FN(cb) ((void (*)(void))(cb))

static op *op_new(sbx_async *as, enum op_kind kind, sbx_sandbox *sb, void (*fn)(void), void *ud) {
    op *o = calloc(1, sizeof(*o));
    if (!o) {
        REFUSE(as, SBX_E_NOMEM, "out of memory");
        return NULL;
    }
    o->as = as;
    o->kind = kind;
    o->ep = sb ? sb->ep : 0;
    o->fn = fn;
    o->ud = ud;
    as->refs++;
    as->ops++;
    return o;
}

static void op_free(op *o) {
    sbx_async *as = o->as;
    if (o->streaming)
        sbxi_exec_stream_done(&o->st);
    free(o->body);
    free(o->idem);
    free(o->order);
    free(o);
    as->ops--;
    as_unref(as);
}

/* Deliver an error (or success with err NULL for done-type ops) and free the op. */
static void op_fail(op *o, const sbx_err *e) {
    switch (o->kind) {
    case OP_CREATE:
        CB(o, sbx_create_cb)(o->ud, NULL, e);
        break;
    case OP_FORK:
        CB(o, sbx_fork_cb)(o->ud, NULL, 0, e);
        break;
    case OP_EXEC:
        CB(o, sbx_exec_cb)(o->ud, NULL, e);
        break;
    case OP_READ:
    case OP_GET_ARCHIVE:
    case OP_INSPECT:
        CB(o, sbx_data_cb)(o->ud, NULL, 0, e);
        break;
    case OP_STATUS:
        CB(o, sbx_status_cb)(o->ud, NULL, e);
        break;
    case OP_LEASE:
        CB(o, sbx_lease_cb)(o->ud, NULL, e);
        break;
    case OP_DONE:
        CB(o, sbx_done_cb)(o->ud, e);
        break;
    case OP_PORT:
        CB(o, sbx_port_cb)(o->ud, 0, NULL, 0, e);
        break;
    }
    op_free(o);
}

static void cancelled(op *o) {
    sbx_err e;
    sbxi_err_set(&e, SBX_E_IO, 0, "", "cancelled: sbx_async_free was called");
    op_fail(o, &e);
}

static void on_done(void *ud, const sbxi_http_result *res);
static void fork_result(op *o, const sbxi_http_result *res);

static sbx_code submit(op *o, const char *method, const char *path, const char *ctype,
                       const char *accept, const void *body, size_t len, sbxi_http_cb cb,
                       void *cb_ud, size_t ep) {
    sbx_client *c = o->as->client;
    _cleanup_free_ char *url = sbxi_url(&c->eps[ep], path);
    sbxi_http_opts opts = {
        .unix_path = c->eps[ep].unix_path,
        .bearer_token = sbxi_bearer(c, &c->eps[ep]),
        .content_type = ctype,
        .accept = accept,
        .extra_header = o->idem,
        .timeout_ms = o->timeout_ms,
        .connect_timeout_ms = 10000,
    };
    if (o->streaming && cb == on_done) {
        opts.on_chunk = sbxi_exec_stream_chunk;
        opts.chunk_ud = &o->st;
    }
    if (!url)
        return SBX_E_NOMEM;
    int r = sbxi_http_async_request_ex(o->as->engine, method, url, NULL, body, len, &opts, cb,
                                       cb_ud ? cb_ud : o);
    return r == 0            ? SBX_OK
           : r == -ENOMEM    ? SBX_E_NOMEM
           : r == -ESHUTDOWN ? SBX_E_IO
                             : SBX_E_INVALID;
}

/* ---- create: info refresh, then one endpoint after the other ---- */
static void create_next(op *o);

static void on_info(void *ud, const sbxi_http_result *res) {
    info_req *ir = ud;
    op *o = ir->parent;
    sbx_client *c = o->as->client;
    if (!res->cancelled)
        sbxi_info_record(c, ir->ep, res->body, res->len, res->status == 200);
    free(ir);
    if (--o->info_pending > 0)
        return;
    if (res->cancelled || o->as->closed) {
        cancelled(o);
        return;
    }
    o->n_order = sbxi_placement_order(c, o->body, o->order);
    create_next(o);
}

static void create_next(op *o) {
    sbx_client *c = o->as->client;
    if (o->k >= o->n_order) {
        sbx_err e = o->last;
        if (o->n_order == 0)
            sbxi_err_set(&e, SBX_E_UNAVAILABLE, 0, "no_node",
                         "no node of the fleet takes new sandboxes (all drained or not answering)");
        else if ((c->n_eps > 1 || c->fleet) && e.code == SBX_E_UNAVAILABLE)
            sbxi_err_set(&e, e.code, o->last.http_status, o->last.api_code,
                         "every endpoint is full or unreachable (last: %.400s)", o->last.message);
        op_fail(o, &e);
        return;
    }
    o->ep = o->order[o->k++];
    if (c->eps[o->ep].free_slots > 0)
        c->eps[o->ep].free_slots--; /* optimistic: spreads a burst of creates */
    sbx_code rc = submit(o, "POST", "/v1/sandboxes", "application/json", NULL, o->body,
                         strlen(o->body), on_done, NULL, o->ep);
    if (rc != SBX_OK) {
        sbx_err e;
        sbxi_err_set(&e, rc, 0, "", "cannot start the create request");
        op_fail(o, &e);
    }
}

static void create_result(op *o, const sbxi_http_result *res, sbx_code rc, sbx_err *e) {
    sbx_client *c = o->as->client;
    if (rc == SBX_OK) {
        sbx_sandbox *sb = NULL;
        sbx_err pe;
        if (sbxi_sandbox_from_body(c, o->ep, res->body, res->len, &sb, &pe) != SBX_OK) {
            op_fail(o, &pe);
            return;
        }
        CB(o, sbx_create_cb)(o->ud, sb, NULL);
        op_free(o);
        return;
    }
    if (sbxi_gpu_unavailable(rc, e) && o->k < o->n_order) { /* GPUs: the next may have some */
        c->eps[o->ep].gpus_free = 0;
        create_next(o);
        return;
    }
    sbxi_create_next next =
        sbxi_create_failed(&c->eps[o->ep], res->detail, rc, o->idem, o->retried, e);
    if (next == SBXI_CREATE_AGAIN) {
        o->retried = true;
        o->k--;
        create_next(o); /* the same endpoint: o->order[o->k] is o->ep */
        return;
    }
    if (next == SBXI_CREATE_FAIL) {
        op_fail(o, e);
        return;
    }
    o->retried = false;
    c->eps[o->ep].free_slots = rc == SBX_E_UNAVAILABLE ? 0 : -1;
    if (o->last.code != SBX_E_UNAVAILABLE) {
        o->last = *e;
        if (rc == SBX_E_NODE_UNAVAILABLE)
            o->last.code = SBX_E_CONNECT; /* no sandbox was lost: the node could not be reached */
    }
    create_next(o);
}

sbx_code sbx_async_create(sbx_async *as, const sbx_create_opts *opts, sbx_create_cb cb, void *ud) {
    return sbx_async_create_with(as, opts, NULL, cb, ud);
}

sbx_code sbx_async_create_with(sbx_async *as, const sbx_create_opts *opts, const char *extra_json,
                               sbx_create_cb cb, void *ud) {
    sbx_code rc = check_handle(as, cb != NULL);
    if (rc != SBX_OK)
        return rc;
    if (opts && !sbxi_header_safe(opts->idempotency_key))
        return REFUSE(as, SBX_E_INVALID, "the idempotency key has control characters");
    sbx_client *c = as->client;
    op *o = op_new(as, OP_CREATE, NULL, FN(cb), ud);
    if (!o)
        return SBX_E_NOMEM;
    o->body = sbxi_create_body_with(opts, extra_json, &as->refused);
    o->order = calloc(c->n_eps, sizeof(size_t));
    if (!o->body || !o->order ||
        (opts && opts->idempotency_key &&
         asprintf(&o->idem, "Idempotency-Key: %s", opts->idempotency_key) < 0)) {
        rc = o->body ? REFUSE(as, SBX_E_NOMEM, "out of memory") : as->refused.code;
        o->idem = NULL;
        op_free(o);
        return rc;
    }
    if (c->fleet && sbxi_info_stale(c, now_mono_ms())) {
        sbxi_fleet_refresh(c, false, NULL); /* may add nodes: order is sized after it */
        free(o->order);
        if (!(o->order = calloc(c->n_eps ? c->n_eps : 1, sizeof(size_t)))) {
            op_free(o);
            return REFUSE(as, SBX_E_NOMEM, "out of memory");
        }
    } else if (c->n_eps > 1 && sbxi_info_stale(c, now_mono_ms())) {
        for (size_t i = 0; i < c->n_eps; i++) {
            info_req *ir = calloc(1, sizeof(*ir));
            if (!ir)
                break;
            *ir = (info_req){o, i};
            o->info_pending++;
            if (submit(o, "GET", "/v1/info", NULL, NULL, NULL, 0, on_info, ir, i) != SBX_OK) {
                o->info_pending--;
                free(ir);
            }
        }
        if (o->info_pending > 0)
            return SBX_OK;
    }
    o->n_order = sbxi_placement_order(c, o->body, o->order);
    if (o->n_order == 0) {
        op_free(o);
        return REFUSE(as, SBX_E_UNAVAILABLE,
                      "no node of the fleet takes new sandboxes (all drained or not answering)");
    }
    /* the first attempt must not call back from inside this call: defer via the engine */
    rc = submit(o, "POST", "/v1/sandboxes", "application/json", NULL, o->body, strlen(o->body),
                on_done, NULL, o->order[0]);
    if (rc != SBX_OK) {
        op_free(o);
        return REFUSE(as, rc, "cannot start the create request (%s)", sbx_code_name(rc));
    }
    o->ep = o->order[0];
    o->k = 1;
    if (c->eps[o->ep].free_slots > 0)
        c->eps[o->ep].free_slots--;
    return SBX_OK;
}

/* ---- fork: one request, many handles ---- */
static void fork_result(op *o, const sbxi_http_result *res) {
    sbx_sandbox **sbs = NULL;
    size_t n = 0;
    sbx_err e;
    if (sbxi_sandboxes_from_body(o->as->client, o->ep, res->body, res->len, &sbs, &n, &e) !=
        SBX_OK) {
        op_fail(o, &e);
        return;
    }
    CB(o, sbx_fork_cb)(o->ud, sbs, n, NULL); /* the handles are the callee's now */
    free(sbs);
    op_free(o);
}

/* ---- completion of every other operation ---- */
static void on_done(void *ud, const sbxi_http_result *res) {
    op *o = ud;
    if (res->cancelled || o->as->closed) {
        cancelled(o);
        return;
    }
    sbx_err e = {0};
    sbx_client *c = o->as->client;
    sbx_code rc = sbxi_err_from_response(&c->eps[o->ep], res->detail, &e);
    if (rc == SBX_OK && c->fleet)
        c->eps[o->ep].down_until_ms = 0;
    if (!res->detail->timed_out) /* the caller's own limit says nothing of the node */
        rc = sbxi_fleet_failed(c, o->ep, rc, &e);
    if (o->kind == OP_CREATE) {
        create_result(o, res, rc, &e);
        return;
    }
    if (o->kind == OP_PORT && (rc == SBX_OK || (res->status && !sbxi_port_refusal(&e)))) {
        CB(o, sbx_port_cb)(o->ud, res->status, res->body ? res->body : "", res->len, NULL);
        op_free(o);
        return;
    }
    if (rc != SBX_OK) {
        op_fail(o, &e);
        return;
    }
    switch (o->kind) {
    case OP_FORK:
        fork_result(o, res);
        return;
    case OP_STATUS: {
        sbx_sandbox_status st;
        if (sbxi_status_parse(res->body, res->len, &st, &e) != SBX_OK) {
            op_fail(o, &e);
            return;
        }
        CB(o, sbx_status_cb)(o->ud, &st, NULL);
        break;
    }
    case OP_LEASE: {
        _cleanup_free_ char *id = NULL;
        if (sbxi_lease_id_parse(res->body, res->len, &id, &e) != SBX_OK) {
            op_fail(o, &e);
            return;
        }
        CB(o, sbx_lease_cb)(o->ud, id, NULL);
        break;
    }
    case OP_INSPECT:
        CB(o, sbx_data_cb)(o->ud, res->body, res->len, NULL);
        break;
    case OP_EXEC: {
        sbx_exec_result r = {0};
        rc = o->streaming ? sbxi_exec_stream_finish(&o->st, &r, &e)
                          : sbxi_exec_result_parse(res->body, res->len, &r, &e);
        if (rc != SBX_OK) {
            op_fail(o, &e);
            return;
        }
        CB(o, sbx_exec_cb)(o->ud, &r, NULL);
        sbx_exec_result_free(&r);
        break;
    }
    case OP_READ:
    case OP_GET_ARCHIVE: {
        bool is_tar = strncmp(res->content_type, "application/x-tar", 17) == 0;
        if (is_tar != (o->kind == OP_GET_ARCHIVE)) {
            sbxi_err_set(&e, SBX_E_INVALID, 200, is_tar ? "is_a_directory" : "not_a_directory",
                         "the path is %s", is_tar ? "a directory" : "not a directory");
            op_fail(o, &e);
            return;
        }
        CB(o, sbx_data_cb)(o->ud, res->body, res->len, NULL);
        break;
    }
    default:
        CB(o, sbx_done_cb)(o->ud, NULL);
        break;
    }
    op_free(o);
}

static sbx_code start(sbx_async *as, op *o, const char *method, const char *path, const char *ctype,
                      const char *accept, const void *body, size_t len) {
    sbx_code rc = path ? submit(o, method, path, ctype, accept, body, len, on_done, NULL, o->ep)
                       : SBX_E_NOMEM;
    if (rc != SBX_OK) {
        op_free(o);
        REFUSE(as, rc, "cannot start the request (%s)", path ? sbx_code_name(rc) : "out of memory");
    }
    return rc;
}

static sbx_code check_sandbox(sbx_async *as, const sbx_sandbox *sb, bool has_cb) {
    sbx_code rc = check_handle(as, has_cb);
    if (rc == SBX_OK && !sb)
        rc = REFUSE(as, SBX_E_INVALID, "the sandbox is NULL");
    else if (rc == SBX_OK && sb->client != as->client)
        rc = REFUSE(as, SBX_E_INVALID, "the sandbox's client is not the async handle's");
    return rc;
}

#define ASYNC_CHECK(as, sb, cb)                                                                    \
    do {                                                                                           \
        sbx_code check_rc_ = check_sandbox((as), (sb), (cb) != NULL);                              \
        if (check_rc_ != SBX_OK)                                                                   \
            return check_rc_;                                                                      \
    } while (0)

/* One operation about sb (path: /v1/sandboxes/{id}<suffix>, or the files path when given). */
static sbx_code sb_op(sbx_async *as, sbx_sandbox *sb, enum op_kind kind, void (*fn)(void), void *ud,
                      const char *method, const char *suffix, const char *ctype, const char *accept,
                      const void *body, size_t len) {
    op *o = op_new(as, kind, sb, fn, ud);
    if (!o)
        return SBX_E_NOMEM;
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, suffix);
    return start(as, o, method, path, ctype, accept, body, len);
}

sbx_code sbx_async_exec(sbx_async *as, sbx_sandbox *sb, const sbx_exec_opts *opts, sbx_exec_cb cb,
                        void *ud) {
    ASYNC_CHECK(as, sb, cb);
    _cleanup_free_ char *body = sbxi_exec_body(opts, &as->refused);
    if (!body)
        return as->refused.code;
    op *o = op_new(as, OP_EXEC, sb, FN(cb), ud);
    if (!o)
        return SBX_E_NOMEM;
    if (opts->on_output) {
        o->streaming = true;
        sbxi_exec_stream_init(&o->st, opts);
    }
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/exec");
    return start(as, o, "POST", path, "application/json",
                 o->streaming ? "application/x-ndjson" : NULL, body, strlen(body));
}

static sbx_code files_op(sbx_async *as, sbx_sandbox *sb, enum op_kind kind, void (*fn)(void),
                         void *ud, const char *method, const char *ctype, const char *path,
                         const void *data, size_t len, unsigned mode) {
    ASYNC_CHECK(as, sb, fn);
    if (!path || (!data && len) || mode > 0777)
        return REFUSE(as, SBX_E_INVALID,
                      "path is NULL, data NULL with a length, or mode over 0777");
    op *o = op_new(as, kind, sb, fn, ud);
    if (!o)
        return SBX_E_NOMEM;
    _cleanup_free_ char *p = sbxi_files_path(sb->id, path, mode);
    return start(as, o, method, p, ctype, "*/*", data, len);
}

sbx_code sbx_async_write_file(sbx_async *as, sbx_sandbox *sb, const char *path, const void *data,
                              size_t len, sbx_done_cb cb, void *ud) {
    return sbx_async_write_file_mode(as, sb, path, data, len, 0, cb, ud);
}

sbx_code sbx_async_write_file_mode(sbx_async *as, sbx_sandbox *sb, const char *path,
                                   const void *data, size_t len, unsigned mode, sbx_done_cb cb,
                                   void *ud) {
    return files_op(as, sb, OP_DONE, FN(cb), ud, "PUT", "application/octet-stream", path, data, len,
                    mode);
}

sbx_code sbx_async_put_archive(sbx_async *as, sbx_sandbox *sb, const char *path, const void *tar,
                               size_t len, sbx_done_cb cb, void *ud) {
    return files_op(as, sb, OP_DONE, FN(cb), ud, "PUT", "application/x-tar", path, tar, len, 0);
}

sbx_code sbx_async_read_file(sbx_async *as, sbx_sandbox *sb, const char *path, sbx_data_cb cb,
                             void *ud) {
    return files_op(as, sb, OP_READ, FN(cb), ud, "GET", NULL, path, NULL, 0, 0);
}

sbx_code sbx_async_get_archive(sbx_async *as, sbx_sandbox *sb, const char *path, sbx_data_cb cb,
                               void *ud) {
    return files_op(as, sb, OP_GET_ARCHIVE, FN(cb), ud, "GET", NULL, path, NULL, 0, 0);
}

sbx_code sbx_async_terminate(sbx_async *as, sbx_sandbox *sb, sbx_done_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    return sb_op(as, sb, OP_DONE, FN(cb), ud, "DELETE", "", NULL, NULL, NULL, 0);
}

sbx_code sbx_async_fork(sbx_async *as, sbx_sandbox *sb, const sbx_fork_opts *opts, sbx_fork_cb cb,
                        void *ud) {
    return sbx_async_fork_with(as, sb, opts, NULL, cb, ud);
}

sbx_code sbx_async_fork_with(sbx_async *as, sbx_sandbox *sb, const sbx_fork_opts *opts,
                             const char *extra_json, sbx_fork_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    _cleanup_free_ char *body = sbxi_fork_body_with(opts, extra_json, &as->refused);
    if (!body)
        return as->refused.code;
    return sb_op(as, sb, OP_FORK, FN(cb), ud, "POST", "/fork", "application/json", NULL, body,
                 strlen(body));
}

sbx_code sbx_async_inspect(sbx_async *as, sbx_sandbox *sb, sbx_data_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    return sb_op(as, sb, OP_INSPECT, FN(cb), ud, "GET", "", NULL, NULL, NULL, 0);
}

sbx_code sbxi_async_port_request_within(sbx_async *as, sbx_sandbox *sb, unsigned port,
                                        const char *method, const char *path,
                                        const char *content_type, const void *body, size_t len,
                                        uint64_t timeout_ms, sbx_port_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    char sub[48 + 1024];
    if (port < 1 || port > 65535 || !method || !path || strlen(path) > 1000 ||
        timeout_ms > LONG_MAX)
        return REFUSE(as, SBX_E_INVALID,
                      "port must be 1..65535, method and path (at most 1000 bytes) given");
    snprintf(sub, sizeof(sub), "/ports/%u/%s", port, path[0] == '/' ? path + 1 : path);
    op *o = op_new(as, OP_PORT, sb, FN(cb), ud);
    if (!o)
        return SBX_E_NOMEM;
    o->timeout_ms = (long)timeout_ms;
    _cleanup_free_ char *p = sbxi_sandbox_path(sb, sub);
    return start(as, o, method, p, body ? content_type : NULL, NULL, body, body ? len : 0);
}

sbx_code sbx_async_port_request(sbx_async *as, sbx_sandbox *sb, unsigned port, const char *method,
                                const char *path, const char *content_type, const void *body,
                                size_t len, sbx_port_cb cb, void *ud) {
    return sbxi_async_port_request_within(as, sb, port, method, path, content_type, body, len, 0,
                                          cb, ud);
}

sbx_code sbx_async_get_status(sbx_async *as, sbx_sandbox *sb, sbx_status_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    return sb_op(as, sb, OP_STATUS, FN(cb), ud, "GET", "", NULL, NULL, NULL, 0);
}

/* ---- commit (the sandbox's node) and volumes (the first endpoint, as the sync API) ---- */
sbx_code sbx_async_commit(sbx_async *as, sbx_sandbox *sb, const char *name, unsigned flags,
                          sbx_data_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    _cleanup_free_ char *body = sbxi_commit_body(name, flags);
    if (!body)
        return REFUSE(as, SBX_E_INVALID, "commit: the name is NULL or empty");
    return sb_op(as, sb, OP_INSPECT, FN(cb), ud, "POST", "/commit", "application/json", NULL, body,
                 strlen(body));
}

sbx_code sbx_async_pause(sbx_async *as, sbx_sandbox *sb, sbx_data_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    return sb_op(as, sb, OP_INSPECT, FN(cb), ud, "POST", "/pause", "application/json", NULL, "{}",
                 2);
}

sbx_code sbx_async_resume(sbx_async *as, sbx_sandbox *sb, sbx_data_cb cb, void *ud) {
    ASYNC_CHECK(as, sb, cb);
    return sb_op(as, sb, OP_INSPECT, FN(cb), ud, "POST", "/resume", "application/json", NULL, "{}",
                 2);
}

sbx_code sbx_async_resume_on(sbx_async *as, sbx_sandbox *sb, const char *node, sbx_data_cb cb,
                             void *ud) {
    ASYNC_CHECK(as, sb, cb);
    if (!node)
        return sbx_async_resume(as, sb, cb, ud);
    json_t *j = json_pack("{s:s}", "node", node);
    _cleanup_free_ char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return REFUSE(as, SBX_E_NOMEM, "out of memory");
    return sb_op(as, sb, OP_INSPECT, FN(cb), ud, "POST", "/resume", "application/json", NULL, body,
                 strlen(body));
}

static sbx_code volume_op(sbx_async *as, enum op_kind kind, void (*fn)(void), void *ud,
                          const char *method, const char *path, const char *body) {
    if (!path || (!body && strcmp(method, "POST") == 0))
        return REFUSE(as, SBX_E_INVALID, "not a volume name (or out of memory)");
    op *o = op_new(as, kind, NULL, fn, ud);
    if (!o)
        return SBX_E_NOMEM;
    o->ep = sbxi_first_ep(as->client);
    return start(as, o, method, path, body ? "application/json" : NULL, NULL, body,
                 body ? strlen(body) : 0);
}

sbx_code sbx_async_volume_create(sbx_async *as, const char *name, uint64_t size, sbx_data_cb cb,
                                 void *ud) {
    sbx_code rc = check_handle(as, cb != NULL);
    if (rc != SBX_OK)
        return rc;
    _cleanup_free_ char *body = sbxi_volume_body(name, size);
    return volume_op(as, OP_INSPECT, FN(cb), ud, "POST", "/v1/volumes", body);
}

sbx_code sbx_async_volume_remove(sbx_async *as, const char *name, sbx_done_cb cb, void *ud) {
    sbx_code rc = check_handle(as, cb != NULL);
    if (rc != SBX_OK)
        return rc;
    _cleanup_free_ char *path = sbxi_volume_path(name);
    return volume_op(as, OP_DONE, FN(cb), ud, "DELETE", path, NULL);
}

/* ---- leases (on the first endpoint, as the sync API) ---- */
sbx_code sbx_async_lease_create(sbx_async *as, uint64_t ttl_ms, sbx_lease_cb cb, void *ud) {
    sbx_code rc = check_handle(as, cb != NULL);
    if (rc != SBX_OK)
        return rc;
    if (ttl_ms == 0)
        return REFUSE(as, SBX_E_INVALID, "the lease's ttl is 0");
    _cleanup_free_ char *body = sbxi_lease_body(ttl_ms);
    op *o = body ? op_new(as, OP_LEASE, NULL, FN(cb), ud) : NULL;
    if (!o)
        return REFUSE(as, SBX_E_NOMEM, "out of memory");
    o->ep = sbxi_first_ep(as->client);
    return start(as, o, "POST", "/v1/leases", "application/json", NULL, body, strlen(body));
}

static sbx_code lease_call(sbx_async *as, const char *lease_id, bool renew, sbx_done_cb cb,
                           void *ud) {
    sbx_code rc = check_handle(as, cb != NULL);
    if (rc != SBX_OK)
        return rc;
    _cleanup_free_ char *path = sbxi_lease_path(lease_id, renew ? "/renew" : "");
    if (!path)
        return REFUSE(as, SBX_E_INVALID, "bad lease id");
    op *o = op_new(as, OP_DONE, NULL, FN(cb), ud);
    if (!o)
        return SBX_E_NOMEM;
    o->ep = sbxi_fleet_route(as->client, lease_id, sbxi_first_ep(as->client));
    return renew ? start(as, o, "POST", path, "application/json", NULL, "{}", 2)
                 : start(as, o, "DELETE", path, NULL, NULL, NULL, 0);
}

sbx_code sbx_async_lease_renew(sbx_async *as, const char *lease_id, sbx_done_cb cb, void *ud) {
    return lease_call(as, lease_id, true, cb, ud);
}

sbx_code sbx_async_lease_delete(sbx_async *as, const char *lease_id, sbx_done_cb cb, void *ud) {
    return lease_call(as, lease_id, false, cb, ud);
}
