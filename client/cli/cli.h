/* Helpers shared by the sbx subcommands: global options (--host, --json), one-line error
 * messages, the client, the create flags that `create` and `run` share, strict number parsing
 * and output helpers. */
#pragma once

#include <jansson.h>
#include <sbx.h>
#include <stdbool.h>
#include <stddef.h>

#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2
/* `sbx run`'s own failures once its flags are taken, as docker run's: apart from its command's
 * statuses (cli_exit_failure). */
#define CLI_EXIT_RUN_FAILED 125
/* What a plain (streamed) exec asks to pass of each stream: the API's most (docs/API.md). */
#define CLI_STREAM_MAX_OUTPUT (64ull << 20)

typedef struct cli_global {
    const char *host; /* --host, else $SBX_HOST, else the default socket */
    bool json;        /* --json: machine-readable output */
} cli_global;
extern cli_global cli_opts;
/* The status of sbx's own failure, which cli_error returns: CLI_EXIT_ERROR, or
 * CLI_EXIT_RUN_FAILED once `sbx run` has taken its flags (as gnulib's exit_failure, which
 * timeout(1) and env(1) set to 125). Usage errors stay CLI_EXIT_USAGE. */
extern int cli_exit_failure;

/* Long option ids shared by every subcommand's getopt_long table. */
enum {
    CLI_OPT_HOST = 1000,
    CLI_OPT_JSON,
    CLI_OPT_HELP,
    CLI_OPT_CACERT,
    CLI_OPT_CREATE_TIMEOUT, /* --timeout of the create flags (-t is run's --tty) */
    CLI_OPT_FIRST_LOCAL = 1100,
};
#define CLI_COMMON_LONGOPTS                                                                        \
    {"host", required_argument, NULL, CLI_OPT_HOST}, {"json", no_argument, NULL, CLI_OPT_JSON},    \
        {"cacert", required_argument, NULL, CLI_OPT_CACERT}, {                                     \
        "help", no_argument, NULL, 'h'                                                             \
    }
/* Handles --host/--json/--cacert (sets $SBX_CA for libsbx); returns true when opt was one. */
bool cli_common_opt(int opt, const char *arg);
/* Parse a subcommand that takes only the common options and positional arguments: on return
 * optind is the first positional argument. Returns 0 to go on, -1 after printing help (exit 0),
 * or CLI_EXIT_USAGE after a usage error. */
int cli_parse_common(const char *cmd, int argc, char **argv, void (*help)(void));

/* "sbx: message" on stderr; returns cli_exit_failure. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "sbx CMD: message (see sbx CMD --help)" on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* getopt_long's answer opt that no case took, as one usage error naming the flag: ':' a flag
 * without its value, '?' a flag not known (or a value given to one that takes none), else an
 * option the command does not take. optstring: the one getopt_long had (it starts "+:"; main
 * sets opterr to 0, so getopt itself prints nothing). */
int cli_bad_option(const char *cmd, int opt, const char *optstring, char **argv);
/* Print an sbx_err as one line; returns cli_exit_failure. */
int cli_sbx_error(const sbx_err *err);
/* Connect to the endpoints from --host / SBX_HOST. Prints the error itself. */
int cli_client(sbx_client **ret);

/* A growable NULL-terminated list of strings (for --env, --label). */
typedef struct cli_strv {
    const char **v;
    size_t n;
} cli_strv;
int cli_strv_add(cli_strv *l, const char *s);
void cli_strv_free(cli_strv *l);

/* The create flags, parsed into sbx_create_opts. */
typedef struct cli_create_flags {
    sbx_create_opts opts;
    cli_strv env, labels;
    char *network_json;
    json_t *volumes;     /* --volume: [{"name","path","read_only"}], or NULL */
    bool pausable;       /* --pausable */
    const char *on_idle; /* --on-idle end|pause, or NULL */
} cli_create_flags;
#define CLI_CREATE_LONGOPTS                                                                        \
    {"image", required_argument, NULL, 'I'}, {"cpu", required_argument, NULL, 'C'},                \
        {"memory", required_argument, NULL, 'M'}, {"disk", required_argument, NULL, 'D'},          \
        {"pids", required_argument, NULL, 'P'}, {"env", required_argument, NULL, 'e'},             \
        {"label", required_argument, NULL, 'l'}, {"idle-timeout", required_argument, NULL, 'T'},   \
        {"timeout", required_argument, NULL, CLI_OPT_CREATE_TIMEOUT},                              \
        {"max-cost", required_argument, NULL, 'X'}, {"network", required_argument, NULL, 'N'},     \
        {"profile", required_argument, NULL, 'R'}, {"gpus", required_argument, NULL, 'G'},         \
        {"isolation", required_argument, NULL, 'O'}, {"volume", required_argument, NULL, 'V'},     \
        {"pausable", no_argument, NULL, 'Z'}, {                                                    \
        "on-idle", required_argument, NULL, 'Y'                                                    \
    }
