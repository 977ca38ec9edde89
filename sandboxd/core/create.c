/* Admission of a create (core/create.h). */
#include "sandboxd/core/create.h"
#include "sandboxd/core/gpu.h"
#include "sandboxd/core/gvisor.h"

#include "sandboxd/core/images.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"
#include "sandboxd/core/volumes.h"

#include <string.h>

static int not_saved(error_rec *err, int r) {
    return error_set(err, -EDQUOT, "cannot save the sandbox's state: %s", strerror(-r));
}

static int from_pool(sd_sandbox *sb, policy_create *c, const sd_idem *idem, error_rec *err) {
    int r = sd_pool_hand_out(sb, c, idem);
    if (r < 0) {
        sd_registry_set_idem_key(sb, NULL); /* a retry with the same key tries again */
        sd_sandbox_end(sb, END_INFRASTRUCTURE_FAILURE, "its state could not be saved");
        r = not_saved(err, r);
    }
    sd_pool_refill_later(sb->d);
    return r;
}

/* Save a new sandbox before anything is started: one the state directory does not know would
 * be lost by a restart. On failure (a full or read-only state directory) it is forgotten. */
static int cold_start(sd_daemon *d, policy_create *c, const sd_idem *idem, policy_egress **eg,
                      sd_sandbox **ret, error_rec *err) {
    sd_sandbox *sb;
    if (sd_registry_add(d, c, &sb, err) < 0)
        return err->code = -EAGAIN;
    sd_registry_set_idem_key(sb, idem);
    sd_network_attach(sb, TAKE_PTR(*eg)); /* before its first record: its names' addresses */
    int r = sd_gpu_claim(sb, err);        /* GPUs: reserved by admit, so this cannot fail here */
    if (r < 0 || (r = sd_state_save(sb)) < 0) {
        sd_gpu_release(sb);
        sd_sandbox_discard(sb);
        sd_metrics_create(&d->m, SD_CREATE_ERROR, 0);
        return r == -ENODEV ? r : not_saved(err, r);
    }
    log_info("sandbox created sandbox=%s cpu=%g memory=%llu", sb->id, sb->spec.cpu,
             (unsigned long long)sb->spec.memory);
    *ret = sb;
    return 0;
}

static int admit(sd_daemon *d, policy_create *c, const sd_idem *idem, policy_egress **eg,
                 sd_sandbox **ret, bool *ret_starting, error_rec *err) {
    sd_sandbox *sb;
    if (sd_network_check(d, c, eg, err) < 0) {
        sd_metrics_create(&d->m, SD_CREATE_ERROR, 0);
        return err->code;
    }
    if (sd_images_check(d, c->image, err) < 0) /* images: a store or config image (-ENOENT) */
        return err->code;
    if (c->lease && !sd_lease_exists(d, c->lease))
        return error_set(err, -ENOENT, "lease: %s not found", c->lease);
    if (sd_gvisor_check(d, c, err) < 0) /* -EPROTONOSUPPORT isolation_unavailable */
        return err->code;
    if (sd_volumes_check(d, c->volumes, 1, err) < 0) /* volumes: 404 unknown, 409 taken */
        return err->code;
    if (!c->gpus && !c->volumes && (sb = sd_pool_take(d, c))) { /* GPUs, volumes: never pooled */
        *ret_starting = false;
        *ret = sb;
        return from_pool(sb, c, idem, err);
    }
    if (!sd_pool_make_room(d, 1, "a create")) {
        sd_metrics_create(&d->m, SD_CREATE_FULL, 0);
        return error_set(err, -EAGAIN, "the node is full (%u sandboxes)", d->cfg.max_sandboxes);
    }
    if (sd_gpu_reserve(d, c, err) < 0) { /* GPUs: -ENODEV gpu_unavailable */
        sd_metrics_create(&d->m, SD_CREATE_FULL, 0);
        return err->code;
    }
    *ret_starting = true;
    return cold_start(d, c, idem, eg, ret, err);
}

/* Whether a create with idem may replay sb (the one its key names): the same body, or a digest
 * unknown on either side (a record from before digests were kept). */
static bool idem_same(const sd_sandbox *sb, const sd_idem *idem) {
    return !sb->idem_digest[0] || !idem->digest || strcmp(sb->idem_digest, idem->digest) == 0;
}

int sd_create(sd_daemon *d, policy_create *c, const sd_idem *idem, sd_sandbox **ret,
              bool *ret_starting, bool *ret_new, error_rec *err) {
    sd_sandbox *sb = idem && idem->key ? sd_registry_find_idem(d, idem->key) : NULL;
    *ret_new = false;
    if (sb && !idem_same(sb, idem))
        return error_set(err, -EEXIST,
                         "Idempotency-Key: already used by a create with another body (of %s)",
                         sb->id);
    if (sb) { /* a replay: the same sandbox */
        *ret = sb;
        *ret_starting = sb->state == SD_STARTING;
        return 0;
    }
    policy_egress *eg = NULL;
    int r = admit(d, c, idem, &eg, ret, ret_starting, err);
    *ret_new = r >= 0 && *ret_starting;
    policy_egress_free(eg);
    return r;
}

int sd_create_defaults(sd_daemon *d, policy_create *ret, error_rec *err) {
    json_t *none = json_object();
    int r = none ? policy_limits_parse_create(none, d->cfg.defaults, &d->host, ret, err)
                 : error_set(err, -ENOMEM, "out of memory");
    json_decref(none);
    return r;
}
