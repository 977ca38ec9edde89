/* The watch stream (fleet/etcd_watch.h): one curl multi handle kept for the thread's life (its
 * wakeup ends any wait), one easy handle per stream, answers split at newlines. */
#include "sandboxd/fleet/etcd_watch.h"

#include "common/grow.h"
#include "common/macro.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES (16u << 20)

struct etcd_stream {
    CURLM *multi;
    CURL *easy; /* NULL: no stream open */
    struct curl_slist *headers;
    char *buf; /* the answer's bytes not yet split into lines */
    size_t len, cap;
    etcd_stream_cb cb;
    void *ud;
    char why[256]; /* set by the write callback when it stops the transfer */
};

int etcd_stream_new(etcd_stream **ret, error_rec *err) {
    etcd_stream *s = calloc(1, sizeof(*s));
    if (!s || !(s->multi = curl_multi_init())) {
        free(s);
        return error_set(err, -ENOMEM, "out of memory");
    }
    *ret = s;
    return 0;
}

void etcd_stream_close(etcd_stream *s) {
    if (s->easy) {
        curl_multi_remove_handle(s->multi, s->easy);
        curl_easy_cleanup(TAKE_PTR(s->easy));
    }
    curl_slist_free_all(TAKE_PTR(s->headers));
    s->len = 0;
    s->why[0] = 0;
}

void etcd_stream_free(etcd_stream *s) {
    if (!s)
        return;
    etcd_stream_close(s);
    curl_multi_cleanup(s->multi);
    free(s->buf);
    free(s);
}

bool etcd_stream_open_now(const etcd_stream *s) {
    return s->easy != NULL;
}

void etcd_stream_wakeup(etcd_stream *s) {
    curl_multi_wakeup(s->multi);
}

/* One line of the answer: {"result": {...}} goes to the callback; {"error": ...} stops. */
static bool line(etcd_stream *s, const char *p, size_t n) {
    while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
        n--;
    if (!n)
        return true;
    json_t *j = json_loadb(p, n, 0, NULL), *res = json_object_get(j, "result");
    if (json_is_object(res))
        s->cb(s->ud, res);
    else {
        json_t *e = json_object_get(j, "error");
        const char *m = json_string_value(json_object_get(e, "message"));
        snprintf(s->why, sizeof(s->why), "etcd watch: %s",
                 m                   ? m
                 : json_is_string(e) ? json_string_value(e)
                                     : "not a gateway answer");
    }
    json_decref(j);
    return !s->why[0];
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud) {
    etcd_stream *s = ud;
    size_t n = size * nmemb;
    if (s->len + n > LINE_MAX_BYTES || grow_reserve((void **)&s->buf, &s->cap, s->len + n, 1) < 0) {
        snprintf(s->why, sizeof(s->why), "etcd watch: an answer over %u bytes", LINE_MAX_BYTES);
        return 0;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    size_t start = 0;
    for (char *nl; (nl = memchr(s->buf + start, '\n', s->len - start));) {
        if (!line(s, s->buf + start, (size_t)(nl - (s->buf + start))))
            return 0;
        start = (size_t)(nl - s->buf) + 1;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    return n;
}

static char *request_body(const char *prefix, int64_t start_rev) {
    json_t *req = etcd_prefix_json(prefix);
    char rev[32];
    snprintf(rev, sizeof(rev), "%" PRId64, start_rev);
    if (!req || json_object_set_new(req, "start_revision", json_string(rev)) < 0) {
        json_decref(req);
        return NULL;
    }
    json_t *body = json_pack("{s:o}", "create_request", req);
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    return s;
}

int etcd_stream_open(etcd_stream *s, const etcd_client *c, unsigned i, const char *prefix,
                     int64_t start_rev, etcd_stream_cb cb, void *ud, error_rec *err) {
    etcd_stream_close(s);
    _cleanup_free_ char *body = request_body(prefix, start_rev);
    char url[1024];
    snprintf(url, sizeof(url), "%s/v3/watch", etcd_endpoint(c, i));
    s->cb = cb, s->ud = ud;
    s->headers = curl_slist_append(NULL, "Content-Type: application/json");
    /* a member cut off from its cluster's leader cancels the watch (etcd's "hasleader") */
    struct curl_slist *h2 =
        s->headers ? curl_slist_append(s->headers, "Grpc-Metadata-hasleader: true") : NULL;
    CURL *k = body && h2 ? curl_easy_init() : NULL;
    if (!k)
        return etcd_stream_close(s), error_set(err, -ENOMEM, "out of memory");
    s->headers = h2;
    curl_easy_setopt(k, CURLOPT_URL, url);
    curl_easy_setopt(k, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(k, CURLOPT_HTTPHEADER, s->headers);
    curl_easy_setopt(k, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(k, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(k, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(k, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(k, CURLOPT_PROTOCOLS_STR, "http,https");
    /* an idle stream to a host that went away is noticed by TCP keepalive probes */
    curl_easy_setopt(k, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(k, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(k, CURLOPT_TCP_KEEPINTVL, 5L);
    if (curl_multi_add_handle(s->multi, k) != CURLM_OK) {
        curl_easy_cleanup(k);
        etcd_stream_close(s);
        return error_set(err, -ENOMEM, "etcd watch: curl_multi_add_handle");
    }
    s->easy = k;
    return 0;
}

/* The finished transfer's error (it always is one: a watch stream does not end by itself). */
static int finished(etcd_stream *s, CURLcode rc, error_rec *err) {
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    int r;
    if (s->why[0])
        r = error_set(err, -EPROTO, "%s", s->why);
    else if (rc != CURLE_OK)
        r = error_set(err, -EHOSTUNREACH, "etcd watch: %s", curl_easy_strerror(rc));
    else if (status != 200)
        r = error_set(err, status >= 500 ? -EHOSTUNREACH : -EPROTO, "etcd watch: HTTP %ld", status);
    else
        r = error_set(err, -EHOSTUNREACH, "etcd watch: the stream ended");
    etcd_stream_close(s);
    return r;
}

/* Move the transfer on: 1 while it goes on, else its error. */
static int step(etcd_stream *s, error_rec *err) {
    int running = 0, left;
    if (curl_multi_perform(s->multi, &running) != CURLM_OK) {
        etcd_stream_close(s);
        return error_set(err, -EHOSTUNREACH, "etcd watch: curl_multi_perform failed");
    }
    for (CURLMsg *m; s->easy && (m = curl_multi_info_read(s->multi, &left));)
        if (m->msg == CURLMSG_DONE && m->easy_handle == s->easy)
            return finished(s, m->data.result, err);
    return 1;
}

int etcd_stream_run(etcd_stream *s, int ms, error_rec *err) {
    int r = s->easy ? step(s, err) : 1; /* a new transfer starts connecting here */
    if (r < 0)
        return r;
    curl_multi_poll(s->multi, NULL, 0, ms, NULL);
    return s->easy ? step(s, err) : 1;
}