#define CLI_CREATE_HELP                                                                            \
    "  --image NAME          image (default: host)\n"                                              \
    "  --cpu N               vCPUs, fractions allowed (default 1)\n"                               \
    "  --memory SIZE         memory limit, e.g. 512Mi, 2Gi (default 2Gi)\n"                        \
    "  --disk SIZE           writable layer size (default 1Gi)\n"                                  \
    "  --pids N              process limit (default 256)\n"                                        \
    "  --env K=V             environment for every command (repeatable)\n"                         \
    "  --label k=v           label (repeatable)\n"                                                 \
    "  --idle-timeout DUR    end after this long without activity, e.g. 5m (default 5m)\n"         \
    "  --timeout DUR         maximum lifetime, e.g. 1h (default 1h)\n"                             \
    "  --max-cost USD        end the sandbox when it has cost this much\n"                         \
    "  --network MODE        none (default), open, or allow:CIDR,host:port,...\n"                  \
    "  --profile grading     a grading sandbox: a grader user beside the sandbox user\n"           \
    "  --gpus N              N whole GPUs of the node, exclusively (default 0)\n"                  \
    "  --isolation CLASS     native (namespaces + seccomp) or gvisor (gVisor's runsc); default:\n" \
    "                        the daemon's\n"                                                       \
    "  --volume NAME:/PATH[:ro]  mount volume NAME at /PATH, read-only with :ro (repeatable;\n"    \
    "                        see `sbx volume`)\n"                                                  \
    "  --pausable            can be paused to disk and resumed (see `sbx pause`)\n"                \
    "  --on-idle end|pause   what the idle timeout does (default end; pause: implies\n"            \
    "                        --pausable)\n"
void cli_create_flags_init(cli_create_flags *f);
/* Handles one create flag. Returns 1 when handled, 0 when opt is not a create flag, -1 on a bad
 * value (message printed). */
int cli_create_flag(cli_create_flags *f, const char *cmd, int opt, const char *arg);
void cli_create_flags_free(cli_create_flags *f);
/* Create the sandbox of f (with its volumes, when any). */
sbx_code cli_create_sandbox(sbx_client *c, const cli_create_flags *f, sbx_sandbox **ret,
                            sbx_err *err);

/* `sbx image|volume ls|inspect|rm ...` (sub, then argv from sub on): the calls of one kind of
 * named thing on the first endpoint; ls prints a table (print_list) or, with --json, the JSON. */
typedef struct cli_store_ops {
    const char *cmd; /* "image", "volume" */
    sbx_code (*list)(sbx_client *c, char **ret_json, sbx_err *err);
    sbx_code (*inspect)(sbx_client *c, const char *name, char **ret_json, sbx_err *err);
    sbx_code (*remove)(sbx_client *c, const char *name, sbx_err *err);
    void (*print_list)(json_t *a);
    void (*help)(void);
} cli_store_ops;
int cli_store_cmd(const cli_store_ops *ops, const char *sub, int argc, char **argv);

/* Read all of a descriptor into memory (a local file for sbx cp). Returns 0 or -errno. */
int cli_read_fd(int fd, char **ret, size_t *ret_len);
/* Standard base64 (with padding) of len bytes, NUL-terminated (free it); NULL out of memory. */
char *cli_base64(const void *data, size_t len);
/* Print a JSON value indented on stdout. Returns 0 or CLI_EXIT_ERROR. */
int cli_print_json(json_t *j);
/* Print a JSON text (as returned by libsbx) indented on stdout. */
int cli_print_json_text(const char *text);
/* The exit status for a command result: its exit code, 128+signal, 124 on command_timeout. */
int cli_exit_status(const sbx_exec_result *r);

/* Run a command and report it: streams output live (human mode) or prints the result as JSON
 * (--json). Returns the exit status for sbx (cli_exit_status), 127 when the command's program
 * was not found and 126 when it could not be run (as docker exec/run), or cli_exit_failure. */
