/* `grist order`: print the global record indices a shard delivers, in delivery order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grist/format.h"
#include "grist/plan.h"
#include "cli.h"
#include "commands.h"

static const char order_usage[] =
	"usage: grist order [options] (--records N | FILE...)\n"
	"       grist order --mix W1,...,Wn [options] FILE...\n"
	"\n"
	"Print the global record indices in delivery order, one per line. With --mix, the\n"
	"FILEs are n datasets as in 'grist load --mix' (the d-th FILE, or the d-th group of\n"
	"FILEs between lone '+' arguments) and each line is D:INDEX, the dataset and the\n"
	"record's index within it.\n"
	"\n"
	"  --records N            a dataset of N records (instead of files)\n"
	"  --mix W1,...,Wn        mix n datasets with weights W > 0 (Grain's MapDataset.mix)\n"
	"  --group-size G         records per chunk with --records (default 1)\n"
	"  --seed S               shuffle seed (default {default:seed})\n"
	"  --epochs E             epochs to print; 0 = unbounded (default 1)\n"
	"  --shard I/K            print shard I of K (default {default:shard})\n"
	"  --shard-mode MODE      strided (default) or contiguous\n"
	"  --no-shuffle           index order in every epoch\n"
	"  --no-reshuffle         the same order in every epoch\n"
	"  --granularity G        record (default) or chunk\n"
	"  --window W             chunks shuffled together at chunk granularity (default {default:window})\n";

/* Buffered decimal output: printf per line would dominate the run time. */
struct out_buf {
	char data[1 << 16];
	size_t len;
	int failed;
};

static void out_flush(struct out_buf *o)
{
	if (o->len && !o->failed) {
		fwrite(o->data, 1, o->len, stdout);
		o->failed = cli_stdout_failed();
	}
	o->len = 0;
}

static void out_u64(struct out_buf *o, uint64_t v, char end)
{
	char tmp[24];
	size_t n = 0;

	if (o->len + sizeof(tmp) > sizeof(o->data))
		out_flush(o);
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		o->data[o->len++] = tmp[--n];
	o->data[o->len++] = end;
}

/* The value of option argv[*i] ("--name VALUE"); NULL when missing. */
static const char *option_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* The plan's view of the datasets: each one's files (records, chunk size) from their footers. */
static int plan_components(const struct grist_dataset_spec *specs, size_t n, struct grist_plan_file **files,
			   struct grist_plan_component *comps)
{
	struct grist_reader *reader;
	struct grist_file_info info;
	size_t total = 0, d, f, k = 0;
	int ret;

