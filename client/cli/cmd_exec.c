/* `sbx exec [-i] [-t] [-d] [--env K=V] [--cwd D] [--timeout 30s] [--sh] ID -- CMD ARGS...`: run a
 * command in a sandbox, streaming its output live, and exit with the command's status (128+signal
 * when it was killed, 124 on command_timeout, 137 when OOM-killed; 127/126 when it could not
 * start: not found / not runnable). Plain: the NDJSON exec.
 * `-i`/`-t`: attached over a WebSocket (stdin streamed as it arrives, a terminal with raw mode
 * and resizes; stream.c). `-d`: in the background, printing the pid. Also cli_exec (plain) and
 * cli_exec_attached (-i/-t), shared with `sbx run`. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(void) {
    printf(
        "usage: sbx exec [-i] [-t] [-d] [--env K=V] [--cwd DIR] [--timeout DUR] [--sh] [--user U] "
        "ID -- CMD "
        "[ARGS...]\n"
        "\n"
        "Run CMD in sandbox ID. Output streams live (up to 64 MiB of each stream, with a note\n"
        "on stderr past that; -i and -t have none); sbx exits with the command's exit code,\n"
        "128+N when it was killed by signal N, 124 when --timeout expired, 137 when it was\n"
        "OOM-killed, 127 when CMD was not found, 126 when it was found but could not be run\n"
        "(as docker exec), 1 when sbx itself failed. With -i or -t, Ctrl-C (SIGINT), SIGTERM\n"
        "and SIGHUP sent to sbx go to the command (with -it on a terminal Ctrl-C is a\n"
        "keystroke). Without them, as docker exec, they end sbx alone: the command goes on\n"
        "until --timeout or the sandbox's end.\n\n"
        "  -i, --interactive     stream sbx's stdin to the command as it arrives (no size\n"
        "                        limit; end of input closes the command's stdin)\n"
        "  -t, --tty             give the command a terminal; window changes are forwarded;\n"
        "                        with -i the local one goes to raw mode (Ctrl-C reaches the\n"
        "                        command), as docker exec -it\n"
        "  --term NAME           TERM for -t (default: $TERM, else xterm)\n"
        "  -d, --detach          start in the background and print the process id (see sbx\n"
        "                        ps, logs, attach, kill)\n"
        "  --env K=V             environment variable (repeatable)\n"
        "  --cwd DIR             working directory (default /workspace)\n"
        "  --timeout DUR         kill the command after DUR, e.g. 30s\n"
        "  --sh                  run CMD ARGS... as one /bin/sh -c script\n"
        "  --user USER           agent (default) or grader (grading sandboxes only)\n"
        "  --json                print the result as JSON instead of streaming (output that is\n"
        "                        not UTF-8 as stdout_b64/stderr_b64, base64)\n"
        "  --host ENDPOINTS      daemon endpoints (see sbx --help)\n");
}

/* A stream's bytes into o as name when they are UTF-8, else base64 as name_b64 (as the API sends
 * them: "(not valid UTF-8)" stood where binary output was). 0, or -1 out of memory. */
static int set_data(json_t *o, const char *name, const char *d, size_t n) {
    json_t *s = d ? json_stringn(d, n) : json_null();
    if (s)
        return json_object_set_new(o, name, s);
    char key[16], *b = cli_base64(d, n);
    snprintf(key, sizeof(key), "%s_b64", name);
    int r = b ? json_object_set_new(o, key, json_string(b)) : -1;
    free(b);
    return r;
}

/* The result as one JSON object (--json); returns status or cli_exit_failure. */
static int print_result_json(const sbx_exec_result *r, int status) {
    json_t *j = json_pack("{si so ss sf}", "exit_code", r->exit_code, "signal",
                          r->signal ? json_integer(r->signal) : json_null(), "reason", r->reason,
                          "duration", r->duration_s);
    json_t *counts = json_pack("{sI sI sb sb}", "stdout_bytes", (json_int_t)r->stdout_bytes,
                               "stderr_bytes", (json_int_t)r->stderr_bytes, "stdout_truncated",
                               r->stdout_truncated, "stderr_truncated", r->stderr_truncated);
    if (!j || !counts || set_data(j, "stdout", r->stdout_data, r->stdout_len) < 0 ||
        set_data(j, "stderr", r->stderr_data, r->stderr_len) < 0 ||
        json_object_update(j, counts) < 0 || cli_print_json(j) != 0)
        status = cli_exit_failure;
    json_decref(counts);
    json_decref(j);
    return status;
}

/* A stream the daemon cut at max: say so (the output looks whole otherwise). bytes: what the
 * command wrote to it, which the exit record counts past the cut. */
static void note_cut(const char *name, uint64_t bytes, uint64_t max) {
    if (bytes > max)
        cli_error("the command's %s was cut at %llu of its %llu bytes (a plain exec passes at most "
                  "64 MiB of each; sbx exec -i or -t has no limit)",
                  name, (unsigned long long)max, (unsigned long long)bytes);
}

