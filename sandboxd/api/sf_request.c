/* SandboxFusion's side of a request (api/sandboxfusion.c runs the job): the languages this node
 * runs and those it refuses, the checks of a /run_code or /run_jupyter body and whether the
 * image has a language's toolchain (the answer's pieces are api/sf_answer.c's). Calls nothing in
 * sandboxfusion.c or sf_job.c. */
#include "sandboxd/api/sf_request.h"

#include "common/b64.h"
#include "common/jsonkeys.h"
#include "common/macro.h"
#include "policy/image_name.h"
#include "policy/limits.h"
#include "sandboxd/core/images.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SF_MAX_FILES 256

static const sf_lang langs[] = {
    {"python", "main.py", NULL, {"python3", "main.py"}, {"python3"}, false},
    {"pytest",
     "test_main.py",
     NULL,
     {"python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_main.py"},
     {"python3", "/usr/lib/python3/dist-packages/pytest"},
     false},
    {"bash", "main.sh", NULL, {"bash", "main.sh"}, {"bash"}, false},
    /* As SandboxFusion: C++17 without optimization, and -lcrypto -lssl -lpthread each when the
     * image has it (decided in the sandbox: g++ finds the library in its search path). */
    {"cpp",
     "main.cpp",
     "l=; for f in crypto ssl pthread; do for s in so a; do case $(g++ -print-file-name=lib$f.$s) "
     "in /*) l=\"$l -l$f\"; break;; esac; done; done; exec g++ -std=c++17 -o main main.cpp $l",
     {"./main"},
     {"g++"},
     false},
    {"c", "main.c", "gcc -O2 -o main main.c -lm", {"./main"}, {"gcc"}, false},
    {"nodejs", "main.js", NULL, {"node", "main.js"}, {"node"}, false},
    {"go",
     "main.go",
     "GOCACHE=/tmp/gocache GOPATH=/tmp/gopath go build -o main main.go",
     {"./main"},
     {"go"},
     false},
    /* As SandboxFusion: the class path is "." and every files entry named *.jar */
    {"java",
     "Main.java",
     "exec javac -cp \"$1\" Main.java",
     {"java", "-ea", "Main"},
     {"javac", "java"},
     true},
    /* As SandboxFusion: no -O (integer overflow panics, as in a debug build) */
    {"rust", "main.rs", "rustc main.rs -o main", {"./main"}, {"rustc"}, false},
};

/* The languages SandboxFusion knows that this node does not run: refused as SandboxError. */
static const char *const known_elsewhere[] = {
    "go_test", "php",     "csharp",     "typescript", "sql",   "cuda",          "lua",
    "R",       "perl",    "D_ut",       "ruby",       "scala", "julia",         "junit",
    "jest",    "verilog", "python_gpu", "lean",       "swift", "kotlin_script", "racket"};

const sf_lang *sd_sf_lang_python(void) {
    return &langs[0];
}

/* "." and each files key ending in .jar, joined with ':' (SandboxFusion's java class path: every
 * such key, as given, in the request's order). */
static char *java_classpath(json_t *body) {
    json_t *files = json_object_get(body, "files");
    const char *k;
    json_t *v;
    size_t n = 2, len;
    json_object_foreach(files, k, v) {
        if ((len = strlen(k)) >= 4 && strcmp(k + len - 4, ".jar") == 0)
            n += len + 1;
    }
    char *cp = malloc(n), *p = cp;
    if (!cp)
        return NULL;
    *p++ = '.';
    json_object_foreach(files, k, v) {
        if ((len = strlen(k)) >= 4 && strcmp(k + len - 4, ".jar") == 0) {
            *p++ = ':';
            memcpy(p, k, len);
            p += len;
        }
    }
    *p = '\0';
    return cp;
}

json_t *sd_sf_compile_argv(const sf_lang *l, json_t *body) {
    if (!l->classpath)
        return json_pack("[sss]", "sh", "-c", l->compile);
    _cleanup_free_ char *cp = java_classpath(body);
    return cp ? json_pack("[sssss]", "sh", "-c", l->compile, "sh", cp) : NULL;
}

