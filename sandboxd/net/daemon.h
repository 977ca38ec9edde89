/* The daemon's side of sandbox networking: the small hooks the registry, lifecycle, API,
 * metrics and restore code call; they turn daemon objects into sd_net calls (sandboxd/net/net.h).
 * Networking is opt-in: the config file's "network" object with "enabled": true. */
#pragma once

#include "policy/egress.h"
#include "sandboxd/daemon.h"

#include <stdio.h>

/* At start-up: sd_net_init from cfg.network (a failure is logged, networking stays off). */
void sd_net_daemon_init(sd_daemon *d);
/* After sd_state_restore: re-adopt the running networked sandboxes' rules. */
void sd_net_daemon_restore(sd_daemon *d);
/* Create request: validate and resolve the `network` value of c. Mode none gives *ret NULL. */
int sd_net_daemon_check(sd_daemon *d, const policy_create *c, policy_egress **ret, error_rec *err);
/* spec.json: "network", "etc_hosts", "dns". */
void sd_net_daemon_spec(sd_sandbox *sb, json_t *spec);
/* The shim reported init_pid: plumb (mode none: nothing). */
int sd_net_daemon_setup(sd_sandbox *sb, error_rec *err);
/* The sandbox ended: remove its network (idempotent). */
void sd_net_daemon_teardown(sd_sandbox *sb);
/* Memory only (the daemon exits or forgets an ended sandbox). */
void sd_net_daemon_free(sd_sandbox *sb);
/* The sandbox object's "network" value. */
json_t *sd_net_daemon_json(const sd_sandbox *sb);
/* sandboxd_egress_denied_total{sandbox="..."} lines. */
void sd_net_daemon_metrics(sd_daemon *d, FILE *f);
