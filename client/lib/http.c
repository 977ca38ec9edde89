/* libsbx's HTTP layer on libcurl: easy-handle setup shared by the sync and async paths (Unix
 * socket or TCP, bearer token, body, response collection or streaming, a fleet node's redirects
 * and the CA file), URL building, and one synchronous request to a given endpoint. The bottom
 * room of client/lib's transport: it calls no other file of the folder but errors.c and
 * curl_dl.c (request.c, above it, adds the fleet's checks and the Unix socket). */
#include "common/grow.h"
#include "client/lib/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    sbxi_response *r = ud;
    size_t len = size * n;
    if (r->on_chunk && r->easy) {
        long status = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            r->on_chunk(r->chunk_ud, data, len);
            return len;
        }
    }
    if (r->len + len + 1 > SBXI_MAX_RESPONSE) {
        r->overflow = true;
        return 0; /* aborts the transfer */
    }
    if (grow_reserve((void **)&r->body, &r->cap, r->len + len + 1, 1) < 0) {
        r->overflow = true;
        return 0;
    }
    memcpy(r->body + r->len, data, len);
    r->len += len;
    r->body[r->len] = 0;
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
    sbxi_response *r = ud;
    size_t len = size * n;
    static const char ra[] = "Retry-After:";
    if (len > sizeof(ra) && strncasecmp(data, ra, sizeof(ra) - 1) == 0)
        r->retry_after = strtol(data + sizeof(ra) - 1, NULL, 10);
    return len;
}

void sbxi_response_reset(sbxi_response *r) {
    free(r->body);
    sbxi_chunk_fn fn = r->on_chunk;
    void *ud = r->chunk_ud;
    memset(r, 0, sizeof(*r));
    r->on_chunk = fn;
    r->chunk_ud = ud;
}

/* Redirects (307 from a node that does not hold the sandbox or cannot place it: body resent,
 * bearer token kept) and the CA file ($SBX_CA) for https:// endpoints. */
static void easy_redirects_and_ca(CURL *h, bool tcp) {
    if (!tcp)
        return;
    /* A node answers 307 for a sandbox another node holds and for a create it cannot place;
     * the request (method and body) goes again to the Location with the bearer token: the
     * token was already given to the node that names the target, a member of its fleet. */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 1L);
    curl_easy_setopt(h, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    const char *ca = getenv("SBX_CA");
    if (ca && *ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
}

void sbxi_easy_setup(CURL *h, const char *method, const char *url, const char *unix_path,
                     struct curl_slist *headers, const void *body, size_t len,
                     sbxi_response *resp) {
    resp->easy = h;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (unix_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, unix_path);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, resp->curl_error);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    easy_redirects_and_ca(h, unix_path == NULL);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        }
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
}

void sbxi_response_finish(CURL *h, CURLcode rc, sbxi_response *r) {
    r->curl_code = rc;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    if (rc != CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &r->os_errno);
        if (!r->curl_error[0])
            snprintf(r->curl_error, sizeof(r->curl_error), "%s", curl_easy_strerror(rc));
    }
    char *eu = NULL;
    if (curl_easy_getinfo(h, CURLINFO_REDIRECT_COUNT, &r->redirects) == CURLE_OK &&
        r->redirects > 0 && curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eu) == CURLE_OK && eu)
        snprintf(r->final_url, sizeof(r->final_url), "%s", eu);
    char *ct = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
        snprintf(r->content_type, sizeof(r->content_type), "%s", ct);
    if (!r->body) {
        r->body = calloc(1, 1);
        r->cap = r->body ? 1 : 0;
    }
    r->easy = NULL;
}

bool sbxi_interrupt_came(int fd, int signo) {
    unsigned char b[64];
    bool hit = false;
    for (;;) {
        ssize_t n = read(fd, b, sizeof(b));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return hit;
        hit = hit || memchr(b, signo, (size_t)n) != NULL;
    }
}

static CURLcode multi_failed(CURLMcode m) {
    return m == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_RECV_ERROR;
}

/* curl_easy_perform's own loop (poll, then perform, until the transfer is done) on the client's
 * multi handle, whose poll also watches the interrupt fd. At the signal's byte the unfinished
 * transfer is removed, which closes its connection: CURLE_ABORTED_BY_CALLBACK. */
