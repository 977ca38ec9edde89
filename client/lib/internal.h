/* libsbx internals shared by its files (never installed): endpoints, the client and sandbox
 * structs, request bodies, response parsing, the NDJSON splitter, base64 and error mapping. */
#pragma once

#include "client/lib/curl_dl.h"
#include "common/macro.h"

#include <sbx.h>

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How long GET /v1/info's free_slots stays trusted for placement. */
#define SBXI_INFO_TTL_MS 1000
/* Largest answer kept in memory (file downloads included). */
#define SBXI_MAX_RESPONSE (1024ull * 1024 * 1024)
/* How long the fleet's node list from etcd stays trusted for placement and routing. */
#define SBXI_FLEET_REFRESH_MS 1000
/* How long a node that stopped answering is skipped. */
#define SBXI_FLEET_DOWN_MS 3000

typedef struct sbxi_endpoint {
    char *display;   /* what messages show: the socket path or the URL */
    char *base_url;  /* "http://localhost" for unix sockets, else the URL without trailing / */
    char *unix_path; /* NULL for TCP */
    bool is_default; /* the default socket: connect errors say how to start the daemon */
    long free_slots; /* from GET /v1/info; -1 unknown or unreachable */
    long gpus_free;  /* GPUs: from GET /v1/info or the fleet record (gpu.c); -1 unknown */
    uint64_t info_at_ms;
    /* fleet mode (fleet.c): the node's name, whether etcd still lists it, whether it is
     * drained, until when it is skipped because it stopped answering, and the warm pools and
     * create defaults its record publishes (common/poolshape.h) */
    char *node;
    bool gone, draining;
    uint64_t down_until_ms;
    json_t *pools, *defaults;
} sbxi_endpoint;

typedef struct sbxi_fleet sbxi_fleet;

struct sbx_client {
    sbxi_endpoint *eps; /* in fleet mode only ever appended to: handles keep their index */
    size_t n_eps;
    char *token;
    CURL *easy;   /* the synchronous API's handle for TCP endpoints (keeps connections alive) */
    CURLM *multi; /* easy's transfers while intr_fd is watched (its own kept-alive connections) */
    int ufd;      /* the synchronous API's kept-alive Unix-socket connection, or -1 */
    size_t ufd_ep;
    sbxi_fleet *fleet;       /* etcd:// addresses only */
    uint64_t timeout_ms;     /* the sync API's limit on one whole request, 0: none (port_wait's) */
    int intr_fd, intr_signo; /* sbx_client_set_interrupt_fd's; intr_fd -1: none */
};

struct sbx_sandbox {
    sbx_client *client;
    char *id;
    size_t ep; /* index into client->eps: where the sandbox lives */
};

/* ---- client.c ---- */
/* Whether s is safe inside an HTTP header (no control characters). */
bool sbxi_header_safe(const char *s);
/* Parse a comma-separated endpoint list into a malloc'd array. Returns SBX_OK or SBX_E_INVALID. */
sbx_code sbxi_hosts_parse(const char *hosts, sbxi_endpoint **ret, size_t *ret_n, sbx_err *err);
void sbxi_endpoints_free(sbxi_endpoint *eps, size_t n);
/* Placement order for a new sandbox (body: the create's JSON, or NULL): endpoint indexes, most
 * free slots first (unknown last but still tried; in fleet mode power of two choices, first
 * among the nodes with a ready warm pool entry for it, see fleet.c). order has room for
 * client->n_eps entries. Returns how many to try. */
size_t sbxi_placement_order(sbx_client *client, const char *body, size_t *order);
/* Whether the endpoints' info is too old to place by. */
bool sbxi_info_stale(const sbx_client *client, uint64_t now_ms);
/* Record an info answer (free_slots, or -1 when it failed). */
void sbxi_info_record(sbx_client *client, size_t ep, const char *body, size_t len, bool ok);
sbx_sandbox *sbxi_sandbox_new(sbx_client *client, const char *id, size_t ep);
/* "/v1/sandboxes/<id><suffix>"; NULL on OOM. */
char *sbxi_sandbox_path(const sbx_sandbox *sb, const char *suffix);
/* Lease bodies, paths (NULL for a bad id or OOM) and the create answer's id. */
char *sbxi_lease_body(uint64_t ttl_ms);
char *sbxi_lease_path(const char *lease_id, const char *suffix);
sbx_code sbxi_lease_id_parse(const char *body, size_t len, char **ret, sbx_err *err);
/* volumes.c: a POST /v1/volumes body (size 0: the daemon's default) and /v1/volumes/<name>
 * (NULL for a name with characters no volume name has); commit.c: a commit body. NULL on OOM
 * or a bad argument. */
