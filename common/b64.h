/* Standard base64 (RFC 4648, with padding): bytes <-> text for JSON fields like stdin_b64. */
#pragma once

#include <stddef.h>

/* Encode len bytes; returns a malloc'd NUL-terminated string or NULL on ENOMEM. */
char *b64_encode(const void *data, size_t len);
/* Encode len bytes into out ((len + 2) / 3 * 4 bytes, no NUL); returns that length. Pieces
 * whose lengths are multiples of 3 encode to the pieces of the whole. */
size_t b64_encode_into(const void *data, size_t len, char *out);
/* Decode; whitespace is not allowed. Returns 0 with a malloc'd buffer (NUL-terminated for
 * convenience), -EINVAL on malformed input, -ENOMEM. */
int b64_decode(const char *s, size_t slen, unsigned char **ret, size_t *ret_len);
/* 0 when b64_decode would take s, else -EINVAL (nothing is allocated). */
int b64_check(const char *s, size_t slen);
/* As b64_decode and b64_check, with ASCII whitespace anywhere skipped: text wrapped into lines
 * (MIME, Python's base64.encodebytes), as Python's b64decode takes it. Anything else that is
 * not base64 is still -EINVAL. */
int b64_decode_wrapped(const char *s, size_t slen, unsigned char **ret, size_t *ret_len);
int b64_check_wrapped(const char *s, size_t slen);
