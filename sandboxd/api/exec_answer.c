/* The JSON answer of a buffered exec (exec_answer.h), and the answer of a command that did not
 * start. The buffered answer is a list of pieces (the small fields as one
 * dumped object without its closing brace, then per stream its key, its text and the quote,
 * then the brace) that sd_reply_reader's callback writes into the connection's buffer as the
 * client takes it. The output stays in the session's buffers, charged to the daemon's output
 * budget, until the answer is over. An answer of little output (ANSWER_WHOLE_MAX) is written
 * out whole at once instead and goes with its length. */
#include "sandboxd/api/exec_answer.h"

#include "common/b64.h"
#include "common/jsonstr.h"
#include "common/macro.h"

#include <stdio.h>
#include <string.h>

#define ANSWER_WHOLE_MAX (16 << 10) /* output bytes up to which an answer is built whole */

typedef enum { PIECE_LIT, PIECE_TEXT, PIECE_B64 } piece_kind;

typedef struct piece {
    piece_kind kind;
    const char *data;
    size_t len;
} piece;

typedef struct answer {
    sd_daemon *d;
    char *head;
    char *out[2]; /* taken from the session */
    size_t out_len[2];
    char keys[2][32];
    piece p[8];
    unsigned n, k; /* pieces, the one being written */
    size_t pos;    /* in p[k] */
    char pend[8];  /* an escape or base64 group that did not fit the last buffer */
    size_t pend_len, pend_pos;
} answer;

static void answer_free(void *ud) {
    answer *a = ud;
    for (int i = 0; i < 2; i++)
        sd_exec_output_free(a->d, a->out[i], a->out_len[i]);
    free(a->head);
    free(a);
}

/* Write into buf what p (at *pos) gives, at most max bytes; a piece of an escape or of a
 * base64 group that does not fit goes to a->pend. */
static size_t piece_write(answer *a, const piece *p, char *buf, size_t max) {
    size_t left = p->len - a->pos;
    if (p->kind == PIECE_LIT) {
        size_t n = MIN(max, left);
        memcpy(buf, p->data + a->pos, n);
        a->pos += n;
        return n;
    }
    if (p->kind == PIECE_TEXT) {
        size_t n = jsonstr_escape(p->data, p->len, &a->pos, buf, max);
        if (n == 0) /* one escape, whole, into pend */
            a->pend_len = jsonstr_escape(p->data, a->pos + 1, &a->pos, a->pend, sizeof(a->pend));
        return n;
    }
    size_t groups = MIN(left / 3, max / 4);
    if (groups > 0) {
        size_t n = b64_encode_into(p->data + a->pos, groups * 3, buf);
        a->pos += groups * 3;
        return n;
    }
    size_t take = MIN(left, (size_t)3);
    a->pend_len = b64_encode_into(p->data + a->pos, take, a->pend);
    a->pos += take;
    return 0;
}

static size_t answer_read(void *ud, char *buf, size_t max) {
    answer *a = ud;
    size_t o = 0;
    while (o < max) {
        if (a->pend_pos < a->pend_len) {
            size_t n = MIN(max - o, a->pend_len - a->pend_pos);
            memcpy(buf + o, a->pend + a->pend_pos, n);
            o += n;
            if ((a->pend_pos += n) == a->pend_len)
                a->pend_pos = a->pend_len = 0;
            continue;
        }
        if (a->k == a->n)
            break;
        if (a->pos == a->p[a->k].len) {
            a->k++;
            a->pos = 0;
            continue;
        }
        o += piece_write(a, &a->p[a->k], buf + o, max - o);
    }
    return o;
}

static void add(answer *a, piece_kind kind, const char *data, size_t len) {
    a->p[a->n++] = (piece){.kind = kind, .data = data ? data : "", .len = len};
}

static const char *const names[2] = {"stdout", "stderr"};

/* A small answer goes whole, with its length: libmicrohttpd then sends the head and the body in
 * one call, where a streamed answer takes three (the head, the chunk, the last chunk), and the
 * client wakes once for it. Its output's share of the budget goes back at once. */
static bool answer_whole(sd_request *req, answer *a) {
    if (a->out_len[0] + a->out_len[1] > ANSWER_WHOLE_MAX)
        return false;
    size_t max = a->p[0].len + 128 + 6 * (a->out_len[0] + a->out_len[1]); /* \u00XX: 6 each */
    char *buf = malloc(max);
    if (!buf)
        return false;
    size_t n = answer_read(a, buf, max);
    if (a->k != a->n || a->pend_len > 0) { /* (max is over any answer's length: never) */
        free(buf);
        a->k = a->pos = a->pend_len = a->pend_pos = 0; /* streamed then, from its start */
        return false;
    }
    answer_free(a);
    sd_reply_data(req, 200, "application/json", buf, n);
    return true;
}

void sd_api_exec_answer(sd_request *req, sd_exec *e, const sd_exec_result *r, json_t *head) {
    answer *a = calloc(1, sizeof(*a));
    for (int i = 0; i < 2; i++) {
        char key[32];
        snprintf(key, sizeof(key), "%s_truncated", names[i]);
        json_object_set_new(head, key, json_boolean(r->truncated[i]));
    }
    if (r->over_budget) /* cut by the daemon-wide budget, not by max_output */
        json_object_set_new(head, "output_budget_exceeded", json_true());
    char *h = json_dumps(head, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(head);
    size_t hl = h ? strlen(h) : 0;
    if (!a || hl < 2 || h[hl - 1] != '}') {
        free(h);
        free(a);
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    a->d = req->d;
    a->head = h;
    add(a, PIECE_LIT, h, hl - 1); /* "{...": the output keys follow */
    for (int i = 0; i < 2; i++) {
        a->out[i] = sd_exec_take_output(e, i, &a->out_len[i]);
        size_t len = r->truncated[i] ? jsonstr_utf8_whole_len(a->out[i], r->len[i]) : r->len[i];
        bool text = jsonstr_utf8_valid(a->out[i], len);
        snprintf(a->keys[i], sizeof(a->keys[i]), ",\"%s%s\":\"", names[i], text ? "" : "_b64");
        add(a, PIECE_LIT, a->keys[i], strlen(a->keys[i]));
        add(a, text ? PIECE_TEXT : PIECE_B64, a->out[i], len);
        add(a, PIECE_LIT, "\"", 1);
    }
    add(a, PIECE_LIT, "}\n", 2);
    if (!answer_whole(req, a))
        sd_reply_reader(req, 200, "application/json", answer_read, answer_free, a);
}

void sd_api_exec_reply_error(sd_request *req, const error_rec *err) {
    if (err->code == SD_EXEC_E_PIDS)
        sd_reply_error(req, 409, "pids_limit", "%s", err->message);
    else if (err->code == SD_EXEC_E_TOO_BIG)
        sd_reply_error(req, 400, "invalid_argument", "%s", err->message);
    else
        sd_reply_error_rec(req, err);
}
