/* Signal dispositions at the kernel's level, for init and a command before its exec: which
 * signals are not at SIG_DFL, and putting one back. Where shim/rawsys.h knows the architecture
 * (x86-64, arm64) the kernel's call is made directly: it also reaches glibc's own signals (32
 * and 33), which glibc's sigaction refuses, and no sanitizer's wrapper keeps its handler; it
 * leaves errno alone, for a reaper on init's memory. */
#pragma once

#include <stdint.h>

#define SHIM_SIG_BIT(s) (1ull << ((s)-1))

/* The signals 1-64 that are ignored or handled here: bit s-1 for signal s. */
uint64_t shim_sigdisp_changed(void);

/* Put sig back to SIG_DFL. */
void shim_sigdisp_default(int sig);