	for (d = 0; d < n; d++)
		total += specs[d].num_paths;
	*files = calloc(total, sizeof(**files));
	if (!*files)
		return -ENOMEM;
	for (d = 0; d < n; d++) {
		ret = grist_reader_open(specs[d].paths, specs[d].num_paths, NULL, &reader);
		if (ret < 0)
			return ret;
		comps[d].files = *files + k;
		comps[d].num_files = specs[d].num_paths;
		comps[d].weight = specs[d].weight;
		for (f = 0; f < specs[d].num_paths; f++, k++) {
			ret = grist_reader_file_info(reader, f, &info);
			if (ret < 0)
				break;
			(*files)[k].num_records = info.num_records;
			(*files)[k].group_size = info.group_size;
		}
		grist_reader_close(reader);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int cmd_order(int argc, char **argv)
{
	struct grist_plan_file file = { 0, 1 }, *files = NULL;
	struct grist_plan_component comp = { &file, 1, 1.0 }, *comps = &comp;
	struct grist_dataset_spec *specs = NULL;
	double *weights = NULL;
	size_t num_weights = 0, num_specs = 1;
	const char **paths = NULL;
	bool have_group_size = false;
	struct grist_plan_config cfg;
	struct grist_loader_config lc;
	struct grist_stream_cursor *cur = NULL;
	struct grist_stream *s = NULL;
	struct grist_stream_item it;
	struct out_buf *o = NULL;
	bool have_records = false;
	int i, ret, status = CLI_EXIT_OK, nfiles = 0;

	grist_plan_config_init(&cfg);
	grist_loader_config_init(&lc);
	lc.epochs = 1; /* order's default: one epoch */
	paths = calloc((size_t)argc, sizeof(*paths));
	if (!paths)
		return cli_library_error(-ENOMEM);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v;

		if (cli_is_help(a)) {
			cli_print_help(stdout, order_usage);
			goto out;
		}
		if (a[0] != '-') {
			paths[nfiles++] = a;
			continue;
		}
		if (!strcmp(a, "--no-shuffle") || !strcmp(a, "--no-reshuffle")) {
			status = cli_loader_option(a + 2, NULL, &lc);
			if (status)
				goto out;
			continue;
		}
		v = option_value(argc, argv, &i);
		if (!v) {
			status = cli_usage_error("%s needs a value", a);
			goto out;
		}
		if (!strcmp(a, "--mix")) {
			free(weights);
			weights = NULL;
			status = cli_parse_weights(v, &weights, &num_weights);
			if (status)
				goto out;
		} else if (!strcmp(a, "--records") || !strcmp(a, "--group-size")) {
			uint64_t x;

			if (!cli_parse_u64(v, &x)) {
				status = cli_usage_error("%s: '%s' is not a non-negative integer", a, v);
				goto out;
			}
			if (!strcmp(a, "--records")) {
				file.num_records = x;
				have_records = true;
			} else {
				if (!x) {
					status = cli_usage_error("--group-size must be >= 1");
					goto out;
				}
				file.group_size = x;
				have_group_size = true;
			}
		} else if (!strcmp(a, "--seed") || !strcmp(a, "--epochs") || !strcmp(a, "--window") ||
			   !strcmp(a, "--shard") || !strcmp(a, "--shard-mode") || !strcmp(a, "--granularity")) {
			/* the loader's options, parsed and bounded by the library's table as `load` does */
			status = cli_loader_option(a + 2, v, &lc);
			if (status)
				goto out;
		} else {
			status = cli_usage_error("unknown option '%s'", a);
			goto out;
		}
	}
	cfg.seed = lc.seed;
	cfg.epochs = lc.epochs;
	cfg.shuffle = !lc.no_shuffle;
	cfg.reshuffle = !lc.same_order_each_epoch;
	cfg.granularity = lc.granularity;
	cfg.window = lc.window_chunks ? lc.window_chunks : GRIST_PLAN_DEFAULT_WINDOW;
	cfg.shard_mode = lc.shard_mode;
	cfg.shard_index = lc.shard_index;
	cfg.shard_count = lc.shard_count ? lc.shard_count : 1;
	if ((nfiles && have_records) || (!nfiles && !have_records)) {
		status = cli_usage_error("give either --records N or FILEs");
		goto out;
	}
	if (nfiles && have_group_size) {
		status = cli_usage_error("--group-size applies to --records; FILEs have their own");
		goto out;
	}
	if (weights && !nfiles) {
		status = cli_usage_error("--mix needs FILEs, one dataset each or groups separated by '+'");
		goto out;
	}
	if (nfiles) {
		status = cli_group_datasets(paths, (size_t)nfiles, weights, num_weights, &specs, &num_specs);
		if (status)
			goto out;
		if (num_specs > 1) {
			comps = calloc(num_specs, sizeof(*comps));
			if (!comps) {
				status = cli_library_error(-ENOMEM);
				goto out;
			}
		}
		/* Record counts and chunk geometry come from the files' footers. */
		ret = plan_components(specs, num_specs, &files, comps);
		if (ret < 0) {
			status = cli_library_error(ret);
			goto out;
		}
	}

	cfg.components = comps;
	cfg.num_components = num_specs;
	ret = grist_stream_create(&cfg, &s);
	if (ret < 0) {
		status = cli_library_error(ret);
		goto out;
	}
	ret = grist_stream_cursor_create(s, &cur);
	o = malloc(sizeof(*o));
	if (ret < 0 || !o) {
		status = cli_library_error(ret < 0 ? ret : -ENOMEM);
		goto out;
	}
	o->len = 0;
	o->failed = 0;
	while ((ret = grist_stream_next(cur, &it)) == 1 && !o->failed) {
		if (num_specs > 1)
			out_u64(o, it.component, ':');
		out_u64(o, it.record, '\n');
	}
	out_flush(o);
	if (ret < 0)
		status = cli_library_error(ret);
	else if (o->failed || fflush(stdout) == EOF)
		status = CLI_EXIT_DATA; /* cli_finish_stdout() says why */
out:
	free(o);
	free(files);
	free(paths);
	free(specs);
	free(weights);
	if (comps != &comp)
		free(comps);
	grist_stream_cursor_destroy(cur);
	grist_stream_destroy(s);
	return status;
}
