/* The seccomp profile compiler: JSON (schema in policy/seccomp.h) -> validated rules ->
 * libseccomp filter -> raw BPF or PFC; plus the async-signal-safe loader used after fork. */
#include "policy/seccomp.h"

#include "common/fdutil.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

#define MAX_INSNS 4096 /* BPF_MAXINSNS */
#define MAX_ARGS 6

struct policy_seccomp {
    scmp_filter_ctx ctx;
    size_t n_rules;
    size_t n_syscalls;
};

/* How a rule constrains one syscall. */
typedef enum rule_kind {
    RULE_PLAIN,     /* no args: every call */
    RULE_MASKED,    /* one masked_eq comparison (on seen_syscall.index) */
    RULE_ARGS,      /* any other comparisons */
    RULE_OTHERWISE, /* "otherwise": the calls no earlier rule for the syscall matched */
} rule_kind;

/* One (syscall, rule) pair seen while compiling: to refuse rules that libseccomp would silently
 * drop or resolve by an order of its own. */
typedef struct seen_syscall {
    int nr;
    size_t rule;
    rule_kind kind;
    unsigned index;
} seen_syscall;

typedef struct compile_state {
    scmp_filter_ctx ctx;
    uint32_t default_action;
    seen_syscall *seen;
    size_t n_seen, cap_seen;
} compile_state;

static const struct {
    const char *name;
    uint64_t value;
} constants[] = {
    {"AF_UNIX", AF_UNIX},
    {"AF_INET", AF_INET},
    {"AF_INET6", AF_INET6},
    {"AF_NETLINK", AF_NETLINK},
    {"AF_PACKET", AF_PACKET},
    {"AF_KEY", AF_KEY},
    {"AF_ALG", AF_ALG},
    {"AF_VSOCK", AF_VSOCK},
    {"NETLINK_ROUTE", NETLINK_ROUTE},
    {"CLONE_NEWNS", CLONE_NEWNS},
    {"CLONE_NEWCGROUP", CLONE_NEWCGROUP},
    {"CLONE_NEWUTS", CLONE_NEWUTS},
    {"CLONE_NEWIPC", CLONE_NEWIPC},
    {"CLONE_NEWUSER", CLONE_NEWUSER},
    {"CLONE_NEWPID", CLONE_NEWPID},
    {"CLONE_NEWNET", CLONE_NEWNET},
    {"CLONE_NEWTIME", CLONE_NEWTIME},
    {"PER_LINUX", PER_LINUX},
    {"PER_LINUX32", PER_LINUX32},
    {"UNAME26", UNAME26},
    {"ADDR_NO_RANDOMIZE", ADDR_NO_RANDOMIZE},
};

static const struct {
    const char *name;
    enum scmp_compare op;
} ops[] = {
    {"eq", SCMP_CMP_EQ},
    {"ne", SCMP_CMP_NE},
    {"lt", SCMP_CMP_LT},
    {"le", SCMP_CMP_LE},
    {"gt", SCMP_CMP_GT},
    {"ge", SCMP_CMP_GE},
    {"masked_eq", SCMP_CMP_MASKED_EQ},
};

/* ---- small parsers ---- */

/* Refuse keys outside `allowed` (NULL-terminated); "comment" is always allowed. */
static int check_keys(json_t *obj, const char *const *allowed, const char *where, error_rec *err) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (strcmp(key, "comment") == 0 && !json_is_string(v))
            return error_set(err, -EINVAL, "%s.comment: expected a string", where);
        bool ok = strcmp(key, "comment") == 0;
        for (size_t i = 0; !ok && allowed[i]; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok)
            return error_set(err, -EINVAL, "%s: unknown field \"%s\"", where, key);
    }
    return 0;
}

static int parse_term(const char *t, size_t len, uint64_t *ret) {
    char buf[64];
    if (len == 0 || len >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, t, len);
    buf[len] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(constants); i++)
        if (strcmp(buf, constants[i].name) == 0) {
            *ret = constants[i].value;
            return 0;
        }
    if (buf[0] < '0' || buf[0] > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *ret = v;
    return 0;
}

/* "A|B|0x10" -> A | B | 0x10; spaces around terms are allowed. */
static int parse_value_string(const char *s, uint64_t *ret) {
    uint64_t acc = 0;
    for (;;) {
        while (*s == ' ')
            s++;
        size_t n = strcspn(s, "|");
        size_t len = n;
        while (len > 0 && s[len - 1] == ' ')
            len--;
        uint64_t v;
        if (parse_term(s, len, &v) < 0)
            return -EINVAL;
        acc |= v;
        if (s[n] == '\0')
            break;
        s += n + 1;
    }
    *ret = acc;
    return 0;
}

