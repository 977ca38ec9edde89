/* A system call that never touches errno: for a process that shares its memory, and so its
 * thread's errno, with another one that runs at the same time (shim/exec.c's reaper on init's
 * memory, and init while it waits for it). Returns the kernel's value: the result, or -errno.
 * Defines SHIM_RAW_SYSCALL only on the architectures it knows; elsewhere callers take another
 * path. */
#pragma once

#if defined(__x86_64__) && defined(__LP64__) /* (not x32) */
#define SHIM_RAW_SYSCALL 1
static inline long shim_raw_syscall(long nr, long a, long b, long c, long d) {
    register long r10 __asm__("r10") = d;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
#define SHIM_RAW_SYSCALL 1
static inline long shim_raw_syscall(long nr, long a, long b, long c, long d) {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory", "cc");
    return x0;
}
#endif
