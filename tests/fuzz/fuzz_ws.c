/* libFuzzer target: libsbx's WebSocket parser (client/lib/ws.c) and the upgrade answer's head,
 * on bytes a server (or anything on the socket) could send. Parsing all at once and parsing in
 * chunks must deliver the same messages and fail the same way; every message must be a known
 * opcode within the limit. */
#include "client/lib/ws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct trace {
    uint64_t hash;
    size_t n;
} trace;

static int record(void *ud, int op, const uint8_t *d, size_t n) {
    trace *t = ud;
    if (op != SBXI_WS_TEXT && op != SBXI_WS_BINARY && op != SBXI_WS_CLOSE && op != SBXI_WS_PING &&
        op != SBXI_WS_PONG)
        abort();
    if (n > 4096 || (op >= 0x8 && n > 125))
        abort();
    t->hash = t->hash * 1099511628211u ^ (uint64_t)op;
    for (size_t i = 0; i < n; i++)
        t->hash = (t->hash ^ d[i]) * 1099511628211u;
    t->n++;
    return 0;
}

static int run(const uint8_t *d, size_t n, size_t step, bool forbid, trace *t) {
    sbxi_ws_parser p;
    sbxi_ws_parser_init(&p, 4096, record, t);
    p.forbid_masked = forbid;
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i += step)
        r = sbxi_ws_parse(&p, d + i, n - i < step ? n - i : step);
    sbxi_ws_parser_done(&p);
    return r < 0 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536)
        return 0;
    size_t step = (size_t)(data[0] % 17) + 1;
    bool forbid = data[0] & 0x80;
    trace whole = {0}, split = {0};
    int a = run(data + 1, size - 1, size, forbid, &whole);
    int b = run(data + 1, size - 1, step, forbid, &split);
    if (a != b || whole.n != split.n || whole.hash != split.hash)
        abort();
    sbxi_ws_answer ans;
    (void)sbxi_ws_answer_parse((const char *)data + 1, size - 1, "dGhlIHNhbXBsZSBub25jZQ==", &ans);
    return 0;
}
