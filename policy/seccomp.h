/* The sandbox's seccomp profile: a JSON document (policy/seccomp.json) parsed, validated and
 * compiled with libseccomp into a classic-BPF program. The daemon compiles it once at start-up
 * (policy_seccomp_compile_file); the shim loads the raw program after fork with
 * shim_seccomp_apply_bpf (shim/seccomp.h), so no libseccomp is needed at exec time.
 *
 * Schema (version 1). Every object may carry a "comment" string; any other unknown key is an
 * error, so typos never silently weaken the profile.
 *
 *   {
 *     "version": 1,
 *     "default_action": ACTION,       for syscalls no rule matches (ours: "errno:ENOSYS")
 *     "bad_arch_action": ACTION,      for any ABI but the native one, e.g. x86 (int $0x80) and
 *                                     x32 (nr | 0x40000000) on x86_64; "allow" is refused
 *     "profiles": {                   optional: named variants of this profile
 *       "grading": {"deny": ["ptrace", ...], "action": ACTION}   the deny names leave every
 *     },                              rule and come back in one rule with this action
 *     "rules": [
 *       { "names": ["read", ...],     syscall names as libseccomp knows them
 *         "action": ACTION,
 *         "args": [ARG, ...] }        optional, at most 6, ANDed; at most one per index
 *       { "names": [...], "action": ACTION,
 *         "otherwise": true }         the calls of these syscalls that no earlier rule matched
 *     ]
 *   }
 *
 *   ACTION: "allow" | "errno:NAME" (EPERM, ENOSYS, ...) | "errno:N" (1..4095) | "kill_process"
 *           | "kill_thread" | "trap" | "log"
 *   ARG:    {"index": 0..5, "op": OP, "value": V}  or  {"index": I, "op": "masked_eq",
 *           "mask": V, "value": V} (matches when (arg & mask) == value)
 *   OP:     "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "masked_eq" (unsigned 64-bit compares)
 *   V:      a non-negative JSON integer, or a string of terms joined by "|", each a number
 *           (decimal or 0x hex) or a constant: AF_UNIX AF_INET AF_INET6 AF_NETLINK AF_PACKET
 *           AF_KEY AF_ALG AF_VSOCK NETLINK_ROUTE CLONE_NEWNS CLONE_NEWCGROUP CLONE_NEWUTS
 *           CLONE_NEWIPC CLONE_NEWUSER CLONE_NEWPID CLONE_NEWNET CLONE_NEWTIME PER_LINUX
 *           PER_LINUX32 UNAME26 ADDR_NO_RANDOMIZE
 *
 * Semantics worth knowing (libseccomp's, enforced here where libseccomp would be silent):
 * - A syscall with a rule without "args" may appear in no other rule: libseccomp would drop the
 *   conditional rules without a word. Rules with args for one syscall may have different
 *   actions; calls that match none of them take the default action.
 * - The kernel truncates int arguments to 32 bits while seccomp compares all 64, so compare
 *   int arguments with "masked_eq" and mask 0xffffffff, or an allow rule can be bypassed.
 * - "otherwise" (e.g. EPERM for every personality value but the allowed ones, where the
 *   default would be ENOSYS) must be the last rule for each of its syscalls, and every earlier
 *   rule for them must be one masked_eq on one and the same argument. It compiles to an
 *   always-true comparison (index >= 0), which libseccomp checks after a level's masked_eq
 *   ones; the restriction keeps that the only order in play (golden and behaviour tests pin it).
 * - A rule whose action equals the default action is accepted and compiles to nothing.
 * - A name libseccomp knows but the native architecture lacks is skipped; an unknown name is
 *   an error. The program is built for the native architecture only.
 *
 * Error messages name the rule and field: "rules[3].names[2]: unknown syscall \"foo\"". */
#pragma once

#include "common/error.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct policy_seccomp policy_seccomp;

/* Parse and validate a profile and build the libseccomp filter. */
int policy_seccomp_load(const char *json_path, policy_seccomp **ret, error_rec *err);
int policy_seccomp_load_string(const char *json, policy_seccomp **ret, error_rec *err);
/* The same with profiles.PROFILE applied (NULL: the document as it is). */
int policy_seccomp_load_profile(const char *json, const char *profile, policy_seccomp **ret,
                                error_rec *err);
int policy_seccomp_load_file_profile(const char *json_path, const char *profile,
                                     policy_seccomp **ret, error_rec *err);
void policy_seccomp_free(policy_seccomp *p);

/* Number of rules in the document and of distinct syscalls compiled into the filter. */
size_t policy_seccomp_n_rules(const policy_seccomp *p);
size_t policy_seccomp_n_syscalls(const policy_seccomp *p);

/* The raw BPF program: an array of struct sock_filter (8 bytes each), malloc'd. */
int policy_seccomp_export_bpf(const policy_seccomp *p, void **ret, size_t *ret_len, error_rec *err);
/* libseccomp's human-readable pseudo filter code, written to fd. */
int policy_seccomp_export_pfc(const policy_seccomp *p, int fd, error_rec *err);

/* Load json_path and write its raw BPF program atomically to bpf_out_path (mode 0644). */
int policy_seccomp_compile_file(const char *json_path, const char *bpf_out_path, error_rec *err);
int policy_seccomp_compile_file_profile(const char *json_path, const char *profile,
                                        const char *bpf_out_path, error_rec *err);
/* Read a program written by policy_seccomp_compile_file, checking its size. Call before fork. */
int policy_seccomp_read_bpf(const char *bpf_path, void **ret, size_t *ret_len, error_rec *err);

/* A program length the kernel takes: a non-empty multiple of 8 bytes of at most 4096
 * instructions. (Installing it changes the calling process: shim/seccomp.h.) */
bool policy_seccomp_bpf_len_ok(size_t len);
