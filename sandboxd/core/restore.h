/* Start-up after a restart: leases and sandboxes come back from the state directory; every
 * running sandbox is re-adopted through its shim (or ended as infrastructure_failure). */
#pragma once

#include "sandboxd/core/context.h"

void sd_restore(sd_daemon *d);
