/* A GRPO group's shared start: the first episode of a task's group to need a sandbox makes the
 * group create one template sandbox and write the task's setup files in it once; then the
 * waiting episodes get sandboxes forked from it (sbx_async_fork, one call per batch of waiting
 * episodes). Setup commands still run in each episode's own sandbox: they may
 * draw something per episode (docs/GRPO.md). The template is
 * deleted (its cost counted) once every episode of the group has a sandbox, or once launching
 * stopped (grpo_group_stop: the cost cap, a failed run) and no episode waits. Any failure of
 * the template, its setup or a fork sends the episodes down the cold path (each creates its
 * own sandbox and runs the setup, as without forks), so infrastructure failures are reported
 * exactly as before. SBX_GRPO_FORK=0 in the environment turns forks off. */
#include "client/grpo/runner.h"

#include "common/macro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { G_IDLE, G_CREATING, G_SETUP, G_READY, G_FORKING, G_FAILED };

struct grpo_group {
    grpo_run *run;
    const grpo_task *task;
    int state;
    size_t remaining; /* episodes of the group without a sandbox yet */
    size_t setup_i;
    sbx_sandbox *tmpl; /* the template, until its end record was read */
    bool tmpl_live;    /* the template is not terminated yet */
    bool busy, orphan; /* busy: a call is in flight; orphan: free when it ends */
    bool stop;         /* no more episodes start: release once none waits */
    grpo_episode **waiting;
    size_t n_waiting;
    grpo_episode **forking;
    size_t n_forking;
};

grpo_group *grpo_group_new(grpo_run *run, const grpo_task *t, size_t n_episodes) {
    grpo_group *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->waiting = calloc(n_episodes, sizeof(*g->waiting));
    g->forking = calloc(n_episodes, sizeof(*g->forking));
    if (!g->waiting || !g->forking) {
        free(g->waiting);
        free(g->forking);
        free(g);
        return NULL;
    }
    const char *env = getenv("SBX_GRPO_FORK");
    g->run = run;
    g->task = t;
    g->remaining = n_episodes;
    g->state = n_episodes < 2 || (env && strcmp(env, "0") == 0) ? G_FAILED : G_IDLE;
    return g;
}

/* The template's handle goes (its end record read, or given up): the run learns when the last
 * one went (run->templates_gone), to report the cost only once it is all counted. */
static void g_tmpl_free(grpo_group *g) {
    if (!g->tmpl)
        return;
    sbx_sandbox_free(g->tmpl);
    g->tmpl = NULL;
    if (--g->run->templates == 0 && g->run->templates_gone)
        g->run->templates_gone(g->run);
}

static void g_free_now(grpo_group *g) {
    g_tmpl_free(g);
    free(g->waiting);
    free(g->forking);
    free(g);
}

static void g_on_terminated(void *ud, const sbx_err *err);

/* Terminate the template (its cost comes from the end record, like an episode's). */
static void g_release(grpo_group *g) {
    if (!g->tmpl_live || g->busy)
        return;
    g->tmpl_live = false;
    g->busy = sbx_async_terminate(g->run->sbx, g->tmpl, g_on_terminated, g) == SBX_OK;
}

/* After every answer: an orphaned group releases its template, then frees itself. */
static void g_after(grpo_group *g) {
    if (!g->orphan || g->busy)
        return;
    g_release(g);
    if (!g->busy)
        g_free_now(g);
}

/* The run tears down (sbx_async_free cancels what is in flight): free and return. */
static bool g_closing(grpo_group *g) {
    g->busy = false;
    if (!g->run->closing)
        return false;
    if (g->orphan)
        g_free_now(g);
    return true;
}

static void g_fail(grpo_group *g) {
    g->state = G_FAILED;
    for (size_t i = 0; i < g->n_forking; i++)
        grpo_episode_create_cold(g->forking[i]);
    for (size_t i = 0; i < g->n_waiting; i++)
        grpo_episode_create_cold(g->waiting[i]);
    g->remaining -= g->n_forking + g->n_waiting;
    g->n_forking = g->n_waiting = 0;
    g_release(g);
}

static void g_on_forked(void *ud, sbx_sandbox **sbs, size_t n, const sbx_err *err);

static void g_fork(grpo_group *g) {
    if (g->busy || !g->n_waiting)
        return;
    memcpy(g->forking, g->waiting, g->n_waiting * sizeof(*g->forking));
    g->n_forking = g->n_waiting;
    g->n_waiting = 0;
    grpo_create c; /* the forks differ from the template by their labels only */
    grpo_episode_create_opts(g->forking[0], "agent", &c);
    sbx_fork_opts fo;
    sbx_fork_opts_init(&fo);
    fo.count = (unsigned)g->n_forking;
    fo.overrides.labels = c.o.labels;
    g->state = G_FORKING;
    g->busy = sbx_async_fork(g->run->sbx, g->tmpl, &fo, g_on_forked, g) == SBX_OK;
    if (!g->busy)
        g_fail(g);
}

