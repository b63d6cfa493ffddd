/* The option table's check of a configuration whose fields were set directly (loader.c). */
#ifndef GRIST_EXEC_OPTIONS_TABLE_H
#define GRIST_EXEC_OPTIONS_TABLE_H

#include "grist/loader.h"

/*
 * grist_loader_options_check() - every numeric field that is set (non-zero) lies within
 * its option's bounds. Return: 0 or -EINVAL naming the option and its range.
 */
int grist_loader_options_check(const struct grist_loader_config *c);

#endif
