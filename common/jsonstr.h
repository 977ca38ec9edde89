/* JSON string bodies written piece by piece (an exec answer's output is encoded as the client
 * takes it, never copied whole): a strict UTF-8 check (as jansson's) and an escaper that
 * stops where the output buffer ends and resumes where it stopped. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* True when data[0..len) is well-formed UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF; NUL bytes are allowed and escaped as \u0000). */
bool jsonstr_utf8_valid(const char *data, size_t len);

/* Escape data[*pos..len) into out[0..cap) as the inside of a JSON string (the quotes are not
 * written); an escape sequence is never split. Advances *pos; returns the bytes written (0 only
 * when cap < 6 or nothing is left). */
size_t jsonstr_escape(const char *data, size_t len, size_t *pos, char *out, size_t cap);
/* How long data[0..len) is once escaped so (the quotes not counted). */
size_t jsonstr_escaped_len(const char *data, size_t len);

/* Length of data without a trailing, incomplete UTF-8 character (0-3 bytes shorter): where
 * output cut at any byte can end as text. */
size_t jsonstr_utf8_whole_len(const char *data, size_t len);