char *sbxi_volume_body(const char *name, uint64_t size);
char *sbxi_volume_path(const char *name);
char *sbxi_commit_body(const char *name, unsigned flags);

/* ---- fleet.c: etcd:// addresses, the node list, routing by the id's node part ---- */
/* Whether hosts is a fleet address (etcd://host:port[,host:port...][/prefix]). */
bool sbxi_fleet_addr(const char *hosts);
/* Parse the address and read the node list into client->eps (SBX_E_CONNECT when etcd cannot
 * be reached, SBX_E_UNAVAILABLE when no node is registered). */
sbx_code sbxi_fleet_open(sbx_client *client, const char *addr, sbx_err *err);
void sbxi_fleet_free(sbxi_fleet *f);
/* Re-read the node list (at most every SBXI_FLEET_REFRESH_MS unless force). On failure the
 * last view stays. */
sbx_code sbxi_fleet_refresh(sbx_client *client, bool force, sbx_err *err);
/* Whether the node list is older than SBXI_FLEET_REFRESH_MS. */
bool sbxi_fleet_stale(const sbx_client *client);
/* The endpoint of the node an id ("sb-<hex>.<node>", "ls-<hex>.<node>") names, else fallback. */
size_t sbxi_fleet_route(sbx_client *client, const char *id, size_t fallback);
/* The first endpoint worth talking to (fleet: a listed node that answers; else 0). */
size_t sbxi_first_ep(const sbx_client *client);
/* Whether an endpoint is listed and not skipped for not answering. */
bool sbxi_ep_usable(const sbx_client *client, size_t ep);
/* A request to ep failed with rc: in fleet mode a connection failure (or a node etcd no longer
 * lists) becomes SBX_E_NODE_UNAVAILABLE, the node is skipped for a while, the list re-read. */
sbx_code sbxi_fleet_failed(sbx_client *client, size_t ep, sbx_code rc, sbx_err *err);
/* Before a request to ep: SBX_E_NODE_UNAVAILABLE (err filled) when etcd says the node is gone. */
sbx_code sbxi_fleet_check(sbx_client *client, size_t ep, sbx_err *err);
/* The endpoint of the node named name (len bytes), or SIZE_MAX. */
size_t sbxi_fleet_ep_by_node(const sbx_client *client, const char *name, size_t len);
/* etcd's node list as sbx_client_nodes answers it (prefix, etcd ok/unreachable, the nodes with
 * their state and heartbeat age); NULL on OOM. */
json_t *sbxi_fleet_nodes_json(const sbxi_fleet *f);

/* ---- nodes.c: the fleet calls that go through request.c ---- */
/* A client given one node's URL: when that node is in a fleet, append every node's
 * GET path (a JSON array) to all (nodes that do not answer are left out) and return SBX_OK;
 * SBX_E_NOT_FOUND when the node is not in a fleet. */
sbx_code sbxi_fleet_list_via_node(sbx_client *client, const char *path, json_t *all, sbx_err *err);

/* ---- sandbox.c: answers shared by the sync and async APIs ---- */
/* "sb-..." from a create answer's body. */
sbx_code sbxi_sandbox_from_body(sbx_client *client, size_t ep, const char *body, size_t len,
                                sbx_sandbox **ret, sbx_err *err);
/* The handles of a fork answer (an array of sandbox objects). */
sbx_code sbxi_sandboxes_from_body(sbx_client *client, size_t ep, const char *body, size_t len,
                                  sbx_sandbox ***ret, size_t *ret_n, sbx_err *err);
sbx_code sbxi_status_parse(const char *body, size_t len, sbx_sandbox_status *ret, sbx_err *err);

/* ---- http.c: one request's description and its collected answer ---- */
typedef void (*sbxi_chunk_fn)(void *ud, const char *data, size_t len);

typedef struct sbxi_response {
    long status; /* 0 when no HTTP answer came */
    char *body;  /* NUL-terminated (not streamed when on_chunk is set) */
    size_t len, cap;
    char content_type[96];
    long retry_after;
    CURLcode curl_code;
    long os_errno;
    char curl_error[CURL_ERROR_SIZE];
    bool overflow;
    long redirects;         /* 307s followed (a fleet node sent the request to another) */
    char final_url[200];    /* where the last attempt went, when redirected */
    sbxi_chunk_fn on_chunk; /* when set and status is 2xx, body bytes go here instead */
    void *chunk_ud;
    CURL *easy;       /* during the transfer */
    bool timed_out;   /* no whole answer within the client's timeout_ms */
    bool interrupted; /* the client's interrupt signal came (sbx_client_set_interrupt_fd) */
} sbxi_response;

/* Set up an easy handle for one request; the response collects into resp. headers is owned by
 * the caller and must outlive the transfer. body is not copied. */