int cli_exec(sbx_sandbox *sb, sbx_exec_opts *opts);
/* The same attached (`exec -i/-t`, `run -i`; cli_stream_run): with_stdin streams sbx's stdin to
 * the command as it arrives (no size limit; its end closes the command's stdin); popts (NULL: no
 * terminal) may ask for a terminal. Output streams live, or with --json and no terminal is
 * collected and printed with the result at the end. Returns as cli_exec. */
int cli_exec_attached(sbx_sandbox *sb, sbx_exec_opts *opts, const sbx_process_opts *popts,
                      bool with_stdin);
/* The process options of an attached command: with tty, a terminal of term's type (NULL: $TERM)
 * and the local window's size. */
void cli_tty_process_opts(bool tty, const char *term, sbx_process_opts *ret);
/* -i with -t wants sbx's stdin to be a terminal, as docker's: 0, or "the input device is not a
 * TTY" printed and CLI_EXIT_ERROR (before any request). */
int cli_tty_check(bool with_stdin, bool tty);
/* Build the argv to send from the words after the sandbox id: with sh, one script of the words
 * joined by spaces. *script (malloc'd) must be freed. Returns 0 or -ENOMEM. */
int cli_command_argv(char **words, int n, bool sh, const char ***ret_argv, char **script);

/* What exec and run send: the argv (cli_command_argv). */
typedef struct cli_command {
    const char **argv;
    char *script;
} cli_command;
/* Fill opts' argv and shell from the words after the sandbox id. Returns 0, or CLI_EXIT_ERROR
 * with the message printed. cli_command_free releases what it holds. */
int cli_command_prepare(cli_command *cmd, char **words, int n, bool sh, sbx_exec_opts *opts);
void cli_command_free(cli_command *cmd);

/* ---- attached processes (stream.c) ---- */
/* The local terminal's size (0 or -1 when stdin is not a terminal). */
int cli_tty_size(unsigned *rows, unsigned *cols);
/* Put the local terminal in raw mode; restored by cli_tty_restore, at exit and on a fatal
 * signal. -1 when stdin is not a terminal. */
int cli_tty_raw(void);
void cli_tty_restore(void);
/* An sbx_output_cb writing stdout/stderr bytes to fds 1 and 2 (after flushing stdout). When the
 * reader is gone (EPIPE) it exits 141 quietly, as SIGPIPE's death would; on another write error
 * (a full disk) it says so and exits CLI_EXIT_ERROR. The command goes on in its sandbox, as after
 * any disconnect (cmd_run.c removes its sandbox at exit). */
void cli_stream_output(void *ud, enum sbx_stream s, const char *data, size_t len);
/* Catch what cli_stream_run handles: SIGWINCH when tty, SIGINT/SIGTERM/SIGHUP when fwd (to be
 * forwarded to the command). Called before the command starts, a signal that comes meanwhile is
 * forwarded once it runs. 0, or CLI_EXIT_ERROR with the message printed. cli_stream_run (or
 * cli_signals_unwatch, when the command did not start) puts the old dispositions back. */
int cli_signals_watch(bool tty, bool fwd);
void cli_signals_unwatch(void);
/* Pump an attached process until it ends: stdin forwarded when with_stdin, SIGWINCH as resizes
 * when tty, and with sig_to (p's sandbox; NULL: sbx's own dispositions stay) SIGINT, SIGTERM
 * and SIGHUP sent to the command, whose exit status then ends sbx as usual (a Ctrl-C that only
 * ended sbx left the command running). Restores the terminal. Returns the command's exit status
 * (cli_exit_status) or CLI_EXIT_ERROR. ret (may be NULL): the exit record, and no timeout/OOM
 * note is printed. */
int cli_stream_run(sbx_process *p, sbx_sandbox *sig_to, bool with_stdin, bool tty,
                   sbx_exec_result *ret);
/* A PID argument (a positive decimal number that fits a pid_t); 0 or CLI_EXIT_USAGE with the
 * message printed. */
int cli_parse_pid(const char *cmd, const char *s, long *ret);
/* A finite decimal number ("1.5", "2e3"; not hex, inf or nan). 0, or -1 when s is not one. */
int cli_parse_number(const char *s, double *ret);
/* An unsigned decimal integer (digits only) no larger than max. 0, or -1 when s is not one. */
int cli_parse_uint(const char *s, unsigned long long max, unsigned long long *ret);
/* Write all of data to fd, waiting (poll) while a non-blocking fd is full. 0 or -errno. */
int cli_write_all(int fd, const void *data, size_t len);
