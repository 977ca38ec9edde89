/* The sbx CLI's subcommands: one file each (client/cli/cmd_<name>.c), all built only on the
 * public libsbx header. Each returns the process exit status. */
#pragma once

int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_port(int argc, char **argv); /* inbound ports */
int cmd_info(int argc, char **argv);
int cmd_grpo(int argc, char **argv);
int cmd_image(int argc, char **argv);  /* images */
int cmd_volume(int argc, char **argv); /* volumes */
int cmd_commit(int argc, char **argv);
int cmd_pause(int argc, char **argv);  /* pause to disk */
int cmd_resume(int argc, char **argv); /* its way back (cmd_pause.c) */
int cmd_ps(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_kill(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_node(int argc, char **argv); /* drain, undrain */
