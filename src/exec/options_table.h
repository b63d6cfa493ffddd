/* The option table's check of a configuration whose fields were set directly, and the defaults it shares with loader.c. */
#ifndef GRIST_EXEC_OPTIONS_TABLE_H
#define GRIST_EXEC_OPTIONS_TABLE_H

#include "grist/loader.h"

/*
 * The defaults the loader and the engine resolve, once. The table shows them (as text, so
 * each is a plain number) to every front end: the CLI's and grist-bench's help, and the
 * values grist-bench runs with, are read from the table (tools/frontend/cli.c), and a front end that
 * needs a resolved value asks grist_loader_get_config() or grist_loader_stats().
 */
#define GRIST_DEFAULT_PREFETCH 4
#define GRIST_MAX_PREFETCH 64
#define GRIST_DEFAULT_QUEUE_DEPTH 64         /* local files; URLs get a deeper window (engine_sizing.c) */
#define GRIST_DEFAULT_MAX_BATCH_MIB 64       /* max_batch_bytes, in MiB */
#define GRIST_DEFAULT_READ_AHEAD_MAX_MIB 64  /* the default read-ahead per thread is at most this */

/*
 * grist_loader_options_check() - every numeric field that is set (non-zero) lies within
 * its option's bounds. Return: 0 or -EINVAL naming the option and its range.
 */
int grist_loader_options_check(const struct grist_loader_config *c);

#endif
