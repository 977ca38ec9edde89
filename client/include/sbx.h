/* libsbx: the public C API of sandboxd's client library.
 *
 * One naming scheme, sbx_<object>_<verb>. Every call that can fail returns an sbx_code and, when
 * given one, fills an sbx_err with the code, the HTTP status and the API's message; the library
 * never prints and never exits. Strings and buffers the library returns are malloc'd and owned
 * by the caller (free() them) unless a comment says otherwise.
 *
 * Synchronous flow:   sbx_client_new -> sbx_sandbox_create -> sbx_sandbox_write_file ->
 *                     sbx_sandbox_exec -> sbx_sandbox_read_file -> sbx_sandbox_terminate
 *                     (sbx_sandbox_fork copies a prepared sandbox into many).
 * Asynchronous flow:  sbx_async_new(client, uv_loop) then sbx_async_* with callbacks, for
 *                     hundreds of sandboxes on one libuv loop.
 *
 * Endpoints: "unix:/run/sandboxd/sandboxd.sock" (the default), a bare socket path, or
 * "http://host:port" (TCP, with a bearer token). Several endpoints separated by commas (or in
 * SBX_HOST) make the client place each new sandbox on the one with the most free capacity.
 * A fleet address "etcd://host:2379[,host:2379...]/prefix" reads the nodes from etcd: creates
 * are placed by power of two choices over their free slots, every other call goes to the node
 * the sandbox id names ("sb-<hex>.<node>"). Any node's URL works too: nodes redirect (307) and
 * the library follows with the token. $SBX_CA names a CA file for https:// endpoints. */
#ifndef SBX_H
#define SBX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_DEFAULT_SOCKET "/run/sandboxd/sandboxd.sock"

typedef enum sbx_code {
    SBX_OK = 0,
    SBX_E_INVALID,     /* bad argument, or the daemon answered 400/405/415/422 */
    SBX_E_NOT_FOUND,   /* 404: no such sandbox or file */
    SBX_E_CONFLICT,    /* 409: the sandbox is not in a state that allows this */
    SBX_E_TOO_LARGE,   /* 413 */
    SBX_E_UNAVAILABLE, /* 503: every node is full (retry later) */
    SBX_E_CONNECT,     /* the daemon could not be reached */
    SBX_E_AUTH,        /* 401/403 */
    SBX_E_SERVER,      /* another 5xx */
    SBX_E_PROTOCOL,    /* an answer the library could not understand */
    SBX_E_NOMEM,
    SBX_E_IO, /* a local file or stream failed */
    /* fleet: the node that holds the sandbox (its id's node part) left the fleet or stopped
     * answering; the sandbox is lost with it (the GRPO runner: infrastructure_failure) */
    SBX_E_NODE_UNAVAILABLE,
    /* a synchronous call stopped waiting for its answer: the signal it was told to watch for
     * came (sbx_client_set_interrupt_fd) */
    SBX_E_INTERRUPTED,
} sbx_code;

typedef struct sbx_err {
    sbx_code code;
    long http_status;  /* 0 when no HTTP answer came */
    char api_code[64]; /* the API's snake_case "code", e.g. "invalid_argument" */
    char message[512];
} sbx_err;

const char *sbx_code_name(sbx_code code);

/* ---- units as users write them (for command lines and config files) ---- */
/* "512Mi", "2Gi", "1G", "1048576" -> bytes. SBX_E_INVALID on anything else. */
sbx_code sbx_parse_size(const char *s, uint64_t *ret_bytes);
/* "30s", "5m", "1h", "250ms", "1.5" (seconds) -> milliseconds. SBX_E_INVALID otherwise. */
sbx_code sbx_parse_duration(const char *s, uint64_t *ret_ms);

/* ---- client ---- */
typedef struct sbx_client sbx_client;

/* hosts: NULL means $SBX_HOST, else the default socket. */
sbx_code sbx_client_new(const char *hosts, sbx_client **ret, sbx_err *err);
void sbx_client_free(sbx_client *client); /* accepts NULL */
/* Bearer token for TCP endpoints (NULL means $SBX_TOKEN), sent whole whatever its length.
 * SBX_E_INVALID for one with a control character (e.g. a token file's trailing newline): the
 * client keeps the token it had. */
