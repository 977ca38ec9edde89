/* An exec request of the daemon (common/shimproto.h "exec") packed into init's message
 * (shim/ipc.h SHIM_IPC_EXEC): cwd, argv and env, the command's file, a terminal's size. */
#include "shim/exec_msg.h"

#include "shim/grading.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_ARGV 4096 /* argv and env entries (init takes 2 more: "sh -c", shim/exec.c) */

/* Append the strings of a JSON array (with an optional prefix) to buf; -EINVAL on junk. */
static int pack_strings(json_t *arr, char *buf, size_t cap, size_t *off, size_t *count) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        const char *str = json_string_value(v);
        if (!str || strlen(str) != json_string_length(v))
            return -EINVAL;
        size_t l = strlen(str) + 1;
        if (*off + l > cap)
            return -E2BIG;
        memcpy(buf + *off, str, l);
        *off += l;
        (*count)++;
    }
    return 0;
}

static int pack_str(const char *str, char *buf, size_t cap, size_t *off) {
    size_t l = strlen(str) + 1;
    if (*off + l > cap)
        return -E2BIG;
    memcpy(buf + *off, str, l);
    *off += l;
    return 0;
}

static bool env_overridden(json_t *env, const char *kv) {
    size_t kl = strcspn(kv, "=") + 1, i;
    json_t *v;
    json_array_foreach(env, i, v) {
        const char *s = json_string_value(v);
        if (s && strncmp(s, kv, kl) == 0)
            return true;
    }
    return false;
}

/* Grading sandboxes set HOME and PYTHONNOUSERSITE themselves (docs/GRPO.md). */
static bool env_forced(const shim_spec *spec, const char *kv) {
    return spec->grading &&
           (strncmp(kv, "HOME=", 5) == 0 || strncmp(kv, "PYTHONNOUSERSITE=", 17) == 0);
}

/* One env entry; the grader's PATH starts with the helper's directory. */
static int pack_env(const char *kv, bool grader, char *buf, size_t cap, size_t *off) {
    if (!grader || strncmp(kv, "PATH=", 5) != 0)
        return pack_str(kv, buf, cap, off);
    char path[8192];
    int n = snprintf(path, sizeof(path), "PATH=" SHIM_GRADING_BIN ":%s", kv + 5);
    return n < 0 || (size_t)n >= sizeof(path) ? -E2BIG : pack_str(path, buf, cap, off);
}

static int pack_grading_env(bool grader, char *buf, size_t cap, size_t *off, size_t *ne) {
    int r = pack_str(grader ? "HOME=" SHIM_GRADER_HOME : "HOME=" SHIM_AGENT_HOME, buf, cap, off);
    if (r == 0)
        r = pack_str("PYTHONNOUSERSITE=1", buf, cap, off);
    *ne += 2;
    return r;
}

/* cwd\0 argv..\0 env..\0 (spec env, overridden by the request's env). */
int shim_exec_msg_pack(const shim_spec *spec, json_t *msg, bool grader, char *buf, size_t cap,
                       size_t *len, int *argc, int *envc) {
    json_t *argv = json_object_get(msg, "argv"), *env = json_object_get(msg, "env");
    json_t *cwd = json_object_get(msg, "cwd"), *shell = json_object_get(msg, "shell");
    const char *cwds = cwd ? json_string_value(cwd) : "/workspace";
    if (!json_is_array(argv) || json_array_size(argv) < 1 || json_array_size(argv) > MAX_ARGV ||
        (env && (!json_is_array(env) || json_array_size(env) > MAX_ARGV)) || !cwds ||
        cwds[0] != '/' || (shell && !json_is_boolean(shell)))
        return -EINVAL;
    size_t off = 0, na = 0, ne = 0;
    int r = pack_str(cwds, buf, cap, &off);
    if (r == 0 && json_is_true(shell)) {
        r = pack_str("/bin/sh", buf, cap, &off);
        if (r == 0)
            r = pack_str("-c", buf, cap, &off);
        na = 2;
    }
    if (r < 0 || (r = pack_strings(argv, buf, cap, &off, &na)) < 0)
        return r;
    for (size_t i = 0; i < spec->n_env; i++) {
        const char *kv = spec->env[i];
        if ((env && env_overridden(env, kv)) || env_forced(spec, kv))
            continue;
        if ((r = pack_env(kv, grader, buf, cap, &off)) < 0)
            return r;
        ne++;
    }
    for (size_t i = 0; env && i < json_array_size(env); i++) {
        const char *kv = json_string_value(json_array_get(env, i));
        if (!kv || strlen(kv) != json_string_length(json_array_get(env, i)) || !strchr(kv, '=') ||
            kv[0] == '=')
            return -EINVAL;
        if (env_forced(spec, kv))
            continue;
        if ((r = pack_env(kv, grader, buf, cap, &off)) < 0)
            return r;
        ne++;
    }
    if (spec->grading && (r = pack_grading_env(grader, buf, cap, &off, &ne)) < 0)
        return r;
    *len = off;
    *argc = (int)na;
    *envc = (int)ne;
    return 0;
}

/* exec's "file" {"name": N, "data": S} after env (SHIM_IPC_FILE): N\0 then S's bytes. */
int shim_exec_msg_pack_file(json_t *file, char *buf, size_t cap, size_t *off) {
    json_t *name = json_object_get(file, "name"), *data = json_object_get(file, "data");
    const char *n = json_string_value(name);
    if (!json_is_object(file) || json_object_size(file) != 2 || !n || !n[0] ||
        strlen(n) != json_string_length(name) || !json_is_string(data))
        return -EINVAL;
    size_t dl = json_string_length(data);
    int r = pack_str(n, buf, cap, off);
    if (r < 0)
        return r;
    if (dl > cap - *off)
        return -E2BIG;
    memcpy(buf + *off, json_string_value(data), dl);
    *off += dl;
    return 0;
}

/* {"rows": R, "cols": C} as the 4-byte prefix of SHIM_IPC_TTY; 0 when out of range. */
size_t shim_exec_msg_tty_prefix(json_t *tty, unsigned char out[4]) {
    json_t *rows = json_object_get(tty, "rows"), *cols = json_object_get(tty, "cols");
    json_int_t r = json_integer_value(rows), c = json_integer_value(cols);
    if (!json_is_integer(rows) || !json_is_integer(cols) || r < 1 || r > 1000 || c < 1 || c > 1000)
        return 0;
    out[0] = (unsigned char)(r >> 8), out[1] = (unsigned char)r;
    out[2] = (unsigned char)(c >> 8), out[3] = (unsigned char)c;
    return 4;
}
