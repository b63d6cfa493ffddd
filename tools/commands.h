/* The `grist` CLI's subcommands, dispatched by tools/grist.c; one file per group (cmd_*.c). */
#ifndef GRIST_TOOLS_COMMANDS_H
#define GRIST_TOOLS_COMMANDS_H

/* Subcommands: each takes the arguments after its own name (argv[0] is the name). */
int cmd_order(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_write(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_load(int argc, char **argv);

#endif
