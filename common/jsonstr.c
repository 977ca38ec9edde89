/* Strict UTF-8 check and resumable JSON string escaping (see jsonstr.h). */
#include "common/jsonstr.h"

#include <stdint.h>
#include <string.h>

/* Length of the well-formed sequence at p (at most n bytes), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t need = c < 0x80 ? 1 : c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
    if (need == 0 || need > n)
        return 0;
    for (size_t i = 1; i < need; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if (need == 3) {
        unsigned v = (c & 0x0f) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu);
        if (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))
            return 0;
    } else if (need == 4) {
        unsigned v = (c & 0x07) << 18 | (p[1] & 0x3fu) << 12 | (p[2] & 0x3fu) << 6 | (p[3] & 0x3fu);
        if (v < 0x10000 || v > 0x10ffff)
            return 0;
    }
    return need;
}

bool jsonstr_utf8_valid(const char *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i = 0;
    while (i < len) {
        uint64_t w;
        if (len - i >= 8 && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ull) == 0)) {
            i += 8; /* eight ASCII bytes */
            continue;
        }
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

/* What jansson writes for the byte c (JSON_COMPACT, no JSON_ESCAPE_SLASH, no ENSURE_ASCII). */
static bool needs_escape(unsigned char c) {
    return c < 0x20 || c == '"' || c == '\\';
}

size_t jsonstr_escaped_len(const char *data, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        bool short_esc =
            c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t';
        n += !needs_escape(c) ? 1 : short_esc ? 2 : 6;
    }
    return n;
}

size_t jsonstr_escape(const char *data, size_t len, size_t *pos, char *out, size_t cap) {
    size_t i = *pos, o = 0;
    while (i < len) {
        unsigned char c = (unsigned char)data[i];
        if (!needs_escape(c)) {
            size_t run = i;
            while (run < len && run - i < cap - o && !needs_escape((unsigned char)data[run]))
                run++;
            if (run == i)
                break; /* out is full */
            memcpy(out + o, data + i, run - i);
            o += run - i;
            i = run;
            continue;
        }
        if (cap - o < 6)
            break;
        const char *short_esc = c == '"'    ? "\\\""
                                : c == '\\' ? "\\\\"
                                : c == '\b' ? "\\b"
                                : c == '\f' ? "\\f"
                                : c == '\n' ? "\\n"
                                : c == '\r' ? "\\r"
                                : c == '\t' ? "\\t"
                                            : NULL;
        if (short_esc) {
            memcpy(out + o, short_esc, 2);
            o += 2;
        } else {
            static const char hex[] = "0123456789ABCDEF"; /* as jansson */
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[c >> 4];
            out[o + 5] = hex[c & 15];
            o += 6;
        }
        i++;
    }
    *pos = i;
    return o;
}

size_t jsonstr_utf8_whole_len(const char *data, size_t len) {
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = (unsigned char)data[len - back];
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? len - back : len;
    }
    return len;
}
