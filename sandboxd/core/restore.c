/* Start-up after a restart (core/restore.h): the records are read back (core/state.c), leases
 * first; a running sandbox is re-adopted through its shim, a warm pool entry is kept when its
 * template is still configured, and networked ones get their rules back. */
#include "sandboxd/core/restore.h"

#include "sandboxd/core/checkpoint.h"
#include "sandboxd/core/fork.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/quarantine.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"

static void adopt(sd_sandbox *sb, bool pool) {
    error_rec err = {0};
    sd_slot_claim(sb->d, sb->uid_slot);
    if (sb->start_unconfirmed && sb->seed_dir) { /* its group's answer is lost, its layer goes */
        sd_sandbox_adopt(sb, &err);
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "the daemon stopped while the fork started");
    } else if (pool && !sd_pool_adopt_restored(sb)) {
        sd_sandbox_adopt(sb, &err);
        sd_sandbox_end(sb, END_TERMINATED, "warm pool entry of a template no longer configured");
    } else if (sd_sandbox_adopt(sb, &err) < 0) {
        log_warn("cannot re-adopt sandbox=%s error=\"%s\"", sb->id, err.message);
        if (sd_checkpoint_shim_gone(sb)) /* stopped while pausing or resuming: paused */
            return;
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE,
                       "the sandbox's shim was gone when the daemon restarted");
    } else {
        log_info("re-adopting sandbox=%s", sb->id);
    }
}

static int restore_sandbox(sd_daemon *d, json_t *j) {
    sd_sandbox *sb;
    bool pool;
    int r = sd_state_load(d, j, &sb, &pool);
    if (r < 0)
        return r;
    sd_registry_insert(d, sb);
    error_rec err = {0};
    if (sb->state != SD_ENDED && sd_gpu_claim(sb, &err) < 0) { /* GPUs: held again */
        log_warn("sandbox=%s error=\"%s\"", sb->id, err.message);
        adopt(sb, pool);
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "its GPUs are gone after the restart");
    } else if (sb->state == SD_PAUSED) {
        sd_slot_claim(d, sb->uid_slot); /* its checkpoint's ids (core/checkpoint.c) */
        if (sd_checkpoint_restored(sb) < 0)
            sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE,
                           "its checkpoint was not whole when the daemon restarted");
    } else if (sb->state != SD_ENDED) {
        adopt(sb, pool);
    }
    return 0;
}

static void network_lost(sd_sandbox *sb, const char *why) {
    sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE,
                   "the sandbox's network could not be restored%s%s", why ? ": " : "",
                   why ? why : "");
}

void sd_restore(sd_daemon *d) {
    sd_leases_restore(d);
    sd_state_foreach(d, "sandboxes", restore_sandbox);
    sd_checkpoint_sweep(d);
    sd_fork_recover(d);
    sd_network_restore(d, network_lost);
    sd_slots_quarantine_left(d); /* after every restored sandbox has claimed its slot */
}
