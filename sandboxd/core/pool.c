/* Warm pools: per template (image, cpu, memory, disk, pids, network mode) the daemon keeps
 * `size` sandboxes started ahead and never handed out. Templates come from the configuration
 * (a fixed size) or from demand (sd_pool_demand: SandboxFusion's requests): a demand template's
 * size follows the rate its shape is asked for, and falls to none when nobody asks. A create whose
 * shape matches a template takes a running entry at once; its labels, env, timeouts, lease and cost
 * cap are applied at hand-out, and its created_at, timers and cost start then. Entries are hidden
 * from the API, count toward --max-sandboxes (a cold create that finds the node full ends one to
 * make room), and are refilled from the timer, at most pool_max_starting at a time. */
#include "sandboxd/core/pool.h"

#include "common/timeutil.h"
#include "sandboxd/core/gvisor.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"

#include <string.h>

#define POOL_MAX_SIZE 4096
/* Refills wait until no entry was taken for POOL_QUIET_MS (a burst or a tight loop of creates is
 * served from the pool without pool starts competing for the CPU), but never longer than
 * POOL_MAX_DEFER_MS after the first take they have not made up for (steady load). */
#define POOL_QUIET_MS 250
#define POOL_MAX_DEFER_MS 2000
/* Demand templates: at most POOL_DEMAND_MAX shapes; a template keeps ready what its shape was
 * asked for in POOL_DEMAND_LEAD_MS at the rate of the last POOL_DEMAND_WINDOW_MS (plus one),
 * at most a quarter of --max-sandboxes (and POOL_DEMAND_MAX_SIZE), and none once nobody asked
 * for --pool-demand-idle seconds. Their refills start at once: they exist to keep up with a
 * steady stream. */
#define POOL_DEMAND_MAX 8
#define POOL_DEMAND_WINDOW_MS 1000
#define POOL_DEMAND_LEAD_MS 100
#define POOL_DEMAND_MAX_SIZE 64

typedef struct sd_pool {
    policy_create tmpl;
    unsigned size;
    bool broken; /* an entry failed to start: retry after a pause */
    uint64_t retry_ms;
    uint64_t last_take_ms, first_take_ms; /* first_take_ms: 0 when nothing is owed */
    bool demand;                          /* sized by sd_pool_demand, not the configuration */
    unsigned asked, asked_before;         /* requests in this window and in the one before */
    uint64_t window_ms, last_ask_ms;
} sd_pool;

static unsigned count(sd_daemon *d, int t, unsigned *starting);

static unsigned n_templates(const sd_daemon *d) {
    return d->n_pools + d->n_demand_pools;
}

static bool same_shape(const policy_create *a, const policy_create *b) {
    return strcmp(a->image, b->image) == 0 && a->cpu == b->cpu && a->memory == b->memory &&
           a->disk == b->disk && a->pids == b->pids && a->net_mode == b->net_mode &&
           a->net_mode != POLICY_NET_ALLOW && a->grading == b->grading && a->gvisor == b->gvisor &&
           a->pausable == b->pausable;
}

static int parse_one(sd_daemon *d, json_t *j, sd_pool *p, error_rec *err) {
    if (!json_is_object(j))
        return error_set(err, -EINVAL, "pools: every entry must be an object");
    json_t *sz = json_object_get(j, "size");
    if (!json_is_integer(sz) || json_integer_value(sz) < 1 ||
        json_integer_value(sz) > POOL_MAX_SIZE)
        return error_set(err, -EINVAL, "pools: size must be an integer in [1, %d]", POOL_MAX_SIZE);
    json_t *body = json_copy(j);
    if (!body)
        return error_set(err, -ENOMEM, "out of memory");
    json_object_del(body, "size");
    if (json_object_get(body, "entrypoint")) { /* (a create's: api/entrypoint.c) */
        json_decref(body);
        return error_set(err, -EINVAL,
                         "pools: entrypoint: a warm sandbox starts none (the "
                         "create that takes it may ask for one)");
    }
    int r = policy_limits_parse_create(body, d->cfg.defaults, &d->host, &p->tmpl, err);
    json_decref(body);
    if (r >= 0)
        r = policy_limits_check_env(p->tmpl.env, err);
    if (r < 0)
        return error_prefix(err, "pools");
    p->size = (unsigned)json_integer_value(sz);
    if (p->tmpl.gpus) /* GPUs: held by the sandbox that asks (core/gpu.c) */
        return error_set(err, -EINVAL, "pools: gpus cannot be pooled");
    if (p->tmpl.volumes) /* volumes: mounted for the sandbox that asks */
        return error_set(err, -EINVAL, "pools: volumes cannot be pooled");
    if (p->tmpl.net_mode == POLICY_NET_ALLOW)
        return error_set(err, -EINVAL, "pools: network \"allow\" cannot be pooled (none, open)");
    if (sd_gvisor_check(d, &p->tmpl, err) < 0) /* a gvisor pool on a node without runsc */
        return error_prefix(err, "pools");
    policy_egress *eg = NULL;
    r = sd_network_check(d, &p->tmpl, &eg, err);
    policy_egress_free(eg);
    return r < 0 ? error_prefix(err, "pools") : 0;
}

