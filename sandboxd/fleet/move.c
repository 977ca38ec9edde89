/* The calls between nodes of a paused sandbox's move (fleet/move.h), each a libsbx call on a
 * libuv worker thread with the fleet token; the answer comes back to the loop. */
#include "sandboxd/fleet/move.h"

#include "client/include/sbx.h"
#include "common/fdutil.h"
#include "common/macro.h"
#include "sandboxd/core/ckpt_archive.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

typedef enum { MOVE_PUSH, MOVE_ASK, MOVE_PULL } move_kind;

struct sd_move_job {
    uv_work_t w;
    sd_daemon *d;
    move_kind kind;
    char url[512], id[64], node[64], self[64], key[64], dir[PATH_MAX];
    const char *token;
    sd_move_fn done;
    void *ud;
    bool cancelled;
    sd_move_result res;
};

static void from_err(sd_move_result *res, const sbx_err *e) {
    res->code = e->code == SBX_E_NOMEM ? -ENOMEM
                : e->code == SBX_E_IO  ? -EIO /* this node's own disk (the tar) */
                : e->http_status       ? -EREMOTEIO
                                       : -EHOSTUNREACH;
    res->http_status = e->http_status;
    snprintf(res->api_code, sizeof(res->api_code), "%s", e->api_code);
    snprintf(res->message, sizeof(res->message), "%s", e->message);
}

/* Whether node holds the sandbox (*ret_holds); false when it could not be asked. A node that
 * does not hold it sends the request on (307) to the node the id names, whose answer names
 * itself: libsbx follows. */
static bool ask_node(sd_move_job *j, sbx_client *c, bool *ret_holds, sbx_err *e) {
    sbx_sandbox *sb = NULL;
    char *json = NULL;
    if (sbx_sandbox_open_lazy(c, j->id, &sb, e) == SBX_OK)
        sbx_sandbox_inspect(sb, &json, e);
    sbx_sandbox_free(sb);
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    const char *node = json_string_value(json_object_get(o, "node"));
    const char *state = json_string_value(json_object_get(o, "state"));
    bool asked = o || e->code == SBX_E_NOT_FOUND;
    *ret_holds = node && state && strcmp(node, j->node) == 0 && strcmp(state, "ended") != 0;
    json_decref(o);
    if (*ret_holds && !j->res.body) /* what it says of the sandbox: the caller's answer */
        j->res.body = json, json = NULL;
    free(json);
    return asked;
}

static void ask(sd_move_job *j, sbx_client *c) {
    sbx_err e = {0};
    j->res.known = ask_node(j, c, &j->res.holds, &e);
    if (!j->res.known)
        from_err(&j->res, &e);
}

static void push(sd_move_job *j, sbx_client *c) {
    sbx_err e = {0}, e2 = {0};
    if (sbx_checkpoint_pull(c, j->id, j->self, j->key, &j->res.body, &e) == SBX_OK) {
        j->res.holds = j->res.known = true;
        return;
    }
    from_err(&j->res, &e);
    j->res.known = e.http_status != 0;
    if (!j->res.known) /* no answer: the other node may have taken it all the same */
        j->res.known = ask_node(j, c, &j->res.holds, &e2);
}

static void pull(sd_move_job *j, sbx_client *c) {
    char parent[PATH_MAX];
    sbx_sandbox *sb = NULL;
    sbx_err e = {0};
    snprintf(parent, sizeof(parent), "%s", j->dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    _cleanup_close_ int fd = open(parent, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600); /* the tar */
    error_rec err = {0};
    if (fd < 0 || mkdir(j->dir, 0700) < 0) {
        j->res.code = negative_errno();
        snprintf(j->res.message, sizeof(j->res.message), "stage the checkpoint in %s: %s", j->dir,
                 strerror(-j->res.code));
    } else if (sbx_sandbox_open_lazy(c, j->id, &sb, &e) != SBX_OK ||
               sbx_sandbox_checkpoint_download(sb, j->key, fd, &e) != SBX_OK) {
        from_err(&j->res, &e);
    } else if (lseek(fd, 0, SEEK_SET) < 0 || sd_ckpt_unpack(fd, j->dir, &j->res.record, &err) < 0) {
        j->res.code = err.code ?: -EIO;
        snprintf(j->res.message, sizeof(j->res.message), "%s", err.message);
    }
    sbx_sandbox_free(sb);
    if (j->res.code < 0)
        rm_rf(j->dir);
}

static void work(uv_work_t *w) {
    sd_move_job *j = w->data;
    sbx_client *c = NULL;
    sbx_err e = {0};
    if (sbx_client_new(j->url, &c, &e) != SBX_OK || sbx_client_set_token(c, j->token) != SBX_OK) {
        from_err(&j->res, &e);
        j->res.code = -EINVAL;
    } else if (j->kind == MOVE_PUSH) {
        push(j, c);
    } else if (j->kind == MOVE_ASK) {
        ask(j, c);
    } else {
        pull(j, c);
    }
    sbx_client_free(c);
}

static void after(uv_work_t *w, int status) {
    sd_move_job *j = w->data;
    (void)status;
    if (!j->cancelled) {
        j->done(j->d, j->ud, &j->res);
    } else if (j->kind == MOVE_PULL && j->res.code == 0) {
        rm_rf(j->dir); /* nobody takes the staged checkpoint */
    }
    if (j->cancelled) {
        free(j->res.body);
        json_decref(j->res.record);
    }
    free(j);
}

static int start(sd_daemon *d, move_kind kind, const char *url, const char *id, const char *node,
                 const char *key, const char *dir, sd_move_fn done, void *ud, sd_move_job **ret) {
    sd_move_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (sd_move_job){.d = d, .kind = kind, .done = done, .ud = ud};
    j->token = d->cfg.fleet_token && *d->cfg.fleet_token ? d->cfg.fleet_token : d->cfg.token;
    snprintf(j->url, sizeof(j->url), "%s", url);
    snprintf(j->id, sizeof(j->id), "%s", id);
    snprintf(j->node, sizeof(j->node), "%s", node ?: "");
    snprintf(j->self, sizeof(j->self), "%s", d->cfg.node_name ?: "");
    snprintf(j->dir, sizeof(j->dir), "%s", dir ?: "");
    snprintf(j->key, sizeof(j->key), "%s", key ?: "");
    j->w.data = j;
    int r = uv_queue_work(d->loop, &j->w, work, after);
    if (r < 0) {
        free(j);
        return r;
    }
    *ret = j;
    return 0;
}

int sd_move_push(sd_daemon *d, const char *url, const char *id, const char *node, const char *key,
                 sd_move_fn done, void *ud, sd_move_job **ret) {
    return start(d, MOVE_PUSH, url, id, node, key, NULL, done, ud, ret);
}

int sd_move_ask(sd_daemon *d, const char *url, const char *id, const char *node, sd_move_fn done,
                void *ud, sd_move_job **ret) {
    return start(d, MOVE_ASK, url, id, node, NULL, NULL, done, ud, ret);
}

int sd_move_pull(sd_daemon *d, const char *url, const char *id, const char *key, const char *dir,
                 sd_move_fn done, void *ud, sd_move_job **ret) {
    return start(d, MOVE_PULL, url, id, NULL, key, dir, done, ud, ret);
}

void sd_move_cancel(sd_move_job *job) {
    if (job)
        job->cancelled = true;
}