static CURLcode perform_watched(sbx_client *c, sbxi_response *resp) {
    if (!c->multi && !(c->multi = curl_multi_init()))
        return CURLE_OUT_OF_MEMORY;
    CURLMcode m = curl_multi_add_handle(c->multi, c->easy);
    if (m != CURLM_OK)
        return multi_failed(m);
    CURLcode rc = CURLE_OK;
    for (bool done = false; !done;) {
        struct curl_waitfd w = {.fd = c->intr_fd, .events = CURL_WAIT_POLLIN};
        int running = 0, left;
        if ((m = curl_multi_poll(c->multi, &w, 1, 1000, NULL)) != CURLM_OK) {
            rc = multi_failed(m);
            break;
        }
        if (w.revents && sbxi_interrupt_came(c->intr_fd, c->intr_signo)) {
            resp->interrupted = true;
            snprintf(resp->curl_error, sizeof(resp->curl_error), "interrupted by signal %d",
                     c->intr_signo);
            rc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        if ((m = curl_multi_perform(c->multi, &running)) != CURLM_OK) {
            rc = multi_failed(m);
            break;
        }
        CURLMsg *msg = running ? NULL : curl_multi_info_read(c->multi, &left);
        if (msg && msg->msg == CURLMSG_DONE) {
            rc = msg->data.result;
            done = true;
        }
    }
    curl_multi_remove_handle(c->multi, c->easy);
    return rc;
}

CURLcode sbxi_easy_perform(sbx_client *c, sbxi_response *resp) {
    return c->intr_fd >= 0 ? perform_watched(c, resp) : curl_easy_perform(c->easy);
}

/* line appended to *l (left as it was on OOM). */
static bool append(struct curl_slist **l, const char *line) {
    struct curl_slist *n = curl_slist_append(*l, line); /* (copies line) */
    if (n)
        *l = n;
    return n != NULL;
}

/* prefix and value as one line, sized to fit: no header is cut short (a long bearer token). */
static bool append2(struct curl_slist **l, const char *prefix, const char *value) {
    _cleanup_free_ char *line = NULL;
    return asprintf(&line, "%s%s", prefix, value) >= 0 && append(l, line);
}

/* The one place request headers are built (sync API, async API, the runner's trainer calls). */
struct curl_slist *sbxi_headers(const char *content_type, const char *accept, const char *bearer,
                                const char *extra) {
    struct curl_slist *l = NULL;
    bool ok = content_type ? append2(&l, "Content-Type: ", content_type)
                           : append(&l, "Content-Type:"); /* "Name:" alone: not sent */
    ok = ok && append2(&l, "Accept: ", accept ? accept : "application/json");
    ok = ok && append(&l, "Expect:"); /* no 100-continue round trip for uploads */
    if (ok && bearer && bearer[0])
        ok = append2(&l, "Authorization: Bearer ", bearer);
    if (ok && extra)
        ok = append(&l, extra);
    if (ok)
        return l;
    curl_slist_free_all(l);
    return NULL;
}

const char *sbxi_bearer(const sbx_client *c, const sbxi_endpoint *ep) {
    return ep->unix_path ? NULL : c->token; /* the socket's permissions suffice */
}

struct curl_slist *sbxi_api_headers(const sbx_client *c, const sbxi_endpoint *ep,
                                    const char *content_type, const char *accept,
                                    const char *extra) {
    return sbxi_headers(content_type, accept, sbxi_bearer(c, ep), extra);
}

char *sbxi_url(const sbxi_endpoint *ep, const char *path) {
    char *s;
    if (asprintf(&s, "%s%s", ep->base_url, path) < 0)
        return NULL;
    return s;
}

char *sbxi_escape(const char *s) {
    char *esc = curl_easy_escape(NULL, s, 0);
    char *out = esc ? strdup(esc) : NULL; /* so that callers free() it */
    curl_free(esc);
    return out;
}

char *sbxi_files_path(const char *id, const char *path, unsigned mode) {
    _cleanup_free_ char *esc = sbxi_escape(path);
    char *s;
    if (!esc)
        return NULL;
    int r = mode ? asprintf(&s, "/v1/sandboxes/%s/files?path=%s&mode=%04o", id, esc, mode)
                 : asprintf(&s, "/v1/sandboxes/%s/files?path=%s", id, esc);
    return r < 0 ? NULL : s;
}

sbx_code sbxi_request_ep(sbx_client *c, const sbxi_endpoint *e, const char *method,
                         const char *path, const char *content_type, const char *accept,
                         const char *extra_header, const void *body, size_t len,
                         sbxi_response *resp, sbx_err *err) {
    struct curl_slist *hdrs = sbxi_api_headers(c, e, content_type, accept, extra_header);
    if (!hdrs)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    sbxi_response_reset(resp);
    const char *why = NULL;
    if (!c->easy && sbxi_curl_load(&why) < 0) {
        curl_slist_free_all(hdrs);
        return sbxi_err_set(err, SBX_E_CONNECT, 0, "", "cannot reach %s: %s", e->display, why);
    }
    if (!c->easy)
        c->easy = curl_easy_init();
    else
        curl_easy_reset(c->easy);
    _cleanup_free_ char *url = sbxi_url(e, path);
    if (!c->easy || !url) {
        curl_slist_free_all(hdrs);
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "%s",
                            c->easy ? "out of memory" : "cannot create a libcurl handle");
    }
    sbxi_easy_setup(c->easy, method, url, e->unix_path, hdrs, body, len, resp);
    if (c->timeout_ms)
        curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    CURLcode rc = sbxi_easy_perform(c, resp);
    sbxi_response_finish(c->easy, rc, resp);
    resp->timed_out = c->timeout_ms && rc == CURLE_OPERATION_TIMEDOUT;
    curl_slist_free_all(hdrs);
    return sbxi_err_from_response(e, resp, err);
}
