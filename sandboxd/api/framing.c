/* RFC 9112 message framing checks that libmicrohttpd 0.9.75 does not make: a request whose
 * framing a proxy in front of the daemon could read differently is refused before its body is
 * read (request smuggling). See sd_http_framing_error in sandboxd/api/http.h. */
#include "sandboxd/api/http.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct framing_scan {
    char *msg;
    size_t cap;
    const char *content_length;
    size_t n_te;
    bool te_chunked_last, bad;
} framing_scan;

static bool is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return false;
    return n > 0;
}

/* libmicrohttpd parses the head in place and overwrites a line's terminator with NULs: CRLF
 * becomes two, a bare LF or a bare CR one. The byte after the NUL that ends a value is therefore
 * NUL exactly when the line ended in CRLF (tests/integration/test_api_strict.sh pins this). */
static bool ends_in_crlf(const char *s, size_t n) {
    return s[n] == '\0' && s[n + 1] == '\0';
}

#define SHOWN(n) ((int)((n) > 64 ? 64 : (n))) /* at most 64 bytes of a name or value */

_printf_(2, 3) static enum MHD_Result fail(framing_scan *sc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->msg, sc->cap, fmt, ap);
    va_end(ap);
    sc->bad = true;
    return MHD_NO;
}

static enum MHD_Result content_length_cb(framing_scan *sc, const char *v, size_t n) {
    if (n == 0 || strspn(v, "0123456789") != n)
        return fail(sc, "HTTP framing: Content-Length \"%.*s\" is not a number", SHOWN(n), v);
    if (sc->content_length && strcmp(sc->content_length, v) != 0)
        return fail(sc, "HTTP framing: two different Content-Length headers (%.*s and %.*s)",
                    SHOWN(strlen(sc->content_length)), sc->content_length, SHOWN(n), v);
    sc->content_length = v;
    return MHD_YES;
}

/* Transfer-Encoding: only "chunked", once; a list of codings, or chunked twice, is refused. */
static enum MHD_Result transfer_encoding_cb(framing_scan *sc, const char *v, size_t n) {
    if (++sc->n_te > 1 || strcasecmp(v, "chunked") != 0)
        return fail(sc,
                    "HTTP framing: Transfer-Encoding \"%.*s\" is not supported (only a single "
                    "\"chunked\")",
                    SHOWN(n), v);
    sc->te_chunked_last = true;
    return MHD_YES;
}

static enum MHD_Result header_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size) {
    framing_scan *sc = cls;
    (void)kind;
    if (!key || !value)
        return MHD_YES;
    if (!is_token(key, key_size))
        return fail(sc,
                    "HTTP framing: header name \"%.*s\" is not a token (whitespace before the "
                    "colon?)",
                    SHOWN(key_size), key);
    if (memchr(value, '\r', value_size) || memchr(value, '\n', value_size))
        return fail(sc, "HTTP framing: the value of header \"%.*s\" holds a CR or LF",
                    SHOWN(key_size), key);
    if (!ends_in_crlf(value, value_size))
        return fail(sc, "HTTP framing: the line of header \"%.*s\" does not end in CRLF",
                    SHOWN(key_size), key);
    if (strcasecmp(key, "Content-Length") == 0)
        return content_length_cb(sc, value, value_size);
    if (strcasecmp(key, "Transfer-Encoding") == 0)
        return transfer_encoding_cb(sc, value, value_size);
    return MHD_YES;
}

bool sd_http_framing_error(void *conn, const char *version, char *msg, size_t cap) {
    framing_scan sc = {.msg = msg, .cap = cap};
    if (version && !ends_in_crlf(version, strlen(version))) {
        snprintf(msg, cap, "HTTP framing: the request line does not end in CRLF");
        return true;
    }
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, header_cb, &sc);
    if (sc.bad)
        return true;
    if (sc.n_te && sc.content_length) {
        snprintf(msg, cap, "HTTP framing: both Transfer-Encoding and Content-Length");
        return true;
    }
    if (sc.n_te && version && strcmp(version, "HTTP/1.1") != 0) {
        snprintf(msg, cap, "HTTP framing: Transfer-Encoding in an %s request", version);
        return true;
    }
    return false;
}
