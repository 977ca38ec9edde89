/* Shared helpers of the sbx subcommands (see cli.h). */
#include "client/cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cli_global cli_opts;
int cli_exit_failure = CLI_EXIT_ERROR;

bool cli_common_opt(int opt, const char *arg) {
    if (opt == CLI_OPT_HOST)
        cli_opts.host = arg;
    else if (opt == CLI_OPT_JSON)
        cli_opts.json = true;
    else if (opt == CLI_OPT_CACERT)
        setenv("SBX_CA", arg, 1);
    else
        return false;
    return true;
}

int cli_parse_common(const char *cmd, int argc, char **argv, void (*help)(void)) {
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS, {0}};
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return -1;
        }
        if (!cli_common_opt(opt, optarg))
            return cli_bad_option(cmd, opt, "+:h", argv);
    }
    return 0;
}

int cli_bad_option(const char *cmd, int opt, const char *optstring, char **argv) {
    const char *arg = optind > 0 ? argv[optind - 1] : ""; /* the element getopt just took */
    int name_len = (int)strcspn(arg, "=");
    bool is_long = strncmp(arg, "--", 2) == 0;
    if (opt == ':' && is_long) /* (getopt moved past the flag: arg is it) */
        return cli_usage_error(cmd, "flag needs an argument: %s", arg);
    if (opt == ':')
        return cli_usage_error(cmd, "flag needs an argument: '%c' in %s", optopt, arg);
    if (opt != '?')
        return cli_usage_error(cmd, "unknown flag: %s", arg);
    if (optopt == 0) /* a long flag not known */
        return cli_usage_error(cmd, "unknown flag: %.*s", name_len, arg);
    if (is_long && (optopt >= 256 || strchr(optstring, optopt)))
        return cli_usage_error(cmd, "flag takes no argument: %.*s", name_len, arg);
    return cli_usage_error(cmd, "unknown shorthand flag: '%c'", optopt); /* (maybe in a group) */
}

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sbx: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return cli_exit_failure;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sbx %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see sbx %s --help)\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_sbx_error(const sbx_err *err) {
    return cli_error("%s", err->message[0] ? err->message : sbx_code_name(err->code));
}

int cli_client(sbx_client **ret) {
    sbx_err err = {0};
    if (sbx_client_new(cli_opts.host, ret, &err) != SBX_OK)
        return cli_sbx_error(&err);
    return 0;
}

int cli_strv_add(cli_strv *l, const char *s) {
    const char **nv = realloc(l->v, (l->n + 2) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    nv[l->n++] = s;
    nv[l->n] = NULL;
    l->v = nv;
    return 0;
}

void cli_strv_free(cli_strv *l) {
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void cli_create_flags_init(cli_create_flags *f) {
    memset(f, 0, sizeof(*f));
    sbx_create_opts_init(&f->opts);
}

void cli_create_flags_free(cli_create_flags *f) {
    cli_strv_free(&f->env);
    cli_strv_free(&f->labels);
    free(f->network_json);
    json_decref(f->volumes);
}

sbx_code cli_create_sandbox(sbx_client *c, const cli_create_flags *f, sbx_sandbox **ret,
                            sbx_err *err) {
    if (!f->volumes && !f->pausable && !f->on_idle)
        return sbx_sandbox_create(c, &f->opts, ret, err);
    json_t *x = json_object();
    if (x && f->volumes)
        json_object_set(x, "volumes", f->volumes);
    if (x && f->pausable)
        json_object_set_new(x, "pausable", json_true());
    if (x && f->on_idle)
        json_object_set_new(x, "on_idle", json_string(f->on_idle));
    char *extra = x ? json_dumps(x, JSON_COMPACT) : NULL;
    json_decref(x);
    sbx_code rc = extra ? sbx_sandbox_create_with(c, &f->opts, extra, ret, err) : SBX_E_NOMEM;
    free(extra);
    return rc;
}

/* --volume NAME:/PATH[:ro]; the daemon checks the name and the path (400 names the field). */
static int volume_flag(cli_create_flags *f, const char *cmd, const char *arg) {
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg || colon[1] != '/')
        return cli_usage_error(cmd, "--volume wants NAME:/PATH[:ro], not \"%s\"", arg), -1;
    size_t n = strlen(colon + 1);
    bool ro = n > 3 && strcmp(colon + 1 + n - 3, ":ro") == 0;
    json_t *v = json_pack("{s:s%,s:s%,s:b}", "name", arg, (size_t)(colon - arg), "path", colon + 1,
                          ro ? n - 3 : n, "read_only", ro);
    if (!f->volumes)
        f->volumes = json_array();
    if (!v || !f->volumes || json_array_append_new(f->volumes, v) < 0)
        return cli_error("out of memory"), -1;
    return 1;
}

static int network_flag(cli_create_flags *f, const char *cmd, const char *arg) {
    if (strcmp(arg, "none") == 0 || strcmp(arg, "open") == 0) {
        f->opts.network = arg;
        return 1;
    }
    if (strncmp(arg, "allow:", 6) != 0 || !arg[6])
        return cli_usage_error(cmd, "--network must be none, open or allow:CIDR,host:port,..."), -1;
    json_t *list = json_array();
    char *copy = strdup(arg + 6), *save = NULL;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(list, json_string(t));
    free(copy);
    json_t *o = json_pack("{so}", "allow", list);
    free(f->network_json);
    f->network_json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!f->network_json)
        return cli_error("out of memory"), -1;
    f->opts.network = f->network_json;
    return 1;
}

