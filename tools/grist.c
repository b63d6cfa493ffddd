/* The `grist` command: git-style dispatch to one subcommand per verb. */
#include <stdio.h>
#include <string.h>

#include "grist/error.h"
#include "cli.h"
#include "commands.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	/* Subcommands, one line each: { name, function, one-line summary }. */
	{ "info", cmd_info, "records, chunks, codec and options of ArrayRecord files" },
	{ "cat", cmd_cat, "write every record in index order" },
	{ "get", cmd_get, "write the records at given global indices" },
	{ "verify", cmd_verify, "check every chunk, block header and hash of files" },
	{ "write", cmd_write, "write stdin lines as records of a new ArrayRecord file" },
	{ "convert", cmd_convert, "TFRecord, text lines, folders or ArrayRecord into ArrayRecord (shards, threads)" },
	{ "load", cmd_load, "run the loader: shuffled, sharded batches with digests and checkpoints" },
	{ "order", cmd_order, "print the record indices a shard delivers, in order" },
	{ "tokenize", cmd_tokenize, "print the token ids of text files (tiktoken ranks or SentencePiece), JSON lines" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: grist <command> [options] [args]\n\n"
		     "grist %s reads and writes ArrayRecord files and feeds training jobs.\n\n"
		     "commands:\n", grist_version());
	for (i = 0; commands[i].name; i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nA FILE may be an s3://, gs:// or http(s):// URL (s3:// and gs:// globs are listed);\n"
		     "any command takes --remote OPTS, e.g. timeout_ms:5000,retries:3,inflight:32,coalesce:1M\n"
		     "(see include/grist/remote.h).\n"
		     "\nRun 'grist <command> --help' for a command's options, 'grist --version' for the version.\n"
		     "Exit status: 0 ok, 1 data or I/O error, 2 usage error.\n");
}

/* The library never prints: its diagnostics come here, and the CLI prints them as it always has. */
static void print_log(void *ctx, enum grist_log_level level, const char *message)
{
	(void)ctx;
	(void)level;
	fprintf(stderr, "grist: %s\n", message);
}

int main(int argc, char **argv)
{
	static char name[64];
	size_t i;

	cli_install_sigbus();
	grist_set_log_callback(print_log, NULL);
	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[1]) || !strcmp(argv[1], "help")) {
		usage(stdout);
		return cli_finish_stdout(CLI_EXIT_OK);
	}
	if (!strcmp(argv[1], "--version")) {
		printf("grist %s\n", grist_version());
		return cli_finish_stdout(CLI_EXIT_OK);
	}
	for (i = 0; commands[i].name; i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		int sub_argc = argc - 1, ret;
		char **sub_argv = argv + 1;

		snprintf(name, sizeof(name), "grist %s", commands[i].name);
		cli_command_name = name;
		ret = cli_remote_args(&sub_argc, &sub_argv);
		if (ret)
			return ret;
		return cli_finish_stdout(commands[i].run(sub_argc, sub_argv));
	}
	fprintf(stderr, "grist: unknown command '%s'\n\n", argv[1]);
	/* The benchmarks left the CLI for a program of their own (bench/): say where they went. */
	if (!strcmp(argv[1], "bench"))
		fprintf(stderr, "Benchmarks are the program grist-bench now (same options): grist-bench --help\n\n");
	usage(stderr);
	return CLI_EXIT_USAGE;
}
