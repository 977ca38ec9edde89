/* The fork engine (core/fork.h): N new sandboxes whose /workspace and /tmp start as copies
 * of the source's at fork time. The source is frozen (cgroup freezer, best effort) while `cp -a
 * --sparse=always` copies its /workspace and /tmp (through /proc/<init>/root, never following the
 * sandbox's symlinks) into a snapshot layer: a tmpfs under <run-dir>/layers/<id>. The copy runs in
 * a files worker (core/files_worker.c) in the source's memory cgroup, so the layer's pages are
 * charged to the source, never to the daemon; files that do not fit in what the source's limit
 * has left fail the fork up front (-EDQUOT). FIFOs, sockets and device nodes are removed from
 * the layer, which the forks share: each fork's init mounts it as the read-only, id-mapped lower
 * layer of an overlay (shim/seed.c; a copy where the kernel cannot id-map it). The layer is
 * removed once every fork has started. All or nothing: when one fork fails, the others are
 * ended and the owner hears the error. A daemon stopping during a copy kills it, thaws the source
 * and removes the layer; a restarted daemon thaws every sandbox and removes every layer left by
 * the one before it (sd_fork_recover). */
#include "sandboxd/core/fork.h"
#include "sandboxd/core/images.h"

#include "common/fdutil.h"
#include "common/spec.h"
#include "common/timeutil.h"
#include "sandboxd/core/cgroup.h"
#include "sandboxd/core/files.h"
#include "sandboxd/core/gvisor.h"
#include "sandboxd/core/leases.h"
#include "sandboxd/core/lifecycle.h"
#include "sandboxd/core/network.h"
#include "sandboxd/core/pool.h"
#include "sandboxd/core/registry.h"
#include "sandboxd/core/state.h"
#include "sandboxd/core/volumes.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

struct sd_fork {
    sd_daemon *d;
    sd_fork *next;        /* d->forks */
    sd_fork_done_fn done; /* NULL: the owner is gone */
    void *ud;
    char src_id[64];
    uint32_t src_uid_base;
    int src_init_pid;
    char layer[PATH_MAX];
    bool layer_mounted, frozen;
    policy_create spec; /* the forks' create (the source's, with the body's overrides) */
    unsigned count, pending, failed;
    sd_sandbox **sbs;
    char message[300];
    int code;                /* the group's error code (0: -EIO) */
    sd_files_worker *copier; /* the copy, running in the source's memory cgroup */
    char copy_cg[PATH_MAX];  /* v2: the copy's own cgroup (the frozen source takes none) */
    bool stopping;           /* the daemon stops: the copy was killed */
    unsigned slots;          /* its share of d->fork_slots: count, until the forks are made */
};

/* The room an admitted fork holds until its forks are made (or it fails), so that creates
 * during its copy cannot fill the node under it. */
static void slots_release(sd_fork *f) {
    f->d->fork_slots -= MIN(f->d->fork_slots, f->slots);
    f->slots = 0;
}

static void freeze(sd_daemon *d, const char *id, bool frozen) {
    if (sd_cgroup_freeze_hold(d, id, frozen) < 0)
        log_debug("fork: cannot %s sandbox=%s (copying without a freeze)",
                  frozen ? "freeze" : "thaw", id);
}

static void layer_remove(sd_fork *f) {
    if (!f->layer[0])
        return;
    if (f->layer_mounted)
        umount2(f->layer, MNT_DETACH);
    rm_rf(f->layer);
    f->layer[0] = 0;
}

static void copy_cg_remove(sd_fork *f) {
    if (f->copy_cg[0] && rmdir(f->copy_cg) < 0 && errno != ENOENT)
        log_debug("fork: rmdir %s: %s", f->copy_cg, strerror(errno));
    f->copy_cg[0] = 0;
}

