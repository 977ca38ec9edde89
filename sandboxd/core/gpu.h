/* GPUs (docs/DAEMON.md "GPUs"): the node's inventory (the config file's "gpus" or discovery of
 * /dev/nvidia*), which sandbox holds which GPU (whole GPUs, exclusively), what the shim gets
 * for a GPU sandbox (its device nodes, the driver's user-space files, the env), and the
 * numbers /v1/info, /metrics and the fleet record show. The allocation lives only in the
 * sandboxes' specs (their "gpus" uuids), so a restart recomputes it from the state records. */
#pragma once

#include "sandboxd/core/context.h"

/* Build the inventory from d->cfg (at start-up, before restore). */
int sd_gpu_init(sd_daemon *d, error_rec *err);
void sd_gpu_done(sd_daemon *d);
unsigned sd_gpu_total(const sd_daemon *d);
unsigned sd_gpu_free(const sd_daemon *d);
/* Admission: pick c->gpus free GPUs (or check the named ones) and write their uuids into
 * c->gpu_uuids. -ENODEV (gpu_unavailable) when too few are free or a named one is not here or
 * taken. Claims nothing: sd_gpu_claim follows once the sandbox exists. */
int sd_gpu_reserve(sd_daemon *d, policy_create *c, error_rec *err);
/* Mark sb's GPUs (its spec's uuids) as its own: -ENODEV when one is missing or held. */
int sd_gpu_claim(sd_sandbox *sb, error_rec *err);
/* Free every GPU sb holds (any end path; idempotent). */
void sd_gpu_release(sd_sandbox *sb);
/* The shim spec's "gpus" object for sb ({"devices":[...],"binds":[...]}), or NULL for none. */
json_t *sd_gpu_spec_json(const sd_sandbox *sb);
/* Add NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES to env (an object) for a GPU sandbox. */
void sd_gpu_env(const sd_sandbox *sb, json_t *env);
/* {"total":N,"free":N,"devices":[{"uuid","device","bus_id","memory","sandbox"}]} */
json_t *sd_gpu_info_json(const sd_daemon *d);
