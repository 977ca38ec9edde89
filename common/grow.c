/* The one growable array (common/grow.h). */
#include "common/grow.h"

#include "common/macro.h"

#include <errno.h>
#include <stdlib.h>

int grow_reserve(void **buf, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : MAX(4096 / elem, (size_t)16);
    while (c < need)
        c *= 2;
    void *nb = reallocarray(*buf, c, elem);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = c;
    return 0;
}
