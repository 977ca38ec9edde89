/* Spare shims, started ahead of need and handed a sandbox directory (see spare.h). */
#include "sandboxd/core/spare.h"

#include "common/log.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPARE_STOP_MS 3000 /* how long the daemon's end waits for its spares to end */

typedef struct spare {
    int dir_fd;    /* write end: the directory and a newline go here */
    int status_fd; /* read end of the spare's start-up line */
    pid_t pid;     /* its process group too (a session leader), its parked init in it */
} spare;

struct sd_spares {
    spare s[SD_SPARE_SHIMS_MAX];
    unsigned n;
    uv_idle_t later;
    char root[4096]; /* <run dir>/spare-root: where each spare's init builds a root ahead */
};

/* Whether creates that set no isolation run under gVisor (the config's defaults): every one
 * would free what a spare parked for a native start, so spares park nothing. */
static bool default_gvisor(const sd_daemon *d) {
    const char *iso = json_string_value(json_object_get(d->cfg.defaults, "isolation"));
    return iso && !strcmp(iso, "gvisor");
}

static int spare_spawn(sd_daemon *d, spare *ret) {
    static char pad[SD_SPARE_DIR_MAX + 1];
    if (!pad[0])
        memset(pad, ' ', SD_SPARE_DIR_MAX - sizeof("spare")); /* ps shows blanks */
    char version[16];
    snprintf(version, sizeof(version), "%d", d->cgroup_version);
    char *root = d->spares->root[0] ? d->spares->root : NULL;
    char *argv[] = {d->cfg.shim_path, "spare", pad, version, d->cgroup_parent, root, NULL};
    if (default_gvisor(d))
        argv[3] = NULL; /* `sbx-shim spare PAD`: nothing parked */
    int status[2], dir[2];
    if (pipe2(status, O_CLOEXEC) < 0)
        return negative_errno();
    if (pipe2(dir, O_CLOEXEC) < 0) {
        int r = negative_errno();
        safe_close(status[0]);
        safe_close(status[1]);
        return r;
    }
    int fds[] = {status[1], dir[0]};
    pid_t pid = -1;
    int r = sd_spawn(d->loop, d->cfg.shim_path, argv, spec_host_env, fds, 2, NULL, NULL, &pid);
    safe_close(status[1]);
    safe_close(dir[0]);
    if (r < 0) {
        safe_close(status[0]);
        safe_close(dir[1]);
        return r;
    }
    *ret = (spare){.dir_fd = dir[1], .status_fd = status[0], .pid = pid};
    return 0;
}

static void spares_fill(sd_daemon *d) {
    struct sd_spares *sp = d->spares;
    while (sp->n < MIN(d->cfg.spare_shims, SD_SPARE_SHIMS_MAX) && !d->shutting_down) {
        int r = spare_spawn(d, &sp->s[sp->n]);
        if (r < 0) {
            log_warn("cannot start a spare sbx-shim: %s", strerror(-r));
            return;
        }
        sp->n++;
    }
}

static void fill_later_cb(uv_idle_t *h) {
    sd_daemon *d = h->data;
    uv_idle_stop(h);
    if (d->n_starting == 0) /* a build began since: the next refill comes after it */
        spares_fill(d);
}

int sd_spares_init(sd_daemon *d, error_rec *err) {
    d->spares = calloc(1, sizeof(*d->spares));
    if (!d->spares)
        return error_set(err, -ENOMEM, "out of memory");
    uv_idle_init(d->loop, &d->spares->later);
    d->spares->later.data = d;
    uv_unref((uv_handle_t *)&d->spares->later);
    char *root = d->spares->root;
    snprintf(root, sizeof(d->spares->root), "%s/spare-root", d->cfg.run_dir);
    if (mkdir(root, 0700) < 0 && errno != EEXIST) { /* the spares build no root ahead */
        log_warn("cannot make %s: %s", root, strerror(errno));
        root[0] = 0;
    }
    sd_cgroup_remove_stale(d); /* left by spares (and a daemon) of an earlier run, killed */
    spares_fill(d);
    return 0;
}

void sd_spares_refill(sd_daemon *d) {
    if (d->spares && d->spares->n < MIN(d->cfg.spare_shims, SD_SPARE_SHIMS_MAX))
        uv_idle_start(&d->spares->later, fill_later_cb);
}

int sd_spares_take(sd_daemon *d, const char *dir, int *ret_status_fd) {
    struct sd_spares *sp = d->spares;
    size_t len = strlen(dir);
    if (!sp || len > SD_SPARE_DIR_MAX || strchr(dir, '\n'))
        return -EAGAIN;
    char line[SD_SPARE_DIR_MAX + 2];
    memcpy(line, dir, len);
    line[len] = '\n';
    while (sp->n > 0) {
        spare s = sp->s[--sp->n];
        ssize_t w = write(s.dir_fd, line, len + 1); /* < PIPE_BUF: whole or not at all */
        safe_close(s.dir_fd);
        if (w == (ssize_t)(len + 1)) {
            /* a spare still parking does so at a lower priority (shim/sandbox.h): the create
             * waits for it now, so at the daemon's own from here on. It is alive (the write
             * went through) and not yet reaped (that happens on the loop): its pid is its own. */
            errno = 0;
            int nice = getpriority(PRIO_PROCESS, 0);
            setpriority(PRIO_PGRP, (id_t)s.pid, errno ? 0 : nice);
            *ret_status_fd = s.status_fd;
            return 0;
        }
        safe_close(s.status_fd);   /* it died (EPIPE): try the next */
        sd_cgroup_remove_stale(d); /* and its parked cgroup stayed */
    }
    return -EAGAIN;
}

void sd_spares_stop(sd_daemon *d) {
    struct sd_spares *sp = d->spares;
    if (!sp)
        return;
    uv_idle_stop(&sp->later);
    for (unsigned i = 0; i < sp->n; i++) /* end of file: each removes what it parked, exits */
        sp->s[i].dir_fd = safe_close(sp->s[i].dir_fd);
    uint64_t deadline = now_mono_ms() + SPARE_STOP_MS;
    for (unsigned i = 0; i < sp->n; i++) { /* its end closes its status pipe */
        struct pollfd p = {.fd = sp->s[i].status_fd, .events = POLLIN};
        uint64_t now = now_mono_ms();
        if (now < deadline)
            poll(&p, 1, (int)(deadline - now));
        sp->s[i].status_fd = safe_close(sp->s[i].status_fd);
    }
    sp->n = 0;
    sd_cgroup_remove_stale(d);
}
