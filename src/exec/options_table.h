/* The option table's check of a configuration whose fields were set directly, and the defaults it shares with loader.c. */
#ifndef GRIST_EXEC_OPTIONS_TABLE_H
#define GRIST_EXEC_OPTIONS_TABLE_H

#include "grist/loader.h"

/*
 * prefetch: the default and the bound, once. The table shows them (as text) to every front
 * end, the loader resolves 0 to the default, and a front end that needs the resolved value
 * asks grist_loader_get_config().
 */
#define GRIST_DEFAULT_PREFETCH 4
#define GRIST_MAX_PREFETCH 64

/*
 * grist_loader_options_check() - every numeric field that is set (non-zero) lies within
 * its option's bounds. Return: 0 or -EINVAL naming the option and its range.
 */
int grist_loader_options_check(const struct grist_loader_config *c);

#endif
