/* The request's query arguments (libmicrohttpd's GET arguments; see http.h): one value, all
 * values of a repeated one, the first parameter a route does not take as it came, the whole
 * query again (for a redirect), the path escaped again, and the check for an encoded NUL. */
#include "sandboxd/api/http.h"

#include "common/macro.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sd_req_query(sd_request *req, const char *key) {
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

typedef struct query_iter {
    const char *key;
    const char **out;
    size_t n, max;
} query_iter;

static enum MHD_Result query_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
    query_iter *it = cls;
    if (key && value && strcmp(key, it->key) == 0 && it->n < it->max)
        it->out[it->n++] = value;
    return MHD_YES;
}

size_t sd_req_query_all(sd_request *req, const char *key, const char **out, size_t max) {
    query_iter it = {.key = key, .out = out, .max = max};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, query_cb, &it);
    return it.n;
}

typedef struct {
    const char *const *keys;
    size_t n;
    unsigned seen; /* a bit per key */
    const char *bad, *why;
} query_check;

static enum MHD_Result check_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
    query_check *q = cls;
    if (!key)
        return MHD_YES;
    size_t i = 0;
    while (i < q->n && q->keys[i] && strcmp(key, q->keys[i]) != 0)
        i++;
    if (i == q->n || !q->keys[i])
        q->why = "unknown query parameter (this daemon does not implement it)";
    else if (!value)
        q->why = "needs a value (name=value)";
    else if ((q->seen & (1u << i)) && strcmp(key, "label") != 0)
        q->why = "given more than once";
    else {
        q->seen |= 1u << i;
        return MHD_YES;
    }
    q->bad = key;
    return MHD_NO;
}

const char *sd_req_query_bad(sd_request *req, const char *const *keys, size_t n,
                             const char **ret_why) {
    query_check q = {.keys = keys, .n = MIN(n, 32u)};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, check_cb, &q);
    if (q.bad)
        *ret_why = q.why;
    return q.bad;
}

/* s onto f: ASCII letters, digits and the bytes of keep as they are, any other byte as %XX. */
static void escape_keep(FILE *f, const char *s, const char *keep) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr(keep, *p))
            fputc(*p, f);
        else
            fprintf(f, "%%%02X", *p);
}

static void url_escape(FILE *f, const char *s) {
    escape_keep(f, s, "-._~");
}

char *sd_url_path_escape(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    escape_keep(f, path, "-._~!$&'()*+,;=:@/");
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

typedef struct query_out {
    FILE *f;
    const char *skip;
    bool any;
} query_out;

static enum MHD_Result query_out_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
    query_out *q = cls;
    if (!key || (q->skip && strcmp(key, q->skip) == 0))
        return MHD_YES;
    fputc(q->any ? '&' : '?', q->f);
    q->any = true;
    url_escape(q->f, key);
    if (value) {
        fputc('=', q->f);
        url_escape(q->f, value);
    }
    return MHD_YES;
}

char *sd_req_query_string(sd_request *req, const char *skip, const char *add) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    query_out q = {f, skip, false};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, query_out_cb, &q);
    if (add)
        fprintf(f, "%c%s", q.any ? '&' : '?', add);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A query value with an encoded NUL ("%00") would be cut short where C reads it, turning
 * "path=/workspace/a%00b" into "/workspace/a": such requests are refused as a whole. */
static enum MHD_Result nul_arg_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                  size_t key_size, const char *value, size_t value_size) {
    const char **bad = cls;
    if ((key && strlen(key) != key_size) || (value && strlen(value) != value_size)) {
        *bad = key ? key : "";
        return MHD_NO;
    }
    return MHD_YES;
}

const char *sd_req_query_with_nul(sd_request *req) {
    const char *bad = NULL;
    MHD_get_connection_values_n(req->conn, MHD_GET_ARGUMENT_KIND, nul_arg_cb, &bad);
    return bad;
}
