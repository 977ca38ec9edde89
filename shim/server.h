/* The shim's protocol server: serves common/shimproto.h on <dir>/shim.sock for a built sandbox,
 * relays commands to init, enforces per-command timeouts, reports exits, OOM kills and init's
 * death. A lost daemon connection changes nothing: the shim keeps running for re-adoption. */
#pragma once

#include "shim/sandbox.h"

/* Blocks SIGCHLD/SIGTERM/SIGINT; call before the sandbox is built. */
void shim_server_block_signals(void);
/* Runs until shutdown (returns 0) or init's death (returns 1); the sandbox is torn down. */
int shim_server_run(shim_sandbox *sb);