static void fork_free(sd_fork *f) {
    for (sd_fork **pp = &f->d->forks; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    layer_remove(f);
    copy_cg_remove(f);
    slots_release(f);
    for (unsigned i = 0; i < f->count; i++)
        if (f->sbs[i])
            f->sbs[i]->fork = NULL;
    policy_create_done(&f->spec);
    free(f->sbs);
    free(f);
}

void sd_fork_forget(sd_fork *f) {
    f->done = NULL; /* the forks go on; nobody waits for the answer */
}

/* Every fork has answered: tell the owner, and on any failure end the ones that started. */
static void fork_done(sd_fork *f) {
    error_rec err = {0};
    if (f->failed) {
        for (unsigned i = 0; i < f->count; i++)
            if (f->sbs[i]) {
                f->sbs[i]->fork = NULL;
                sd_sandbox_end(f->sbs[i], END_TERMINATED, "another fork of the group failed");
            }
        error_set(&err, f->code ? f->code : -EIO, "fork: %s", f->message);
    }
    if (f->done)
        f->done(f->ud, f->sbs, f->count, f->failed ? &err : NULL);
    log_info("fork done source=%s count=%u failed=%u", f->src_id, f->count, f->failed);
    fork_free(f);
}

static void on_create_finished(void *ud, sd_sandbox *sb, const error_rec *err) {
    sd_fork *f = sb->fork;
    if (!f)
        return;
    sb->fork = NULL;
    if (err) {
        if (!f->failed++) { /* the first failure's code and message, as a create answers */
            f->code = err->code;
            snprintf(f->message, sizeof(f->message), "%s", err->message);
        }
        for (unsigned i = 0; i < f->count; i++)
            if (f->sbs[i] == sb)
                f->sbs[i] = NULL; /* it ends by itself */
    }
    if (--f->pending == 0)
        fork_done(f);
}

static int fork_one(sd_fork *f, unsigned i, error_rec *err) {
    sd_daemon *d = f->d;
    policy_create c = {0};
    policy_egress *eg = NULL;
    int r = sd_spec_copy(&f->spec, &c, err);
    if (r >= 0) /* volumes: a create may have taken one during the copy */
        r = sd_volumes_check(d, c.volumes, 1, err);
    if (r >= 0)
        r = sd_network_check(d, &c, &eg, err);
    sd_sandbox *sb = NULL;
    if (r >= 0)
        r = sd_registry_add(d, &c, &sb, err);
    policy_create_done(&c);
    if (r < 0) {
        policy_egress_free(eg);
        return r;
    }
    sd_network_attach(sb, eg); /* before its first record: its names' addresses */
    r = sd_registry_set_seed(sb, f->layer, f->src_uid_base, f->src_id);
    if (r < 0 || (r = sd_state_save(sb)) < 0) { /* never run a sandbox a restart would not know */
        sd_sandbox_discard(sb);
        return r == -ENOMEM
                   ? error_set(err, r, "out of memory")
                   : error_set(err, -EDQUOT, "cannot save a fork's state: %s", strerror(-r));
    }
    sb->fork = f;
    f->sbs[i] = sb;
    f->pending++;
    log_info("sandbox created sandbox=%s forked_from=%s", sb->id, f->src_id);
    sd_sandbox_start_or_queue(sb);
    return 0;
}

static void copy_done(void *ud, const error_rec *e) {
    sd_fork *f = ud;
    f->copier = NULL;
    copy_cg_remove(f);
    if (f->frozen)
        freeze(f->d, f->src_id, false);
    f->frozen = false;
    error_rec err = {0};
    if (e->code < 0) {
        f->code = f->stopping ? -EIO : e->code == -ENOMEM ? -EDQUOT : e->code;
        snprintf(f->message, sizeof(f->message), "%s",
                 f->stopping ? "the daemon stopped during the copy" : e->message);
        f->failed = 1;
    }
    slots_release(f); /* the forks take their own room now */
    for (unsigned i = 0; i < f->count && !f->failed; i++)
        if (fork_one(f, i, &err) < 0) {
            f->failed = 1;
            f->code = err.code; /* (a full state directory: 507, as a create's) */
            snprintf(f->message, sizeof(f->message), "%s", err.message);
        }
    /* the forks answer through on_create_finished; the group ends when they all have */
    if (--f->pending == 0) /* the copy held the group */
        fork_done(f);
}

static int make_layer(sd_fork *f, uint64_t disk, error_rec *err) {
    char id[24];
    sd_random_id("ly-", id, sizeof(id));
    snprintf(f->layer, sizeof(f->layer), "%s/layers/%s", f->d->cfg.run_dir, id);
    int r = mkdir_p(f->layer, 0700);
    if (r < 0) {
        f->layer[0] = 0;
        return error_set_errno(err, r, "mkdir the snapshot layer");
    }
    char opts[96];
    snprintf(opts, sizeof(opts), "size=%llu,mode=0700", (unsigned long long)disk);
    f->layer_mounted = mount("sbx-layer", f->layer, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0;
    if (!f->layer_mounted)
        log_warn("fork: no tmpfs for the snapshot layer (%s); using the run dir", strerror(errno));
    return 0;
}

/* Run args (a host tool, the host's environment) and wait for it; it dies with the worker. */
static int run_tool(char **args, int *ret_status, error_rec *err) {
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvpe(args[0], args, (char **)spec_host_env);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, ret_status, 0) < 0)
        return error_set_errno(err, negative_errno(), "cannot run %s", args[0]);
    return 0;
}

