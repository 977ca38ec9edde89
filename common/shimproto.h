/* The daemon <-> sbx-shim protocol: small, closed and versioned.
 *
 * Transport: a SOCK_SEQPACKET Unix socket, `<sandbox dir>/shim.sock`, created by the shim. One
 * packet is one message: a JSON object of at most SHIMPROTO_MSG_MAX bytes, with up to
 * SHIMPROTO_MAX_FDS descriptors attached (SCM_RIGHTS). Every message has "v" (the protocol
 * version, SHIMPROTO_VERSION) and "type". A peer that sees another version or an unknown type
 * answers {"type":"error"} and ignores the message; it never crashes.
 *
 * Daemon -> shim requests carry "seq" (u64 chosen by the daemon); the reply echoes it.
 *   hello     {}                              -> hello {version, id, init_pid, shim_pid, state,
 *                                                       oom_kills, running:[xid...], started_ms,
 *                                                       exec_file: true (exec takes "file")}
 *   exec      {xid, argv:[..], env:[K=V..], cwd, timeout_ms, shell:bool, file}
 *             fds: [stdin_r, stdout_w, stderr_w] -> started {xid, pid}  or error
 *             xid: a string (1..128 bytes) or an integer, unique among running commands.
 *             argv: 1..4096 strings; with shell:true it runs as /bin/sh -c argv[0] argv[1..].
 *             env: the spec's env, with the request's K=V added or overriding by key.
 *             file: optional {name, data} (a non-empty string, a string): the command's own
 *             process writes data to name (relative to cwd) after its chdir and before its exec,
 *             created or truncated as a shell's `>` would, as the command's user; where it
 *             cannot be written the reply is an error naming it ("exec write NAME: ...") and
 *             nothing runs; a FIFO there is such an error (opened without blocking: ENXIO with
 *             no reader). (SandboxFusion's code: a program and its source, no shell.)
 *             cwd: absolute, default /workspace. timeout_ms: 0 or absent = none; on expiry the
 *             command's whole process tree is killed. pid: the command's pid in the sandbox.
 *             A missing program or cwd is an error reply (errno ENOENT), not an exit.
 *             A fork refused inside the sandbox (its pids limit) is an error reply with errno
 *             EAGAIN and "limit": "pids".
 *             user: "agent" (default, uid 1000) or "grader" (uid 1001, grading sandboxes only:
 *             EINVAL elsewhere); in a grading sandbox HOME and PYTHONNOUSERSITE=1 are set for
 *             the user, and the grader's PATH starts with /.sbx/bin.
 *   kill      {xid, signal}                   -> ok  (signal 1..64, default SIGKILL; sent to the
 *                                                command's whole process tree)
 *   stats     {}                              -> stats {cpu_usec, mem_bytes, mem_peak_bytes,
 *                                                       pids, oom_kills, disk_used_bytes}
 *   port_connect {port}                    -> connected {port} with one fd attached: a TCP socket
 *                                                (nonblocking) connected to 127.0.0.1:port in the
 *                                                sandbox's network namespace; nothing listening is
 *                                                an error with errno ECONNREFUSED (shim/ports.h)
 *   shutdown  {}                              -> ok, then the shim tears the sandbox down,
 *                                                removes its directory and exits
 *   pause     {dir}                           -> paused {dump_ms, files_ms, sockets_ended},
 *                                                then the shim tears the sandbox down and exits
 *                                                as for shutdown (sockets_ended: shim/sockets.h); a
 *                                                pausable sandbox only (EOPNOTSUPP), running no
 *                                                command (EBUSY). dir: an empty directory that
 *                                                becomes its checkpoint (shim/pause.h), whole once
 *                                                dir/SHIMPROTO_CHECKPOINT_DONE exists (written
 *                                                last). A failed pause leaves the sandbox running.
 * Shim -> daemon events (no seq), sent to every connected client:
 *   exit      {xid, exit_code, signal, reason, duration_ms, message?}
 *             reason: "exited" | "signaled" | "command_timeout" | "oom_killed" (end_reason.h)
 *             exit_code is 128+signal when signaled; duration_ms counts from the exec request.
 *   oom       {oom_kills}                     the cgroup's OOM kill counter went up
 *   dead      {reason, message}               the sandbox's init died; the shim tears down and
 *                                             exits 1 (reason "init_exited")
 * Errors: {type:"error", seq, errno (positive), message}. This is the error_rec record.
 * Malformed input (not JSON, wrong "v", no "type") gets errno EPROTO and seq null; an unknown
 * type EOPNOTSUPP; bad fields EINVAL; exec without 3 fds EBADF; kill of an unknown xid ESRCH.
 * A lost connection changes nothing: the shim keeps running, and SIGTERM to the shim is the
 * same as shutdown.
 *
 * Start-up: the daemon writes `<dir>/spec.json` (see common/spec.h) and runs
 * `sbx-shim <dir>` with fd 3 the write end of a pipe. The shim detaches (setsid), builds the
 * sandbox, listens on shim.sock, then writes one line to fd 3 and closes it:
 *   {"ok":true,"init_pid":N,"shim_pid":N}  or  {"ok":false,"errno":N,"message":"..."}
 * where a failure's message reads "step <name>: ..." (the named build step that failed) and the
 * shim has already undone everything, <dir> included, before it exits 1. init_pid is a host pid
 * (its /proc/N/ns/net is the sandbox's network namespace). `sbx-shim cleanup <dir>` reclaims
 * what a killed shim left behind (processes, cgroups, <dir>); it is idempotent.
 * A restarted daemon re-adopts a sandbox by connecting to shim.sock and sending hello.
 * A spec with "restore" (a checkpoint's dir) starts the same way: the sandbox comes back from
 * the checkpoint instead of being built; the checkpoint is left as it was.
 *
 * Grading sandboxes also listen on `<dir>/agent/agent.sock` (bound into the sandbox as
 * /.sbx/run/agent.sock, shim/grading.h) for sbx-as-agent, accepting only the grader's uid. It
 * serves exec (always as the agent; the shim names the xid, "sbx-as-agent-N"; what the command
 * leaves running is killed when it exits; its exit event goes to that connection only and it
 * is not in hello's running list) and kill of that connection's own commands; a closed
 * connection kills its commands. */