static int parse_double(const char *cmd, const char *name, const char *arg, double *ret) {
    double v;
    if (cli_parse_number(arg, &v) < 0 || !(v > 0))
        return cli_usage_error(cmd, "--%s wants a positive number, not \"%s\"", name, arg), -1;
    *ret = v;
    return 1;
}

int cli_create_flag(cli_create_flags *f, const char *cmd, int opt, const char *arg) {
    sbx_create_opts *o = &f->opts;
    uint64_t v;
    switch (opt) {
    case 'I':
        o->image = arg;
        return 1;
    case 'C':
        return parse_double(cmd, "cpu", arg, &o->cpu);
    case 'X':
        return parse_double(cmd, "max-cost", arg, &o->max_cost_usd);
    case 'M':
    case 'D':
        if (sbx_parse_size(arg, &v) != SBX_OK || v == 0)
            return cli_usage_error(cmd, "--%s wants a size like 512Mi or 2Gi, not \"%s\"",
                                   opt == 'M' ? "memory" : "disk", arg),
                   -1;
        *(opt == 'M' ? &o->memory : &o->disk) = v;
        return 1;
    case 'P': {
        unsigned long long n;
        if (cli_parse_uint(arg, 1000000, &n) < 0 || n == 0)
            return cli_usage_error(cmd, "--pids wants a positive number, not \"%s\"", arg), -1;
        o->pids = (unsigned)n;
        return 1;
    }
    case 'T':
    case CLI_OPT_CREATE_TIMEOUT:
        if (sbx_parse_duration(arg, &v) != SBX_OK || v == 0)
            return cli_usage_error(cmd, "--%s wants a duration like 30s, 5m or 1h, not \"%s\"",
                                   opt == 'T' ? "idle-timeout" : "timeout", arg),
                   -1;
        *(opt == 'T' ? &o->idle_timeout_ms : &o->timeout_ms) = v;
        return 1;
    case 'e':
    case 'l':
        if (!strchr(arg, '=') || arg[0] == '=')
            return cli_usage_error(cmd, "--%s wants KEY=VALUE, not \"%s\"",
                                   opt == 'e' ? "env" : "label", arg),
                   -1;
        if (cli_strv_add(opt == 'e' ? &f->env : &f->labels, arg) < 0)
            return cli_error("out of memory"), -1;
        o->env = f->env.v;
        o->labels = f->labels.v;
        return 1;
    case 'N':
        return network_flag(f, cmd, arg);
    case 'G': { /* GPUs: the daemon checks the range (400 names the field) */
        unsigned long long n;
        if (cli_parse_uint(arg, 64, &n) < 0)
            return cli_usage_error(cmd, "--gpus wants a number of GPUs (0-64), not \"%s\"", arg),
                   -1;
        o->gpus = (unsigned)n;
        return 1;
    }
    case 'V':
        return volume_flag(f, cmd, arg);
    case 'R': /* the daemon validates the name (400 names the field) */
        o->profile = arg;
        return 1;
    case 'O': /* the same for the isolation class */
        o->isolation = arg;
        return 1;
    case 'Z':
        f->pausable = true;
        return 1;
    case 'Y': /* and for on_idle */
        f->on_idle = arg;
        return 1;
    default:
        return 0;
    }
}

/* The bytes grow in a memory stream (open_memstream): the C library's growable buffer. */
int cli_read_fd(int fd, char **ret, size_t *ret_len) {
    char *data = NULL, buf[65536];
    size_t len = 0;
    FILE *m = open_memstream(&data, &len);
    if (!m)
        return -errno;
    int r = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        if (fwrite(buf, 1, (size_t)n, m) != (size_t)n) {
            r = -ENOMEM;
            break;
        }
    }
    if (fclose(m) != 0 && r == 0)
        r = -ENOMEM;
    if (r < 0) {
        free(data);
        return r;
    }
    *ret = data;
    *ret_len = len;
    return 0;
}

char *cli_base64(const void *data, size_t len) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *d = data;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; out && i < len; i += 3) {
        unsigned v = (unsigned)d[i] << 16 | (i + 1 < len ? (unsigned)d[i + 1] << 8 : 0) |
                     (i + 2 < len ? d[i + 2] : 0);
        *o++ = abc[v >> 18 & 63];
        *o++ = abc[v >> 12 & 63];
        *o++ = i + 1 < len ? abc[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? abc[v & 63] : '=';
    }
    if (out)
        *o = 0;
    return out;
}