json_t *sd_sf_run_argv(const sf_lang *l, json_t *body) {
    _cleanup_free_ char *cp = l->classpath ? java_classpath(body) : NULL;
    json_t *argv = json_array();
    if (!argv || (l->classpath && !cp))
        goto fail;
    for (size_t i = 0; l->run[i]; i++) {
        if (json_array_append_new(argv, json_string(l->run[i])) < 0)
            goto fail;
        if (i == 0 && cp &&
            (json_array_append_new(argv, json_string("-cp")) < 0 ||
             json_array_append_new(argv, json_string(cp)) < 0))
            goto fail;
    }
    return argv;
fail:
    json_decref(argv);
    return NULL;
}

/* The image a /run_code sandbox gets: the operator's default, normalized as a create does. */
static bool program_present(sd_daemon *d, const char *prog) {
    json_t *img = json_object_get(d->cfg.defaults, "image");
    char name[POLICY_IMAGE_NAME_MAX] = "host", path[PATH_MAX];
    if (json_is_string(img) && policy_image_name(json_string_value(img), "image", name, NULL) < 0)
        return true; /* the create refuses it, naming it */
    if (prog[0] == '/')
        return sd_images_has_path(d, name, prog, false);
    static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        snprintf(path, sizeof(path), "%s/%s", dirs[i], prog);
        if (sd_images_has_path(d, name, path, true))
            return true;
    }
    return false;
}

/* A timeout in seconds: 0..3 days, so that a request's sum (compile + run, or total, plus the
 * sandbox's 120 s of margin) stays within a sandbox's timeout (POLICY_MAX_DURATION_MS). */
#define SF_MAX_TIMEOUT_S (3 * 86400)

/* The length of the whitespace character at s as pydantic-core's str::trim (Rust's
 * char::is_whitespace) has it: ASCII's (isspace), U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
 * U+2029, U+202F, U+205F and U+3000 (not U+001C..U+001F, which Python's str.strip takes); 0 for
 * another character. s is valid UTF-8 (jansson's). */
static size_t space_len(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    if (isspace(u[0]))
        return 1;
    if (u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0))
        return 2;
    if ((u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80) ||
        (u[0] == 0xe2 && u[1] == 0x80 &&
         ((u[2] >= 0x80 && u[2] <= 0x8a) || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf)) ||
        (u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) ||
        (u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80))
        return 3;
    return 0;
}

/* s without the whitespace (space_len) around it: its first character, *ret_len its length. */
static const char *trim_space(const char *s, size_t *ret_len) {
    for (size_t k; (k = space_len(s)) > 0;)
        s += k;
    size_t n = strlen(s);
    for (size_t k = 1; k <= 3 && k <= n;) /* the character that ends at n: 1 to 3 bytes */
        if (space_len(s + n - k) == k) {
            n -= k;
            k = 1;
        } else
            k++;
    *ret_len = n;
    return s;
}

/* A string of an int as pydantic's lax mode reads one: blanks around it (trim_space), a sign,
 * digits with single '_' between them, then optionally '.' and only zeros ("1024.0"; not "1e3",
 * "1024."). Saturates (a value that large is out of every range here). */
static int int_from_str(const char *s, json_int_t *ret) {
    json_int_t n = 0;
    size_t len;
    s = trim_space(s, &len);
    const char *end = s + len; /* (what follows is blanks: no digit, '_' or '.') */
    bool neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    for (; isdigit((unsigned char)*s) || (*s == '_' && isdigit((unsigned char)s[1])); s++)
        if (*s != '_')
            n = n > (INT64_MAX - 9) / 10 ? INT64_MAX : n * 10 + (*s - '0');
    if (*s == '.') {
        if (*++s != '0')
            return -EINVAL;
        while (*s == '0')
            s++;
    }
    if (s != end)
        return -EINVAL;
    *ret = neg ? -n : n;
    return 0;
}

/* A string of a float as pydantic's lax mode reads one, in decimal ("5", " 2.5 ", "1e3", any
 * length; no hex, and "inf" or "nan", out of every range here, are refused): blanks around it
 * (trim_space), or single '_' between other characters and then no blanks (pydantic-core
 * parses the trimmed text, else the untrimmed text without its underscores). */
static int float_from_str(const char *s, double *ret) {
    size_t len, n = 0;
    const char *t = trim_space(s, &len);
    bool blanks = t != s || t[len];
    _cleanup_free_ char *buf = malloc(len + 1); /* (a body is at most SD_SF_BODY_MAX) */
    char *end;
    if (!buf)
        return -ENOMEM;
    for (const char *p = t; p < t + len; p++) {
        if (*p == '_' && (blanks || p == t || p + 1 == t + len || p[-1] == '_' || p[1] == '_'))
            return -EINVAL;
        if (*p == '_')
            continue;
        if (!strchr("0123456789+-.eE", *p))
            return -EINVAL; /* what strtod takes beyond decimal: hex, inf, nan */
        buf[n++] = *p;
    }
    buf[n] = 0;
    double d = strtod(buf, &end);
    if (end == buf || *end)
        return -EINVAL;
    *ret = d;
    return 0;
}

