/* The one growable array: make room for `need` elements of `elem` bytes in *buf, whose capacity
 * (in elements) is *cap, doubling it. Used by libsbx, the runner and the daemon alike. */
#pragma once

#include <stddef.h>

/* 0, or -ENOMEM with *buf and *cap unchanged. */
int grow_reserve(void **buf, size_t *cap, size_t need, size_t elem);
