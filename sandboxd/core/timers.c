/* The daemon's clock: one repeating timer (250 ms) that enforces every sandbox's cost cap,
 * lifetime and idle timeout, expires leases, refreshes usage stats from the shims and forgets
 * ended sandboxes after 10 minutes (24 h for ones that carry an Idempotency-Key). */
#include "sandboxd/daemon.h"

#include "common/timeutil.h"
#include "sandboxd/core/shim_client.h"

#include <string.h>

#define TICK_MS 250
#define STATS_EVERY_MS 2000
#define START_TIMEOUT_MS 60000
#define ENDED_VISIBLE_MS (10 * 60 * 1000ull)
#define IDEM_KEEP_MS (24 * 3600 * 1000ull)

static void stats_reply(void *ud, json_t *r) {
    sd_sandbox *sb = ud;
    if (!r || strcmp(json_string_value(json_object_get(r, "type")) ?: "", "stats") != 0)
        return;
    sb->cpu_usec = (uint64_t)json_integer_value(json_object_get(r, "cpu_usec"));
    sb->mem_bytes = (uint64_t)json_integer_value(json_object_get(r, "mem_bytes"));
    sb->mem_peak_bytes = (uint64_t)json_integer_value(json_object_get(r, "mem_peak_bytes"));
    sb->pids = (uint64_t)json_integer_value(json_object_get(r, "pids"));
    uint64_t oom = (uint64_t)json_integer_value(json_object_get(r, "oom_kills"));
    if (oom > sb->oom_kills)
        sb->d->m.oom_kills += oom - sb->oom_kills;
    sb->oom_kills = MAX(sb->oom_kills, oom);
}

static void check_running(sd_sandbox *sb, uint64_t now, bool stats) {
    double cost = sd_sandbox_cost(sb);
    if (sb->spec.max_cost_usd > 0 && cost >= sb->spec.max_cost_usd)
        sd_sandbox_end(sb, "cost_limit", "the sandbox reached its cost cap of $%g (spent $%.7f)",
                       sb->spec.max_cost_usd, cost);
    else if (now >= sb->expires_ms)
        sd_sandbox_end(sb, "lifetime_exceeded", "the sandbox reached the end of its lifetime");
    else if (sd_exec_count(sb) == 0 && now >= sb->last_activity_ms + sb->spec.idle_timeout_ms)
        sd_sandbox_end(sb, "idle_timeout", "no command or API call for %.3gs",
                       sb->spec.idle_timeout_ms / 1000.0);
    else if (stats && sb->shim)
        sd_shim_request(sb->shim, "stats", NULL, NULL, 0, stats_reply, sb);
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
        } else if (sb->state == SD_STARTING && !sb->queued &&
                   now_mono_us() > sb->start_mono_us + START_TIMEOUT_MS * 1000ull) {
            sd_sandbox_end(sb, "infrastructure_failure", "the sandbox did not start in %ds",
                           START_TIMEOUT_MS / 1000);
        } else if (sb->state == SD_ENDED && now >= sb->ended_ms + ENDED_VISIBLE_MS) {
            sb->hidden = true;
            if (!sb->idem_key || now >= sb->created_ms + IDEM_KEEP_MS) {
                if (sb->shim || sb->uid_slot >= 0)
                    continue; /* still tearing down */
                sd_state_remove(d, sb->id);
                sd_registry_remove(d, sb);
            }
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