sbx_code sbx_client_set_token(sbx_client *client, const char *token);
/* Ctrl-C for a program whose signal handler cannot end a blocking call itself (Python's
 * KeyboardInterrupt, which its interpreter raises only after the call returns): while fd >= 0,
 * a synchronous call that waits for the daemon's answer also watches fd, a signal handler's
 * non-blocking self-pipe that gets one byte per signal, the signal's number (as Python's
 * signal.set_wakeup_fd writes it). A byte equal to signo ends the call at once with
 * SBX_E_INTERRUPTED (api_code "interrupted") and closes its connection (the next call opens
 * another); the request is not sent again, to any endpoint. Other bytes are read and dropped.
 * A signo byte already there when a call starts ends it too, before anything is sent (a signal
 * that came just before the call is not lost): the program reads out the bytes of the signals
 * it has handled itself before its next call. What was asked goes on at the daemon as for
 * a client that went away: an exec's command runs on (docs/API.md). fd -1 (the default): not
 * watched. On a Unix socket the time spent sending is not watched; on TCP the whole transfer
 * is (a fleet's lookups in etcd are not). */
void sbx_client_set_interrupt_fd(sbx_client *client, int fd, int signo);
/* GET /v1/info of the first endpoint (or all, as a JSON array, when several; an endpoint that
 * fails is an entry with "error"). SBX_E_PROTOCOL when one endpoint's answer is not an object. */
sbx_code sbx_client_info(sbx_client *client, char **ret_json, sbx_err *err);
/* GET /v1/sandboxes; label_filter "k=v" or NULL. Returns the JSON array. */
sbx_code sbx_client_list(sbx_client *client, const char *label_filter, char **ret_json,
                         sbx_err *err);

/* ---- the fleet (docs/FLEET.md) ---- */
/* {"prefix","etcd":"ok"|"unreachable","nodes":[{"name","url","state":"ready"|"draining",
 * "max","active","starting","free","pools","version","heartbeat_age_s",...}]}: read from etcd
 * for an etcd:// client, else GET /v1/fleet of the (first) node. */
sbx_code sbx_client_nodes(sbx_client *client, char **ret_json, sbx_err *err);
/* drain != 0: no new sandboxes on node name (running ones finish); 0: undrain. Asks a node of
 * the fleet (POST /v1/fleet/nodes/{name}/drain|undrain). */
sbx_code sbx_node_drain(sbx_client *client, const char *name, int drain, sbx_err *err);

/* ---- leases: sandboxes created under a lease die when it is not renewed ----
 * A lease lives on the client's first endpoint (sandboxes that name it must be placed there);
 * in a fleet it lives in etcd and covers sandboxes on every node. */
sbx_code sbx_lease_create(sbx_client *client, uint64_t ttl_ms, char **ret_lease_id, sbx_err *err);
sbx_code sbx_lease_renew(sbx_client *client, const char *lease_id, sbx_err *err);
/* DELETE /v1/leases/{id}: ends the lease and terminates its sandboxes. */
sbx_code sbx_lease_delete(sbx_client *client, const char *lease_id, sbx_err *err);

/* ---- images: a node's image store (client/lib/images.c). With several endpoints these talk
 * to the first one. ---- */
#define SBX_IMAGE_STRIP_SETUID 1u /* clear setuid/setgid bits instead of refusing the archive */
/* Import an archive (docker save, OCI image layout or rootfs tarball; gzip or not) read from
 * fd to its end, streamed, as name ("NAME" or "NAME:TAG"). ret_json (may be NULL): the image
 * object, free() it. */
sbx_code sbx_image_import(sbx_client *client, const char *name, int fd, unsigned flags,
                          char **ret_json, sbx_err *err);
sbx_code sbx_image_list(sbx_client *client, char **ret_json, sbx_err *err);
sbx_code sbx_image_inspect(sbx_client *client, const char *name, char **ret_json, sbx_err *err);
/* SBX_E_CONFLICT while a sandbox or a warm pool uses it. */
sbx_code sbx_image_remove(sbx_client *client, const char *name, sbx_err *err);

/* ---- volumes: a node's named volumes (client/lib/volumes.c, docs/API.md "Volumes"). With
 * several endpoints these talk to the first one. A sandbox mounts them through its create's
 * "volumes" field: sbx_sandbox_create_with(opts, "{\"volumes\":[{\"name\":\"pip-cache\",
 * \"path\":\"/cache\",\"read_only\":true}]}", ...). ---- */
/* POST /v1/volumes: size in bytes (0: the daemon's default, 1Gi). ret_json (may be NULL): the
 * volume object, free() it. SBX_E_CONFLICT: the name is taken. */
sbx_code sbx_volume_create(sbx_client *client, const char *name, uint64_t size, char **ret_json,
                           sbx_err *err);
