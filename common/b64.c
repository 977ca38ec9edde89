/* Base64 encoder, strict decoder, and a decoder that skips whitespace (see b64.h). */
#include "common/b64.h"

#include "common/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t b64_encode_into(const void *data, size_t len, char *out) {
    const unsigned char *in = data;
    char *p = out;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < len)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        *p++ = alphabet[(v >> 18) & 63];
        *p++ = alphabet[(v >> 12) & 63];
        *p++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *p++ = i + 2 < len ? alphabet[v & 63] : '=';
    }
    return (size_t)(p - out);
}

char *b64_encode(const void *data, size_t len) {
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    out[b64_encode_into(data, len, out)] = 0;
    return out;
}

static int sextet(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decode into out (slen / 4 * 3 bytes; NULL: only check); the decoded length, or -EINVAL. */
static long decode_into(const char *s, size_t slen, unsigned char *out) {
    if (slen % 4)
        return -EINVAL;
    size_t n = 0;
    for (size_t i = 0; i < slen; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            if (c == '=' && i + 4 == slen && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                v[k] = 0;
                pad++;
            } else if ((v[k] = sextet(c)) < 0 || pad) {
                return -EINVAL;
            }
        }
        unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | v[3];
        unsigned char b[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w};
        if (out)
            memcpy(out + n, b, (size_t)(3 - pad));
        n += (size_t)(3 - pad);
    }
    return (long)n;
}

int b64_check(const char *s, size_t slen) {
    long n = decode_into(s, slen, NULL);
    return n < 0 ? (int)n : 0;
}

int b64_decode(const char *s, size_t slen, unsigned char **ret, size_t *ret_len) {
    if (slen % 4)
        return -EINVAL;
    unsigned char *out = malloc(slen / 4 * 3 + 1);
    if (!out)
        return -ENOMEM;
    long n = decode_into(s, slen, out);
    if (n < 0) {
        free(out);
        return (int)n;
    }
    out[n] = 0;
    *ret = out;
    *ret_len = (size_t)n;
    return 0;
}

/* s without its ASCII whitespace: s itself when it has none, else a malloc'd copy in *own. */
static int unwrap(const char *s, size_t slen, const char **ret, size_t *ret_len, char **own) {
    static const char ws[] = " \t\n\v\f\r";
    size_t i = 0;
    while (i < slen && !memchr(ws, s[i], sizeof(ws) - 1))
        i++;
    *own = NULL;
    if (i == slen) {
        *ret = s, *ret_len = slen;
        return 0;
    }
    char *c = malloc(slen);
    if (!c)
        return -ENOMEM;
    size_t n = 0;
    for (i = 0; i < slen; i++)
        if (!memchr(ws, s[i], sizeof(ws) - 1))
            c[n++] = s[i];
    *ret = *own = c, *ret_len = n;
    return 0;
}

int b64_decode_wrapped(const char *s, size_t slen, unsigned char **ret, size_t *ret_len) {
    _cleanup_free_ char *own = NULL;
    const char *t;
    size_t tlen;
    int r = unwrap(s, slen, &t, &tlen, &own);
    return r < 0 ? r : b64_decode(t, tlen, ret, ret_len);
}

int b64_check_wrapped(const char *s, size_t slen) {
    _cleanup_free_ char *own = NULL;
    const char *t;
    size_t tlen;
    int r = unwrap(s, slen, &t, &tlen, &own);
    return r < 0 ? r : b64_check(t, tlen);
}
