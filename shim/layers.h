/* Store images in the shim (layers.c): the spec's {"type":"layers","layers":[...]} and the
 * overlay lower layers built from them, each an id-mapped read-only bind of a store layer so
 * that files keep their owners as seen from inside the sandbox. */
#pragma once

#include "common/error.h"
#include "common/spec.h"

#include <stddef.h>

/* Mount each layer at <staging>/l/<i> (id-mapped to the sandbox's uid range where the kernel
 * can; plain read-only binds elsewhere) and write the overlay "lowerdir=" list, relative to
 * staging and top layer first, into buf. */
int shim_layers_mount(const shim_spec *s, const char *staging, char *buf, size_t len,
                      error_rec *err);