sbx_code sbx_volume_list(sbx_client *client, char **ret_json, sbx_err *err);
sbx_code sbx_volume_inspect(sbx_client *client, const char *name, char **ret_json, sbx_err *err);
/* Removes the volume and its data. SBX_E_CONFLICT while a sandbox uses it. */
sbx_code sbx_volume_remove(sbx_client *client, const char *name, sbx_err *err);

/* ---- sandboxes ---- */
typedef struct sbx_sandbox sbx_sandbox;

typedef struct sbx_create_opts {
    const char *image;           /* NULL: the host image */
    double cpu;                  /* vCPUs; 0: default (1) */
    uint64_t memory;             /* bytes; 0: default (2Gi) */
    uint64_t disk;               /* bytes; 0: default (1Gi) */
    unsigned pids;               /* 0: default (256) */
    const char *const *env;      /* NULL-terminated "K=V" list, or NULL */
    const char *const *labels;   /* NULL-terminated "k=v" list, or NULL */
    uint64_t idle_timeout_ms;    /* 0: default (5m) */
    uint64_t timeout_ms;         /* 0: default (1h) */
    double max_cost_usd;         /* 0: no cap */
    const char *network;         /* NULL/"none", "open", or a JSON value: {"allow":[...]} */
    const char *idempotency_key; /* NULL: none */
    const char *lease_id;        /* NULL: none */
    const char *profile;         /* NULL: default; "grading": a grading sandbox (docs/GRPO.md) */
    unsigned gpus;               /* whole GPUs (docs/API.md "GPUs"); 0: none */
    const char *isolation;       /* NULL: the daemon's default; "native" or "gvisor" (gVisor) */
} sbx_create_opts;

void sbx_create_opts_init(sbx_create_opts *opts);

sbx_code sbx_sandbox_create(sbx_client *client, const sbx_create_opts *opts, sbx_sandbox **ret,
                            sbx_err *err);
/* The same with create fields sbx_create_opts has no member for, as a JSON object added to the
 * body, e.g. {"ports":[8000],"entrypoint":true} (docs/API.md "Ports", "Entrypoint"); a key
 * opts already sets, or one that is not an object, is SBX_E_INVALID. */
sbx_code sbx_sandbox_create_with(sbx_client *client, const sbx_create_opts *opts,
                                 const char *extra_json, sbx_sandbox **ret, sbx_err *err);
/* A handle on an existing sandbox (checked with GET). */
sbx_code sbx_sandbox_open(sbx_client *client, const char *id, sbx_sandbox **ret, sbx_err *err);
/* The same handle without the GET where the endpoint is known: the client has one endpoint, or
 * the id names a fleet node. A missing sandbox is then reported by the first call made with the
 * handle (SBX_E_NOT_FOUND). Otherwise it is sbx_sandbox_open. For one-shot tools (`sbx exec`),
 * where the check would be a round trip of its own. */
sbx_code sbx_sandbox_open_lazy(sbx_client *client, const char *id, sbx_sandbox **ret, sbx_err *err);
const char *sbx_sandbox_id(const sbx_sandbox *sb); /* owned by the handle */
/* GET /v1/sandboxes/{id}: state, limits, usage, cost, end reason, as JSON. */
sbx_code sbx_sandbox_inspect(sbx_sandbox *sb, char **ret_json, sbx_err *err);

/* The same GET, reduced to what a program usually wants to know. */
typedef struct sbx_sandbox_status {
    char state[16];      /* "starting", "running" or "ended" */
    char end_reason[32]; /* "" until ended; then "terminated", "idle_timeout", ... */
    double cost_usd;     /* so far; once ended, the end record's final cost */
} sbx_sandbox_status;
sbx_code sbx_sandbox_get_status(sbx_sandbox *sb, sbx_sandbox_status *ret, sbx_err *err);

/* POST /v1/sandboxes/{id}/fork: count new sandboxes on the source's node whose /workspace and
 * /tmp start as copies of the source's. The overrides are create fields; a field left at its
 * sbx_create_opts_init value keeps the source's (idempotency_key is not used). All or nothing. */
typedef struct sbx_fork_opts {
    unsigned count; /* 1..256; 0 means 1 */
    sbx_create_opts overrides;
} sbx_fork_opts;
void sbx_fork_opts_init(sbx_fork_opts *opts);
/* *ret_array: malloc'd array of *ret_count handles (free them with sbx_sandbox_array_free). */
sbx_code sbx_sandbox_fork(sbx_sandbox *sb, const sbx_fork_opts *opts, sbx_sandbox ***ret_array,
                          size_t *ret_count, sbx_err *err);
