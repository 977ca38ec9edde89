/* The JSON answer of a buffered exec (api/exec.c), written as the client takes it, and the
 * answer of a command that did not start (exec, background, processes). */
#pragma once

#include "sandboxd/api/http.h"
#include "sandboxd/core/exec.h"

/* Answer req (200) with head (the result's small fields, stolen) and the session's output: it
 * takes e's buffers (sd_exec_take_output) and writes them escaped, or as base64 under
 * "stdout_b64"/"stderr_b64" when they are not UTF-8, piece by piece: no copy of the output is
 * made and no answer holds the loop for longer than one piece. */
void sd_api_exec_answer(sd_request *req, sd_exec *e, const sd_exec_result *r, json_t *head);

/* Answer a command that did not start: its own codes (SD_EXEC_E_PIDS: 409 pids_limit,
 * SD_EXEC_E_TOO_BIG: 400 invalid_argument), else as sd_reply_error_rec. */
void sd_api_exec_reply_error(sd_request *req, const error_rec *err);
