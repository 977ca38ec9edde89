/* A GRPO group's shared start: the first episode of a task's group to need a sandbox makes the
 * group create one template sandbox and write the task's setup files in it once; then the
 * waiting episodes get sandboxes forked from it (POST /v1/sandboxes/{id}/fork, one request per
 * batch of waiting episodes). Setup commands still run in each episode's own sandbox: they may
 * draw something per episode (docs/GRPO.md). The template is
 * deleted (its cost counted) once every episode of the group has a sandbox. Any failure of
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
    char tmpl[96];
    bool tmpl_live, busy, orphan; /* busy: a request is in flight; orphan: free when it ends */
    grpo_episode **waiting;
    size_t n_waiting;
    grpo_episode **forking;
    size_t n_forking;
};

static void g_on_resp(void *ud, const grpo_http_resp *r);

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

static void g_free_now(grpo_group *g) {
    free(g->waiting);
    free(g->forking);
    free(g);
}

static void g_request(grpo_group *g, const char *method, const char *path, json_t *body,
                      uint64_t timeout_ms) {
    g->busy = true;
    if (grpo_daemon_request(g->run, method, path, body, timeout_ms, g_on_resp, g) < 0)
        g->busy = false; /* the caller sees !busy and falls back */
}

/* Delete the template (its cost comes from the end record's GET, like an episode's). */
static void g_release(grpo_group *g) {
    if (!g->tmpl_live || g->busy)
        return;
    char path[160];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", g->tmpl);
    g->tmpl_live = false;
    g_request(g, "DELETE", path, NULL, 60000);
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

static void g_fork(grpo_group *g) {
    if (g->busy || !g->n_waiting)
        return;
    memcpy(g->forking, g->waiting, g->n_waiting * sizeof(*g->forking));
    g->n_forking = g->n_waiting;
    g->n_waiting = 0;
    char path[160];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/fork", g->tmpl);
    json_t *body =
        json_pack("{s:i,s:{s:s,s:s,s:s}}", "count", (int)g->n_forking, "labels", "grpo_run",
                  g->run->run_id, "grpo_role", "agent", "grpo_task", g->task->id);
    g->state = G_FORKING;
    g_request(g, "POST", path, body, 120000);
    if (!g->busy)
        g_fail(g);
}

/* Setup files in the template; then fork whoever waits. */
static void g_setup_next(grpo_group *g) {
    const grpo_task *t = g->task;
    size_t i = g->setup_i++;
    if (i < t->n_setup_files) {
        _cleanup_free_ char *path = grpo_file_put_path(g->tmpl, &t->setup_files[i]);
        g->busy = path && grpo_daemon_request_raw(g->run, "PUT", path, "application/octet-stream",
                                                  t->setup_files[i].data, t->setup_files[i].len,
                                                  g_on_resp, g) == 0;
    } else {
        g->state = G_READY;
        return g_fork(g);
    }
    if (!g->busy)
        g_fail(g);
}

static bool ok_status(const grpo_http_resp *r, long want) {
    return !r->transport_error && r->status == want;
}

static void g_on_created(grpo_group *g, const grpo_http_resp *r) {
    json_t *j = ok_status(r, 201) ? json_loads(r->body, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(j, "id"));
    if (!id || strlen(id) >= sizeof(g->tmpl)) {
        json_decref(j);
        return g_fail(g);
    }
    snprintf(g->tmpl, sizeof(g->tmpl), "%s", id);
    g->tmpl_live = true;
    json_decref(j);
    g->state = G_SETUP;
    g_setup_next(g);
}

static void g_on_setup(grpo_group *g, const grpo_http_resp *r) {
    if (!ok_status(r, 204))
        return g_fail(g); /* the episodes write it again and report it as before */
    g_setup_next(g);
}

static void g_on_forked(grpo_group *g, const grpo_http_resp *r) {
    json_t *j = ok_status(r, 201) ? json_loads(r->body, 0, NULL) : NULL;
    if (!json_is_array(j) || json_array_size(j) != g->n_forking) {
        json_decref(j);
        return g_fail(g);
    }
    for (size_t i = 0; i < g->n_forking; i++) {
        const char *id = json_string_value(json_object_get(json_array_get(j, i), "id"));
        grpo_episode_forked(g->forking[i], id ? id : "");
    }
    json_decref(j);
    g->remaining -= g->n_forking;
    g->n_forking = 0;
    g->state = G_READY;
    if (g->n_waiting)
        g_fork(g);
    else if (g->remaining == 0)
        g_release(g);
}

static void g_on_deleted(grpo_group *g, const grpo_http_resp *r) {
    if (ok_status(r, 204)) { /* then the end record, for the cost */
        char path[160];
        snprintf(path, sizeof(path), "/v1/sandboxes/%s", g->tmpl);
        g->tmpl[0] = '#'; /* marks the GET */
        return g_request(g, "GET", path, NULL, 30000);
    }
}

static void g_on_resp(void *ud, const grpo_http_resp *r) {
    grpo_group *g = ud;
    g->busy = false;
    if (g->tmpl[0] == '#') { /* the template's end record */
        json_t *j = ok_status(r, 200) ? json_loads(r->body, 0, NULL) : NULL;
        json_t *c = json_object_get(json_object_get(j, "end"), "cost_usd");
        if (json_is_number(c) && !g->orphan)
            g->run->sandbox_cost += json_number_value(c);
        json_decref(j);
        g->tmpl[0] = 0;
    } else if (!g->tmpl_live && g->tmpl[0] && g->state != G_CREATING) {
        g_on_deleted(g, r);
    } else if (g->orphan) {
    } else if (g->state == G_CREATING) {
        g_on_created(g, r);
    } else if (g->state == G_SETUP) {
        g_on_setup(g, r);
    } else if (g->state == G_FORKING) {
        g_on_forked(g, r);
    }
    if (g->orphan && !g->busy) {
        if (g->tmpl_live)
            return g_release(g);
        g_free_now(g);
    }
}

bool grpo_group_want(grpo_episode *ep) {
    grpo_run *run = ep->run;
    grpo_group *g = ep->group < run->n_groups ? run->groups[ep->group] : NULL;
    if (!g || g->state == G_FAILED)
        return false;
    g->waiting[g->n_waiting++] = ep;
    if (g->state == G_IDLE) {
        g->state = G_CREATING;
        g_request(g, "POST", "/v1/sandboxes", grpo_episode_create_body(ep), 120000);
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

void grpo_group_free(grpo_group *g) {
    if (!g)
        return;
    g->orphan = true;
    if (g->tmpl_live && !g->busy)
        g_release(g);
    if (!g->busy)
        g_free_now(g);
}