/* The same with fork fields sbx_create_opts has no member for, as a JSON object added to the
 * body as sbx_sandbox_create_with adds them (a key opts already sets, "count" included, or one
 * that is not an object, is SBX_E_INVALID): the daemon's fork takes "on_idle" ("end"; "pause"
 * is refused, and a source made with "on_idle":"pause" forks only with "end"), "volumes" ([]:
 * none of the source's), "ports" and "pausable"; "entrypoint" is refused (400 naming it).
 * E.g. {"on_idle":"end","ports":[8000]} (docs/API.md "Additions: warm pools and forks"). */
sbx_code sbx_sandbox_fork_with(sbx_sandbox *sb, const sbx_fork_opts *opts, const char *extra_json,
                               sbx_sandbox ***ret_array, size_t *ret_count, sbx_err *err);
/* POST /v1/sandboxes/{id}/commit (client/lib/commit.c): the running sandbox's files (its
 * writable layer over its store image, /workspace, /tmp) become image name ("NAME[:TAG]") on
 * its node; flags: SBX_IMAGE_STRIP_SETUID clears setuid/setgid bits instead of refusing. The
 * sandbox is frozen for the copy. ret_json (may be NULL): the image object with "freeze_ms",
 * free() it. SBX_E_CONFLICT: the name is taken. */
sbx_code sbx_sandbox_commit(sbx_sandbox *sb, const char *name, unsigned flags, char **ret_json,
                            sbx_err *err);
/* POST .../pause and .../resume (client/lib/pause.c; docs/API.md "Pause and resume"): a
 * sandbox created pausable ({"pausable": true} through sbx_sandbox_create_with) is saved to the
 * node's disk with its processes, memory and files, and costs nothing but disk until resumed
 * with the same id, processes and files. ret_json (may be NULL): the sandbox object ("state"
 * "paused" or "running", "pause" with the checkpoint's size and times), free() it.
 * SBX_E_CONFLICT: not running / not paused, not pausable, or commands still running;
 * SBX_E_SERVER: the node cannot pause (api_code "unsupported") or CRIU failed (the sandbox
 * stays as it was: running, or paused with its checkpoint). */
sbx_code sbx_sandbox_pause(sbx_sandbox *sb, char **ret_json, sbx_err *err);
sbx_code sbx_sandbox_resume(sbx_sandbox *sb, char **ret_json, sbx_err *err);
/* Resume on node (a node of the fleet; NULL: as sbx_sandbox_resume): the paused sandbox's
 * checkpoint moves there through the nodes' API and it runs there with the same id (requests
 * for it sent to its first node are redirected). The sandbox stays paused where it was when the
 * move fails (the answer says why: SBX_E_NOT_FOUND no such node, SBX_E_UNAVAILABLE that node is
 * full or not in the fleet, SBX_E_CONFLICT its uid slot is in use there...). */
sbx_code sbx_sandbox_resume_on(sbx_sandbox *sb, const char *node, char **ret_json, sbx_err *err);
/* What nodes of a fleet ask each other during a move (sandboxd's fleet/move.c; not for
 * trainers): POST /v1/checkpoints on the client's first endpoint, which pulls paused sandbox
 * id's checkpoint from node from (its URL from the fleet's own list) with the move's one-time
 * key and resumes it; ret_json: the running sandbox. And the pull itself: GET
 * .../checkpoint?key= of a sandbox its node is moving, the tar written to fd. */
sbx_code sbx_checkpoint_pull(sbx_client *client, const char *id, const char *from, const char *key,
                             char **ret_json, sbx_err *err);
sbx_code sbx_sandbox_checkpoint_download(sbx_sandbox *sb, const char *key, int fd, sbx_err *err);
/* Frees each handle (without terminating) and the array; accepts NULL. */
void sbx_sandbox_array_free(sbx_sandbox **array, size_t count);
/* POST .../timeout: the sandbox now lives until timeout_ms from now. */
sbx_code sbx_sandbox_set_timeout(sbx_sandbox *sb, uint64_t timeout_ms, sbx_err *err);
sbx_code sbx_sandbox_write_file(sbx_sandbox *sb, const char *path, const void *data, size_t len,
                                sbx_err *err);
/* The same with the file's mode (e.g. 0755; 0 means the default 0644). */
sbx_code sbx_sandbox_write_file_mode(sbx_sandbox *sb, const char *path, const void *data,
                                     size_t len, unsigned mode, sbx_err *err);
sbx_code sbx_sandbox_read_file(sbx_sandbox *sb, const char *path, void **ret, size_t *ret_len,
                               sbx_err *err);
/* PUT a tar archive to be unpacked into the directory at path / GET a directory as a tar. */
sbx_code sbx_sandbox_put_archive(sbx_sandbox *sb, const char *path, const void *tar, size_t len,
                                 sbx_err *err);
