/* /run_jupyter's driver (api/sf_jupyter.c), below api/sf_job.c that runs it in the
 * request's sandbox: the Python program that runs the cells in a kernel, and its answer read
 * into the response. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* The driver's argv (python3 -c, no shell); NULL when out of memory. Its stdin: the request. */
json_t *sd_sf_jupyter_argv(void);
/* The driver's command result (resp keeps a reference of its own) and its stdout (out, NULL:
 * none) into resp: "driver", then the cells (Success), or Failed for a cell or the whole notebook
 * past its timeout. false when the driver gave no answer (resp has its "driver" only): a
 * SandboxError. */
bool sd_sf_jupyter_answer(json_t *resp, json_t *driver, const char *out);
