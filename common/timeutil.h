/* Clocks: monotonic milliseconds for timers, wall-clock for what users read. */
#pragma once

#include <stdint.h>
#include <stddef.h>

uint64_t now_mono_ms(void);
uint64_t now_mono_us(void);
uint64_t now_real_ms(void);
/* RFC 3339 UTC with milliseconds ("2026-11-29T23:39:20.123Z") into buf (>= 32 bytes). */
void time_format_rfc3339(uint64_t real_ms, char *buf, size_t len);
