/* Units as users write them: sizes ("512Mi", "2Gi", "1G", 1048576) and durations ("30s", "5m",
 * "1h", "250ms", 1.5). Used by the daemon's request parsing and the CLI's flags alike. */
#pragma once

#include <stdint.h>

/* Bytes. Accepts a plain integer or number+suffix: k/K, M, G, T (powers of 1000) and Ki, Mi, Gi,
 * Ti (powers of 1024), optionally followed by "B". -EINVAL on junk, -ERANGE on overflow. */
int units_parse_size(const char *s, uint64_t *ret_bytes);
/* Milliseconds. Accepts a number of seconds (fractions allowed) or number+unit: ms, s, m, h, d. */
int units_parse_duration(const char *s, uint64_t *ret_ms);
/* Human form of a size: "2Gi", "512Mi", or plain bytes when not a whole unit. buf >= 32. */
void units_format_size(uint64_t bytes, char *buf, unsigned len);