/* In the files worker (the source's memory cgroup): cp, which the memory cgroup's OOM killer
 * takes before any of the source's processes. Then find removes FIFOs, sockets and device
 * nodes: forks share the layer (shim/seed.c), and a FIFO in it would be one pipe for all of
 * them, a channel between sandboxes. Files, directories and symlinks stay. */
static int copy_run(void *ud, error_rec *err) {
    sd_fork *f = ud; /* the worker's copy of it */
    (void)!file_write_str("/proc/self/oom_score_adj", "1000");
    char ws[64], tmp[64];
    snprintf(ws, sizeof(ws), "/proc/%d/root/workspace", f->src_init_pid);
    snprintf(tmp, sizeof(tmp), "/proc/%d/root/tmp", f->src_init_pid);
    /* -x: a volume mounted under /workspace or /tmp is not the sandbox's own files */
    char *cp[] = {"cp", "-a", "-x", "--sparse=always", "--", ws, tmp, f->layer, NULL};
    char *purge[] = {"find", f->layer, "-xdev", "(",  "-type", "p", "-o", "-type",   "s",
                     "-o",   "-type",  "b",     "-o", "-type", "c", ")",  "-delete", NULL};
    int st = 0, r = run_tool(cp, &st, err);
    if (r < 0)
        return r;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        return error_set(err, -EDQUOT,
                         "copying the source's files ran out of its memory (the snapshot is "
                         "charged to the source sandbox's memory limit)");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EIO, "copying the source's files failed (cp status %d)", st);
    if ((r = run_tool(purge, &st, err)) < 0)
        return r;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return error_set(err, -EIO,
                         "clearing the snapshot's FIFOs, sockets and devices failed "
                         "(find status %d)",
                         st);
    return 0;
}

/* Bytes the source's files take (its writable layer's used blocks, holes not counted). */
static uint64_t layer_used(int init_pid) {
    static const char *const dirs[] = {"workspace", "tmp"};
    uint64_t used = 0;
    dev_t seen = 0;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/root/%s", init_pid, dirs[i]);
        struct statfs fs;
        struct stat st;
        if (statfs(p, &fs) < 0 || stat(p, &st) < 0 || (i > 0 && st.st_dev == seen))
            continue;
        seen = st.st_dev;
        used += (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
    }
    return used;
}

/* The memory cgroup the copy runs in: the source's (v1: the memory controller is apart from
 * the freezer), or on v2 a cgroup of its own beside it, capped at what the source may still
 * take (a process joining the frozen source would freeze too). */
static int copy_memcg(sd_fork *f, uint64_t room, char *buf, size_t len, error_rec *err) {
    sd_daemon *d = f->d;
    if (d->cgroup_version != 2) {
        sd_cgroup_memcg_dir(d, f->src_id, buf, len);
        return 0;
    }
    snprintf(f->copy_cg, sizeof(f->copy_cg), "%s/%s", d->cgroup_parent, strrchr(f->layer, '/') + 1);
    char max[32];
    snprintf(max, sizeof(max), "%llu", (unsigned long long)room);
    int r = mkdir(f->copy_cg, 0755) < 0 ? negative_errno() : 0;
    char knob[PATH_MAX + 16];
    snprintf(knob, sizeof(knob), "%s/memory.max", f->copy_cg);
    if (r == 0 && room != UINT64_MAX)
        r = file_write_str(knob, max);
    if (r < 0) {
        copy_cg_remove(f);
        return error_set_errno(err, r, "cannot make the copy's cgroup");
    }
    snprintf(buf, len, "%s", f->copy_cg);
    return 0;
}

/* Page cache the memory cgroup dir may reclaim (file pages; tmpfs pages are not among them):
 * the copy can take it, so it counts as room. */
