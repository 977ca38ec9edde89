/* etcd v3 JSON gateway client (fleet/etcd.h): one reused curl easy handle, short timeouts. */
#include "sandboxd/fleet/etcd.h"

#include "common/b64.h"
#include "common/grow.h"
#include "common/macro.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETCD_ENDPOINTS_MAX 8
#define ETCD_ANSWER_MAX (8u << 20)
#define ETCD_CONNECT_MS 1000

struct etcd_client {
    CURL *curl;
    char *endpoints[ETCD_ENDPOINTS_MAX];
    unsigned n, cur;   /* cur: the endpoint that answered last */
    long timeout_ms;   /* each try's */
    unsigned n_redone; /* calls answered on a new connection after a dead one */
};

typedef struct answer {
    char *buf;
    size_t len, cap;
} answer;

int etcd_new(const char *endpoints, etcd_client **ret, error_rec *err) {
    etcd_client *c = calloc(1, sizeof(*c));
    _cleanup_free_ char *copy = strdup(endpoints);
    if (!c || !copy || !(c->curl = curl_easy_init())) {
        etcd_free(c);
        return error_set(err, -ENOMEM, "out of memory");
    }
    c->timeout_ms = ETCD_TIMEOUT_MS;
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e && c->n < ETCD_ENDPOINTS_MAX;
         e = strtok_r(NULL, ",", &save)) {
        size_t len = strlen(e);
        while (len && e[len - 1] == '/')
            e[--len] = 0;
        if (len)
            c->endpoints[c->n++] = strdup(e);
    }
    if (c->n == 0) {
        etcd_free(c);
        return error_set(err, -EINVAL, "--fleet-etcd: no endpoint in \"%s\"", endpoints);
    }
    *ret = c;
    return 0;
}

void etcd_set_timeout(etcd_client *c, unsigned ms) {
    c->timeout_ms = ms;
}

unsigned etcd_redone(const etcd_client *c) {
    return c->n_redone;
}

unsigned etcd_endpoints(const etcd_client *c) {
    return c->n;
}

const char *etcd_endpoint(const etcd_client *c, unsigned i) {
    return c->endpoints[(c->cur + i) % c->n];
}

void etcd_free(etcd_client *c) {
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    for (unsigned i = 0; i < c->n; i++)
        free(c->endpoints[i]);
    free(c);
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud) {
    answer *a = ud;
    size_t len = size * n;
    if (a->len + len > ETCD_ANSWER_MAX ||
        grow_reserve((void **)&a->buf, &a->cap, a->len + len + 1, 1) < 0)
        return 0;
    memcpy(a->buf + a->len, data, len);
    a->len += len;
    a->buf[a->len] = 0;
    return len;
}

/* One POST to one endpoint (on a new connection when fresh): 0 with the parsed answer,
 * -EHOSTUNREACH when it did not answer; *reused: it was tried on a connection kept from a call
 * before. */
