/* `sbx run [create flags] [-i] [-t] [--sh] [--cwd D] [--cmd-timeout DUR] -- CMD...`: create a
 * sandbox, run one command in it and remove it, even when the command fails or sbx gets
 * Ctrl-C/SIGTERM (a signal thread terminates the sandbox, which ends the running command) or sbx
 * exits because it cannot write the output (an atexit handler). Exits like exec, but 125 for its
 * own failures after its flags (as docker run; 2 for a usage error). Plain: cli_exec;
 * -i/-t: attached as `sbx exec -i/-t`, stdin streamed as it arrives, a terminal
 * (cli_exec_attached). */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(void) {
    printf("usage: sbx run [FLAGS] -- CMD [ARGS...]\n\n"
           "Create a sandbox, run CMD in it, remove it (also on failure or Ctrl-C). Exits with\n"
           "the command's status like sbx exec (130 when interrupted), 125 when sbx itself\n"
           "failed (no daemon, a refused create...), as docker run.\n\n" CLI_CREATE_HELP
           "  -i, --stdin           stream sbx's stdin to the command as it arrives (no size\n"
           "                        limit; end of input closes the command's stdin)\n"
           "  -t, --tty             give the command a terminal (raw mode with -i: -it)\n"
           "  --sh                  run CMD ARGS... as one /bin/sh -c script\n"
           "  --cwd DIR             working directory (default /workspace)\n"
           "  --cmd-timeout DUR     kill the command after DUR\n"
           "  --json                print the result as JSON instead of streaming\n"
           "  --host ENDPOINTS      daemon endpoints (see sbx --help)\n");
}

/* Shared between the main thread and the signal thread. */
static struct {
    pthread_mutex_t lock;
    char id[160];
    int signal;
} run_state = {PTHREAD_MUTEX_INITIALIZER, "", 0};

static void terminate_id(const char *id) {
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    if (sbx_client_new(cli_opts.host, &c, NULL) == SBX_OK &&
        sbx_sandbox_open(c, id, &sb, NULL) == SBX_OK)
        sbx_sandbox_terminate(sb, NULL);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}

static void *signal_thread(void *arg) {
    sigset_t *set = arg;
    int sig = 0;
    if (sigwait(set, &sig) != 0)
        return NULL;
    char id[160];
    pthread_mutex_lock(&run_state.lock);
    run_state.signal = sig;
    snprintf(id, sizeof(id), "%s", run_state.id);
    pthread_mutex_unlock(&run_state.lock);
    if (id[0])
        terminate_id(id); /* ends the command; the main thread then cleans up and exits */
    sleep(15);
    _exit(128 + sig); /* the daemon did not end the command in time */
}

/* sbx exits from within the exec when it cannot write the output (cli_stream_output): the
 * sandbox still goes. */
static void terminate_at_exit(void) {
    char id[160];
    pthread_mutex_lock(&run_state.lock);
    snprintf(id, sizeof(id), "%s", run_state.id);
    run_state.id[0] = 0;
    pthread_mutex_unlock(&run_state.lock);
    if (id[0])
        terminate_id(id);
}

static int interrupted(void) {
    pthread_mutex_lock(&run_state.lock);
    int s = run_state.signal;
    pthread_mutex_unlock(&run_state.lock);
    return s;
}

enum { OPT_CWD = CLI_OPT_FIRST_LOCAL, OPT_CMD_TIMEOUT, OPT_SH };

typedef struct run_mode {
    bool in, tty, sh;
} run_mode;

static int parse(int argc, char **argv, cli_create_flags *f, sbx_exec_opts *o, run_mode *m) {
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        CLI_CREATE_LONGOPTS,
        {"stdin", no_argument, NULL, 'i'},
        {"interactive", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},
        {"cwd", required_argument, NULL, OPT_CWD},
        {"cmd-timeout", required_argument, NULL, OPT_CMD_TIMEOUT},
        {"sh", no_argument, NULL, OPT_SH},
        {0},
    };
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "+:hit", longopts, NULL)) != -1) {
        if (cli_common_opt(opt, optarg))
            continue;
        int r = cli_create_flag(f, "run", opt, optarg);
        if (r < 0)
            return CLI_EXIT_USAGE;
        if (r > 0)
            continue;
        if (opt == 'h') {
            help();
            return -1;
        } else if (opt == 'i')
            m->in = true;
        else if (opt == 't')
            m->tty = true;
        else if (opt == OPT_SH)
            m->sh = true;
        else if (opt == OPT_CWD)
            o->cwd = optarg;
        else if (opt == OPT_CMD_TIMEOUT) {
            if (sbx_parse_duration(optarg, &o->timeout_ms) != SBX_OK || o->timeout_ms == 0)
                return cli_usage_error("run", "--cmd-timeout wants a duration, not \"%s\"", optarg);
        } else
            return cli_bad_option("run", opt, "+:hit", argv);
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc)
        return cli_usage_error("run", "missing the command to run");
    return 0;
}

static int attached(sbx_sandbox *sb, sbx_exec_opts *o, const run_mode *m) {
    sbx_process_opts po;
    cli_tty_process_opts(m->tty, NULL, &po);
    return cli_exec_attached(sb, o, &po, m->in);
}

static int run(cli_create_flags *f, sbx_exec_opts *o, const run_mode *m) {
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    int rc = cli_client(&c);
    if (rc == 0 && cli_create_sandbox(c, f, &sb, &err) != SBX_OK)
        rc = cli_sbx_error(&err);
    if (rc == 0) {
        pthread_mutex_lock(&run_state.lock);
        snprintf(run_state.id, sizeof(run_state.id), "%s", sbx_sandbox_id(sb));
        pthread_mutex_unlock(&run_state.lock);
        if (!interrupted())
            rc = m->in || m->tty ? attached(sb, o, m) : cli_exec(sb, o);
        if (sbx_sandbox_terminate(sb, &err) != SBX_OK && rc == 0)
            rc = cli_sbx_error(&err);
        pthread_mutex_lock(&run_state.lock);
        run_state.id[0] = 0; /* done: nothing for terminate_at_exit */
        pthread_mutex_unlock(&run_state.lock);
    }
    if (interrupted())
        rc = 128 + interrupted();
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return rc;
}

int cmd_run(int argc, char **argv) {
    cli_create_flags f;
    cli_create_flags_init(&f);
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    run_mode m = {0};
    int rc = parse(argc, argv, &f, &o, &m);
    if (rc != 0) {
        cli_create_flags_free(&f);
        return rc < 0 ? 0 : rc;
    }
    cli_command cmd = {0};
    rc = cli_tty_check(m.in, m.tty); /* 1, as docker run -it says it */
    if (rc == 0) {
        cli_exit_failure = CLI_EXIT_RUN_FAILED; /* from here sbx's own failures, as docker run */
        rc = cli_command_prepare(&cmd, argv + optind, argc - optind, m.sh, &o);
    }
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_t th;
    if (rc == 0 &&
        (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
         pthread_create(&th, NULL, signal_thread, &set) != 0 || atexit(terminate_at_exit) != 0))
        rc = cli_error("cannot set up signal handling");
    if (rc == 0)
        rc = run(&f, &o, &m);
    cli_command_free(&cmd);
    cli_create_flags_free(&f);
    return rc;
}
