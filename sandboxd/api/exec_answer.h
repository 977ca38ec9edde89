/* The JSON answer of a buffered exec (api/exec.c), written as the client takes it. */
#pragma once

#include "sandboxd/api/http.h"
#include "sandboxd/core/exec.h"

/* Answer req (200) with head (the result's small fields, stolen) and the session's output: it
 * takes e's buffers (sd_exec_take_output) and writes them escaped, or as base64 under
 * "stdout_b64"/"stderr_b64" when they are not UTF-8, piece by piece: no copy of the output is
 * made and no answer holds the loop for longer than one piece. */
void sd_api_exec_answer(sd_request *req, sd_exec *e, const sd_exec_result *r, json_t *head);
