/* GPU-aware placement of a create (docs/API.md "GPUs"): a create asking for N GPUs tries the
 * endpoints whose last info (or fleet record) showed at least N free GPUs first, in the order
 * placement chose otherwise; an endpoint answering 409 gpu_unavailable is passed over for the
 * next one, like a full one. */
#include "client/lib/internal.h"

#include <stdlib.h>
#include <string.h>

long sbxi_gpus_free(json_t *info) {
    json_t *f = json_object_get(json_object_get(info, "gpus"), "free");
    return json_is_integer(f) ? (long)json_integer_value(f) : -1;
}

/* The "gpus" a create body asks for: a count, or the length of a uuid list; 0 for none. */
static long gpus_asked(const char *body) {
    json_t *j = body ? json_loads(body, 0, NULL) : NULL, *g = json_object_get(j, "gpus");
    long n = json_is_integer(g) ? (long)json_integer_value(g)
             : json_is_array(g) ? (long)json_array_size(g)
                                : 0;
    json_decref(j);
    return n;
}

void sbxi_gpu_first(sbx_client *c, const char *body, size_t *order, size_t n) {
    long want = gpus_asked(body);
    if (want <= 0 || n < 2)
        return;
    size_t *tmp = calloc(n, sizeof(*tmp)), k = 0; /* stable: enough free GPUs, then the rest */
    if (!tmp)
        return;
    for (size_t i = 0; i < n; i++)
        if (c->eps[order[i]].gpus_free >= want)
            tmp[k++] = order[i];
    for (size_t i = 0; i < n; i++)
        if (c->eps[order[i]].gpus_free < want)
            tmp[k++] = order[i];
    memcpy(order, tmp, n * sizeof(*order));
    free(tmp);
    if (c->eps[order[0]].gpus_free >= want)
        c->eps[order[0]].gpus_free -= want; /* optimistic, as free_slots: spreads a burst */
}

bool sbxi_gpu_unavailable(sbx_code rc, const sbx_err *e) {
    return rc == SBX_E_CONFLICT && strcmp(e->api_code, "gpu_unavailable") == 0;
}