sbx_code sbx_sandbox_get_archive(sbx_sandbox *sb, const char *path, void **ret, size_t *ret_len,
                                 sbx_err *err);
/* GET path whatever it is, in one request: a file's bytes (*ret_is_archive 0) or a
 * directory as a tar (1). read_file on a directory fails with "is_a_directory" after the
 * tar came (and get_archive on a file after the file came): this fetches either once. */
sbx_code sbx_sandbox_read_path(sbx_sandbox *sb, const char *path, void **ret, size_t *ret_len,
                               int *ret_is_archive, sbx_err *err);
/* Inbound ports (docs/API.md "Ports"): open TCP port 1..65535 of the sandbox (idempotent; also
 * "ports" at create) and return the daemon's URL that proxies HTTP to it (free() it), e.g.
 * "http://host:7070/v1/sandboxes/ID/ports/8000/"; over a Unix socket the host is localhost
 * and the URL is reached through that socket. */
sbx_code sbx_sandbox_port_url(sbx_sandbox *sb, unsigned port, char **ret_url, sbx_err *err);
/* One HTTP request to the port through the daemon's proxy: METHOD /PATH (path without the
 * leading slash is fine), body (may be NULL) with content_type. The server's answer, whatever
 * its status, is SBX_OK with *ret_status and *ret_body (NUL-terminated, free() it; ret_len may
 * be NULL); the daemon's own refusals (port_not_open, port_unreachable, port_timeout, ...) are
 * errors with their api_code. */
sbx_code sbx_sandbox_port_request(sbx_sandbox *sb, unsigned port, const char *method,
                                  const char *path, const char *content_type, const void *body,
                                  size_t len, long *ret_status, char **ret_body, size_t *ret_len,
                                  sbx_err *err);
/* Wait until something answers HTTP on the port (GET /, any status), polling every 100 ms while
 * the daemon says nothing listens yet; SBX_E_CONFLICT "port_wait_timeout" after timeout_ms
 * with the last reason, and at once for a port not opened or a sandbox that ended. Each probe
 * is given only the time left (at least 100 ms), so a server that accepts but does not answer
 * does not hold it past timeout_ms. */
sbx_code sbx_sandbox_port_wait(sbx_sandbox *sb, unsigned port, uint64_t timeout_ms, sbx_err *err);
/* DELETE: idempotent. The handle stays valid (for its id) until sbx_sandbox_free. */
sbx_code sbx_sandbox_terminate(sbx_sandbox *sb, sbx_err *err);
void sbx_sandbox_free(sbx_sandbox *sb); /* accepts NULL; does not terminate */

/* ---- commands ---- */
enum sbx_stream { SBX_STREAM_STDOUT = 1, SBX_STREAM_STDERR = 2 };
typedef void (*sbx_output_cb)(void *userdata, enum sbx_stream stream, const char *data, size_t len);

typedef struct sbx_exec_opts {
    const char *const *argv; /* NULL-terminated; with shell=1, argv[0] is a shell script */
    int shell;
    const char *const *env; /* NULL-terminated "K=V" list, or NULL */
    const char *cwd;        /* NULL: /workspace */
    const void *stdin_data; /* bytes fed to the command's stdin, or NULL */
    size_t stdin_len;
    uint64_t timeout_ms;     /* 0: no per-command timeout */
    uint64_t max_output;     /* per stream byte cap kept in the result; 0: daemon default */
    sbx_output_cb on_output; /* when set, output streams live (NDJSON) into this callback */
    void *userdata;
    const char *user; /* NULL/"agent"; "grader" in a grading sandbox (docs/GRPO.md) */
} sbx_exec_opts;

typedef struct sbx_exec_result {
    int exit_code;   /* -1 when killed by a signal */
    int signal;      /* 0 when it exited */
    char reason[32]; /* exited | signaled | command_timeout | oom_killed | ... */
    double duration_s;
    char *stdout_data; /* NUL-terminated; NULL when streamed to on_output */
    size_t stdout_len;
    char *stderr_data;
    size_t stderr_len;
    uint64_t stdout_bytes; /* bytes the command wrote, even past the cap */
    uint64_t stderr_bytes;
    int stdout_truncated;
    int stderr_truncated;
} sbx_exec_result;

void sbx_exec_opts_init(sbx_exec_opts *opts);
sbx_code sbx_sandbox_exec(sbx_sandbox *sb, const sbx_exec_opts *opts, sbx_exec_result *ret,
                          sbx_err *err);
