/* Image names (image_name.c): "name" or "name:tag", what a create body's "image" and the image
 * store accept. Pure. */
#pragma once

#include "common/error.h"

#define POLICY_IMAGE_NAME_MAX 258 /* 128 + ":" + 128 + NUL */

/* Validate and normalize: "name" becomes "name:latest"; "host" stays "host". The name is
 * [a-z0-9][a-z0-9._-]* and the tag [A-Za-z0-9_][A-Za-z0-9_.-]*, each at most 128 characters, no
 * "/" and no "..". -EINVAL with a message naming `field`. */
int policy_image_name(const char *in, const char *field, char out[POLICY_IMAGE_NAME_MAX],
                      error_rec *err);
