/* Mixtures on the command line: the --mix weights and the FILE groups they weigh (load, order). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Weight @k (1-based) is the text [@s, @s + @len): a positive, finite decimal number. */
static int parse_weight(const char *s, size_t len, size_t k, double *out)
{
	char item[64], *end;
	double w;

	if (len == 0)
		return cli_usage_error("--mix: weight %zu is empty (expected W1,W2,... with numbers > 0)", k);
	if (len >= sizeof(item))
		return cli_usage_error("--mix: weight %zu ('%.*s...') is too long", k, 20, s);
	memcpy(item, s, len);
	item[len] = '\0';
	/* strtod alone would also take "inf", "nan", hex floats and leading blanks */
	if (strspn(item, "0123456789.eE+-") != len || !((item[0] >= '0' && item[0] <= '9') || item[0] == '.' ||
							   item[0] == '-' || item[0] == '+'))
		return cli_usage_error("--mix: weight %zu ('%s') is not a decimal number", k, item);
	w = strtod(item, &end);
	if (*end || end == item)
		return cli_usage_error("--mix: weight %zu ('%s') is not a decimal number", k, item);
	if (!isfinite(w))
		return cli_usage_error("--mix: weight %zu ('%s') is not a finite number", k, item);
	if (!(w > 0))
		return cli_usage_error("--mix: weight %zu is '%s'; weights must be > 0", k, item);
	*out = w;
	return 0;
}

int cli_parse_weights(const char *s, double **weights, size_t *n)
{
	const char *p, *comma;
	size_t count = 1, k = 0;
	double *w;
	int ret;

	*weights = NULL;
	*n = 0;
	for (p = s; *p; p++)
		count += *p == ',';
	w = calloc(count, sizeof(*w));
	if (!w)
		return cli_library_error(-ENOMEM);
	for (p = s; k < count; p = comma + 1) {
		comma = strchr(p, ',');
		if (!comma)
			comma = p + strlen(p);
		ret = parse_weight(p, (size_t)(comma - p), k + 1, &w[k]);
		if (ret) {
			free(w);
			return ret;
		}
		k++;
	}
	*weights = w;
	*n = count;
	return 0;
}

static bool is_separator(const char *arg)
{
	return !strcmp(arg, "+");
}

int cli_group_datasets(const char *const *args, size_t nargs, const double *weights, size_t nweights,
		       struct grist_dataset_spec **specs, size_t *n)
{
	struct grist_dataset_spec *sp;
	size_t groups = 1, i, d = 0, start = 0;
	bool grouped = false;

	*specs = NULL;
	*n = 0;
	if (nargs == 0)
		return cli_usage_error("no input file");
	if (weights) {
		for (i = 0; i < nargs; i++)
			if (is_separator(args[i]))
				groups++;
		grouped = groups > 1;
		if (!grouped)
			groups = nargs;
		if (groups != nweights)
			return cli_usage_error("--mix has %zu weight%s but %zu dataset%s %s given (%s)", nweights,
					       nweights == 1 ? "" : "s", groups, groups == 1 ? "" : "s",
					       groups == 1 ? "is" : "are",
					       grouped ? "groups of FILEs separated by '+'" : "one per FILE");
	}
	sp = calloc(groups, sizeof(*sp));
	if (!sp)
		return cli_library_error(-ENOMEM);
	for (i = 0; i <= nargs; i++) {
		/* a dataset ends at the end, at a '+' when grouped, after every FILE when not */
		if (i < nargs && !(grouped && is_separator(args[i])) && !(weights && !grouped && i > start))
			continue;
		if (i == start) {
			free(sp);
			return cli_usage_error("dataset %zu of --mix has no files ('+' must stand between FILEs)", d);
		}
		sp[d].paths = args + start;
		sp[d].num_paths = i - start;
		sp[d].weight = weights ? weights[d] : 1.0;
		d++;
		start = grouped ? i + 1 : i;
	}
	*specs = sp;
	*n = groups;
	return 0;
}