/* A command the daemon refused to start: its message on stderr, then 127 when its program was
 * not found and 126 when it was found but could not be run, as docker exec/run and a shell exit
 * (the answer is 400 invalid_argument "exec PROGRAM: STRERROR", PROGRAM as the shim names it, cut
 * short; docs/API.md); otherwise sbx's own error (cli_exit_failure), as for a --cwd not there. */
static int start_error(const sbx_exec_opts *o, const sbx_err *err) {
    int own = cli_sbx_error(err);
    const char *program = o->shell ? "/bin/sh" : o->argv[0];
    const char *m = err->message, *sep = strrchr(m, ':');
    if (err->code != SBX_E_INVALID || strncmp(m, "exec ", 5) != 0 || !sep || sep[1] != ' ')
        return own;
    size_t n = (size_t)(sep - (m + 5)); /* the program's name, a prefix when it was cut */
    if (n == 0 || strncmp(m + 5, program, n) != 0)
        return own;
    return strcmp(sep + 2, "No such file or directory") == 0 ? 127 : 126;
}

int cli_exec(sbx_sandbox *sb, sbx_exec_opts *o) {
    sbx_exec_result r = {0};
    sbx_err err = {0};
    if (!cli_opts.json) { /* streamed: nothing is kept, so the most the API passes (1 MiB
                           * is the default for answers that keep it) */
        o->on_output = cli_stream_output;
        o->max_output = CLI_STREAM_MAX_OUTPUT;
    }
    if (sbx_sandbox_exec(sb, o, &r, &err) != SBX_OK)
        return start_error(o, &err);
    int status = cli_exit_status(&r);
    if (cli_opts.json) {
        status = print_result_json(&r, status);
    } else {
        note_cut("stdout", r.stdout_bytes, o->max_output);
        note_cut("stderr", r.stderr_bytes, o->max_output);
        if (strcmp(r.reason, "command_timeout") == 0)
            cli_error("the command timed out after %.1fs", r.duration_s);
        else if (strcmp(r.reason, "oom_killed") == 0)
            cli_error("the command was killed: out of memory");
    }
    sbx_exec_result_free(&r);
    return status;
}

enum { OPT_CWD = CLI_OPT_FIRST_LOCAL, OPT_TIMEOUT, OPT_SH, OPT_TERM, OPT_USER };

typedef struct exec_mode {
    bool in, tty, detach;
    const char *term;
} exec_mode;

int cli_tty_check(bool with_stdin, bool tty) {
    return with_stdin && tty && !isatty(0) ? cli_error("the input device is not a TTY") : 0;
}

void cli_tty_process_opts(bool tty, const char *term, sbx_process_opts *po) {
    sbx_process_opts_init(po);
    po->tty = tty;
    if (tty) {
        const char *t = term ? term : getenv("TERM");
        po->term = t && *t ? t : NULL;
        if (cli_tty_size(&po->rows, &po->cols) < 0)
            po->rows = po->cols = 0;
    }
}

static int exec_detached(sbx_sandbox *sb, sbx_exec_opts *o, const exec_mode *m) {
    sbx_process_opts po;
    cli_tty_process_opts(m->tty, m->term, &po);
    long pid = 0;
    char *json = NULL;
    sbx_err err = {0};
    if (sbx_sandbox_process_start(sb, o, &po, &pid, &json, &err) != SBX_OK)
        return start_error(o, &err);
    int rc = 0;
    if (cli_opts.json)
        rc = cli_print_json_text(json);
    else
        printf("%ld\n", pid);
    free(json);
    return rc;
}

/* --json with -i: the output collected, printed with the result at the end. */
typedef struct collected {
    FILE *f[2];
    char *data[2];
    size_t len[2];
} collected;

static void collect(void *ud, enum sbx_stream s, const char *d, size_t n) {
    collected *c = ud;
    fwrite(d, 1, n, c->f[s == SBX_STREAM_STDERR]);
}