void sbxi_easy_setup(CURL *h, const char *method, const char *url, const char *unix_path,
                     struct curl_slist *headers, const void *body, size_t len, sbxi_response *resp);
/* The request headers every libsbx request carries: content type (NULL: none), accept (NULL:
 * application/json), the bearer token (NULL or "": none), one extra "K: V" (or NULL). */
struct curl_slist *sbxi_headers(const char *content_type, const char *accept, const char *bearer,
                                const char *extra);
/* The client's token for an endpoint: TCP only, the socket's permissions suffice. */
const char *sbxi_bearer(const sbx_client *c, const sbxi_endpoint *ep);
/* sbxi_headers for a request to one of the client's endpoints. */
struct curl_slist *sbxi_api_headers(const sbx_client *c, const sbxi_endpoint *ep,
                                    const char *content_type, const char *accept,
                                    const char *extra);
/* base_url + path (path starts with '/'); NULL on OOM. */
char *sbxi_url(const sbxi_endpoint *ep, const char *path);
/* Percent-encoding for a query value (malloc'd; NULL on OOM). */
char *sbxi_escape(const char *s);
/* "/v1/sandboxes/<id>/files?path=<escaped>" (with &mode=<octal> when mode != 0). */
char *sbxi_files_path(const char *id, const char *path, unsigned mode);
void sbxi_response_reset(sbxi_response *r);
/* The bytes waiting on a non-blocking interrupt pipe (sbx_client_set_interrupt_fd's) are read:
 * whether they held signo. */
bool sbxi_interrupt_came(int fd, int signo);
/* The synchronous API's transfer on c->easy, set up: curl_easy_perform, or while the client
 * watches an interrupt fd the same loop on c->multi whose poll watches it too; at the signal's
 * byte the transfer ends unfinished, its connection closed (resp->interrupted). */
CURLcode sbxi_easy_perform(sbx_client *c, sbxi_response *resp);
/* After curl_easy_perform or a multi completion: fill status, content type and errno. */
void sbxi_response_finish(CURL *h, CURLcode rc, sbxi_response *r);
/* The same to an endpoint that is not one of the client's (a node of GET /v1/fleet). */
sbx_code sbxi_request_ep(sbx_client *c, const sbxi_endpoint *e, const char *method,
                         const char *path, const char *content_type, const char *accept,
                         const char *extra_header, const void *body, size_t len,
                         sbxi_response *resp, sbx_err *err);
/* ---- request.c ---- */
/* Synchronous request on the client's easy handle (or its Unix socket connection). */
sbx_code sbxi_request(sbx_client *c, size_t ep, const char *method, const char *path,
                      const char *content_type, const char *accept, const char *extra_header,
                      const void *body, size_t len, sbxi_response *resp, sbx_err *err);

/* ---- async.c ---- */
struct uv_loop_s *sbxi_async_loop(const sbx_async *as);
/* sbx_async_port_request given at most timeout_ms (0: no limit of its own) for its whole
 * answer: past it, cb gets the error "request_timeout" (a node of a fleet is not marked down
 * for it). */
sbx_code sbxi_async_port_request_within(sbx_async *as, sbx_sandbox *sb, unsigned port,
                                        const char *method, const char *path,
                                        const char *content_type, const void *body, size_t len,
                                        uint64_t timeout_ms, sbx_port_cb cb, void *ud);

/* ---- unixhttp.c: HTTP/1.1 over the daemon's Unix socket, without libcurl ---- */
/* A connected, close-on-exec stream socket to path (blocking; a full backlog times out after
 * 10 s, like libcurl's connect timeout): the fd, or -errno. For callers that speak their own
 * protocol on the socket too (the WebSocket client). */
int sbxi_unix_connect(const char *path);
/* One request to the Unix endpoint ep on the client's kept-alive connection (a new one when
 * the daemon closed it). The body is body/len, or when body_fd >= 0 streamed from body_fd
 * (fd_size bytes; chunked to its end when fd_size < 0). Fills resp as sbxi_response_finish
 * does: status, body (or on_chunk for a 2xx answer), content type, Retry-After, and on a
 * transport failure curl_code (the matching CURLcode), os_errno and curl_error. */
void sbxi_unix_request(sbx_client *c, size_t ep, const char *method, const char *path,
                       const struct curl_slist *hdrs, const void *body, size_t len, int body_fd,
                       int64_t fd_size, sbxi_response *resp);