static int parse_value(json_t *v, const char *where, uint64_t *ret, error_rec *err) {
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *ret = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && parse_value_string(json_string_value(v), ret) == 0)
        return 0;
    if (json_is_string(v))
        return error_set(err, -EINVAL,
                         "%s: bad value \"%s\" (expected numbers or known constants joined by |)",
                         where, json_string_value(v));
    return error_set(err, -EINVAL, "%s: expected a non-negative integer or a string", where);
}

static int errno_from_name(const char *s) {
    if (*s >= '0' && *s <= '9') {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        return errno == 0 && *end == '\0' && v >= 1 && v <= 4095 ? (int)v : -1;
    }
    for (int e = 1; e < 4096; e++) {
        const char *n = strerrorname_np(e);
        if (n && strcmp(n, s) == 0)
            return e;
    }
    return -1;
}

static int parse_action(json_t *v, const char *where, bool allow_ok, uint32_t *ret,
                        error_rec *err) {
    const char *s = json_string_value(v);
    if (!s)
        return error_set(err, -EINVAL, "%s: expected a string", where);
    if (allow_ok && strcmp(s, "allow") == 0)
        *ret = SCMP_ACT_ALLOW;
    else if (strcmp(s, "kill_process") == 0)
        *ret = SCMP_ACT_KILL_PROCESS;
    else if (strcmp(s, "kill_thread") == 0)
        *ret = SCMP_ACT_KILL_THREAD;
    else if (strcmp(s, "trap") == 0)
        *ret = SCMP_ACT_TRAP;
    else if (strcmp(s, "log") == 0)
        *ret = SCMP_ACT_LOG;
    else if (strncmp(s, "errno:", 6) == 0 && errno_from_name(s + 6) > 0)
        *ret = SCMP_ACT_ERRNO((uint32_t)errno_from_name(s + 6));
    else
        return error_set(err, -EINVAL,
                         "%s: unknown action \"%s\" (expected %skill_process, kill_thread, trap, "
                         "log, errno:NAME or errno:N)",
                         where, s, allow_ok ? "allow, " : "");
    return 0;
}

/* ---- rules ---- */

static int parse_arg(json_t *a, const char *where, struct scmp_arg_cmp *ret, error_rec *err) {
    static const char *const keys[] = {"index", "op", "value", "mask", NULL};
    char w[96];
    if (!json_is_object(a))
        return error_set(err, -EINVAL, "%s: expected an object", where);
    int r = check_keys(a, keys, where, err);
    if (r < 0)
        return r;
    json_t *idx = json_object_get(a, "index"), *op = json_object_get(a, "op");
    json_t *val = json_object_get(a, "value"), *mask = json_object_get(a, "mask");
    if (!json_is_integer(idx) || json_integer_value(idx) < 0 || json_integer_value(idx) >= MAX_ARGS)
        return error_set(err, -EINVAL, "%s.index: expected an integer 0..5", where);
    size_t o = 0;
    while (o < ARRAY_SIZE(ops) &&
           !(json_is_string(op) && strcmp(json_string_value(op), ops[o].name) == 0))
        o++;
    if (o == ARRAY_SIZE(ops))
        return error_set(err, -EINVAL,
                         "%s.op: unknown operator (expected eq, ne, lt, le, gt, ge, masked_eq)",
                         where);
    if (!val)
        return error_set(err, -EINVAL, "%s.value: missing", where);
    bool masked = ops[o].op == SCMP_CMP_MASKED_EQ;
    if (masked != (mask != NULL))
        return error_set(err, -EINVAL, "%s.mask: %s", where,
                         masked ? "missing (masked_eq needs a mask)" : "only valid with masked_eq");
    uint64_t v, m = 0;
    snprintf(w, sizeof(w), "%s.value", where);
    if ((r = parse_value(val, w, &v, err)) < 0)
        return r;
    snprintf(w, sizeof(w), "%s.mask", where);
    if (masked && (r = parse_value(mask, w, &m, err)) < 0)
        return r;
    *ret = (struct scmp_arg_cmp){.arg = (unsigned)json_integer_value(idx),
                                 .op = ops[o].op,
                                 .datum_a = masked ? m : v,
                                 .datum_b = masked ? v : 0};
    return 0;
}

