/* The sandbox object as the API shows it (docs/API.md): limits, network, labels, times,
 * usage, cost and the end. */
#include "sandboxd/api/api.h"

#include "common/timeutil.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/registry.h"

static json_t *time_json(uint64_t ms) {
    char buf[40];
    time_format_rfc3339(ms, buf, sizeof(buf));
    return json_string(buf);
}

static json_t *limits_json(const policy_create *c) {
    return json_pack("{s:f,s:I,s:I,s:i,s:f,s:f,s:o}", "cpu", c->cpu, "memory",
                     (json_int_t)c->memory, "disk", (json_int_t)c->disk, "pids", (int)c->pids,
                     "idle_timeout", c->idle_timeout_ms / 1000.0, "timeout", c->timeout_ms / 1000.0,
                     "max_cost_usd",
                     c->max_cost_usd > 0 ? json_real(c->max_cost_usd) : json_null());
}

static json_t *usage_json(const sd_sandbox *sb) {
    return json_pack("{s:f,s:I,s:I,s:I,s:I,s:i,s:i}", "cpu_seconds", sb->cpu_usec / 1e6,
                     "memory_peak_bytes", (json_int_t)sb->mem_peak_bytes, "memory_bytes",
                     (json_int_t)sb->mem_bytes, "pids", (json_int_t)sb->pids, "oom_kills",
                     (json_int_t)sb->oom_kills, "commands_run", (int)sb->commands_run,
                     "commands_running", (int)sb->commands_running);
}

static json_t *end_json(const sd_sandbox *sb) {
    if (sb->state != SD_ENDED)
        return json_null();
    return json_pack("{s:s,s:s,s:o,s:f}", "reason", end_reason_name(sb->end_reason), "message",
                     sb->end_message, "ended_at", time_json(sb->ended_ms), "cost_usd",
                     sb->end_cost);
}

/* A pausable sandbox's pause: on_idle, and when paused (or resuming) its checkpoint (what it
 * costs on disk, how long its dump took) and since when; the last resume's time. */
static json_t *pause_json(const sd_sandbox *sb) {
    json_t *j = json_pack("{s:s}", "on_idle", sb->spec.on_idle_pause ? "pause" : "end");
    if (j && (sb->state == SD_PAUSED || sb->resuming))
        json_object_set_new(j, "checkpoint",
                            json_pack("{s:I,s:f,s:f,s:i,s:o}", "bytes", (json_int_t)sb->ckpt_bytes,
                                      "dump_ms", sb->ckpt_dump_ms, "files_ms", sb->ckpt_files_ms,
                                      "sockets_ended", (int)sb->ckpt_sockets_ended, "paused_at",
                                      time_json(sb->paused_ms)));
    if (j && sb->resume_ms > 0)
        json_object_set_new(j, "last_resume_ms", json_real(sb->resume_ms));
    if (j && sb->state == SD_PAUSED && sb->move_to[0]) /* api/move.c */
        json_object_set_new(j, "moving_to", json_string(sb->move_to));
    return j;
}

json_t *sd_api_sandbox_json(const sd_sandbox *sb) {
    const policy_create *c = &sb->spec;
    json_t *j =
        json_pack("{s:s,s:s,s:s,s:o,s:o,s:O,s:o,s:o,s:o,s:o,s:o,s:f,s:o,s:o}", "id", sb->id,
                  "state", sd_state_name(sb->state), "image", c->image, "limits", limits_json(c),
                  "network", sd_network_json(sb), "labels", c->labels, "lease",
                  c->lease ? json_string(c->lease) : json_null(), "created_at",
                  time_json(sb->created_ms), "last_activity_at", time_json(sb->last_activity_ms),
                  "expires_at", time_json(sb->expires_ms), "usage", usage_json(sb), "cost_usd",
                  sd_sandbox_cost(sb), "end", end_json(sb), "pooled", json_boolean(sb->pooled));
    if (j && sb->forked_from[0])
        json_object_set_new(j, "forked_from", json_string(sb->forked_from));
    if (j) /* GPUs: the uuids it holds (core/gpu.c), [] for none */
        json_object_set_new(j, "gpus", c->gpu_uuids ? json_deep_copy(c->gpu_uuids) : json_array());
    if (j) /* docs/SECURITY.md: "native" or "gvisor" */
        json_object_set_new(j, "isolation", json_string(c->gvisor ? "gvisor" : "native"));
    if (j) /* volumes: [{"name","path","read_only"}], [] for none */
        json_object_set_new(j, "volumes", c->volumes ? json_deep_copy(c->volumes) : json_array());
    if (j && sb->d->cfg.fleet_etcd && sb->d->cfg.node_name) /* in a fleet: the node that holds it */
        json_object_set_new(j, "node", json_string(sb->d->cfg.node_name));
    if (j && c->pausable) /* core/checkpoint.c */
        json_object_set_new(j, "pause", pause_json(sb));
    return j;
}
