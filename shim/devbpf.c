/* The cgroup v2 device program (devbpf.h). Its context is struct bpf_cgroup_dev_ctx:
 * access_type (access << 16 | type), major, minor at offsets 0, 4, 8. The program is:
 *   r2 = access_type & 0xffff; r3 = major; r4 = minor
 *   for each rule: if r2 == CHAR && r3 == major && (any || r4 == minor) return 1
 *   return 0 */
#include "shim/devbpf.h"

#include "common/macro.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

const shim_devbpf_rule shim_devbpf_defaults[] = {
    {1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 2}, {136, SHIM_DEVBPF_ANY},
};
const size_t shim_devbpf_n_defaults = ARRAY_SIZE(shim_devbpf_defaults);

#define INSN(c, d, s, o, i)                                                                        \
    (struct bpf_insn) {                                                                            \
        .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)                        \
    }
#define LDX_W(dst, src, off) INSN(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0)
#define AND32(dst, imm) INSN(BPF_ALU | BPF_AND | BPF_K, dst, 0, 0, imm)
#define JNE(dst, imm, off) INSN(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
#define MOV64(dst, imm) INSN(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static long sys_bpf(int cmd, union bpf_attr *attr) {
    return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

int shim_devbpf_attach(const char *cg_dir, const shim_devbpf_rule *rules, size_t n,
                       error_rec *err) {
    struct bpf_insn prog[6 + 5 * SHIM_DEVBPF_MAX_RULES];
    size_t k = 0;
    if (n > SHIM_DEVBPF_MAX_RULES)
        return error_set(err, -E2BIG, "device program: more than %d rules", SHIM_DEVBPF_MAX_RULES);
    prog[k++] = LDX_W(BPF_REG_2, BPF_REG_1, 0);
    prog[k++] = AND32(BPF_REG_2, 0xffff);
    prog[k++] = LDX_W(BPF_REG_3, BPF_REG_1, 4);
    prog[k++] = LDX_W(BPF_REG_4, BPF_REG_1, 8);
    for (size_t i = 0; i < n; i++) {
        bool any = rules[i].minor == SHIM_DEVBPF_ANY;
        short len = any ? 4 : 5; /* this rule's instructions: a miss jumps past them */
        prog[k++] = JNE(BPF_REG_2, BPF_DEVCG_DEV_CHAR, len - 1);
        prog[k++] = JNE(BPF_REG_3, (int)rules[i].major, len - 2);
        if (!any)
            prog[k++] = JNE(BPF_REG_4, (int)rules[i].minor, 2);
        prog[k++] = MOV64(BPF_REG_0, 1);
        prog[k++] = EXIT();
    }
    prog[k++] = MOV64(BPF_REG_0, 0);
    prog[k++] = EXIT();
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insns = (uint64_t)(uintptr_t)prog;
    attr.insn_cnt = (uint32_t)k;
    attr.license = (uint64_t)(uintptr_t) "GPL";
    _cleanup_close_ int pfd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (pfd < 0)
        return error_set_errno(err, negative_errno(), "device program: BPF_PROG_LOAD");
    _cleanup_close_ int cfd = open(cg_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0)
        return error_set_errno(err, negative_errno(), "device program: open %s", cg_dir);
    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (uint32_t)cfd;
    attr.attach_bpf_fd = (uint32_t)pfd;
    attr.attach_type = BPF_CGROUP_DEVICE;
    attr.attach_flags = BPF_F_ALLOW_MULTI;
    if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0)
        return error_set_errno(err, negative_errno(), "device program: attach to %s", cg_dir);
    return 0;
}