#pragma once

/* pause: the file a whole checkpoint has, written last ({dump_ms, files_ms, sockets_ended}) */
#define SHIMPROTO_CHECKPOINT_DONE "checkpoint.json"

#include "common/error.h"

#include <jansson.h>
#include <stddef.h>

#define SHIMPROTO_VERSION 1
#define SHIMPROTO_MSG_MAX 65536
#define SHIMPROTO_MAX_FDS 4
/* A spare shim's parked cgroup under the daemon's parent (`spare-<shim pid>`, shim/sandbox.h);
 * the daemon removes those of spares that are gone (sandboxd/core/spare.h). */
#define SHIMPROTO_SPARE_CGROUP "spare-"

/* Send msg (the "v" field is added). fds may be NULL when n_fds is 0. Returns 0 or -errno. */
int shimproto_send(int sock, json_t *msg, const int *fds, size_t n_fds);
/* Receive one message. Returns 0 with *ret set (and received fds, CLOEXEC, in fds/n_fds),
 * -ECONNRESET when the peer closed, -EAGAIN on a nonblocking socket with nothing to read,
 * -EPROTO for a malformed message or wrong version (any attached fds are closed). */
int shimproto_recv(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds);
/* The same without waiting on a blocking socket: -EAGAIN when nothing is there (so that an event
 * loop needs no poll before it). */
int shimproto_recv_nowait(int sock, json_t **ret, int fds[SHIMPROTO_MAX_FDS], size_t *n_fds);
/* Build {"type":"error","seq":seq,"errno":-err->code,"message":...}. */
json_t *shimproto_error(json_t *seq, const error_rec *err);
/* Convert an error reply into an error_rec; returns its negative errno. */
int shimproto_error_parse(json_t *msg, error_rec *err);
/* The message's "type", or "" when absent. */
const char *shimproto_type(json_t *msg);