static void on_started(void *ud, sd_sandbox *sb) {
    sd_pool_refill(sb->d);
}

/* A failed pool start must not be retried in a tight loop. */
static void on_ended(void *ud, sd_sandbox *sb) {
    sd_daemon *d = sb->d;
    int t = sb->pool;
    if (sb->end_reason == END_INFRASTRUCTURE_FAILURE && t >= 1 && (unsigned)t <= n_templates(d)) {
        d->pools[t - 1].broken = true;
        d->pools[t - 1].retry_ms = now_mono_ms() + 5000;
    }
}

static const sd_listener listener = {.started = on_started, .ended = on_ended};

static void refill_later_cb(uv_idle_t *h) {
    uv_idle_stop(h);
    sd_pool_refill(h->data);
}

void sd_pool_refill_later(sd_daemon *d) {
    uv_idle_start(&d->pool_later, refill_later_cb);
}

int sd_pool_init(sd_daemon *d, error_rec *err) {
    uv_idle_init(d->loop, &d->pool_later);
    d->pool_later.data = d;
    if (!d->cfg.pool_max_starting)
        d->cfg.pool_max_starting = MAX(1u, d->cfg.max_starting / 2);
    if (sd_listener_add(d, &listener, NULL) < 0)
        return error_set(err, -ENOSPC, "too many listeners");
    size_t n = json_array_size(d->cfg.pools);
    d->pools = calloc(n + POOL_DEMAND_MAX, sizeof(sd_pool));
    if (!d->pools)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int r = parse_one(d, json_array_get(d->cfg.pools, i), &d->pools[i], err);
        d->n_pools = (unsigned)i + 1;
        if (r < 0)
            return r;
        log_info("warm pool %zu image=%s cpu=%g memory=%llu network=%s size=%u", i,
                 d->pools[i].tmpl.image, d->pools[i].tmpl.cpu,
                 (unsigned long long)d->pools[i].tmpl.memory,
                 d->pools[i].tmpl.net_mode == POLICY_NET_OPEN ? "open" : "none", d->pools[i].size);
    }
    return 0;
}

void sd_pool_done(sd_daemon *d) {
    for (unsigned i = 0; i < n_templates(d); i++)
        policy_create_done(&d->pools[i].tmpl);
    free(d->pools);
    d->pools = NULL;
    d->n_pools = d->n_demand_pools = 0;
}

static int template_of(sd_daemon *d, const policy_create *c) {
    for (unsigned i = 0; i < n_templates(d); i++)
        if (same_shape(&d->pools[i].tmpl, c))
            return (int)i;
    return -1;
}

/* A running entry of c's template (*ret_t: the template), or NULL. */
static sd_sandbox *ready_entry(sd_daemon *d, const policy_create *c, int *ret_t) {
    int t = *ret_t = template_of(d, c);
    for (sd_sandbox *sb = t >= 0 ? d->sandboxes : NULL; sb; sb = sb->next)
        if (sb->pool == t + 1 && sb->state == SD_RUNNING)
            return sb;
    return NULL;
}

sd_sandbox *sd_pool_take(sd_daemon *d, const policy_create *c) {
    int t;
    sd_sandbox *sb = ready_entry(d, c, &t);
    if (t < 0)
        return NULL;
    if (!sb) {
        d->m.pool_misses++;
        return NULL;
    }
    d->m.pool_hits++;
    d->pools[t].last_take_ms = now_mono_ms();
    if (!d->pools[t].first_take_ms)
        d->pools[t].first_take_ms = d->pools[t].last_take_ms;
    return sb;
}

bool sd_pool_has_ready(sd_daemon *d, const policy_create *c) {
    int t;
    return ready_entry(d, c, &t) != NULL;
}

