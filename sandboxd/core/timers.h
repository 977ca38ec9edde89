/* The daemon's clock: one repeating timer that enforces cost caps, lifetimes and idle
 * timeouts, expires leases, refreshes usage stats and forgets long-ended sandboxes. */
#pragma once

#include "sandboxd/core/sandbox.h"

#include <stddef.h>

void sd_timers_start(sd_daemon *d);
void sd_timers_tick(sd_daemon *d);
/* Whether running sandbox sb must end at wall-clock time now_ms: its reason (and a message in
 * msg), or -1 when it runs on. */
int sd_timers_check(const sd_sandbox *sb, uint64_t now_ms, char *msg, size_t len);