void sbx_exec_result_free(sbx_exec_result *res); /* frees the buffers, accepts NULL */

/* ---- processes: attached commands over a WebSocket, terminals, background commands ----
 * (client/lib/process.c, processes.c). An attached process streams stdin as it is written,
 * output as it comes, and takes resizes and signals while it runs; see docs/API.md
 * ("Processes and attach"). */
typedef struct sbx_process sbx_process;

typedef struct sbx_process_opts {
    int tty;             /* a pseudo-terminal: stdout and stderr become one stream (stdout) */
    unsigned rows, cols; /* its size (1..1000); 0: 24x80 */
    const char *term;    /* TERM; NULL: the daemon's default (xterm) */
} sbx_process_opts;
void sbx_process_opts_init(sbx_process_opts *opts);

/* Start exec's command attached. exec->on_output gets the output as it comes (called from
 * sbx_process_dispatch/sbx_process_wait, or on the loop for the async form); exec->stdin_data,
 * when set, is queued as the first stdin bytes (stdin stays open). popts may be NULL. Returns
 * once the daemon said the command started (sbx_process_pid). Endpoints: unix: and http://
 * (https:// answers SBX_E_INVALID: not supported yet). */
sbx_code sbx_process_start(sbx_sandbox *sb, const sbx_exec_opts *exec,
                           const sbx_process_opts *popts, sbx_process **ret, sbx_err *err);
#define SBX_ATTACH_STDIN 1u  /* take the stdin side (SBX_E_CONFLICT "stdin_taken" if held) */
#define SBX_ATTACH_REPLAY 2u /* first receive the buffered output tail */
/* Attach to a running process (SBX_E_CONFLICT "process_ended" once it has ended). */
sbx_code sbx_process_attach(sbx_sandbox *sb, long pid, unsigned flags, sbx_output_cb on_output,
                            void *userdata, sbx_process **ret, sbx_err *err);
long sbx_process_pid(const sbx_process *p);
/* Queue stdin bytes (never blocks; sent as the socket and the daemon's flow control allow).
 * A program that produces stdin faster than it is taken should wait while
 * sbx_process_write_pending is large (e.g. over 1 MiB). */
sbx_code sbx_process_write(sbx_process *p, const void *data, size_t len, sbx_err *err);
size_t sbx_process_write_pending(const sbx_process *p);
sbx_code sbx_process_close_stdin(sbx_process *p, sbx_err *err);
sbx_code sbx_process_resize(sbx_process *p, unsigned rows, unsigned cols, sbx_err *err);
/* signal: "INT", "SIGTERM", "9", ... */
sbx_code sbx_process_signal(sbx_process *p, const char *signal, sbx_err *err);
/* For a program's own poll loop: the socket, the poll events it waits for (POLLIN, and POLLOUT
 * while bytes are queued), and one non-blocking round (send what can be sent, read what is
 * there, run the callbacks). */
int sbx_process_fd(const sbx_process *p);
short sbx_process_poll_events(const sbx_process *p);
sbx_code sbx_process_dispatch(sbx_process *p, sbx_err *err);
/* Whether the exit record came (or the stream ended). */
int sbx_process_done(const sbx_process *p);
/* Send what is queued and run callbacks until the command exits. ret: the exit record (no
 * output data: it went to on_output). A command whose sandbox ended under it has no exit
 * status: SBX_E_CONFLICT with the daemon's message, as the plain exec's 409 (the async form's
 * on_exit gets NULL and that error). */
sbx_code sbx_process_wait(sbx_process *p, sbx_exec_result *ret, sbx_err *err);
/* Closes the stream (the command goes on unless it has ended) and frees; accepts NULL. In the
 * async form the memory is released on the loop. */
void sbx_process_free(sbx_process *p);

/* Background commands (plain requests). ret_json: the process object (may be NULL). */
sbx_code sbx_sandbox_process_start(sbx_sandbox *sb, const sbx_exec_opts *exec,
                                   const sbx_process_opts *popts, long *ret_pid, char **ret_json,
                                   sbx_err *err);
/* GET .../processes: {"processes":[...]} (running and recently ended). */
sbx_code sbx_sandbox_process_list(sbx_sandbox *sb, char **ret_json, sbx_err *err);
/* GET .../processes/{pid}; tail > 0 adds the last tail bytes of each output stream. */
sbx_code sbx_sandbox_process_get(sbx_sandbox *sb, long pid, uint64_t tail, char **ret_json,
                                 sbx_err *err);
/* The same GET, decoded: ret's stdout_data/stderr_data hold the last tail bytes of each stream
 * (tail 0: all that is kept), and once the process has ended, its exit fields (reason "" while
 * it runs). Free with sbx_exec_result_free. */
