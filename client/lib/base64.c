/* Base64 (RFC 4648, padded) for stdin_b64 in exec requests and *_b64 output in answers. */
#include "client/lib/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *sbxi_base64_encode(const void *data, size_t len) {
    const unsigned char *in = data;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < len)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        *o++ = alphabet[(v >> 18) & 63];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *o++ = i + 2 < len ? alphabet[v & 63] : '=';
    }
    *o = 0;
    return out;
}

static int value_of(char c) {
    const char *p = c ? strchr(alphabet, c) : NULL;
    return p ? (int)(p - alphabet) : -1;
}

int sbxi_base64_decode(const char *s, size_t slen, char **ret, size_t *ret_len) {
    while (slen > 0 && (s[slen - 1] == '\n' || s[slen - 1] == '\r'))
        slen--;
    if (slen % 4)
        return -EINVAL;
    char *out = malloc(slen / 4 * 3 + 1);
    if (!out)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < slen; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            v[k] = value_of(c);
            if (v[k] < 0 && c == '=' && i + 4 == slen && (k == 3 || (k == 2 && s[i + 3] == '=')))
                v[k] = -2;
            if (v[k] == -1) {
                free(out);
                return -EINVAL;
            }
        }
        unsigned x = ((unsigned)v[0] << 18) | ((unsigned)v[1] << 12) |
                     ((unsigned)(v[2] < 0 ? 0 : v[2]) << 6) | (unsigned)(v[3] < 0 ? 0 : v[3]);
        out[n++] = (char)(x >> 16);
        if (v[2] >= 0)
            out[n++] = (char)(x >> 8);
        if (v[3] >= 0)
            out[n++] = (char)x;
    }
    out[n] = 0;
    *ret = out;
    *ret_len = n;
    return 0;
}
