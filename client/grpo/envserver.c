/* Server environments (client/grpo/envserver.h, docs/GRPO.md "Server environments"), the
 * episode's part: wait for the port, /reset, /step per turn, /state, all through libsbx's port
 * proxy (sbx_async_port_request) on the run's loop. episode.c reaches these through the run's
 * env_* hooks (run.c sets them), so that no call goes back up into this file. */
#include "client/grpo/envserver.h"
#include "client/grpo/runner.h"
#include "client/lib/internal.h"

#include "common/timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>

static void env_infra(grpo_episode *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void env_infra(grpo_episode *ep, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    grpo_episode_infra(ep, msg);
}

static void env_reset(grpo_episode *ep);

static void on_poll(void *ud, long status, const void *body, size_t len, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!grpo_episode_live(ep))
        return;
    const grpo_env_server *s = ep->task->env_server;
    if (!err)
        return env_reset(ep);
    bool later = strcmp(err->api_code, "port_unreachable") == 0 ||
                 strcmp(err->api_code, "port_timeout") == 0 ||
                 strcmp(err->api_code, "request_timeout") == 0 ||
                 strcmp(err->api_code, "sandbox_not_running") == 0;
    if (later && now_mono_ms() < ep->env_deadline_ms)
        return grpo_episode_later(ep, 100);
    env_infra(ep, "the environment server's port %u did not answer%s%.1f s: %s", s->port,
              later ? " within " : " (", s->wait_ms / 1000.0, err->message);
}

/* The shortest time a probe is given, even when the wait's time is (nearly) up. */
#define ENV_PROBE_MIN_MS 100

/* One GET / given only the wait's time left: a server that accepts and never answers does not
 * hold the episode past its wait (each probe had the daemon's 30 s). */
void grpo_env_poll(grpo_episode *ep) {
    uint64_t now = now_mono_ms(), end = ep->env_deadline_ms;
    uint64_t left = end > now + ENV_PROBE_MIN_MS ? end - now : ENV_PROBE_MIN_MS;
    sbx_code rc =
        sbxi_async_port_request_within(ep->run->sbx, ep->agent, ep->task->env_server->port, "GET",
                                       "/", NULL, NULL, 0, left, on_poll, ep);
    if (rc != SBX_OK)
        env_infra(ep, "environment server: cannot send a request (%s)", sbx_code_name(rc));
}

void grpo_env_begin(grpo_episode *ep) {
    ep->env_deadline_ms = now_mono_ms() + ep->task->env_server->wait_ms;
    grpo_env_poll(ep);
}

/* The server's JSON answer (2xx), or NULL after calling the episode an infrastructure failure. */
static json_t *env_answer(grpo_episode *ep, const char *what, long status, const void *body,
                          size_t len, const sbx_err *err) {
    if (err && err->code == SBX_E_CONFLICT) { /* the agent's actions may have ended it */
        grpo_episode_refused(ep, err, what);
        return NULL;
    }
    if (err) {
        env_infra(ep, "environment server %s: %s", what, err->message);
        return NULL;
    }
    json_t *j = status / 100 == 2 ? json_loadb(body, len, 0, NULL) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        env_infra(ep, "environment server %s: HTTP %ld, not a JSON object: %.200s", what, status,
                  (const char *)body);
        return NULL;
    }
    return j;
}

/* The observation as the policy reads it: its "text" when it has one, else its JSON. */
static char *observation_text(json_t *obs) {
    const char *t = json_string_value(json_object_get(obs, "text"));
    if (t)
        return strdup(t);
    if (json_is_string(obs))
        return strdup(json_string_value(obs));
    return obs ? json_dumps(obs, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("");
}

static void on_reset(void *ud, long status, const void *body, size_t len, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!grpo_episode_live(ep))
        return;
    json_t *j = env_answer(ep, "/reset", status, body, len, err);
    if (!j)
        return;
    char *obs = observation_text(json_object_get(j, "observation"));
    json_decref(j);
    grpo_episode_observe(ep, obs ? obs : "", false);
    free(obs);
}

static void env_reset(grpo_episode *ep) {
    sbx_code rc =
        sbx_async_port_request(ep->run->sbx, ep->agent, ep->task->env_server->port, "POST",
                               "/reset", "application/json", "{}", 2, on_reset, ep);
    if (rc != SBX_OK)
        env_infra(ep, "environment server: cannot send /reset (%s)", sbx_code_name(rc));
}

static void on_step(void *ud, long status, const void *body, size_t len, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!grpo_episode_live(ep))
        return;
    json_t *j = env_answer(ep, "/step", status, body, len, err);
    if (!j)
        return;
    json_t *last = json_array_get(ep->trace, json_array_size(ep->trace) - 1);
    json_t *rw = json_object_get(j, "reward");
    if (json_is_number(rw))
        json_object_set_new(last, "env_reward", json_real(json_number_value(rw)));
    bool done = json_is_true(json_object_get(j, "done"));
    char *obs = observation_text(json_object_get(j, "observation"));
    json_decref(j);
    if (done) { /* the last observation: logged as bounded as any turn's output */
        char out[GRPO_OBS_MAX];
        out[grpo_text_append(out, 0, sizeof(out) - 1, obs, obs ? strlen(obs) : 0)] = 0;
        grpo_text_for_log(out);
        json_object_set_new(last, "output", json_string(out));
        ep->turn++;
        grpo_episode_agent_done(ep, "env_done");
    } else {
        grpo_episode_observe(ep, obs ? obs : "", true);
    }
    free(obs);
}

void grpo_env_step(grpo_episode *ep, const char *action) {
    json_t *b = json_pack("{s:{s:s}}", "action", "message", action);
    char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    sbx_code rc =
        s ? sbx_async_port_request(ep->run->sbx, ep->agent, ep->task->env_server->port, "POST",
                                   "/step", "application/json", s, strlen(s), on_step, ep)
          : SBX_E_NOMEM;
    free(s);
    if (rc != SBX_OK)
        env_infra(ep, "environment server: cannot send /step (%s)", sbx_code_name(rc));
}

static void on_state(void *ud, long status, const void *body, size_t len, const sbx_err *err) {
    grpo_episode *ep = ud;
    if (!grpo_episode_live(ep))
        return;
    json_t *j = env_answer(ep, "/state", status, body, len, err);
    if (!j)
        return;
    json_decref(j);
    ep->env_state = strndup(body, len);
    if (!ep->env_state)
        return env_infra(ep, "out of memory");
    grpo_episode_agent_done(ep, ep->env_stop);
}

void grpo_env_finish(grpo_episode *ep, const char *stop) {
    ep->env_stop = stop;
    sbx_code rc = sbx_async_port_request(ep->run->sbx, ep->agent, ep->task->env_server->port, "GET",
                                         "/state", NULL, NULL, 0, on_state, ep);
    if (rc != SBX_OK)
        env_infra(ep, "environment server: cannot send /state (%s)", sbx_code_name(rc));
}