int cli_print_json(json_t *j) {
    if (!j || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
        return cli_error("cannot print JSON");
    fputc('\n', stdout);
    return 0;
}

int cli_print_json_text(const char *text) {
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!j)
        return cli_error("the daemon sent invalid JSON");
    int r = cli_print_json(j);
    json_decref(j);
    return r;
}

int cli_exit_status(const sbx_exec_result *r) {
    if (strcmp(r->reason, "command_timeout") == 0)
        return 124;
    if (r->signal > 0)
        return 128 + (r->signal & 127);
    if (strcmp(r->reason, "oom_killed") == 0)
        return 137;
    if (r->exit_code < 0 || r->exit_code > 255)
        return CLI_EXIT_ERROR;
    return r->exit_code;
}

int cli_command_argv(char **words, int n, bool sh, const char ***ret_argv, char **script) {
    *script = NULL;
    if (sh) {
        size_t len = 1;
        for (int i = 0; i < n; i++)
            len += strlen(words[i]) + 1;
        char *s = calloc(1, len);
        const char **v = calloc(2, sizeof(*v));
        if (!s || !v) {
            free(s);
            free(v);
            return -ENOMEM;
        }
        for (int i = 0; i < n; i++) {
            if (i)
                strcat(s, " ");
            strcat(s, words[i]);
        }
        v[0] = s;
        *script = s;
        *ret_argv = v;
        return 0;
    }
    const char **v = calloc((size_t)n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        v[i] = words[i];
    *ret_argv = v;
    return 0;
}

int cli_command_prepare(cli_command *cmd, char **words, int n, bool sh, sbx_exec_opts *opts) {
    if (cli_command_argv(words, n, sh, &cmd->argv, &cmd->script) < 0)
        return cli_error("out of memory");
    opts->argv = cmd->argv;
    opts->shell = sh;
    return 0;
}

void cli_command_free(cli_command *cmd) {
    free(cmd->script);
    free(cmd->argv);
}

int cli_parse_number(const char *s, double *ret) {
    /* strtod alone also takes hex, inf, nan and leading blanks */
    if (!*s || s[strspn(s, "0123456789.eE+-")] != 0)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *ret = v;
    return 0;
}

int cli_parse_uint(const char *s, unsigned long long max, unsigned long long *ret) {
    /* strtoull alone also takes a sign (and negates) and leading blanks */
    if (!*s || s[strspn(s, "0123456789")] != 0)
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno || v > max)
        return -1;
    *ret = v;
    return 0;
}

int cli_parse_pid(const char *cmd, const char *s, long *ret) {
    unsigned long long v;
    if (cli_parse_uint(s, INT_MAX, &v) < 0 || v == 0) /* a pid_t */
        return cli_usage_error(cmd, "PID must be a positive number, not \"%s\"", s);
    *ret = (long)v;
    return 0;
}

int cli_write_all(int fd, const void *data, size_t len) {
    const char *d = data;
    while (len > 0) {
        ssize_t w = write(fd, d, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* a non-blocking descriptor (shared with whoever gave it to us): wait for room */
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return -errno;
            continue;
        }
        if (w < 0)
            return -errno;
        d += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Remove each name, going on past a failure as sbx rm does; CLI_EXIT_ERROR when any failed. */
static int store_rm(const cli_store_ops *ops, sbx_client *c, int n, char **names) {
    int rc = 0;
    for (int i = 0; i < n; i++) {
        sbx_err err = {0};
        if (ops->remove(c, names[i], &err) != SBX_OK)
            rc = cli_sbx_error(&err);
        else
            printf("%s\n", names[i]);
    }
    return rc;
}

int cli_store_cmd(const cli_store_ops *ops, const char *sub, int argc, char **argv) {
    int prc = cli_parse_common(ops->cmd, argc, argv, ops->help);
    if (prc != 0)
        return prc < 0 ? 0 : prc;
    int n = argc - optind;
    bool ls = strcmp(sub, "ls") == 0, rm = strcmp(sub, "rm") == 0;
    if ((ls && n != 0) || (!ls && !rm && n != 1) || (rm && n < 1))
        return cli_usage_error(ops->cmd, "wrong number of arguments for %s", sub);
    sbx_client *c = NULL;
    sbx_err err = {0};
    char *js = NULL;
    int rc = cli_client(&c);
    if (rc != 0)
        return rc;
    if (rm) {
        rc = store_rm(ops, c, argc - optind, argv + optind);
    } else {
        sbx_code code = ls ? ops->list(c, &js, &err) : ops->inspect(c, argv[optind], &js, &err);
        if (code != SBX_OK) {
            rc = cli_sbx_error(&err);
        } else if (ls && !cli_opts.json) {
            json_t *a = json_loads(js, 0, NULL);
            ops->print_list(a);
            json_decref(a);
        } else {
            rc = cli_print_json_text(js);
        }
    }
    free(js);
    sbx_client_free(c);
    return rc;
}