/* b's key, when given, as SandboxFusion's pydantic (v2, lax mode) takes an int (integer) or a
 * float field: a JSON number, true or false (1, 0), or a string of one; an int field also takes
 * a real with no fractional part (1024.0, not 1024.5). The value is replaced by its number, so
 * what follows (and the Jupyter driver, which gets the body) sees numbers only. Returns false
 * when it is none of these. */
static bool coerce_number(json_t *b, const char *key, bool integer) {
    json_t *v = json_object_get(b, key), *num;
    const char *s = json_string_value(v);
    json_int_t i;
    double d = json_real_value(v);
    if (!v || json_is_integer(v) || (json_is_real(v) && !integer))
        return true;
    if (json_is_boolean(v))
        num = json_integer(json_is_true(v));
    else if (json_is_real(v) && d > -0x1p63 && d < 0x1p63 && (double)(json_int_t)d == d)
        num = json_integer((json_int_t)d);
    else if (!s || strlen(s) != json_string_length(v))
        return false; /* (a string with a NUL is no number) */
    else if (integer && int_from_str(s, &i) == 0)
        num = json_integer(i);
    else if (!integer && float_from_str(s, &d) == 0)
        num = json_real(d);
    else
        return false;
    return num && json_object_set_new(b, key, num) == 0;
}

static bool is_num(json_t *v) {
    return json_is_number(v) && json_number_value(v) >= 0 &&
           json_number_value(v) <= SF_MAX_TIMEOUT_S;
}

/* The fields of SandboxFusion's RunCodeRequest and RunJupyterRequest: every one is implemented
 * but "args" (pytest's extra arguments), taken only as its default []; any other field is a
 * 400 naming it (docs/API.md "SandboxFusion"). */
static const char *const run_code_keys[] = {"code",  "language", "compile_timeout", "run_timeout",
                                            "stdin", "files",    "memory_limit_MB", "fetch_files",
                                            "args",  NULL};
static const char *const run_jupyter_keys[] = {"cells",           "kernel", "cell_timeout",
                                               "total_timeout",   "files",  "fetch_files",
                                               "memory_limit_MB", NULL};

int sd_sf_check_known(json_t *b, bool jupyter, error_rec *err) {
    json_t *args = json_object_get(b, "args");
    if (jsonkeys_check(b, jupyter ? run_jupyter_keys : run_code_keys, NULL, err) < 0)
        return -EINVAL;
    if (args && !(json_is_array(args) && json_array_size(args) == 0))
        return error_set(err, -EINVAL,
                         "args: extra pytest arguments are not implemented by this daemon (only "
                         "[] is accepted)");
    return 0;
}

bool sd_sf_file_ignored(const char *path) {
    return strstr(path, "IGNORE_THIS_FILE");
}

const char *sd_sf_check_common(json_t *b, uint64_t host_memory) {
    json_t *files = json_object_get(b, "files"), *fetch = json_object_get(b, "fetch_files");
    json_t *mem = json_object_get(b, "memory_limit_MB");
    if (files && !json_is_object(files))
        return "files: must be an object of path -> base64 content";
    if (json_object_size(files) > SF_MAX_FILES)
        return "files: too many files";
    const char *k;
    json_t *v;
    static char bad_file[300];
    json_object_foreach(files, k, v) {
        if (!*k || (!json_is_string(v) && !json_is_null(v)))
            return "files: each value must be a base64 string (or null)";
        if (json_is_string(v) && !sd_sf_file_ignored(k) &&
            b64_check_wrapped(json_string_value(v), json_string_length(v)) < 0) {
            snprintf(bad_file, sizeof(bad_file), "files: %.200s is not valid base64", k);
            return bad_file; /* (before a sandbox is made for it) */
        }
    }
    if (fetch && !json_is_array(fetch))
        return "fetch_files: must be an array of paths";
    size_t i;
    json_array_foreach(fetch, i, v) {
        if (!json_is_string(v) || !json_string_length(v))
            return "fetch_files: each entry must be a path";
    }
    if (json_array_size(fetch) > SF_MAX_FILES)
        return "fetch_files: too many files";
    if (!coerce_number(b, "memory_limit_MB", true))
        return "memory_limit_MB: must be an integer";
    mem = json_object_get(b, "memory_limit_MB");
    static char bad_mem[160]; /* a limit is a sandbox's memory: POLICY_MIN_MEMORY..the host's */
    json_int_t mb = json_integer_value(mem);
    if (mb > 0 &&
        (mb < (json_int_t)(POLICY_MIN_MEMORY >> 20) || (uint64_t)mb > host_memory >> 20)) {
        snprintf(bad_mem, sizeof(bad_mem),
                 "memory_limit_MB: must be %llu..%llu (this host's memory), or -1 for the default",
                 (unsigned long long)(POLICY_MIN_MEMORY >> 20),
                 (unsigned long long)(host_memory >> 20));
        return bad_mem;
    }
    return NULL;
}