static uint64_t reclaimable(const char *dir) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/memory.stat", dir);
    _cleanup_free_ char *s = NULL;
    if (file_read_all(path, 1 << 16, &s, NULL) < 0)
        return 0;
    uint64_t sum = 0;
    char *save = NULL;
    for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char key[64];
        unsigned long long v;
        if (sscanf(line, "%63s %llu", key, &v) == 2 &&
            (strcmp(key, "active_file") == 0 || strcmp(key, "inactive_file") == 0))
            sum += v; /* v1 and v2 alike (the sandbox's cgroup is a leaf) */
    }
    return sum;
}

static int start_copy(sd_fork *f, int init_pid, error_rec *err) {
    char memcg[PATH_MAX];
    uint64_t room = UINT64_MAX, used;
    f->src_init_pid = init_pid;
    freeze(f->d, f->src_id, true);
    f->frozen = true;
    sd_cgroup_memcg_dir(f->d, f->src_id, memcg, sizeof(memcg));
    int r = sd_files_memcg_room(memcg, &room);
    if (r >= 0 && room != UINT64_MAX)
        room += reclaimable(memcg);
    if (r >= 0 && room != UINT64_MAX && (used = layer_used(init_pid)) > room)
        r = error_set(err, -EDQUOT,
                      "the source's files (%llu bytes) do not fit in what its memory limit has "
                      "left (%llu bytes): the snapshot is charged to the source sandbox",
                      (unsigned long long)used, (unsigned long long)room);
    else if ((r = copy_memcg(f, r < 0 ? UINT64_MAX : room, memcg, sizeof(memcg), err)) >= 0)
        r = sd_files_worker_start(f->d->loop, memcg, (const int[]){STDERR_FILENO}, 1, copy_run, f,
                                  copy_done, f, &f->copier, err);
    if (r < 0) {
        copy_cg_remove(f);
        freeze(f->d, f->src_id, false);
        f->frozen = false;
        return r;
    }
    f->pending = 1; /* the copy */
    return 0;
}

/* The source's create with the body's fields (except count) laid over it. */
static int fork_spec(sd_daemon *d, sd_sandbox *src, json_t *body, policy_create *ret,
                     error_rec *err) {
    if (json_object_get(body, "entrypoint")) /* (a create's: api/entrypoint.c) */
        return error_set(err, -EINVAL,
                         "entrypoint: a fork starts none (its sandboxes get the source's files, "
                         "not its processes): start it with an exec in each fork");
    json_t *g = json_object_get(body, "gpus"); /* (none to take: a fork takes no GPUs) */
    if (g && !json_is_null(g) && !(json_is_integer(g) && json_integer_value(g) == 0))
        return error_set(err, -EINVAL, "gpus: a fork takes no GPUs (only a create does)");
    json_t *merged = policy_create_to_json(&src->spec);
    if (!merged)
        return error_set(err, -ENOMEM, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        if (strcmp(k, "count") != 0)
            json_object_set(merged, k, v);
    }
    int r = policy_limits_parse_create(merged, NULL, &d->host, ret, err);
    json_decref(merged);
    if (r >= 0 && (r = policy_limits_check_env(ret->env, err)) < 0)
        policy_create_done(ret);
    return r;
}

static int net_ok(sd_daemon *d, const policy_create *c, error_rec *err) {
    policy_egress *eg = NULL;
    int r = sd_network_check(d, c, &eg, err);
    policy_egress_free(eg);
    return r;
}

/* The checks before anything is copied; c gets the forks' create. */
static int admit(sd_sandbox *src, json_t *overrides, unsigned n, policy_create *c, error_rec *err) {
    sd_daemon *d = src->d;
    if (src->state != SD_RUNNING || src->pausing)
        return error_set(err, -EBUSY, "sandbox %s is %s: only a running sandbox forks", src->id,
                         src->state == SD_ENDED    ? "ended"
                         : src->state == SD_PAUSED ? "paused (resume it first)"
                         : src->pausing            ? "pausing"
                                                   : "still starting");
    int r = fork_spec(d, src, overrides, c, err);
    if (r < 0 || (r = net_ok(d, c, err)) < 0)
        return r;
    if (c->lease && !sd_lease_exists(d, c->lease))
        return error_set(err, -ENOENT, "lease: %s not found", c->lease);
    if (sd_images_check(d, c->image, err) < 0) /* images: an "image" override must exist */
        return err->code;
    if (sd_gvisor_check(d, c, err) < 0) /* the gvisor class, here or as an override */
        return err->code;
    if (sd_volumes_check(d, c->volumes, n, err) < 0) /* volumes: read-only ones are shared */
        return err->code;
    if (c->on_idle_pause) /* (a fork's snapshot layer is not a checkpoint's to carry) */
        return error_set(err, -EINVAL,
                         json_object_get(overrides, "on_idle")
                             ? "on_idle: a fork cannot pause when idle (\"pause\" is a create's)"
                             : "on_idle: the source pauses when idle, which a fork cannot: pass "
                               "\"on_idle\": \"end\"");
    if (!sd_pool_make_room(d, n, "a fork"))
        return error_set(err, -EAGAIN, "no room for %u more sandboxes (at most %u)", n,
                         d->cfg.max_sandboxes);
    return 0;
}

