/* uid slots held back after a failed `sbx-shim cleanup` or shim teardown (core/quarantine.h). */
#include "sandboxd/core/quarantine.h"

#include "common/log.h"
#include "common/spec.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RETRY_FIRST_MS 250
#define RETRY_MAX_MS 5000

typedef struct sd_quarantine {
    struct sd_quarantine *next;
    sd_daemon *d;
    uv_timer_t timer;
    int slot;
    unsigned delay_ms; /* until the next check (doubles up to RETRY_MAX_MS) */
    unsigned tries;    /* cleanups run again */
    char id[64];
    char dir[PATH_MAX];
} sd_quarantine;

static bool slot_in_use(const sd_daemon *d, int slot) {
    return sd_cgroup_uids_in_use(d, (uid_t)sd_uid_base(slot), SHIM_UID_RANGE);
}

static void status_text(int status, char *buf, size_t len) {
    if (status < 0)
        snprintf(buf, len, "it could not run");
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

static void timer_closed(uv_handle_t *h) {
    free(h->data);
}

/* Nothing runs under q's uids any more: the slot is free again. */
static void release(sd_quarantine *q) {
    sd_daemon *d = q->d;
    for (sd_quarantine **pp = &d->quarantined; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    d->n_quarantined--;
    sd_slot_release(d, q->slot);
    log_info("uid slot %d free again: nothing runs under uids %d-%d any more sandbox=%s tries=%u",
             q->slot, sd_uid_base(q->slot), sd_uid_base(q->slot) + (int)SHIM_UID_RANGE - 1, q->id,
             q->tries);
    uv_close((uv_handle_t *)&q->timer, timer_closed);
}

static void check(uv_timer_t *t);

static void check_later(sd_quarantine *q) {
    uv_timer_start(&q->timer, check, q->delay_ms, 0);
    q->delay_ms = MIN(q->delay_ms * 2, RETRY_MAX_MS);
}

static void retry_exited(void *ud, int status) {
    sd_quarantine *q = ud;
    char why[64];
    status_text(status, why, sizeof(why));
    log_debug("sbx-shim cleanup retried sandbox=%s slot=%d: %s", q->id, q->slot, why);
    if (slot_in_use(q->d, q->slot))
        check_later(q);
    else
        release(q);
}

/* Free when nothing runs under the slot's uids; else the cleanup again while its run dir is
 * there (it kills what is left in the sandbox's cgroup), and another check later. Without a run
 * dir (the shim's teardown removed it) the cgroups its teardown left go once they are empty. A
 * slot found at start-up in use by no sandbox's cgroup (no id) has neither. */
static void check(uv_timer_t *t) {
    sd_quarantine *q = t->data;
    sd_daemon *d = q->d;
    bool dir_left = q->dir[0] && access(q->dir, F_OK) == 0;
    if (q->id[0] && !dir_left)
        (void)sd_cgroup_sandbox_remove(d, q->id);
    if (!slot_in_use(d, q->slot)) {
        release(q);
        return;
    }
    char *args[] = {d->cfg.shim_path, "cleanup", q->dir, NULL};
    if (dir_left && sd_spawn(d->loop, d->cfg.shim_path, args, spec_host_env, NULL, 0, retry_exited,
                             q, NULL) == 0) {
        q->tries++;
        return;
    }
    check_later(q);
}

/* what: why the slot may still be in use (it names sandbox id). */
static void quarantine(sd_daemon *d, int slot, const char *what, const char *id, const char *dir) {
    sd_quarantine *q = calloc(1, sizeof(*q));
    log_warn("uid slot %d quarantined: %s and processes still run under uids %d-%d; not handed "
             "out again until none does",
             slot, what, sd_uid_base(slot), sd_uid_base(slot) + (int)SHIM_UID_RANGE - 1);
    d->n_quarantined++;
    if (!q) /* held for good: never handed out while its processes may live */
        return;
    *q = (sd_quarantine){.next = d->quarantined, .d = d, .slot = slot, .delay_ms = RETRY_FIRST_MS};
    snprintf(q->id, sizeof(q->id), "%s", id);
    snprintf(q->dir, sizeof(q->dir), "%s", dir);
    uv_timer_init(d->loop, &q->timer);
    uv_unref((uv_handle_t *)&q->timer); /* a stopping daemon does not wait for it */
    q->timer.data = q;
    d->quarantined = q;
    check_later(q);
}

void sd_slot_cleaned(sd_daemon *d, int slot, int status, const char *id, const char *dir) {
    if (slot < 0)
        return;
    bool ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!dir[0] && sd_cgroup_sandbox_left(d, id)) /* as check() does: the cgroups, once empty */
        (void)sd_cgroup_sandbox_remove(d, id);
    if ((ok && dir[0]) || !slot_in_use(d, slot)) {
        sd_slot_release(d, slot);
        return;
    }
    char why[64], what[192];
    status_text(status, why, sizeof(why));
    if (dir[0])
        snprintf(what, sizeof(what), "sbx-shim cleanup of sandbox=%s failed (%s)", id, why);
    else
        snprintf(what, sizeof(what),
                 "sbx-shim cleanup of sandbox=%s found no run dir to clean (%s), which an "
                 "earlier cleanup or its shim removed",
                 id, why);
    quarantine(d, slot, what, id, dir);
}

void sd_slot_torn_down(sd_daemon *d, int slot, const char *id, const char *dir) {
    /* the usual end: its cgroups are gone, one or two access(2) and no /proc scan */
    if (slot < 0 || !sd_cgroup_sandbox_left(d, id) || sd_cgroup_sandbox_remove(d, id) ||
        !slot_in_use(d, slot)) {
        sd_slot_release(d, slot);
        return;
    }
    char what[192];
    snprintf(what, sizeof(what), "the shim's teardown of sandbox=%s left its cgroup", id);
    quarantine(d, slot, what, id, dir);
}

/* A process of cgroup name under the parent runs under uid: its slot, unless a sandbox holds it
 * (re-adopted, paused, or its cleanup running), is quarantined. */
static bool left_user(void *ud, uid_t uid, const char *name) {
    sd_daemon *d = ud;
    int slot = (int)((uid - (uid_t)sd_uid_base(0)) / SHIM_UID_RANGE);
    if (sd_slot_taken(d, slot))
        return false;
    bool sandbox = strncmp(name, "sb-", 3) == 0; /* else no run dir or cgroup of its own to go */
    char what[192], dir[PATH_MAX] = "";
    if (sandbox)
        snprintf(dir, sizeof(dir), "%s/sandboxes/%s", d->cfg.run_dir, name);
    snprintf(what, sizeof(what), "the daemon restarted with the cgroup %s of an earlier run left",
             name);
    sd_slot_claim(d, slot);
    quarantine(d, slot, what, sandbox ? name : "", dir);
    return false;
}

void sd_slots_quarantine_left(sd_daemon *d) {
    uid_t lo = (uid_t)sd_uid_base(0);
    if (sd_cgroup_each_uid_user(d, lo, (uid_t)d->n_slots * SHIM_UID_RANGE, left_user, d) < 0)
        log_warn("cannot read /proc: the uid slots of an earlier run's processes that may still "
                 "run are handed out");
}