sbx_code sbx_sandbox_process_logs(sbx_sandbox *sb, long pid, uint64_t tail, sbx_exec_result *ret,
                                  sbx_err *err);
sbx_code sbx_sandbox_process_signal(sbx_sandbox *sb, long pid, const char *signal, sbx_err *err);
/* DELETE: kills the command's whole tree. */
sbx_code sbx_sandbox_process_kill(sbx_sandbox *sb, long pid, sbx_err *err);

/* ---- asynchronous API on libuv ---- */
struct uv_loop_s;
typedef struct sbx_async sbx_async;

typedef void (*sbx_create_cb)(void *userdata, sbx_sandbox *sb, const sbx_err *err);
typedef void (*sbx_exec_cb)(void *userdata, const sbx_exec_result *res, const sbx_err *err);
typedef void (*sbx_data_cb)(void *userdata, const void *data, size_t len, const sbx_err *err);
typedef void (*sbx_done_cb)(void *userdata, const sbx_err *err);
/* sbs: count handles owned by the callee; the array itself is valid during the callback only. */
typedef void (*sbx_fork_cb)(void *userdata, sbx_sandbox **sbs, size_t count, const sbx_err *err);
typedef void (*sbx_lease_cb)(void *userdata, const char *lease_id, const sbx_err *err);
typedef void (*sbx_status_cb)(void *userdata, const sbx_sandbox_status *st, const sbx_err *err);

/* All callbacks run on loop. err is NULL on success. The result/data passed to a callback is
 * only valid during the callback; a created sbx_sandbox is owned by the callee. */
sbx_code sbx_async_new(sbx_client *client, struct uv_loop_s *loop, sbx_async **ret, sbx_err *err);
/* Cancels what is in flight (their callbacks run with SBX_E_IO) and frees; accepts NULL; may
 * be called from one of its callbacks. A standalone handle's loop is closed too (free its
 * sbx_process handles first), from a callback once sbx_async_run returns. */
void sbx_async_free(sbx_async *as);
/* For event loops that are not libuv (Python's asyncio, a poll loop): a handle on a libuv loop
 * of its own. Wait until sbx_async_fd is readable or sbx_async_timeout_ms has passed (-1: no
 * timer; 0: now), then call sbx_async_run: it runs what is due without blocking, callbacks
 * included. Call it also after starting operations (their first steps are due at once). Both
 * on the thread that uses the handle; sbx_async_fd and sbx_async_timeout_ms are -1 for a handle
 * made by sbx_async_new. */
sbx_code sbx_async_new_standalone(sbx_client *client, sbx_async **ret, sbx_err *err);
int sbx_async_fd(const sbx_async *as);
int sbx_async_timeout_ms(const sbx_async *as);
void sbx_async_run(sbx_async *as);
sbx_code sbx_async_create(sbx_async *as, const sbx_create_opts *opts, sbx_create_cb cb, void *ud);
/* The same with more create fields (sbx_sandbox_create_with). */
sbx_code sbx_async_create_with(sbx_async *as, const sbx_create_opts *opts, const char *extra_json,
                               sbx_create_cb cb, void *ud);
sbx_code sbx_async_exec(sbx_async *as, sbx_sandbox *sb, const sbx_exec_opts *opts, sbx_exec_cb cb,
                        void *ud);
sbx_code sbx_async_fork(sbx_async *as, sbx_sandbox *sb, const sbx_fork_opts *opts, sbx_fork_cb cb,
                        void *ud);
/* The same with more fork fields (sbx_sandbox_fork_with). */
sbx_code sbx_async_fork_with(sbx_async *as, sbx_sandbox *sb, const sbx_fork_opts *opts,
                             const char *extra_json, sbx_fork_cb cb, void *ud);
sbx_code sbx_async_inspect(sbx_async *as, sbx_sandbox *sb, sbx_data_cb cb, void *ud); /* JSON */
sbx_code sbx_async_get_status(sbx_async *as, sbx_sandbox *sb, sbx_status_cb cb, void *ud);
/* sbx_sandbox_port_request on the loop: cb gets the server's status and body (valid during the
 * callback), or err (status 0) for the daemon's refusals and failures. */
typedef void (*sbx_port_cb)(void *userdata, long status, const void *body, size_t len,
                            const sbx_err *err);
sbx_code sbx_async_port_request(sbx_async *as, sbx_sandbox *sb, unsigned port, const char *method,
                                const char *path, const char *content_type, const void *body,
                                size_t len, sbx_port_cb cb, void *ud);