static int post_one(etcd_client *c, const char *url, const char *body, bool fresh, json_t **ret,
                    bool *reused) {
    answer a = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *k = c->curl;
    curl_easy_reset(k);
    curl_easy_setopt(k, CURLOPT_URL, url);
    curl_easy_setopt(k, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(k, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(k, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(k, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(k, CURLOPT_CONNECTTIMEOUT_MS, MIN((long)ETCD_CONNECT_MS, c->timeout_ms));
    curl_easy_setopt(k, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(k, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(k, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(k, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
    CURLcode rc = curl_easy_perform(k);
    long status = 0, connects = 0;
    curl_easy_getinfo(k, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(k, CURLINFO_NUM_CONNECTS, &connects);
    *reused = connects == 0;
    curl_slist_free_all(h);
    json_t *j = rc == CURLE_OK && a.buf ? json_loads(a.buf, 0, NULL) : NULL;
    free(a.buf);
    if (rc != CURLE_OK || status >= 500 || !json_is_object(j)) {
        json_decref(j);
        return rc != CURLE_OK || status >= 500 ? -EHOSTUNREACH : -EPROTO;
    }
    *ret = j;
    return 0;
}

/* POST body (stolen) to path on the first endpoint that answers; a try that failed on a
 * connection kept from a call before is made again at once on a new one (the kept one may be
 * dead, a relay or a NAT in between having lost it, while etcd answers new ones). An answer
 * carrying an error is -ENOENT for gRPC code 5 (not found), -EPROTO otherwise. */
static int call(etcd_client *c, const char *path, json_t *body, json_t **ret, error_rec *err) {
    _cleanup_free_ char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    int r = -EHOSTUNREACH;
    json_t *j = NULL;
    for (unsigned i = 0; i < c->n && r == -EHOSTUNREACH; i++) {
        unsigned e = (c->cur + i) % c->n;
        char url[1024];
        snprintf(url, sizeof(url), "%s%s", c->endpoints[e], path);
        bool reused = false;
        r = post_one(c, url, s, false, &j, &reused);
        if (r == -EHOSTUNREACH && reused && (r = post_one(c, url, s, true, &j, &reused)) == 0)
            c->n_redone++;
        if (r == 0)
            c->cur = e;
    }
    if (r == -EHOSTUNREACH)
        return error_set(err, r, "etcd: no endpoint answered (%s...)", c->endpoints[c->cur]);
    if (r < 0)
        return error_set(err, r, "etcd %s: not a gateway answer", path);
    json_t *e = json_object_get(j, "error");
    if (e) {
        int code = (int)json_integer_value(json_object_get(j, "code"));
        r = error_set(err, code == 5 ? -ENOENT : -EPROTO, "etcd %s: %s", path,
                      json_is_string(e) ? json_string_value(e) : "error");
        json_decref(j);
        return r;
    }
    *ret = j;
    return 0;
}

static json_t *b64_json(const char *s, size_t len) {
    char *e = b64_encode(s, len);
    json_t *j = e ? json_string(e) : NULL;
    free(e);
    return j;
}

int64_t etcd_int64(json_t *v) { /* the gateway writes int64 as strings */
    return json_is_string(v) ? strtoll(json_string_value(v), NULL, 10) : json_integer_value(v);
}

static json_t *id_json(int64_t id) {
    char s[32];
    snprintf(s, sizeof(s), "%" PRId64, id);
    return json_string(s);
}

/* The revision in an answer's header (0 when absent). */
static int64_t header_rev(json_t *ans) {
    return etcd_int64(json_object_get(json_object_get(ans, "header"), "revision"));
}

int etcd_put(etcd_client *c, const char *key, const char *value, int64_t lease, int64_t *ret_rev,
             error_rec *err) {
    json_t *b = json_object(), *ans = NULL;
    json_object_set_new(b, "key", b64_json(key, strlen(key)));
    json_object_set_new(b, "value", b64_json(value, strlen(value)));
    if (lease)
        json_object_set_new(b, "lease", id_json(lease));
    int r = call(c, "/v3/kv/put", b, &ans, err);
    if (r >= 0 && ret_rev)
        *ret_rev = header_rev(ans);
    json_decref(ans);
    return r;
}

static char *b64_text(json_t *v) {
    unsigned char *out = NULL;
    size_t len;
    const char *s = json_string_value(v);
    if (!s || b64_decode(s, strlen(s), &out, &len) < 0)
        return NULL;
    return (char *)out;
}

int etcd_kv_apply(json_t *kvs, json_t *kv, bool deleted) {
    _cleanup_free_ char *k = b64_text(json_object_get(kv, "key"));
    if (!k)
        return -EPROTO;
    if (deleted)
        return json_object_del(kvs, k), 0;
    char *v = b64_text(json_object_get(kv, "value"));
    if (!v) /* an empty value is absent from the answer */
        v = strdup("");
    int r = v && json_object_set_new(kvs, k, json_string(v)) == 0 ? 0 : -ENOMEM;
    free(v);
    return r;
}

static int range(etcd_client *c, json_t *b, json_t **ret, int64_t *ret_rev, error_rec *err) {
    json_t *ans = NULL;
    int r = call(c, "/v3/kv/range", b, &ans, err);
    if (r < 0)
        return r;
    json_t *out = json_object(), *kv;
    size_t i;
    json_array_foreach(json_object_get(ans, "kvs"), i, kv) etcd_kv_apply(out, kv, false);
    if (ret_rev)
        *ret_rev = header_rev(ans);
    json_decref(ans);
    *ret = out;
    return 0;
}

json_t *etcd_prefix_json(const char *prefix) {
    size_t n = strlen(prefix);
    _cleanup_free_ char *end = n ? strdup(prefix) : NULL;
    if (!end)
        return NULL;
    end[n - 1]++; /* the first key after every key starting with prefix */
    json_t *b = json_object();
    if (b && (json_object_set_new(b, "key", b64_json(prefix, n)) < 0 ||
              json_object_set_new(b, "range_end", b64_json(end, n)) < 0))
        json_decref(TAKE_PTR(b));
    return b;
}

int etcd_get_prefix(etcd_client *c, const char *prefix, json_t **ret, int64_t *ret_rev,
                    error_rec *err) {
    if (!*prefix)
        return error_set(err, -EINVAL, "etcd: empty prefix");
    json_t *b = etcd_prefix_json(prefix);
    if (!b)
        return error_set(err, -ENOMEM, "out of memory");
    return range(c, b, ret, ret_rev, err);
}

int etcd_get(etcd_client *c, const char *key, char **ret, int64_t *ret_rev, error_rec *err) {
    json_t *b = json_object(), *all = NULL;
    int64_t rev = 0;
    json_object_set_new(b, "key", b64_json(key, strlen(key)));
    int r = range(c, b, &all, &rev, err);
    if (r < 0)
        return r;
    const char *v = json_string_value(json_object_get(all, key));
    char *out = v ? strdup(v) : NULL;
    json_decref(all);
    if (!out)
        return error_set(err, -ENOENT, "etcd: no key %s", key);
    *ret = out;
    if (ret_rev)
        *ret_rev = rev;
    return 0;
}

int etcd_delete(etcd_client *c, const char *key, int64_t *ret_rev, error_rec *err) {
    json_t *b = json_object(), *ans = NULL;
    json_object_set_new(b, "key", b64_json(key, strlen(key)));
    int r = call(c, "/v3/kv/deleterange", b, &ans, err);
    if (r >= 0 && ret_rev)
        *ret_rev = header_rev(ans);
    json_decref(ans);
    return r;
}

int etcd_lease_grant(etcd_client *c, unsigned ttl_s, int64_t *ret_id, error_rec *err) {
    json_t *ans = NULL;
    int r = call(c, "/v3/lease/grant", json_pack("{s:i}", "TTL", (int)ttl_s), &ans, err);
    if (r < 0)
        return r;
    int64_t id = etcd_int64(json_object_get(ans, "ID"));
    json_decref(ans);
    if (id == 0)
        return error_set(err, -EPROTO, "etcd lease grant: no ID in the answer");
    *ret_id = id;
    return 0;
}

int etcd_lease_keepalive(etcd_client *c, int64_t id, error_rec *err) {
    json_t *b = json_object(), *ans = NULL;
    json_object_set_new(b, "ID", id_json(id));
    int r = call(c, "/v3/lease/keepalive", b, &ans, err);
    if (r < 0)
        return r;
    /* an expired lease comes back without a TTL (0) */
    int64_t ttl = etcd_int64(json_object_get(json_object_get(ans, "result"), "TTL"));
    json_decref(ans);
    return ttl > 0 ? 0 : error_set(err, -ENOENT, "etcd lease %" PRId64 " has expired", id);
}

int etcd_lease_revoke(etcd_client *c, int64_t id, error_rec *err) {
    json_t *b = json_object(), *ans = NULL;
    json_object_set_new(b, "ID", id_json(id));
    int r = call(c, "/v3/lease/revoke", b, &ans, err);
    json_decref(ans);
    return r;
}