const policy_create *sd_pool_template(sd_daemon *d, unsigned t) {
    return t < n_templates(d) ? &d->pools[t].tmpl : NULL;
}

unsigned sd_pool_count(const sd_daemon *d) {
    return n_templates(d);
}

bool sd_pool_is_demand(const sd_daemon *d, unsigned t) {
    return t < n_templates(d) && d->pools[t].demand;
}

/* A demand template's size now: the last windows' rate times the lead, plus one; none when
 * idle. */
static void demand_resize(sd_daemon *d, sd_pool *p, uint64_t now) {
    if (now - p->window_ms >= POOL_DEMAND_WINDOW_MS) {
        p->asked_before = now - p->window_ms < 2 * POOL_DEMAND_WINDOW_MS ? p->asked : 0;
        p->asked = 0;
        p->window_ms = now;
    }
    unsigned rate = MAX(p->asked, p->asked_before) * 1000 / POOL_DEMAND_WINDOW_MS;
    unsigned cap = MIN(MAX(1u, d->cfg.max_sandboxes / 4), (unsigned)POOL_DEMAND_MAX_SIZE);
    p->size = now - p->last_ask_ms >= (uint64_t)d->cfg.pool_demand_idle_s * 1000
                  ? 0
                  : MIN(cap, (rate * POOL_DEMAND_LEAD_MS + 999) / 1000 + 1);
}

/* A free demand slot: a new one, else one whose template is idle and has no entries left. */
static int demand_slot(sd_daemon *d) {
    if (d->n_demand_pools < POOL_DEMAND_MAX)
        return (int)(d->n_pools + d->n_demand_pools++);
    for (unsigned t = d->n_pools; t < n_templates(d); t++)
        if (d->pools[t].size == 0 && count(d, (int)t, NULL) == 0) {
            policy_create_done(&d->pools[t].tmpl);
            return (int)t;
        }
    return -1;
}

void sd_pool_demand(sd_daemon *d, const policy_create *c) {
    if (c->gpus || c->net_mode == POLICY_NET_ALLOW || d->shutting_down ||
        !d->cfg.pool_demand_idle_s)
        return;
    int t = template_of(d, c);
    uint64_t now = now_mono_ms();
    if (t < 0) {
        error_rec err = {0};
        if ((t = demand_slot(d)) < 0)
            return; /* every slot is busy: this shape is cold-started */
        sd_pool *p = &d->pools[t];
        *p = (sd_pool){.demand = true, .window_ms = now};
        if (sd_spec_copy(c, &p->tmpl, &err) < 0) {
            log_error("warm pool for demand: %s", err.message);
            if ((unsigned)t == n_templates(d) - 1)
                d->n_demand_pools--;
            *p = (sd_pool){.demand = true};
            return;
        }
        log_info("warm pool %d by demand image=%s cpu=%g memory=%llu network=%s", t, c->image,
                 c->cpu, (unsigned long long)c->memory,
                 c->net_mode == POLICY_NET_OPEN ? "open" : "none");
    }
    sd_pool *p = &d->pools[t];
    if (!p->demand)
        return; /* a configured template: its size is the configuration's */
    p->asked++;
    p->last_ask_ms = now;
    demand_resize(d, p, now);
}

int sd_pool_hand_out(sd_sandbox *sb, policy_create *c, const sd_idem *idem) {
    /* same shape (same_shape), the user's labels, env, timeouts, lease, cap */
    sd_registry_replace_spec(sb, c);
    sb->pool = 0;
    sb->pooled = true;
    sd_registry_set_hidden(sb, false);
    sd_sandbox_restart_clock(sb);
    sd_registry_set_idem_key(sb, idem);
    /* Saved before the answer: a restarted daemon must never take it for a pool entry again. */
    int r = sd_state_save(sb);
    if (r < 0)
        return r;
    sd_metrics_create(&sb->d->m, SD_CREATE_OK, 0);
    log_info("sandbox created sandbox=%s cpu=%g memory=%llu pooled=true", sb->id, sb->spec.cpu,
             (unsigned long long)sb->spec.memory);
    return 0;
}

static unsigned count(sd_daemon *d, int t, unsigned *starting) {
    unsigned n = 0;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->pool && sb->state != SD_ENDED && (t < 0 || sb->pool == t + 1)) {
            n++;
            if (starting && sb->state == SD_STARTING)
                (*starting)++;
        }
    return n;
}