sbx_code sbx_async_write_file(sbx_async *as, sbx_sandbox *sb, const char *path, const void *data,
                              size_t len, sbx_done_cb cb, void *ud);
sbx_code sbx_async_write_file_mode(sbx_async *as, sbx_sandbox *sb, const char *path,
                                   const void *data, size_t len, unsigned mode, sbx_done_cb cb,
                                   void *ud);
sbx_code sbx_async_read_file(sbx_async *as, sbx_sandbox *sb, const char *path, sbx_data_cb cb,
                             void *ud);
sbx_code sbx_async_put_archive(sbx_async *as, sbx_sandbox *sb, const char *path, const void *tar,
                               size_t len, sbx_done_cb cb, void *ud);
sbx_code sbx_async_get_archive(sbx_async *as, sbx_sandbox *sb, const char *path, sbx_data_cb cb,
                               void *ud);
sbx_code sbx_async_terminate(sbx_async *as, sbx_sandbox *sb, sbx_done_cb cb, void *ud);
/* sbx_sandbox_commit on the loop: cb gets the image object (JSON, with "freeze_ms"). */
sbx_code sbx_async_commit(sbx_async *as, sbx_sandbox *sb, const char *name, unsigned flags,
                          sbx_data_cb cb, void *ud);
/* sbx_sandbox_pause / sbx_sandbox_resume on the loop: cb gets the sandbox object (JSON). */
sbx_code sbx_async_pause(sbx_async *as, sbx_sandbox *sb, sbx_data_cb cb, void *ud);
sbx_code sbx_async_resume(sbx_async *as, sbx_sandbox *sb, sbx_data_cb cb, void *ud);
/* sbx_sandbox_resume_on on the loop. */
sbx_code sbx_async_resume_on(sbx_async *as, sbx_sandbox *sb, const char *node, sbx_data_cb cb,
                             void *ud);
/* Volumes, on the client's first endpoint (as the synchronous calls): create answers the
 * volume object (JSON). */
sbx_code sbx_async_volume_create(sbx_async *as, const char *name, uint64_t size, sbx_data_cb cb,
                                 void *ud);
sbx_code sbx_async_volume_remove(sbx_async *as, const char *name, sbx_done_cb cb, void *ud);
/* Leases, on the client's first endpoint (as the synchronous calls). */
sbx_code sbx_async_lease_create(sbx_async *as, uint64_t ttl_ms, sbx_lease_cb cb, void *ud);
sbx_code sbx_async_lease_renew(sbx_async *as, const char *lease_id, sbx_done_cb cb, void *ud);
sbx_code sbx_async_lease_delete(sbx_async *as, const char *lease_id, sbx_done_cb cb, void *ud);
/* Attached processes on the loop: the same sbx_process (write, close_stdin, resize, signal,
 * free work on it), with callbacks instead of sbx_process_wait. on_start runs once (pid, or
 * err when the start failed: then the process is finished and must still be freed); on_exit
 * once after a successful start (res, or err when the stream broke). The connect itself is
 * done in the call (local sockets: immediate). */
typedef struct sbx_process_cbs {
    void (*on_start)(void *userdata, sbx_process *p, long pid, const sbx_err *err);
    sbx_output_cb on_output;
    void (*on_exit)(void *userdata, sbx_process *p, const sbx_exec_result *res, const sbx_err *err);
    void *userdata;
} sbx_process_cbs;
sbx_code sbx_async_process_start(sbx_async *as, sbx_sandbox *sb, const sbx_exec_opts *exec,
                                 const sbx_process_opts *popts, const sbx_process_cbs *cbs,
                                 sbx_process **ret, sbx_err *err);
sbx_code sbx_async_process_attach(sbx_async *as, sbx_sandbox *sb, long pid, unsigned flags,
                                  const sbx_process_cbs *cbs, sbx_process **ret, sbx_err *err);
/* Requests in flight on this handle. */
size_t sbx_async_pending(const sbx_async *as);
/* Why the latest call on as that starts a request (sbx_async_create ... sbx_async_lease_delete;
 * not sbx_async_process_*, which fill an sbx_err of their own) returned other than SBX_OK: the
 * request was refused before it was sent and its callback will not run. Returns that call's
 * code, or SBX_OK when it was accepted (or as is NULL); ret (may be NULL) gets the code and the
 * library's message (http_status 0), zeroed when SBX_OK. Read it on the thread that made the
 * call, before the next one. */
sbx_code sbx_async_submit_error(const sbx_async *as, sbx_err *ret);

#ifdef __cplusplus
}
#endif
#endif
