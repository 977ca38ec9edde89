/* The gVisor isolation class on this node ("isolation":"gvisor", docs/SECURITY.md): runsc is
 * looked for once at start-up (the config's "runsc", else PATH), its version read and the
 * kernel's prerequisites of its ptrace platform checked. A node where it cannot run says why
 * in /v1/info, and a gvisor create answers 501 isolation_unavailable with that reason; nothing
 * falls back to the native class. The shim does the rest (shim/gvisor.h). */
#pragma once

#include "policy/limits.h"
#include "sandboxd/core/context.h"

/* Find and check runsc (never fails the daemon: an unusable runsc is a reason, kept). */
int sd_gvisor_init(sd_daemon *d, error_rec *err);
void sd_gvisor_done(sd_daemon *d);
/* Admission of c: 0, or -EPROTONOSUPPORT (isolation_unavailable) with the node's reason. */
int sd_gvisor_check(const sd_daemon *d, const policy_create *c, error_rec *err);
/* runsc's absolute path for a gvisor sandbox's spec (NULL when unavailable). */
const char *sd_gvisor_runsc(const sd_daemon *d);
/* /v1/info's "isolation": {"default","classes":{"native":{..},"gvisor":{"available",...}}}. */
json_t *sd_gvisor_info_json(const sd_daemon *d);