static void g_on_setup(void *ud, const sbx_err *err);

/* Setup files in the template; then fork whoever waits. */
static void g_setup_next(grpo_group *g) {
    const grpo_task *t = g->task;
    size_t i = g->setup_i++;
    if (i >= t->n_setup_files) {
        g->state = G_READY;
        return g_fork(g);
    }
    const grpo_file *f = &t->setup_files[i];
    g->busy = sbx_async_write_file_mode(g->run->sbx, g->tmpl, f->path, f->data, f->len,
                                        grpo_file_mode(f), g_on_setup, g) == SBX_OK;
    if (!g->busy)
        g_fail(g);
}

static void g_on_created(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    grpo_group *g = ud;
    if (g_closing(g))
        return sbx_sandbox_free(sb);
    if (sb) {
        g->tmpl = sb;
        g->tmpl_live = true;
        g->run->templates++;
    }
    if (g->orphan)
        return g_after(g);
    if (err)
        return g_fail(g);
    g->state = G_SETUP;
    g_setup_next(g);
}

static void g_on_setup(void *ud, const sbx_err *err) {
    grpo_group *g = ud;
    if (g_closing(g))
        return;
    if (g->orphan)
        return g_after(g);
    if (err)
        return g_fail(g); /* the episodes write it again and report it as before */
    g_setup_next(g);
}

/* Launching stopped and nothing waits for a fork: no episode will need the template (one that
 * still asks creates its own sandbox), so it goes now rather than when the step ends. */
static void g_stop_check(grpo_group *g) {
    if (!g->stop || g->busy || g->orphan || g->n_waiting || g->n_forking || g->state == G_FAILED)
        return;
    g->state = G_FAILED;
    g_release(g);
}

static void g_on_forked(void *ud, sbx_sandbox **sbs, size_t n, const sbx_err *err) {
    grpo_group *g = ud;
    bool closing = g_closing(g);
    if (closing || g->orphan || err || n != g->n_forking) {
        for (size_t i = 0; i < n; i++)
            sbx_sandbox_free(sbs[i]);
        if (closing)
            return;
        return g->orphan ? g_after(g) : g_fail(g);
    }
    for (size_t i = 0; i < n; i++)
        grpo_episode_forked(g->forking[i], sbs[i]);
    g->remaining -= g->n_forking;
    g->n_forking = 0;
    g->state = G_READY;
    if (g->n_waiting)
        g_fork(g);
    else if (g->remaining == 0)
        g_release(g);
    else
        g_stop_check(g);
}

static void g_on_status(void *ud, const sbx_sandbox_status *st, const sbx_err *err) {
    grpo_group *g = ud;
    if (g_closing(g))
        return;
    if (st) /* orphaned or not: the run paid for it */
        g->run->sandbox_cost += st->cost_usd;
    if (g->orphan)
        return g_after(g); /* frees the group and the template's handle */
    g_tmpl_free(g);        /* last: the run may go on (and free the groups) once it was the last */
}

static void g_on_terminated(void *ud, const sbx_err *err) {
    grpo_group *g = ud;
    if (g_closing(g))
        return;
    if (!err) /* then the end record, for the cost */
        g->busy = sbx_async_get_status(g->run->sbx, g->tmpl, g_on_status, g) == SBX_OK;
    g_after(g);
}

bool grpo_group_want(grpo_episode *ep) {
    grpo_run *run = ep->run;
    grpo_group *g = ep->group < run->n_groups ? run->groups[ep->group] : NULL;
    if (!g || g->state == G_FAILED)
        return false;
    g->waiting[g->n_waiting++] = ep;
    if (g->state == G_IDLE) {
        g->state = G_CREATING;
        grpo_create c;
        grpo_episode_create_opts(ep, "template", &c);
        g->busy = sbx_async_create(run->sbx, &c.o, g_on_created, g) == SBX_OK;
        if (!g->busy) {
            g->n_waiting--;
            g->state = G_FAILED;
            return false;
        }
    } else if (g->state == G_READY) {
        g_fork(g);
    }
    return true;
}

void grpo_group_stop(grpo_group *g) {
    if (!g)
        return;
    g->stop = true;
    g_stop_check(g);
}

void grpo_group_free(grpo_group *g) {
    if (!g)
        return;
    g->orphan = true;
    g_after(g);
}
