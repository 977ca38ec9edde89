/* A pausing sandbox's sockets that a restore could not bind again (docs/API.md "Pause and
 * resume", networks): the daemon took the sandbox's veth away when the pause began, and the
 * resume plumbs a new one whose address may differ, so every TCP or UDP socket of init's network
 * namespace bound to an address that is neither loopback nor a wildcard (a connection to the
 * outside, a socket bound to the old address) is ended with SOCK_DESTROY (inet_diag), as a
 * broken network would: its process sees ECONNABORTED. Loopback sockets and listeners on a
 * wildcard address are left for CRIU to carry. */
#pragma once

#include "common/error.h"

#include <sys/types.h>

/* Returns how many sockets were ended (>= 0), or -errno: -EOPNOTSUPP when the kernel cannot
 * (no CONFIG_INET_DIAG_DESTROY) and one had to be. */
int shim_sockets_end_outside(pid_t init_pid, error_rec *err);

/* Then the sandbox's veth (every veth of init's network namespace) is deleted, whatever the
 * daemon's release of it had done by then (it may have been stopped before): the checkpoint has
 * loopback only. Returns how many were deleted (>= 0), or -errno. */
int shim_sockets_remove_links(pid_t init_pid, error_rec *err);
