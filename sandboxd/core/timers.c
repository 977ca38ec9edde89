/* The daemon's clock: one repeating timer (250 ms) that enforces every sandbox's cost cap,
 * lifetime and idle timeout (a pause instead of the end for "on_idle":"pause"), expires leases,
 * refreshes usage stats from the shims and forgets ended sandboxes after 10 minutes (24 h for ones
 * that carry an Idempotency-Key). */
#include "sandboxd/core/timers.h"

#include "common/timeutil.h"
#include "sandboxd/core/checkpoint.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"

#include <stdio.h>

#define TICK_MS 250
#define STATS_EVERY_MS 2000
#define START_TIMEOUT_MS 60000
#define ENDED_VISIBLE_MS (10 * 60 * 1000ull)
#define IDEM_KEEP_MS (24 * 3600 * 1000ull)

int sd_timers_check(const sd_sandbox *sb, uint64_t now, char *msg, size_t len) {
    double cost = sd_sandbox_cost(sb);
    if (sb->spec.max_cost_usd > 0 && cost >= sb->spec.max_cost_usd) {
        snprintf(msg, len, "the sandbox reached its cost cap of $%g", sb->spec.max_cost_usd);
        return END_COST_LIMIT;
    }
    if (now >= sb->expires_ms) {
        snprintf(msg, len, "the sandbox reached the end of its lifetime");
        return END_LIFETIME_EXCEEDED;
    }
    if (sb->commands_running == 0 && sb->connections_open == 0 &&
        now >= sb->last_activity_ms + sb->spec.idle_timeout_ms) {
        snprintf(msg, len, "no command, connection or API call for %.3gs",
                 sb->spec.idle_timeout_ms / 1000.0);
        return END_IDLE_TIMEOUT;
    }
    return -1;
}

static void probe_known(void *ud, const error_rec *err) {
    (void)ud, (void)err; /* the next tick reads it (sd_checkpoint_known) */
}

static void idle_paused(void *ud, sd_sandbox *sb, const error_rec *err) {
    (void)ud;
    if (err && sb->state == SD_RUNNING)
        sd_sandbox_end(sb, END_IDLE_TIMEOUT,
                       "no command, connection or API call for %.3gs; it could not pause: %s",
                       sb->spec.idle_timeout_ms / 1000.0, err->message);
}

/* An idle sandbox created with "on_idle":"pause" pauses instead of ending (core/checkpoint.c);
 * one that cannot ends as any idle one does, saying why. After a restart the node's probe runs
 * first (the pause waits for a later tick). */
static void idle_pause(sd_sandbox *sb, const char *msg) {
    const error_rec *known = sd_checkpoint_known();
    if (!known) {
        sd_checkpoint_probe(sb->d, probe_known, NULL);
        return;
    }
    error_rec err = {0};
    if (known->code < 0)
        err = *known;
    else if (sd_checkpoint_pause(sb, idle_paused, NULL, &err) == 0)
        return;
    sd_sandbox_end(sb, END_IDLE_TIMEOUT, "%s; it could not pause: %s", msg, err.message);
}

static void check_running(sd_sandbox *sb, uint64_t now, bool stats) {
    char msg[200];
    if (sb->pausing)
        return; /* its shim is saving it */
    int reason = sd_timers_check(sb, now, msg, sizeof(msg));
    if (reason == END_IDLE_TIMEOUT && sb->spec.on_idle_pause)
        idle_pause(sb, msg);
    else if (reason >= 0)
        sd_sandbox_end(sb, (end_reason)reason, "%s", msg);
    else if (stats)
        sd_sandbox_refresh_stats(sb);
}

/* A start that takes too long fails. Its cost and its lifetime run from the create (queued, or
 * its shim slow: expires_at is created_at plus its timeout), so its cap and its timeout end it
 * as they end a running sandbox (a pool entry's start at hand-out, a resume's stand still until
 * it runs). */
static void check_starting(sd_sandbox *sb, uint64_t now) {
    double cap = sb->spec.max_cost_usd;
    const char *queued = sb->queued ? " (queued)" : "";
    if (!sb->queued && now_mono_us() > sb->start_mono_us + START_TIMEOUT_MS * 1000ull)
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "the sandbox did not start in %ds",
                       START_TIMEOUT_MS / 1000);
    else if (sb->pool || sb->resuming)
        return;
    else if (cap > 0 && sd_sandbox_cost(sb) >= cap)
        sd_sandbox_end(sb, END_COST_LIMIT,
                       "the sandbox reached its cost cap of $%g before it started%s", cap, queued);
    else if (now >= sb->expires_ms)
        sd_sandbox_end(sb, END_LIFETIME_EXCEEDED,
                       "the sandbox reached the end of its lifetime before it started%s", queued);
}

/* An ended sandbox: hidden after 10 minutes, forgotten once torn down and its key expired (a
 * moved one: once its lifetime is over, core/checkpoint.c). */
static void check_ended(sd_sandbox *sb, uint64_t now) {
    if (now < sb->ended_ms + ENDED_VISIBLE_MS)
        return;
    sd_registry_set_hidden(sb, true);
    if (sb->idem_key && now < sb->created_ms + IDEM_KEEP_MS)
        return;
    if (sb->end_reason == END_MOVED && now < sb->expires_ms + ENDED_VISIBLE_MS)
        return; /* moved to another node: a forward there for the rest of its lifetime */
    if (sb->shim || sb->uid_slot >= 0)
        return; /* still tearing down */
    sd_state_remove(sb->d, sb->id);
    sd_sandbox_forget(sb);
}

void sd_timers_tick(sd_daemon *d) {
    static uint64_t last_stats;
    uint64_t now = now_real_ms(), mono = now_mono_ms();
    bool stats = mono >= last_stats + STATS_EVERY_MS;
    if (stats)
        last_stats = mono;
    sd_leases_expire(d);
    for (sd_sandbox *sb = d->sandboxes, *next; sb; sb = next) {
        next = sb->next;
        if (sb->state == SD_RUNNING && sb->pool) {
            continue; /* a warm pool entry: its timers and cost start at hand-out */
        } else if (sb->state == SD_RUNNING) {
            check_running(sb, now, stats);
        } else if (sb->state == SD_STARTING) {
            check_starting(sb, now);
        } else if (sb->state == SD_ENDED) {
            check_ended(sb, now);
        }
    }
    sd_pool_refill(d);
}

static void tick_cb(uv_timer_t *t) {
    sd_timers_tick(t->data);
}

void sd_timers_start(sd_daemon *d) {
    uv_timer_init(d->loop, &d->tick);
    d->tick.data = d;
    uv_timer_start(&d->tick, tick_cb, TICK_MS, TICK_MS);
}
