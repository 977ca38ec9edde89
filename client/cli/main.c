/* sbx: the command-line client of sandboxd. Parses the global options (--host, --json, --help,
 * --version) and dispatches to one function per subcommand (client/cli/cmd_*.c).
 * A closed stdin, stdout or stderr is made /dev/null first; SIGPIPE is ignored.
 * Exit status: the command's own for exec and run, else 0 ok, 1 error, 2 usage. */
#include "client/cli/cli.h"
#include "client/cli/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef SBX_VERSION
#define SBX_VERSION "0.0.0"
#endif

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"create", cmd_create, "create a sandbox and print its id"},
    {"exec", cmd_exec, "run a command in a sandbox (-i stdin, -t terminal, -d background)"},
    {"ps", cmd_ps, "list a sandbox's processes"},
    {"attach", cmd_attach, "attach to a running process"},
    {"logs", cmd_logs, "print a process's kept output"},
    {"kill", cmd_kill, "signal or kill a process"},
    {"commit", cmd_commit, "make an image of a sandbox's files"},
    {"pause", cmd_pause, "save a pausable sandbox to disk with its processes"},
    {"resume", cmd_resume, "bring a paused sandbox back"},
    {"run", cmd_run, "create a sandbox, run one command in it, remove it"},
    {"cp", cmd_cp, "copy files or directories into or out of a sandbox"},
    {"ls", cmd_ls, "list sandboxes"},
    {"inspect", cmd_inspect, "show a sandbox's state, limits, usage and cost"},
    {"rm", cmd_rm, "terminate sandboxes"},
    {"port", cmd_port, "open a port of a sandbox and print its URL"},
    {"info", cmd_info, "show the daemon's capacity and prices"},
    {"image", cmd_image, "import, list, inspect and remove images"},
    {"volume", cmd_volume, "create, list, inspect and remove named volumes"},
    {"grpo", cmd_grpo, "run GRPO episodes against a trainer"},
    {"nodes", cmd_nodes, "show the fleet's nodes, their capacity and health"},
    {"node", cmd_node, "drain or undrain a node of the fleet"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: sbx [--host ENDPOINTS] [--json] COMMAND [ARGS...]\n\n"
               "Commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nGlobal options (also accepted after the command):\n"
               "  --host ENDPOINTS  unix:/path.sock, a socket path or http://host:port; several\n"
               "                    separated by commas spread sandboxes by free capacity\n"
               "                    (default: $SBX_HOST, else " SBX_DEFAULT_SOCKET ");\n"
               "                    a fleet: etcd://host:2379/prefix or any node's URL\n"
               "  --cacert FILE     CA certificate(s) for https:// endpoints (also $SBX_CA)\n"
               "  --json            machine-readable output\n"
               "  --help, --version\n"
               "Environment: SBX_HOST, SBX_TOKEN (bearer token for http:// endpoints), SBX_CA.\n"
               "Run 'sbx COMMAND --help' for a command's options.\n");
}

/* A closed stdin, stdout or stderr would be the next descriptor open()ed or socket()ed: libsbx's
 * socket, read as input or written with output. Make each closed one /dev/null (as coreutils
 * does). Returns -1 when that fails. */
static int open_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR); /* the lowest free descriptor: fd */
        if (n != fd) {
            if (n >= 0)
                close(n);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (open_std_fds() < 0) /* fd 2 is stderr or still closed */
        return cli_error("cannot open /dev/null: %s", strerror(errno));
    /* A reader that goes away (`sbx run ... | head`) is an EPIPE, not a death: sbx run's exit
     * handler must still end its sandbox (stream.c exits 141 for it). sbx starts no programs. */
    signal(SIGPIPE, SIG_IGN);
    opterr = 0; /* the subcommands say what is wrong with a flag, once (cli_bad_option) */
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("sbx %s\n", SBX_VERSION);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            cli_opts.json = true;
        } else if (strcmp(a, "--host") == 0 && i + 1 < argc) {
            cli_opts.host = argv[++i];
        } else if (strncmp(a, "--host=", 7) == 0) {
            cli_opts.host = a + 7;
        } else if ((strcmp(a, "--cacert") == 0 && i + 1 < argc) ||
                   strncmp(a, "--cacert=", 9) == 0) {
            cli_common_opt(CLI_OPT_CACERT, a[8] == '=' ? a + 9 : argv[++i]);
        } else if (strcmp(a, "--host") == 0 || strcmp(a, "--cacert") == 0) {
            fprintf(stderr, "sbx: flag needs an argument: %s (see sbx --help)\n", a);
            return CLI_EXIT_USAGE;
        } else {
            fprintf(stderr, "sbx: unknown option %s (see sbx --help)\n", a);
            return CLI_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(argv[i], commands[k].name) == 0)
            return commands[k].fn(argc - i, argv + i);
    fprintf(stderr, "sbx: unknown command \"%s\" (see sbx --help)\n", argv[i]);
    return CLI_EXIT_USAGE;
}