/* ---- errors.c ---- */
sbx_code sbxi_err_set(sbx_err *err, sbx_code code, long http_status, const char *api_code,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
sbx_code sbxi_code_from_status(long status, const char *api_code);
/* Map a finished response into SBX_OK (2xx) or an error filled in from the API's JSON or
 * libcurl's error. */
sbx_code sbxi_err_from_response(const sbxi_endpoint *ep, const sbxi_response *r, sbx_err *err);
/* A create that failed (rc, e, its response r) and what comes next (sync and async alike):
 * SBXI_CREATE_NEXT: the daemon answered and refused it (503, a node gone), or the request
 * certainly never reached it (no connection was made): the next endpoint may take it.
 * SBXI_CREATE_AGAIN: the answer was lost after the request may have been received, and the
 * create carries an Idempotency-Key (keyed) and was not redirected: once more to the same
 * endpoint, whose record of the key replays it (retried: that retry failed too, however).
 * SBXI_CREATE_FAIL: hand e back (rewritten, when
 * the create may have been made, to say so): never on to another endpoint, which could leave
 * two sandboxes (keys are remembered per node). */
typedef enum { SBXI_CREATE_NEXT, SBXI_CREATE_AGAIN, SBXI_CREATE_FAIL } sbxi_create_next;
sbxi_create_next sbxi_create_failed(const sbxi_endpoint *ep, const sbxi_response *r, sbx_code rc,
                                    bool keyed, bool retried, sbx_err *e);

/* ---- ports.c ---- */
/* An error answer on a port path is the daemon's own (port_*, the sandbox-level refusals), not
 * the server's. */
bool sbxi_port_refusal(const sbx_err *e);

/* ---- exec.c ---- */
char *sbxi_create_body(const sbx_create_opts *o, sbx_err *err);
/* The same with the fields of extra_json (a JSON object, or NULL) added. */
char *sbxi_create_body_with(const sbx_create_opts *o, const char *extra_json, sbx_err *err);
char *sbxi_fork_body(const sbx_fork_opts *o, sbx_err *err);
/* The same with the create fields of extra_json (sbxi_create_body_with) added; "count" there is
 * SBX_E_INVALID (opts->count says it). */
char *sbxi_fork_body_with(const sbx_fork_opts *o, const char *extra_json, sbx_err *err);
char *sbxi_exec_body(const sbx_exec_opts *o, sbx_err *err);
/* Bytes from "key" (UTF-8) or "key_b64" of o (an empty string when neither): 0 or -errno. */
int sbxi_take_data(json_t *o, const char *key, char **ret, size_t *ret_len);
/* The fields the JSON result and the exit event share (exit_code, signal, reason, ...). */
sbx_code sbxi_exec_status_fill(json_t *o, sbx_exec_result *r, sbx_err *err);
sbx_code sbxi_exec_result_parse(const char *body, size_t len, sbx_exec_result *ret, sbx_err *err);

/* NDJSON splitter: bytes in, one callback per complete line (without '\n'), however the bytes
 * are chunked. A line longer than max is an error. */
typedef struct sbxi_ndjson {
    char *buf;
    size_t len, cap, max;
    bool failed;
    int (*on_line)(void *ud, const char *line, size_t len); /* < 0 stops */
    void *ud;
} sbxi_ndjson;
void sbxi_ndjson_init(sbxi_ndjson *s, size_t max, int (*on_line)(void *, const char *, size_t),
                      void *ud);
/* Returns 0, or < 0 once a line was too long or on_line failed (further input is ignored). */
int sbxi_ndjson_feed(sbxi_ndjson *s, const char *data, size_t len);
/* End of stream: a last line without '\n' is delivered. */
int sbxi_ndjson_finish(sbxi_ndjson *s);
void sbxi_ndjson_done(sbxi_ndjson *s);

/* The state of one streamed exec: turns NDJSON events into on_output calls and the result. */
typedef struct sbxi_exec_stream {
    sbxi_ndjson nd;
    sbx_output_cb on_output;
    void *userdata;
    bool got_exit;
    sbx_exec_result result;
    sbx_err err;
    bool failed;
} sbxi_exec_stream;
void sbxi_exec_stream_init(sbxi_exec_stream *st, const sbx_exec_opts *o);
void sbxi_exec_stream_chunk(void *ud, const char *data, size_t len); /* an sbxi_chunk_fn */
/* After the transfer: the result, or an error if no exit event came. */
sbx_code sbxi_exec_stream_finish(sbxi_exec_stream *st, sbx_exec_result *ret, sbx_err *err);
void sbxi_exec_stream_done(sbxi_exec_stream *st);

/* GPUs (gpu.c): the free GPUs an info answer or node record shows (-1 unknown); endpoints with
 * enough free GPUs for body's "gpus" moved first in order[0..n); whether an answer is 409
 * gpu_unavailable (the next endpoint may have some). */
long sbxi_gpus_free(json_t *info);
void sbxi_gpu_first(sbx_client *c, const char *body, size_t *order, size_t n);
bool sbxi_gpu_unavailable(sbx_code rc, const sbx_err *e);