const char *sd_sf_check_run_code(json_t *b, const char **ret_refusal, const sf_lang **ret_lang) {
    json_t *code = json_object_get(b, "code"), *lang = json_object_get(b, "language");
    json_t *in = json_object_get(b, "stdin");
    static char refusal[256];
    *ret_refusal = NULL;
    *ret_lang = NULL;
    if (!json_is_string(code))
        return "code: is required and must be a string";
    if (!json_is_string(lang))
        return "language: is required and must be a string";
    if (in && !json_is_string(in) && !json_is_null(in))
        return "stdin: must be a string";
    const char *fields[] = {"compile_timeout", "run_timeout"};
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
        bool given = json_object_get(b, fields[i]); /* (coerce_number replaces it) */
        if (given &&
            (!coerce_number(b, fields[i], false) || !is_num(json_object_get(b, fields[i]))))
            return fields[i][0] == 'c' ? "compile_timeout: must be a number of seconds in 0..259200"
                                       : "run_timeout: must be a number of seconds in 0..259200";
    }
    const char *name = json_string_value(lang);
    for (size_t i = 0; i < ARRAY_SIZE(langs); i++)
        if (strcmp(langs[i].name, name) == 0)
            *ret_lang = &langs[i];
    if (*ret_lang)
        return NULL;
    for (size_t i = 0; i < ARRAY_SIZE(known_elsewhere); i++)
        if (strcmp(known_elsewhere[i], name) == 0) {
            snprintf(refusal, sizeof(refusal), "language %s is not supported by this sandboxd",
                     name);
            *ret_refusal = refusal;
            return NULL;
        }
    return "language: unknown (python, pytest, bash, cpp, c, nodejs, go, java, rust)";
}

const char *sd_sf_missing_program(sd_daemon *d, const sf_lang *l) {
    for (size_t i = 0; i < ARRAY_SIZE(l->need) && l->need[i]; i++)
        if (!program_present(d, l->need[i]))
            return l->need[i];
    return NULL;
}

const char *sd_sf_check_jupyter(json_t *b) {
    json_t *cells = json_object_get(b, "cells"), *kernel = json_object_get(b, "kernel");
    if (!json_is_array(cells))
        return "cells: is required and must be an array of strings";
    size_t i;
    json_t *v;
    json_array_foreach(cells, i, v) {
        if (!json_is_string(v))
            return "cells: each cell must be a string";
    }
    if (kernel && !(json_is_string(kernel) && strcmp(json_string_value(kernel), "python3") == 0))
        return "kernel: only python3 is supported";
    const char *k;
    json_object_foreach(json_object_get(b, "files"), k, v) { /* RunJupyterRequest: Dict[str, str] */
        if (json_is_null(v))
            return "files: each value must be a base64 string (null only on /run_code)";
    }
    if (!coerce_number(b, "cell_timeout", false) || !coerce_number(b, "total_timeout", false))
        return "cell_timeout, total_timeout: must be numbers of seconds in 0..259200";
    json_t *ct = json_object_get(b, "cell_timeout"), *tt = json_object_get(b, "total_timeout");
    if ((ct && !is_num(ct)) || (tt && !is_num(tt)))
        return "cell_timeout, total_timeout: must be numbers of seconds in 0..259200";
    return NULL;
}

double sd_sf_num_or(json_t *b, const char *key, double dflt) {
    json_t *v = json_object_get(b, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}
