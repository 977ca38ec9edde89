/* A task whose environment is a server (docs/GRPO.md "Server environments"): the task file's
 * "env_server": {"port": 8000, "entrypoint": true | [argv], "wait": "30s"}. The agent's sandbox
 * is created from the task's image with that port open and the entrypoint started; each turn's
 * command is sent as POST /step {"action":{"message": COMMAND}} over the port through libsbx
 * (after one POST /reset), its observation is what the policy sees next; GET /state at the end
 * goes to the grading sandbox as /grader/env_state.json. */
#pragma once

#include "common/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct grpo_env_server {
    unsigned port;
    uint64_t wait_ms;      /* until the port answers (default 30 s) */
    bool image_entrypoint; /* entrypoint true (the default): the image's Entrypoint + Cmd */
    char *create_json;     /* the create fields: {"ports":[port],"entrypoint":...} */
} grpo_env_server;

/* v: the task's "env_server" (NULL: none, *ret NULL). Errors name the field. */
int grpo_env_server_parse(json_t *v, grpo_env_server **ret, error_rec *err);
/* Whether s (NULL: none) can start in the task's image (NULL: host): "entrypoint": true needs an
 * image with an Entrypoint or Cmd, which host never has (each create was refused). */
int grpo_env_server_check_image(const grpo_env_server *s, const char *image, error_rec *err);
void grpo_env_server_free(grpo_env_server *s);
