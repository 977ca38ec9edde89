/* Signal dispositions at the kernel's level (shim/sigdisp.h). */
#include "shim/sigdisp.h"

#include "shim/rawsys.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/syscall.h>

#ifdef SHIM_RAW_SYSCALL
/* The kernel's struct sigaction on x86-64 and arm64. */
struct ksigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};
#endif

static bool sig_changed(int s) {
#ifdef SHIM_RAW_SYSCALL
    struct ksigaction old;
    return shim_raw_syscall(SYS_rt_sigaction, s, 0, (long)&old, sizeof(old.mask)) == 0 &&
           old.handler != SIG_DFL;
#else
    struct sigaction old;
    return sigaction(s, NULL, &old) == 0 && old.sa_handler != SIG_DFL;
#endif
}

uint64_t shim_sigdisp_changed(void) {
    uint64_t set = 0;
    for (int s = 1; s <= 64; s++)
        if (s != SIGKILL && s != SIGSTOP && sig_changed(s))
            set |= SHIM_SIG_BIT(s);
    return set;
}

void shim_sigdisp_default(int sig) {
#ifdef SHIM_RAW_SYSCALL
    struct ksigaction dfl = {.handler = SIG_DFL};
    shim_raw_syscall(SYS_rt_sigaction, sig, (long)&dfl, 0, sizeof(dfl.mask));
#else
    signal(sig, SIG_DFL);
#endif
}
