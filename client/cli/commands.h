/* The sbx CLI's subcommands: one file each (client/cli/cmd_<name>.c), all built only on the
 * public libsbx header. Each returns the process exit status. */
#pragma once

int cmd_grpo(int argc, char **argv);
