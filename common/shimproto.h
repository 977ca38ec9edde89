/* The daemon <-> sbx-shim protocol: small, closed and versioned.
 *
 * Transport: a SOCK_SEQPACKET Unix socket, `<sandbox dir>/shim.sock`, created by the shim. One
 * packet is one message: a JSON object of at most SHIMPROTO_MSG_MAX bytes, with up to
 * SHIMPROTO_MAX_FDS descriptors attached (SCM_RIGHTS). Every message has "v" (the protocol
 * version, SHIMPROTO_VERSION) and "type". A peer that sees another version or an unknown type
 * answers {"type":"error"} and ignores the message; it never crashes.
 *
 * Daemon -> shim requests carry "seq" (u64 chosen by the daemon); the reply echoes it.
 *   hello     {}                              -> hello {version, id, init_pid, state, oom_kills,
 *                                                       running:[xid...], started_ms}
 *   exec      {xid, argv:[..], env:[K=V..], cwd, timeout_ms, shell:bool}
 *             fds: [stdin_r, stdout_w, stderr_w] -> started {xid, pid}  or error
 *   kill      {xid, signal}                   -> ok
 *   stats     {}                              -> stats {cpu_usec, mem_bytes, mem_peak_bytes,
 *                                                       pids, oom_kills, disk_used_bytes}
 *   shutdown  {}                              -> ok, then the shim tears the sandbox down,
 *                                                removes its directory and exits
 * Shim -> daemon events (no seq):
 *   exit      {xid, exit_code, signal, reason, duration_ms}
 *             reason: "exited" | "signaled" | "command_timeout" | "oom_killed"
 *   oom       {oom_kills}                     the cgroup's OOM kill counter went up
 *   dead      {reason, message}               the sandbox's init died; the shim exits after it
 * Errors: {type:"error", seq, errno (positive), message}. This is the sbx_error record.
 *
 * Start-up: the daemon writes `<dir>/spec.json` (see shim/spec.h) and runs
 * `sbx-shim <dir>` with fd 3 the write end of a pipe. The shim detaches (setsid), builds the
 * sandbox, listens on shim.sock, then writes one line to fd 3 and closes it:
 *   {"ok":true,"init_pid":N,"shim_pid":N}  or  {"ok":false,"errno":N,"message":"..."}
 * A restarted daemon re-adopts a sandbox by connecting to shim.sock and sending hello. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stddef.h>

#define SHIMPROTO_VERSION 1
#define SHIMPROTO_MSG_MAX 65536
#define SHIMPROTO_MAX_FDS 4

/* Send msg (the "v" field is added). fds may be NULL when n_fds is 0. Returns 0 or -errno. */
int shimproto_send(int sock, json_t *msg, const int *fds, size_t n_fds);
/* Receive one message. Returns 0 with *ret set (and received fds, CLOEXEC, in fds/n_fds),
 * -ECONNRESET when the peer closed, -EAGAIN on a nonblocking socket with nothing to read,
 * -EPROTO for a malformed message or wrong version (any attached fds are closed). */
int shimproto_recv(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds);
/* Build {"type":"error","seq":seq,"errno":-err->code,"message":...}. */
json_t *shimproto_error(json_t *seq, const sbx_error *err);
/* Convert an error reply into an sbx_error; returns its negative errno. */
int shimproto_error_parse(json_t *msg, sbx_error *err);
/* The message's "type", or "" when absent. */
const char *shimproto_type(json_t *msg);