static sd_fork *fork_new(sd_sandbox *src, policy_create *c, unsigned n) {
    sd_fork *f = calloc(1, sizeof(*f));
    sd_sandbox **sbs = f ? calloc(n, sizeof(*sbs)) : NULL;
    if (!sbs) {
        free(f);
        return NULL;
    }
    *f = (sd_fork){
        .d = src->d, .next = src->d->forks, .count = n, .spec = *c, .sbs = sbs, .slots = n};
    *c = (policy_create){0};
    src->d->forks = f;
    src->d->fork_slots += n; /* (admit found the room) */
    snprintf(f->src_id, sizeof(f->src_id), "%s", src->id);
    f->src_uid_base = (uint32_t)sd_uid_base(src->uid_slot);
    return f;
}

static int internal(error_rec *err) {
    error_prefix(err, "fork");
    return err->code = -EIO;
}

int sd_fork_start(sd_sandbox *src, json_t *overrides, unsigned count, sd_fork_done_fn done,
                  void *ud, sd_fork **ret, error_rec *err) {
    policy_create c = {0};
    if (src->spec.gpus) /* GPUs: a fork would need GPUs of its own (docs/API.md) */
        return error_set(err, -EINVAL, "gpus: a sandbox with GPUs cannot be forked");
    int r = admit(src, overrides, count, &c, err);
    sd_fork *f = r < 0 ? NULL : fork_new(src, &c, count);
    policy_create_done(&c);
    if (r < 0)
        return r;
    if (!f)
        return error_set(err, -ENOMEM, "out of memory");
    if ((r = make_layer(f, src->spec.disk, err)) < 0) {
        fork_free(f);
        return internal(err);
    }
    if ((r = start_copy(f, src->init_pid, err)) < 0) {
        fork_free(f);
        return r == -EDQUOT ? r : internal(err);
    }
    f->done = done;
    f->ud = ud;
    *ret = f;
    return 0;
}

void sd_fork_stop(sd_daemon *d) {
    for (sd_fork *f = d->forks; f; f = f->next) {
        if (!f->frozen)
            continue; /* past the copy: its forks' shims seed from the layer (a restart removes it)
                       */
        f->stopping = true;
        if (f->copier)
            sd_files_worker_cancel(f->copier); /* cp dies with it (PR_SET_PDEATHSIG) */
        freeze(d, f->src_id, false);
        f->frozen = false;
        layer_remove(f); /* detached: the killed cp's files go with it */
        log_info("fork stopped source=%s (the daemon is stopping during its copy)", f->src_id);
    }
}

/* Layers no fork of this daemon made: a stopped daemon's (restore runs before any fork). */
static void remove_stale_layers(sd_daemon *d) {
    char dir[PATH_MAX], path[PATH_MAX + 300];
    snprintf(dir, sizeof(dir), "%s/layers", d->cfg.run_dir);
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (strncmp(de->d_name, "ly-", 3) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        while (umount2(path, MNT_DETACH) == 0) {
        }
        rm_rf(path);
        log_info("removed the snapshot layer %s of a stopped daemon's fork", path);
        snprintf(path, sizeof(path), "%s/%s", d->cgroup_parent, de->d_name);
        if (d->cgroup_version == 2)
            (void)rmdir(path); /* its copy's cgroup */
    }
    closedir(dp);
}

void sd_fork_recover(sd_daemon *d) {
    for (sd_sandbox *sb = d->sandboxes; sb; sb = sb->next)
        if (sb->state != SD_ENDED && !sb->pool)
            sd_cgroup_freeze(d, sb->id, false); /* a fork's copy may have frozen it */
    remove_stale_layers(d);
}

static const sd_listener listener = {.create_finished = on_create_finished};

int sd_fork_init(sd_daemon *d) {
    return sd_listener_add(d, &listener, NULL);
}
