/* libsbx's attached processes on a libuv loop: the state machine of process.c driven by a
 * uv_poll on its socket, with on_start/on_output/on_exit callbacks. sbx_process_write and the
 * other calls work on it as on a synchronous one; sbx_process_free releases it on the loop
 * (even from inside its own callbacks). */
#include "client/lib/process.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct proc_async {
    uv_poll_t poll;
    sbx_process *p;
    sbx_process_cbs cbs;
    bool started, in_io, free_wanted, closing;
    int events;
} proc_async;

static void on_closed(uv_handle_t *h) {
    proc_async *pa = h->data;
    sbxi_process_release(pa->p);
    free(pa);
}

static void really_free(proc_async *pa) {
    if (pa->closing)
        return;
    pa->closing = true;
    uv_poll_stop(&pa->poll);
    uv_close((uv_handle_t *)&pa->poll, on_closed);
}

static void update_events(proc_async *pa);

static void on_poll(uv_poll_t *h, int status, int events) {
    proc_async *pa = h->data;
    short rev = 0;
    if (status < 0)
        rev = POLLERR;
    if (events & UV_READABLE)
        rev |= POLLIN;
    if (events & UV_WRITABLE)
        rev |= POLLOUT;
    pa->in_io = true;
    sbxi_process_io(pa->p, rev);
    pa->in_io = false;
    if (pa->free_wanted)
        really_free(pa);
    else
        update_events(pa);
}

static void update_events(proc_async *pa) {
    if (pa->closing)
        return;
    short ev = sbxi_process_events(pa->p);
    int want = (ev & POLLIN ? UV_READABLE : 0) | (ev & POLLOUT ? UV_WRITABLE : 0);
    if (want == pa->events)
        return;
    pa->events = want;
    if (want)
        uv_poll_start(&pa->poll, want, on_poll);
    else
        uv_poll_stop(&pa->poll);
}

static void hook(sbx_process *p, enum sbxi_proc_event ev) {
    proc_async *pa = p->async;
    if (ev == SBXI_PROC_EV_RECONNECT) { /* its socket changes under the same number */
        uv_poll_stop(&pa->poll);
        pa->events = 0; /* (update_events watches it again after this round) */
        return;
    }
    if (pa->free_wanted)
        return; /* sbx_process_free was called inside a callback: none after it */
    if (ev == SBXI_PROC_EV_QUEUED) {
        if (!pa->in_io)
            update_events(pa);
        return;
    }
    if (ev == SBXI_PROC_EV_STARTED) {
        pa->started = true;
        if (pa->cbs.on_start)
            pa->cbs.on_start(pa->cbs.userdata, p, p->pid, NULL);
        return;
    }
    /* done */
    if (!pa->started) {
        sbx_err e = p->err;
        if (!p->failed)
            sbxi_err_set(&e, SBX_E_PROTOCOL, 0, "", "the stream ended before the start");
        if (pa->cbs.on_start)
            pa->cbs.on_start(pa->cbs.userdata, p, -1, &e);
        return;
    }
    if (!pa->cbs.on_exit)
        return;
    sbx_err e = p->err;
    if (p->got_exit && p->exit_error[0]) { /* as sbx_process_wait */
        sbxi_err_set(&e, SBX_E_CONFLICT, 409, "conflict", "%s", p->exit_error);
        pa->cbs.on_exit(pa->cbs.userdata, p, NULL, &e);
        return;
    }
    if (p->got_exit) {
        pa->cbs.on_exit(pa->cbs.userdata, p, &p->result, NULL);
        return;
    }
    if (!p->failed)
        sbxi_err_set(&e, SBX_E_IO, 0, "", "the stream ended without an exit record%s%s",
                     p->last_error[0] ? ": " : "", p->last_error);
    pa->cbs.on_exit(pa->cbs.userdata, p, NULL, &e);
}

static void async_free(sbx_process *p) {
    proc_async *pa = p->async;
    if (pa->in_io)
        pa->free_wanted = true;
    else
        really_free(pa);
}

static sbx_code go(sbx_async *as, sbx_sandbox *sb, const char *path, char *msg,
                   const sbx_process_cbs *cbs, sbx_process **ret, sbx_err *err) {
    proc_async *pa = calloc(1, sizeof(*pa));
    if (!pa) {
        free(msg);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    }
    sbx_process *p = NULL;
    sbx_code rc = sbxi_process_open(sb, path, msg, cbs->on_output, cbs->userdata, &p, err);
    if (rc != SBX_OK) {
        free(pa);
        return rc;
    }
    if (uv_poll_init_socket(sbxi_async_loop(as), &pa->poll, p->fd) < 0) {
        sbxi_process_release(p);
        free(pa);
        return sbxi_err_set(err, SBX_E_IO, 0, "", "cannot watch the stream's socket");
    }
    pa->poll.data = pa;
    pa->p = p;
    pa->cbs = *cbs;
    p->async = pa;
    p->hook = hook;
    p->on_free = async_free;
    update_events(pa);
    *ret = p;
    return SBX_OK;
}

sbx_code sbx_async_process_start(sbx_async *as, sbx_sandbox *sb, const sbx_exec_opts *exec,
                                 const sbx_process_opts *popts, const sbx_process_cbs *cbs,
                                 sbx_process **ret, sbx_err *err) {
    if (!as || !sb || !exec || !cbs || !ret)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "a required argument is NULL");
    sbx_err local, *e = err ? err : &local; /* err may be NULL */
    char *body = sbxi_process_body(exec, popts, false, false, e);
    _cleanup_free_ char *path = sbxi_sandbox_path(sb, "/exec/attach");
    if (!body || !path) {
        free(body);
        return body ? sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory") : e->code;
    }
    return go(as, sb, path, body, cbs, ret, err);
}

sbx_code sbx_async_process_attach(sbx_async *as, sbx_sandbox *sb, long pid, unsigned flags,
                                  const sbx_process_cbs *cbs, sbx_process **ret, sbx_err *err) {
    if (!as || !sb || !cbs || !ret || pid <= 0)
        return sbxi_err_set(err, SBX_E_INVALID, 0, "", "a required argument is missing");
    _cleanup_free_ char *path = sbxi_process_attach_path(sb, pid, flags);
    if (!path)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbx_code rc = go(as, sb, path, NULL, cbs, ret, err);
    if (rc == SBX_OK)
        (*ret)->pid = pid;
    return rc;
}
