/* A paused sandbox's move between nodes (fleet/move.c; docs/API.md "Pause and resume"): the
 * calls one node makes to another, through libsbx (the daemon's API, with the fleet token), each
 * on a libuv worker thread so that the loop never waits on another node. The API decides what
 * they mean (api/move.c); these only carry them. */
#pragma once

#include "sandboxd/core/context.h"

#include <jansson.h>
#include <stdbool.h>

typedef struct sd_move_job sd_move_job;

/* Moves a node runs at once in each direction (api/move.c, api/checkpoints.c: more are 503):
 * each holds a libuv worker thread (main.c sets 16) for as long as it lasts. */
#define SD_MOVES_MAX 4

typedef struct sd_move_result {
    int code;          /* 0, or -errno of what failed (the other node's answer: see status) */
    long http_status;  /* the other node's HTTP status; 0 when no answer came */
    char api_code[64]; /* its "code" */
    char message[512];
    char *body;     /* push, ask: the sandbox as the node that holds it says, or NULL */
    json_t *record; /* pull: the sandbox's record from the archive */
    bool holds;     /* push, ask: the other node holds the sandbox (not ended there) */
    bool known;     /* push, ask: whether it does is known (it answered) */
} sd_move_result;

/* Runs on the loop; the result's body and record are the callback's to keep (or free). */
typedef void (*sd_move_fn)(sd_daemon *d, void *ud, sd_move_result *res);

/* Node (at url): pull sandbox id from this node (sbx_checkpoint_pull, with the move's one-time
 * key, which this node's GET .../checkpoint then asks for) and resume it there
 * (code 0: res->body its answer); when its answer is a refusal, it does not hold the sandbox;
 * when no answer comes, it is asked whether it holds it (res->known, res->holds). */
int sd_move_push(sd_daemon *d, const char *url, const char *id, const char *node, const char *key,
                 sd_move_fn done, void *ud, sd_move_job **ret);
/* Whether node (at url) holds sandbox id (res->holds when res->known; else why not). */
int sd_move_ask(sd_daemon *d, const char *url, const char *id, const char *node, sd_move_fn done,
                void *ud, sd_move_job **ret);
/* The checkpoint of id from node url (sbx_sandbox_checkpoint_download) unpacked into dir (made
 * here, core/ckpt_archive.h); res->record: its record. */
int sd_move_pull(sd_daemon *d, const char *url, const char *id, const char *key, const char *dir,
                 sd_move_fn done, void *ud, sd_move_job **ret);
/* The caller went away: done is not called (the job still finishes on its thread). */
void sd_move_cancel(sd_move_job *job);
