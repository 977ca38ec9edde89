/* SandboxFusion's jobs (api/sf_job.c), below api/sandboxfusion.c that takes the requests: the
 * queue, each job's sandbox and its steps (files, compile, run or the Jupyter driver, fetches),
 * and the answer once it is done. */
#pragma once

#include "sandboxd/api/http.h"
#include "sandboxd/api/sf_request.h"

#include <jansson.h>
#include <stdbool.h>

/* At start-up: the queue and the module's listener. At shutdown: answer what waits and what
 * runs (SandboxError), and stop the retry timer. */
int sd_sf_job_init(sd_daemon *d, error_rec *err);
void sd_sf_job_done(sd_daemon *d);
/* Queue a job for a request that passed its checks (body: a reference of its own is kept;
 * lang: /run_code's language, ignored for jupyter) and start what has room; req is answered
 * when the job is done. -ENOMEM: nothing queued, req not answered. */
int sd_sf_job_submit(sd_daemon *d, sd_request *req, json_t *body, bool jupyter,
                     const sf_lang *lang);
