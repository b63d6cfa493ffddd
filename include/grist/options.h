/*
 * grist/options.h - the loader's options by name: one table of names, types, bounds,
 * defaults and help, which every front end parses through.
 *
 * The grist CLI (load, bench, order), the Python package and C callers that take options
 * as text (a config file, a command line of their own) set struct grist_loader_config
 * fields with grist_loader_config_set(), so a value is accepted or refused the same way,
 * with the same message, everywhere. grist_loader_option_at() walks the table for help
 * text and for the bounds (as zstd's ZSTD_cParam_getBounds does).
 *
 * Values are text:
 *   whole numbers   decimal, no sign: "32";
 *   sizes (bytes)   a whole number, or one with a binary suffix: K, M, G, T or KiB, MiB,
 *                   GiB, TiB, all powers of 1024 (as fio and dd read K): "4M" and "4MiB"
 *                   are both 4194304. Decimal units (kB, MB) are refused, not guessed;
 *   booleans        true/false, 1/0, yes/no, on/off;
 *   choices         one of the listed words.
 */
#ifndef GRIST_OPTIONS_H
#define GRIST_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "grist/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

enum grist_option_type {
	GRIST_OPTION_UINT = 0,  /* a whole number in [min, max] */
	GRIST_OPTION_SIZE,      /* bytes in [min, max], suffixes as above */
	GRIST_OPTION_BOOL,
	GRIST_OPTION_CHOICE,    /* one of choices */
	GRIST_OPTION_TEXT,      /* its own small grammar, given in choices (shard "I/K") */
};

/** One option. Owned by the library; fields are only appended. */
struct grist_option {
	const char *name;          /* "queue_depth"; the CLI spells it --queue-depth */
	enum grist_option_type type;
	uint64_t min, max;         /* UINT and SIZE: the accepted range */
	const char *choices;       /* CHOICE: "uring, pread, ref"; TEXT: its grammar */
	const char *default_value; /* as text; what leaving it unset means */
	const char *help;          /* one sentence */
};

/**
 * grist_loader_option_at() - option @i of the table, in help order; NULL past the end.
 */
GRIST_API const struct grist_option *grist_loader_option_at(size_t i);

/**
 * grist_loader_option_find() - the option called @name ('-' and '_' are the same);
 * NULL when there is none.
 */
GRIST_API const struct grist_option *grist_loader_option_find(const char *name);

/**
 * grist_loader_config_set() - parse @value for option @name and set it in @cfg.
 * @cfg: initialised with grist_loader_config_init().
 *
 * Return: 0, or -EINVAL with a message naming the option and what it accepts
 * ("queue_depth: '40000' is not a whole number in 1..32768"); @cfg is unchanged then.
 * -EINVAL too for an option whose field lies beyond the caller's struct (an older
 * caller setting a newer option).
 * Thread-safety: any thread; @cfg is the caller's.
 */
GRIST_API int grist_loader_config_set(struct grist_loader_config *cfg, const char *name, const char *value);

/**
 * grist_parse_size() - a byte count as grist reads every size: digits, optionally
 * followed by K, M, G, T, KiB, MiB, GiB or TiB (powers of 1024).
 * Return: 0, or -EINVAL (no message recorded) for anything else or an overflow.
 */
GRIST_API int grist_parse_size(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