int cli_exec_attached(sbx_sandbox *sb, sbx_exec_opts *o, const sbx_process_opts *po,
                      bool with_stdin) {
    bool tty = po && po->tty;
    collected col = {0};
    bool json = cli_opts.json && !tty;
    if (json) {
        col.f[0] = open_memstream(&col.data[0], &col.len[0]);
        col.f[1] = open_memstream(&col.data[1], &col.len[1]);
        if (!col.f[0] || !col.f[1])
            return cli_error("out of memory");
    }
    o->on_output = json ? collect : cli_stream_output;
    o->userdata = &col;
    sbx_process *p = NULL;
    sbx_err err = {0};
    int rc = 0;
    sbx_exec_result r = {0};
    /* raw mode only when our keystrokes go to the command (as docker exec -it), Ctrl-C with
     * them; else SIGINT (and SIGTERM, SIGHUP) is forwarded to it. Window changes go to its
     * terminal either way (they went only with -i). */
    bool raw = tty && with_stdin && isatty(0);
    if (cli_signals_watch(tty, !raw) != 0) {
        rc = cli_exit_failure;
    } else if (sbx_process_start(sb, o, po, &p, &err) != SBX_OK) {
        cli_signals_unwatch();
        rc = start_error(o, &err);
    } else {
        if (raw)
            cli_tty_raw();
        rc = cli_stream_run(p, raw ? NULL : sb, with_stdin, tty, json ? &r : NULL);
    }
    sbx_process_free(p);
    if (json) {
        fclose(col.f[0]);
        fclose(col.f[1]);
        if (rc >= 0 && r.reason[0]) {
            r.stdout_data = col.data[0], r.stdout_len = col.len[0];
            r.stderr_data = col.data[1], r.stderr_len = col.len[1];
            rc = print_result_json(&r, rc);
        }
        free(col.data[0]);
        free(col.data[1]);
    }
    return rc;
}

static int exec_attached(sbx_sandbox *sb, sbx_exec_opts *o, const exec_mode *m) {
    sbx_process_opts po;
    cli_tty_process_opts(m->tty, m->term, &po);
    return cli_exec_attached(sb, o, &po, m->in);
}

int cmd_exec(int argc, char **argv) {
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {"stdin", no_argument, NULL, 'i'},
        {"interactive", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},
        {"detach", no_argument, NULL, 'd'},
        {"term", required_argument, NULL, OPT_TERM},
        {"env", required_argument, NULL, 'e'},
        {"cwd", required_argument, NULL, OPT_CWD},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"sh", no_argument, NULL, OPT_SH},
        {"user", required_argument, NULL, OPT_USER},
        {0},
    };
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    cli_strv env = {0};
    bool sh = false;
    exec_mode mode = {0};
    int opt, rc = 0;
    optind = 0;
    const char *id = NULL;
    /* options may come before and after the id: `sbx exec [opts] ID [opts] -- CMD...` */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        while (rc == 0 && (opt = getopt_long(argc, argv, "+:hitde:", longopts, NULL)) != -1) {
            if (cli_common_opt(opt, optarg))
                continue;
            switch (opt) {
            case 'h':
                help();
                cli_strv_free(&env);
                return 0;
            case 'i':
                mode.in = true;
                break;
            case 't':
                mode.tty = true;
                break;
            case 'd':
                mode.detach = true;
                break;
            case OPT_TERM:
                mode.term = optarg;
                break;
            case 'e':
                if (!strchr(optarg, '=') || optarg[0] == '=')
                    rc = cli_usage_error("exec", "--env wants KEY=VALUE, not \"%s\"", optarg);
                else if (cli_strv_add(&env, optarg) < 0)
                    rc = cli_error("out of memory");
                break;
            case OPT_CWD:
                o.cwd = optarg;
                break;
            case OPT_TIMEOUT:
                if (sbx_parse_duration(optarg, &o.timeout_ms) != SBX_OK || o.timeout_ms == 0)
                    rc = cli_usage_error("exec", "--timeout wants a duration like 30s, not \"%s\"",
                                         optarg);
                break;
            case OPT_SH:
                sh = true;
                break;
            case OPT_USER:
                o.user = optarg;
                break;
            default:
                rc = cli_bad_option("exec", opt, "+:hitde:", argv);
            }
        }
        bool dashdash = optind > 0 && optind <= argc && strcmp(argv[optind - 1], "--") == 0;
        if (!id && optind < argc)
            id = argv[optind++];
        if (dashdash)
            break;
    }
    if (rc) {
        cli_strv_free(&env);
        return rc;
    }
    if (!id) {
        cli_strv_free(&env);
        return cli_usage_error("exec", "missing the sandbox id");
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        cli_strv_free(&env);
        return cli_usage_error("exec", "missing the command to run");
    }
    o.env = env.v;
    cli_command cmd = {0};
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    if (mode.detach && mode.in)
        rc = cli_usage_error("exec", "-d and -i do not go together (attach later with sbx attach)");
    if (rc == 0)
        rc = cli_tty_check(mode.in, mode.tty);
    if (rc == 0)
        rc = cli_command_prepare(&cmd, argv + optind, argc - optind, sh, &o);
    if (rc == 0)
        rc = cli_client(&c);
    if (rc == 0 && sbx_sandbox_open_lazy(c, id, &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0 && mode.detach)
        rc = exec_detached(sb, &o, &mode);
    else if (rc == 0 && (mode.in || mode.tty))
        rc = exec_attached(sb, &o, &mode);
    else if (rc == 0)
        rc = cli_exec(sb, &o);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    cli_command_free(&cmd);
    cli_strv_free(&env);
    return rc;
}