static int parse_args(json_t *args, size_t ri, struct scmp_arg_cmp *cmp, unsigned *ret_n,
                      error_rec *err) {
    if (!args) {
        *ret_n = 0;
        return 0;
    }
    if (!json_is_array(args) || json_array_size(args) == 0 || json_array_size(args) > MAX_ARGS)
        return error_set(err, -EINVAL, "rules[%zu].args: expected an array of 1..6 comparisons",
                         ri);
    for (size_t i = 0; i < json_array_size(args); i++) {
        char w[64];
        snprintf(w, sizeof(w), "rules[%zu].args[%zu]", ri, i);
        int r = parse_arg(json_array_get(args, i), w, &cmp[i], err);
        if (r < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (cmp[j].arg == cmp[i].arg)
                return error_set(err, -EINVAL,
                                 "%s.index: argument %u is already compared in "
                                 "rules[%zu].args[%zu]",
                                 w, cmp[i].arg, ri, j);
    }
    *ret_n = (unsigned)json_array_size(args);
    return 0;
}

static int seen_add(compile_state *st, seen_syscall s, error_rec *err) {
    if (st->n_seen == st->cap_seen) {
        size_t cap = st->cap_seen ? st->cap_seen * 2 : 256;
        seen_syscall *n = realloc(st->seen, cap * sizeof(*n));
        if (!n)
            return error_set(err, -ENOMEM, "out of memory");
        st->seen = n;
        st->cap_seen = cap;
    }
    st->seen[st->n_seen++] = s;
    return 0;
}

/* An "otherwise" rule is compiled as an always-true comparison (index >= 0). libseccomp checks
 * a level's masked_eq comparisons before its >= ones, so it catches exactly the calls the
 * earlier rules did not; that holds when every earlier rule for the syscall is one masked_eq
 * on the same argument, which is what this refuses otherwise. */
static int check_otherwise(compile_state *st, const seen_syscall *s, size_t ni, const char *name,
                           unsigned *ret_index, error_rec *err) {
    size_t n = 0;
    for (size_t i = 0; i < st->n_seen; i++) {
        const seen_syscall *o = &st->seen[i];
        if (o->nr != s->nr)
            continue;
        if (o->kind != RULE_MASKED || (n > 0 && o->index != *ret_index))
            return error_set(err, -EINVAL,
                             "rules[%zu].names[%zu]: \"otherwise\" for \"%s\" needs every "
                             "earlier rule for it to be one masked_eq on the same argument "
                             "(rules[%zu] is not)",
                             s->rule, ni, name, o->rule);
        *ret_index = o->index;
        n++;
    }
    if (n == 0)
        return error_set(err, -EINVAL,
                         "rules[%zu].names[%zu]: \"otherwise\" for \"%s\" needs earlier rules "
                         "with args for it",
                         s->rule, ni, name);
    return 0;
}

/* Refuse a syscall that would mix an unconditional rule with any other rule for it, or have a
 * rule after its "otherwise". */
static int note_syscall(compile_state *st, seen_syscall s, size_t ni, const char *name,
                        unsigned *ret_index, error_rec *err) {
    for (size_t i = 0; i < st->n_seen; i++) {
        const seen_syscall *o = &st->seen[i];
        if (o->nr != s.nr)
            continue;
        if (o->kind == RULE_PLAIN || s.kind == RULE_PLAIN)
            return error_set(err, -EINVAL,
                             "rules[%zu].names[%zu]: syscall \"%s\" also appears in rules[%zu]; "
                             "a syscall with a rule without args may appear in no other rule",
                             s.rule, ni, name, o->rule);
        if (o->kind == RULE_OTHERWISE)
            return error_set(err, -EINVAL,
                             "rules[%zu].names[%zu]: syscall \"%s\" has its \"otherwise\" "
                             "rule in rules[%zu]; it must be the last rule for it",
                             s.rule, ni, name, o->rule);
    }
    if (s.kind == RULE_OTHERWISE) {
        int r = check_otherwise(st, &s, ni, name, &s.index, err);
        if (r < 0)
            return r;
        *ret_index = s.index;
    }
    return seen_add(st, s, err);
}

static rule_kind kind_of(bool otherwise, const struct scmp_arg_cmp *cmp, unsigned n_cmp) {
    if (otherwise)
        return RULE_OTHERWISE;
    if (n_cmp == 0)
        return RULE_PLAIN;
    return n_cmp == 1 && cmp[0].op == SCMP_CMP_MASKED_EQ ? RULE_MASKED : RULE_ARGS;
}

static int add_names(compile_state *st, json_t *names, size_t ri, uint32_t action, bool otherwise,
                     const struct scmp_arg_cmp *cmp, unsigned n_cmp, error_rec *err) {
    for (size_t i = 0; i < json_array_size(names); i++) {
        const char *name = json_string_value(json_array_get(names, i));
        if (!name)
            return error_set(err, -EINVAL, "rules[%zu].names[%zu]: expected a string", ri, i);
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR)
            return error_set(err, -EINVAL, "rules[%zu].names[%zu]: unknown syscall \"%s\"", ri, i,
                             name);
        if (nr < 0) /* known to libseccomp, absent on this architecture */
            continue;
        seen_syscall s = {.nr = nr,
                          .rule = ri,
                          .kind = kind_of(otherwise, cmp, n_cmp),
                          .index = n_cmp ? cmp[0].arg : 0};
        unsigned index = 0;
        int r = note_syscall(st, s, i, name, &index, err);
        if (r < 0)
            return r;
        if (action == st->default_action)
            continue;
        struct scmp_arg_cmp always = {.arg = index, .op = SCMP_CMP_GE, .datum_a = 0};
        r = otherwise ? seccomp_rule_add_exact_array(st->ctx, action, nr, 1, &always)
                      : seccomp_rule_add_exact_array(st->ctx, action, nr, n_cmp, cmp);
        if (r < 0)
            return error_set_errno(err, r, "rules[%zu].names[%zu]: libseccomp refused \"%s\"", ri,
                                   i, name);
    }
    return 0;
}

