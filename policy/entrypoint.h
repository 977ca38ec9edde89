/* A create's "entrypoint" (docs/API.md "Entrypoint"): a command started in the background once
 * the sandbox runs. Pure parsing, no side effects. */
#pragma once

#include "common/error.h"

#include <jansson.h>

#define POLICY_ENTRYPOINT_ARGV_MAX 4096

/* v: the create body's "entrypoint" (absent/null/false: none, *ret_argv NULL); true: the image's
 * Entrypoint followed by its Cmd (image_ep, image_cmd: arrays or NULL; none is an error); an
 * array of strings: that argv. *ret_argv is a new array. */
int policy_entrypoint_parse(json_t *v, const char *image, json_t *image_ep, json_t *image_cmd,
                            json_t **ret_argv, error_rec *err);
