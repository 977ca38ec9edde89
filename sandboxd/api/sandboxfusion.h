/* SandboxFusion-compatible endpoints (api/sandboxfusion.c): POST /run_code, POST /run_jupyter,
 * GET /v1/ping, each request run in a fresh sandbox through the core. */
#pragma once

#include "sandboxd/api/http.h"

#include <stdbool.h>

/* At start-up (registers the module's listener), and at shutdown (answers what waits). */
int sd_sf_init(sd_daemon *d, error_rec *err);
void sd_sf_done(sd_daemon *d);
/* Whether path is one of the endpoints. */
bool sd_sf_path(const char *path);
/* Handle a request to one of them. */
void sd_api_sandboxfusion(sd_daemon *d, sd_request *req);