static int add_rule(compile_state *st, json_t *rule, size_t ri, error_rec *err) {
    static const char *const keys[] = {"names", "action", "args", "otherwise", NULL};
    char w[64];
    snprintf(w, sizeof(w), "rules[%zu]", ri);
    if (!json_is_object(rule))
        return error_set(err, -EINVAL, "%s: expected an object", w);
    int r = check_keys(rule, keys, w, err);
    if (r < 0)
        return r;
    json_t *names = json_object_get(rule, "names");
    if (!json_is_array(names) || json_array_size(names) == 0)
        return error_set(err, -EINVAL, "%s.names: expected a non-empty array of syscall names", w);
    uint32_t action;
    snprintf(w, sizeof(w), "rules[%zu].action", ri);
    if ((r = parse_action(json_object_get(rule, "action"), w, true, &action, err)) < 0)
        return r;
    struct scmp_arg_cmp cmp[MAX_ARGS];
    unsigned n_cmp = 0;
    if ((r = parse_args(json_object_get(rule, "args"), ri, cmp, &n_cmp, err)) < 0)
        return r;
    json_t *otherwise = json_object_get(rule, "otherwise");
    if (otherwise && !json_is_true(otherwise))
        return error_set(err, -EINVAL, "rules[%zu].otherwise: expected true", ri);
    if (otherwise && n_cmp > 0)
        return error_set(err, -EINVAL, "rules[%zu]: \"otherwise\" and \"args\" exclude each other",
                         ri);
    return add_names(st, names, ri, action, otherwise != NULL, cmp, n_cmp, err);
}

/* ---- the document ---- */

static int parse_header(json_t *doc, uint32_t *ret_default, uint32_t *ret_badarch, error_rec *err) {
    static const char *const keys[] = {
        "version", "default_action", "bad_arch_action", "rules", "profiles", "comment", NULL};
    if (!json_is_object(doc))
        return error_set(err, -EINVAL, "top level: expected an object");
    int r = check_keys(doc, keys, "top level", err);
    if (r < 0)
        return r;
    json_t *ver = json_object_get(doc, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1)
        return error_set(err, -EINVAL, "version: expected 1");
    if ((r = parse_action(json_object_get(doc, "default_action"), "default_action", true,
                          ret_default, err)) < 0)
        return r;
    if ((r = parse_action(json_object_get(doc, "bad_arch_action"), "bad_arch_action", false,
                          ret_badarch, err)) < 0)
        return r;
    if (!json_is_array(json_object_get(doc, "rules")))
        return error_set(err, -EINVAL, "rules: expected an array");
    return 0;
}

