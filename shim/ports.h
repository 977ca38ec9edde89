/* Inbound ports (docs/API.md "Ports"): a TCP connection to 127.0.0.1:PORT made inside the
 * sandbox's network namespace, for the daemon's proxy (shimproto "port_connect"). */
#pragma once

#include "common/error.h"
#include "shim/sandbox.h"

/* Connect to 127.0.0.1:port in the sandbox's network namespace (bounded: loopback answers at
 * once, at most SHIM_PORT_CONNECT_MS). Returns 0 with *ret_fd (CLOEXEC, nonblocking) or -errno
 * (ECONNREFUSED: nothing listens; ETIMEDOUT; EPERM: init's namespace is the shim's own). */
#define SHIM_PORT_CONNECT_MS 2000
int shim_port_connect(shim_sandbox *sb, int port, int *ret_fd, error_rec *err);
/* A socket (domain, type, protocol; CLOEXEC added) made in the network namespace of init_pid:
 * the shim enters it and comes back. -EPERM when that namespace is the shim's own (the host's:
 * init's pid reused by another process). Also a pausing init's listening address (shim/pause.c)
 * and the sockets a pause ends (shim/sockets.c). */
int shim_socket_in_netns(pid_t init_pid, int domain, int type, int protocol, int *ret_fd,
                         error_rec *err);
