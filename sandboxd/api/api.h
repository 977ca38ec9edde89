/* The API layer's handlers (one file per resource: parse the request, call the core, render
 * the answer), dispatched by api/router.c; sd_api_init registers the layer's listener. */
#pragma once

#include "sandboxd/api/http.h"
#include "policy/process.h"
#include "sandboxd/core/sandbox.h"

/* At start-up, before anything is restored: the layer's state and listener. */
int sd_api_init(sd_daemon *d, error_rec *err);
void sd_api_dispatch(sd_daemon *d, sd_request *req);

/* The sandbox object as the API shows it (docs/API.md). */
json_t *sd_api_sandbox_json(const sd_sandbox *sb);

/* GET /metrics's text (malloc'ed), or NULL. */
char *sd_api_metrics_text(sd_daemon *d);

void sd_api_healthz(sd_daemon *d, sd_request *req);
void sd_api_info(sd_daemon *d, sd_request *req);
void sd_api_metrics(sd_daemon *d, sd_request *req);
void sd_api_create(sd_daemon *d, sd_request *req);
void sd_api_list(sd_daemon *d, sd_request *req);
void sd_api_get(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_delete(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_timeout(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_exec(sd_daemon *d, sd_request *req, sd_sandbox *sb);
/* An exec body into pe (the image's WorkingDir as the default cwd) and pp (api/exec.c). */
int sd_api_exec_parse(sd_daemon *d, sd_sandbox *sb, json_t *body, policy_exec *pe,
                      policy_process *pp, error_rec *err);
/* Processes and attach (docs/API.md): api/processes.c and api/attach.c. */
void sd_api_exec_background(sd_daemon *d, sd_request *req, sd_sandbox *sb, policy_exec *pe,
                            const policy_process *pp);
void sd_api_processes_route(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *rest);
void sd_api_exec_attach(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_process_attach(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *pid);
/* entrypoint: api/entrypoint.c. The create's "entrypoint" as an argv (*ret_argv NULL: none);
 * then its start once sb runs (argv stolen): answers req (201 with its pid, or the error; req
 * NULL: the client left, it starts all the same). */
int sd_api_entrypoint_parse(sd_daemon *d, json_t *body, const char *image, json_t **ret_argv,
                            error_rec *err);
void sd_api_entrypoint_start(sd_daemon *d, sd_request *req, sd_sandbox *sb, json_t *argv);
/* inbound ports: api/ports.c (rest: what follows .../ports) */
void sd_api_ports_route(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *rest);
/* At start-up (sd_api_init): a pause cuts the sandbox's proxied connections. */
int sd_api_ports_init(sd_daemon *d, error_rec *err);
/* images: api/images.c */
void sd_api_images_import(sd_daemon *d, sd_request *req);
void sd_api_images_list(sd_daemon *d, sd_request *req);
void sd_api_images_route(sd_daemon *d, sd_request *req, const char *rest);
/* volumes: api/volumes.c (rest: what follows /v1/volumes) */
void sd_api_volumes(sd_daemon *d, sd_request *req, const char *rest);
void sd_api_files_get(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_files_put(sd_daemon *d, sd_request *req, sd_sandbox *sb);
void sd_api_fork(sd_daemon *d, sd_request *req, sd_sandbox *src);
void sd_api_commit(sd_daemon *d, sd_request *req, sd_sandbox *sb); /* api/commit.c */
void sd_api_pause(sd_daemon *d, sd_request *req, sd_sandbox *sb);  /* api/pause.c */
void sd_api_resume(sd_daemon *d, sd_request *req, sd_sandbox *sb); /* api/pause.c */
/* A paused sandbox moving to another node (api/move.c): a resume naming node (NULL: none; a
 * full node picks one) that is not this node (false: resume here); GET .../checkpoint; whether
 * a move of sb waits on the other node; an earlier move whose outcome is not known: that node
 * is asked, then the request is sent on to it, or again(d, req, sb) runs here (true: it will). */
typedef void (*sd_api_sandbox_fn)(sd_daemon *d, sd_request *req, sd_sandbox *sb);
bool sd_api_move_resume(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *node);
void sd_api_checkpoint_get(sd_daemon *d, sd_request *req, sd_sandbox *sb);
bool sd_api_move_in_flight(const sd_sandbox *sb);
bool sd_api_move_settle(sd_daemon *d, sd_request *req, sd_sandbox *sb, sd_api_sandbox_fn again);
/* POST /v1/checkpoints: take a paused sandbox from another node (api/checkpoints.c); whether
 * sandbox id is being taken now. */
void sd_api_checkpoints_take(sd_daemon *d, sd_request *req);
bool sd_api_take_in_flight(const char *id);
/* A create with "on_idle":"pause" (api/pause.c): false where this node can pause (the create
 * goes on); else true: answered 501 unsupported saying why, or waiting for the node's probe,
 * after which `again` runs the create anew. */
bool sd_api_on_idle_pause(sd_daemon *d, sd_request *req, sd_http_handler again);
void sd_api_lease_create(sd_daemon *d, sd_request *req);
void sd_api_lease_renew(sd_daemon *d, sd_request *req, const char *id);
void sd_api_lease_delete(sd_daemon *d, sd_request *req, const char *id);
/* fleet: api/fleet.c (docs/FLEET.md). Each returns true when it answered the request. */
/* An id of another node: 307 to it, 503 node_unavailable, or 404. */
bool sd_api_fleet_route(sd_daemon *d, sd_request *req, const char *id);
/* A sandbox that moved to node (ended "moved"): 307 to it, or 503 node_unavailable. */
void sd_api_fleet_forward(sd_daemon *d, sd_request *req, const char *id, const char *node);
/* A create (its body and parsed spec) this node should not place: 307 to another node (full
 * or drained here; or no ready warm pool entry here while another node has one), or 503
 * node_draining. */
bool sd_api_fleet_place(sd_daemon *d, sd_request *req, json_t *body, const policy_create *c);
/* A create naming another node's lease not known here: looked up, then again(d, req). */
bool sd_api_fleet_lease_wait(sd_daemon *d, sd_request *req, const char *lease,
                             sd_http_handler again);
/* /v1/fleet (rest: what follows it). */
void sd_api_fleet(sd_daemon *d, sd_request *req, const char *rest);
