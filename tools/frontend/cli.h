/*
 * The front ends' shared helpers (the `grist` CLI in tools/ and grist-bench in bench/ both link
 * this static library; neither depends on the other): exit codes, error printing, strict number
 * and loader-option parsing, help texts from the option table, --mix dataset groups, URLs on
 * the command line, signals. Not part of libgrist and never installed.
 */
#ifndef GRIST_FRONTEND_CLI_H
#define GRIST_FRONTEND_CLI_H

#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/loader.h"

/* Exit status of every subcommand. */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_DATA = 1,  /* a data or I/O error */
	CLI_EXIT_USAGE = 2, /* bad command line */
};

/* The name of the running subcommand, for messages ("grist info"). */
extern const char *cli_command_name;

/* Print "grist CMD: <message>" on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Report a failed library call: prints the detailed message of grist_last_error()
 * (or the code's text) and returns the exit status it maps to: -EINVAL is a
 * usage error (2), everything else a data or I/O error (1), the rule of grist/error.h.
 */
int cli_library_error(int code);

/*
 * grist_loader_next() for a command's batch loop: *@b is the next batch, NULL at the end.
 * Returns 0, or cli_library_error()'s exit status when the loader failed.
 */
int cli_loader_next(struct grist_loader *l, struct grist_batch **b);

/*
 * True once a write to stdout has failed (stdio's error flag); remembers the errno of
 * the first failure for cli_finish_stdout(). Long outputs call it to stop early.
 */
bool cli_stdout_failed(void);

/*
 * Flush and close stdout after a command. Return: @rc, or CLI_EXIT_DATA after printing
 * "cannot write standard output: <reason>" when any write, the flush or the close
 * failed and @rc was 0. main() calls it once for every command.
 */
int cli_finish_stdout(int rc);

/*
 * Turn SIGBUS from a mapped input (--io mmap, verify) whose file shrank into exit 1 with
 * "<file>: byte <N>: ..." on stderr, instead of a silent death. main() installs it.
 */
void cli_install_sigbus(void);

/* Parse a whole decimal u64 (no sign, no junk, no overflow). */
bool cli_parse_u64(const char *s, uint64_t *out);

/*
 * The loader knobs that `load` and grist-bench share. A command lists the ones it takes
 * in its getopt table with val CLI_OPT_LOADER and hands them to cli_loader_option()
 * by long name, so each knob is parsed, bounded and explained in one place.
 */
enum { CLI_OPT_LOADER = 1000 };

/*
 * cli_loader_option() - apply --NAME ARG to @c through the library's option table
 * (grist/options.h): NAME is a table option spelled with dashes (batch-size, queue-depth,
 * read-ahead, ...) or one of the flags contiguous-shards, no-shuffle, no-reshuffle,
 * same-order, drop-remainder (ARG is then NULL).
 * Return: 0, or CLI_EXIT_USAGE after printing the table's message.
 */
int cli_loader_option(const char *name, const char *arg, struct grist_loader_config *c);

/*
 * cli_parse_weights() - parse the --mix list "W1,W2,...,Wn": n >= 1 positive, finite
 * decimal numbers separated by commas.
 * @weights: set to a malloc'd array of the @n weights; the caller frees it.
 * Return: 0, or CLI_EXIT_USAGE after printing which weight is wrong and why.
 */
int cli_parse_weights(const char *s, double **weights, size_t *n);

/*
 * cli_group_datasets() - the datasets that the FILE arguments @args[0..@nargs) name.
 * Without weights (@weights NULL) all FILEs are one dataset of weight 1, and '+' is an
 * ordinary file name. With @nweights weights, a lone '+' argument separates datasets of
 * several FILEs each; with no '+', each FILE is a dataset of its own. There must then be
 * exactly @nweights datasets, each of at least one FILE; dataset d gets weights[d].
 * @specs: set to a malloc'd array of @n specs whose paths point into @args; free it.
 * Return: 0, or CLI_EXIT_USAGE after printing what is wrong.
 */
int cli_group_datasets(const char *const *args, size_t nargs, const double *weights, size_t nweights,
		       struct grist_dataset_spec **specs, size_t *n);

/*
 * cli_cleanup_on_signals() - on SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE and
 * SIGXFSZ, a thread of the CLI's own (sigwait(), no handler) aborts every writer
 * (grist_writer_abort_all(): temporaries unlinked, uploads aborted, at most 10 s)
 * and the process dies of the signal; a second signal meanwhile kills at once.
 * Signals the parent ignored stay ignored. Every command that writes calls it
 * first, before any thread is made: the threads inherit the blocked signals.
 */
void cli_cleanup_on_signals(void);

/*
 * cli_signals_settle() - where a command has returned (cli_finish_stdout()): when
 * a signal is being handled, wait for the signal thread to end the process, so it
 * dies of the signal rather than exiting with the command's status.
 */
void cli_signals_settle(void);

/* Seconds of CLOCK_MONOTONIC since *@t0 (progress lines, --stats). */
double cli_seconds_since(const struct timespec *t0);

/* `grist load --options`: the library's option table, with bounds, defaults and help. */
void cli_print_loader_options(FILE *out);

/*
 * cli_print_help() - print a command's usage @text with each {default:NAME} replaced by the
 * default of loader option NAME and each {range:NAME} by its bounds "MIN..MAX", both from
 * the library's table (grist/options.h), so no help text repeats a library number that
 * could drift from it. Anything else in braces is printed as written.
 */
void cli_print_help(FILE *out, const char *text);

/*
 * cli_loader_option_default() - set option @name of @c to the table's default, for a front
 * end that must name the value it runs with (grist-bench's reports, its fio baseline's
 * depth). Return: 0, or CLI_EXIT_USAGE when the default is not a value (threads: "online
 * CPUs").
 */
int cli_loader_option_default(const char *name, struct grist_loader_config *c);

/* User + system CPU seconds of the process so far (getrusage). */
double cli_cpu_seconds(void);

/* True when the argument is -h or --help. */
bool cli_is_help(const char *arg);

/*
 * Take the global --remote OPTS out of @argv (it sets the remote options for the run) and
 * expand s3:// and gs:// arguments holding * ? [ into the sorted objects they match
 * (grist_remote_glob()). 0, or an exit status after printing why.
 */
int cli_remote_args(int *argc, char ***argv);

#endif
