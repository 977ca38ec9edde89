/* Installing a seccomp program on the calling thread (shim/seccomp.h). */
#include "shim/seccomp.h"

#include "common/macro.h"
#include "policy/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int shim_seccomp_apply_bpf(const void *bpf, size_t len) {
    if (!bpf || !policy_seccomp_bpf_len_ok(len))
        return -EINVAL;
    struct sock_fprog prog = {
        .len = (unsigned short)(len / sizeof(struct sock_filter)),
        .filter = (struct sock_filter *)bpf,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return negative_errno();
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return negative_errno();
    return 0;
}
