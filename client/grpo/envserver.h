/* A task whose environment is a server (docs/GRPO.md "Server environments"): the task file's
 * "env_server": {"port": 8000, "entrypoint": true | [argv], "wait": "30s"}. The agent's sandbox
 * is created from the task's image with that port open and the entrypoint started; each turn's
 * command is sent as POST /step {"action":{"message": COMMAND}} over the port through libsbx
 * (after one POST /reset), its observation is what the policy sees next; GET /state at the end
 * goes to the grading sandbox as /grader/env_state.json. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdint.h>

typedef struct grpo_env_server {
    unsigned port;
    uint64_t wait_ms;  /* until the port answers (default 30 s) */
    char *create_json; /* the create fields: {"ports":[port],"entrypoint":...} */
} grpo_env_server;

/* v: the task's "env_server" (NULL: none, *ret NULL). Errors name the field. */
int grpo_env_server_parse(json_t *v, grpo_env_server **ret, error_rec *err);
void grpo_env_server_free(grpo_env_server *s);