static int compile_doc(json_t *doc, policy_seccomp *p, error_rec *err) {
    uint32_t def, badarch;
    int r = parse_header(doc, &def, &badarch, err);
    if (r < 0)
        return r;
    compile_state st = {.default_action = def};
    st.ctx = p->ctx = seccomp_init(def);
    if (!p->ctx)
        return error_set(err, -ENOMEM, "seccomp_init failed");
    if ((r = seccomp_attr_set(p->ctx, SCMP_FLTATR_ACT_BADARCH, badarch)) < 0 ||
        (r = seccomp_attr_set(p->ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
        return error_set_errno(err, r, "libseccomp attributes");
    json_t *rules = json_object_get(doc, "rules");
    for (size_t i = 0; r >= 0 && i < json_array_size(rules); i++)
        r = add_rule(&st, json_array_get(rules, i), i, err);
    p->n_rules = json_array_size(rules);
    for (size_t i = 0; i < st.n_seen; i++) {
        size_t j = 0;
        while (j < i && st.seen[j].nr != st.seen[i].nr)
            j++;
        p->n_syscalls += j == i;
    }
    free(st.seen);
    return r;
}

static int load_doc(json_t *doc, policy_seccomp **ret, error_rec *err) {
    policy_seccomp *p = calloc(1, sizeof(*p));
    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    int r = compile_doc(doc, p, err);
    if (r < 0) {
        policy_seccomp_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

/* Is the string name one of the strings of arr? */
static bool names_have(json_t *arr, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

/* Apply profiles.NAME to doc (in place): its "deny" names leave every rule (a rule left with
 * no name goes) and come back in one rule with the profile's action. */
static int apply_profile(json_t *doc, const char *name, error_rec *err) {
    static const char *const keys[] = {"deny", "action", NULL};
    json_t *prof = json_object_get(json_object_get(doc, "profiles"), name);
    char w[96];
    snprintf(w, sizeof(w), "profiles.%.64s", name);
    if (!json_is_object(prof))
        return error_set(err, -ENOENT, "%s: no such profile", w);
    int r = check_keys(prof, keys, w, err);
    if (r < 0)
        return r;
    json_t *deny = json_object_get(prof, "deny"), *rules = json_object_get(doc, "rules");
    uint32_t action;
    if (!json_is_array(deny) || json_array_size(deny) == 0)
        return error_set(err, -EINVAL, "%s.deny: expected a non-empty array of syscall names", w);
    snprintf(w, sizeof(w), "profiles.%.64s.action", name);
    if ((r = parse_action(json_object_get(prof, "action"), w, false, &action, err)) < 0)
        return r;
    for (size_t i = 0; json_is_array(rules) && i < json_array_size(rules);) {
        json_t *names = json_object_get(json_array_get(rules, i), "names");
        for (size_t k = 0; json_is_array(names) && k < json_array_size(names);)
            if (names_have(deny, json_string_value(json_array_get(names, k)) ?: ""))
                json_array_remove(names, k);
            else
                k++;
        if (json_is_array(names) && json_array_size(names) == 0)
            json_array_remove(rules, i);
        else
            i++;
    }
    json_t *rule = json_pack("{s:s,s:O,s:O}", "comment", "the profile's deny list", "names", deny,
                             "action", json_object_get(prof, "action"));
    if (!rule || !json_is_array(rules) || json_array_append_new(rules, rule) < 0)
        return error_set(err, -EINVAL, "rules: expected an array");
    return 0;
}

int policy_seccomp_load_profile(const char *json, const char *profile, policy_seccomp **ret,
                                error_rec *err) {
    json_error_t jerr;
    _cleanup_(json_decrefp) json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return error_set(err, -EINVAL, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    json_t *profiles = json_object_get(doc, "profiles");
    if (profiles && !json_is_object(profiles))
        return error_set(err, -EINVAL, "profiles: expected an object");
    int r = profile ? apply_profile(doc, profile, err) : 0;
    return r < 0 ? r : load_doc(doc, ret, err);
}

int policy_seccomp_load_string(const char *json, policy_seccomp **ret, error_rec *err) {
    return policy_seccomp_load_profile(json, NULL, ret, err);
}

int policy_seccomp_load(const char *json_path, policy_seccomp **ret, error_rec *err) {
    return policy_seccomp_load_file_profile(json_path, NULL, ret, err);
}

int policy_seccomp_load_file_profile(const char *json_path, const char *profile,
                                     policy_seccomp **ret, error_rec *err) {
    _cleanup_free_ char *text = NULL;
    int r = file_read_all(json_path, 1 << 20, &text, NULL);
    if (r < 0)
        return error_set_errno(err, r, "seccomp profile %s", json_path);
    policy_seccomp *p;
    r = policy_seccomp_load_profile(text, profile, &p, err);
    if (r < 0)
        return error_prefix(err, "seccomp profile %s", json_path);
    *ret = p;
    return 0;
}

void policy_seccomp_free(policy_seccomp *p) {
    if (!p)
        return;
    if (p->ctx)
        seccomp_release(p->ctx);
    free(p);
}

size_t policy_seccomp_n_rules(const policy_seccomp *p) {
    return p->n_rules;
}

size_t policy_seccomp_n_syscalls(const policy_seccomp *p) {
    return p->n_syscalls;
}

/* ---- exports ---- */

int policy_seccomp_export_bpf(const policy_seccomp *p, void **ret, size_t *ret_len,
                              error_rec *err) {
    /* libseccomp 2.5 exports only to a descriptor (seccomp_export_bpf_mem is 2.6). */
    _cleanup_close_ int fd = memfd_create("policy-seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, negative_errno(), "memfd_create");
    int r = seccomp_export_bpf(p->ctx, fd);
    if (r < 0)
        return error_set_errno(err, r, "seccomp_export_bpf");
    if (lseek(fd, 0, SEEK_SET) < 0)
        return error_set_errno(err, negative_errno(), "lseek");
    char *buf;
    size_t len;
    r = fd_read_all(fd, (MAX_INSNS + 1) * sizeof(struct sock_filter), &buf, &len);
    if (r == -EFBIG || (r >= 0 && len > MAX_INSNS * sizeof(struct sock_filter))) {
        if (r >= 0)
            free(buf);
        return error_set(err, -E2BIG, "seccomp program longer than %d instructions", MAX_INSNS);
    }
    if (r < 0)
        return error_set_errno(err, r, "reading the exported seccomp program");
    if (len == 0 || len % sizeof(struct sock_filter) != 0) {
        free(buf);
        return error_set(err, -EIO, "seccomp_export_bpf wrote %zu bytes", len);
    }
    *ret = buf;
    *ret_len = len;
    return 0;
}

int policy_seccomp_export_pfc(const policy_seccomp *p, int fd, error_rec *err) {
    int r = seccomp_export_pfc(p->ctx, fd);
    if (r < 0)
        return error_set_errno(err, r, "seccomp_export_pfc");
    return 0;
}

int policy_seccomp_compile_file(const char *json_path, const char *bpf_out_path, error_rec *err) {
    return policy_seccomp_compile_file_profile(json_path, NULL, bpf_out_path, err);
}

int policy_seccomp_compile_file_profile(const char *json_path, const char *profile,
                                        const char *bpf_out_path, error_rec *err) {
    policy_seccomp *p;
    int r = policy_seccomp_load_file_profile(json_path, profile, &p, err);
    if (r < 0)
        return r;
    _cleanup_free_ void *bpf = NULL;
    size_t len;
    r = policy_seccomp_export_bpf(p, &bpf, &len, err);
    policy_seccomp_free(p);
    if (r < 0)
        return r;
    r = file_write_atomic(bpf_out_path, bpf, len, 0644);
    if (r < 0)
        return error_set_errno(err, r, "writing seccomp program %s", bpf_out_path);
    return 0;
}

bool policy_seccomp_bpf_len_ok(size_t len) {
    return len > 0 && len % sizeof(struct sock_filter) == 0 &&
           len / sizeof(struct sock_filter) <= MAX_INSNS;
}

int policy_seccomp_read_bpf(const char *bpf_path, void **ret, size_t *ret_len, error_rec *err) {
    char *buf;
    size_t len;
    int r = file_read_all(bpf_path, (MAX_INSNS + 1) * sizeof(struct sock_filter), &buf, &len);
    if (r < 0)
        return error_set_errno(err, r, "reading seccomp program %s", bpf_path);
    if (!policy_seccomp_bpf_len_ok(len)) {
        free(buf);
        return error_set(err, -EINVAL, "seccomp program %s: bad size %zu bytes", bpf_path, len);
    }
    *ret = buf;
    *ret_len = len;
    return 0;
}
