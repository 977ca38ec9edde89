/* SandboxFusion's answers (api/sf_answer.c), below api/sandboxfusion.c (refusals) and
 * api/sf_job.c (the jobs' answers): the response object of each endpoint and what goes into it
 * (a refusal, a platform fault, a command's result object, a fetched file). */
#pragma once

#include "sandboxd/core/exec.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A new response: status Success, its fields as SandboxFusion's RunCodeResponse (jupyter:
 * RunJupyterResponse, with "driver" and "cells" in place of the compile and run results). */
json_t *sd_sf_answer_new(bool jupyter);
/* An answer without running anything: SandboxError with msg. */
json_t *sd_sf_answer_refused(const char *msg);
/* A platform fault: resp becomes SandboxError with msg. */
void sd_sf_answer_fault(json_t *resp, const char *msg);
/* A fetched file's bytes into resp's "files", as base64, under path. */
void sd_sf_answer_file(json_t *resp, const char *path, const char *data, size_t len);
/* A command's result object (status, execution_time, return_code, stdout, stderr);
 * *ret_ok: it exited 0. */
json_t *sd_sf_command_result(const sd_exec_result *r, bool *ret_ok);
/* A command that could not start for a reason of its own (the core's -EINVAL: its program
 * missing or not executable, its file not writable): the result a shell in front of it gave,
 * 127 or 126 and the reason on stderr, so the request is Failed, not SandboxError. */
json_t *sd_sf_start_failure_result(const error_rec *err);