static int start_entry(sd_daemon *d, sd_pool *p, int t) {
    policy_create c = {0};
    error_rec err = {0};
    int r = sd_spec_copy(&p->tmpl, &c, &err);
    policy_egress *eg = NULL;
    if (r >= 0)
        r = sd_network_check(d, &c, &eg, &err);
    sd_sandbox *sb = NULL;
    if (r >= 0)
        r = sd_registry_add(d, &c, &sb, &err);
    policy_create_done(&c);
    if (r < 0) {
        policy_egress_free(eg);
        log_error("warm pool %d: cannot add an entry: %s", t, err.message);
        return r;
    }
    sb->pool = t + 1;
    sd_registry_set_hidden(sb, true);
    sd_network_attach(sb, eg);         /* before its first record: its names' addresses */
    if ((r = sd_state_save(sb)) < 0) { /* never run a sandbox a restart would not know */
        sd_sandbox_discard(sb);
        log_error("warm pool %d: cannot save an entry's state: %s", t, strerror(-r));
        return r;
    }
    sd_sandbox_start_or_queue(sb);
    return 0;
}

/* A demand template that shrank ends its entries above the new size (those still starting
 * first: nothing is lost). */
static void trim(sd_daemon *d, int t) {
    unsigned n = count(d, t, NULL);
    for (int pass = 0; pass < 2 && n > d->pools[t].size; pass++)
        for (sd_sandbox *sb = d->sandboxes, *next; sb && n > d->pools[t].size; sb = next) {
            next = sb->next;
            if (sb->pool == t + 1 && sb->state == (pass ? SD_RUNNING : SD_STARTING)) {
                sd_sandbox_end(sb, END_TERMINATED, "warm pool entry no longer in demand");
                n--;
            }
        }
}

void sd_pool_refill(sd_daemon *d) {
    if (d->shutting_down || !n_templates(d))
        return;
    unsigned starting = 0;
    count(d, -1, &starting);
    uint64_t now = now_mono_ms();
    for (unsigned t = 0; t < n_templates(d); t++) {
        sd_pool *p = &d->pools[t];
        if (p->demand) {
            demand_resize(d, p, now);
            trim(d, (int)t);
        }
        if (p->broken && now < p->retry_ms)
            continue;
        p->broken = false;
        if (!p->demand && now < p->last_take_ms + POOL_QUIET_MS &&
            now < p->first_take_ms + POOL_MAX_DEFER_MS)
            continue;
        p->first_take_ms = 0;
        while (count(d, (int)t, NULL) < p->size && starting < d->cfg.pool_max_starting &&
               d->n_starting < d->cfg.max_starting &&
               sd_registry_count_active(d) < d->cfg.max_sandboxes) {
            if (start_entry(d, p, (int)t) < 0) {
                p->broken = true;
                p->retry_ms = now + 5000;
                break;
            }
            starting++;
        }
    }
}

/* images: a template naming the image keeps it from being deleted. */
bool sd_pool_uses_image(sd_daemon *d, const char *name) {
    for (unsigned t = 0; t < d->n_pools; t++) /* configured templates only */
        if (strcmp(d->pools[t].tmpl.image, name) == 0)
            return true;
    return false;
}

static bool evict(sd_daemon *d, const char *what) {
    sd_sandbox *victim = NULL;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->pool && sb->state != SD_ENDED &&
            (!victim || (victim->state == SD_RUNNING && sb->state == SD_STARTING)))
            victim = sb; /* prefer one still starting: nothing is lost */
    if (!victim)
        return false;
    d->m.pool_evictions++;
    sd_sandbox_end(victim, END_TERMINATED, "warm pool entry ended to make room for %s", what);
    return true;
}

bool sd_pool_make_room(sd_daemon *d, unsigned n, const char *what) {
    while (sd_registry_count_active(d) + n > d->cfg.max_sandboxes)
        if (!evict(d, what))
            return false;
    return true;
}

bool sd_pool_adopt_restored(sd_sandbox *sb) {
    sd_daemon *d = sb->d;
    int t = template_of(d, &sb->spec);
    bool keep = t >= 0 && count(d, t, NULL) < d->pools[t].size;
    sb->pool = keep ? t + 1 : INT_MAX; /* INT_MAX: an entry of no template (ended at once) */
    return keep;
}

void sd_pool_entries(sd_daemon *d, unsigned t, unsigned *ret_ready, unsigned *ret_starting) {
    unsigned ready = 0, starting = 0;
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        ready += sb->pool == (int)t + 1 && sb->state == SD_RUNNING;
    count(d, (int)t, &starting);
    *ret_ready = ready;
    *ret_starting = starting;
}
