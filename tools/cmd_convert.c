/* `grist convert`: TFRecord, text lines, folders or ArrayRecord files into (sharded) ArrayRecord files. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grist/format.h"
#include "common/error.h"
#include "format/options.h"
#include "cli.h"
#include "grist/remote.h"
#include "input.h"

/* TFDS names shards with five digits each, so this many is the most a name can say. */
#define SHARDS_MAX 99999

static const char convert_usage[] =
	"usage: grist convert [--from tfrecord|lines|dir|arrayrecord] [--options OPTS] [--shards N]\n"
	"                     [--progress|--no-progress] [--no-check] INPUT... OUT\n\n"
	"Write the records of every INPUT, in order, to the ArrayRecord file OUT (or to N shards).\n"
	"  --from FORMAT   tfrecord: TFRecord files, plain or GZIP (every CRC-32C checked);\n"
	"                  lines: one record per line, without the newline (plain or GZIP text);\n"
	"                  dir: one record per regular file under each folder, sorted bytewise by relative path;\n"
	"                  arrayrecord: re-encode ArrayRecord files with other options.\n"
	"                  Default: told by each INPUT's file type and first bytes.\n"
	"  --options OPTS  writer options, e.g. 'group_size:64,zstd:3,max_parallelism:4'\n"
	"                  (max_parallelism:N compresses N chunks at once; default: the official defaults)\n"
	"  --shards N      write OUT-00000-of-0000N ... : contiguous runs of records whose counts differ by\n"
	"                  at most one; their concatenation is the input\n"
	"  --progress      a progress line on stderr (the default when stderr is a terminal)\n"
	"  --no-progress   no progress line\n"
	"  --no-check      TFRecord: do not check each record's data CRC (lengths are still checked)\n\n"
	"Every output goes to a temporary in its folder and is renamed into place only when all are\n"
	"complete and synced: after an error or a signal nothing is left at OUT and no temporary remains.\n"
	"Exit status: 0 done, 1 bad input or an I/O error (the message names the file and byte or record),\n"
	"2 usage error.\n";

struct convert {
	const struct input_ops **ops;  /* per INPUT */
	char **inputs;
	int ninputs;
	const char *out;
	const char *options;
	uint64_t shards;
	bool check_data;
	bool progress;

	/* The outputs: every shard stays open (finished, not committed) until all are done. */
	struct grist_writer **w;
	char **names;
	uint64_t *quota;           /* records per shard */

	/* Progress. */
	struct timespec start, last;
	uint64_t records, bytes;   /* written so far */
	uint64_t in_total;         /* input bytes on disk, 0 when unknown */
	uint64_t in_done_before;   /* input bytes of the INPUTs already finished */
};

static void human_bytes(char *out, size_t cap, double b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

/* One progress line: records, bytes, rate and, when the input size is known, percent and ETA. */
static void show_progress(struct convert *c, const struct input *cur, bool final)
{
	double t = cli_seconds_since(&c->start);
	char done[32], rate[32], eta[48] = "";

	human_bytes(done, sizeof(done), (double)c->bytes);
	human_bytes(rate, sizeof(rate), t > 0 ? (double)c->bytes / t : 0);
	if (c->in_total) {
		uint64_t in = c->in_done_before + (cur ? cur->ops->done_bytes(cur) : 0);
		double f = (double)in / (double)c->in_total;

		if (f > 1)
			f = 1;
		if (final)
			snprintf(eta, sizeof(eta), "  100%%  %.1f s", t);
		else if (f > 0)
			snprintf(eta, sizeof(eta), "  %3.0f%%  ETA %.0f s", f * 100, t / f - t);
	}
	fprintf(stderr, "\r%s: %llu records  %s  %.0f records/s  %s/s%s\033[K%s", cli_command_name,
		(unsigned long long)c->records, done, t > 0 ? (double)c->records / t : 0, rate, eta,
		final ? "\n" : "");
	fflush(stderr);
}

static int parse_args(int argc, char **argv, struct convert *c)
{
	enum { OPT_FROM = 1, OPT_OPTIONS, OPT_SHARDS, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_NO_CHECK, OPT_HELP };
	static const struct option longopts[] = {
		{ "from", required_argument, NULL, OPT_FROM },
		{ "options", required_argument, NULL, OPT_OPTIONS },
		{ "shards", required_argument, NULL, OPT_SHARDS },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
		{ "no-check", no_argument, NULL, OPT_NO_CHECK },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const struct input_ops *from = NULL;
	struct grist_writer_options wo;
	int opt, i, ret, first = 0;
	bool given;

	c->shards = 1;
	c->check_data = true;
	c->progress = isatty(STDERR_FILENO);
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_FROM:
			from = input_find(optarg);
			if (!from)
				return cli_usage_error("--from: unknown format '%s' (tfrecord, lines, dir, arrayrecord)", optarg);
			break;
		case OPT_OPTIONS:
			c->options = optarg;
			break;
		case OPT_SHARDS:
			if (!cli_parse_u64(optarg, &c->shards) || c->shards < 1 || c->shards > SHARDS_MAX)
				return cli_usage_error("--shards: expected 1..%d, got '%s'", SHARDS_MAX, optarg);
			break;
		case OPT_PROGRESS:
			c->progress = true;
			break;
		case OPT_NO_PROGRESS:
			c->progress = false;
			break;
		case OPT_NO_CHECK:
			c->check_data = false;
			break;
		case 'h':
		case OPT_HELP:
			fputs(convert_usage, stdout);
			return -1;
		default:
			return cli_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind < 2)
		return cli_usage_error("need at least one INPUT and the OUT name");
	c->inputs = argv + optind;
	c->ninputs = argc - optind - 1;
	c->out = argv[argc - 1];
	/* Bad options are a usage error before any input is read. */
	ret = grist_writer_options_parse(c->options, &wo);
	if (ret)
		return cli_library_error(ret);
	c->ops = calloc((size_t)c->ninputs, sizeof(*c->ops));
	if (!c->ops)
		return cli_library_error(-ENOMEM);
	given = from != NULL;
	for (i = 0; i < c->ninputs; i++) {
		if (given) {
			if (grist_path_is_url(c->inputs[i]) && from != &input_arrayrecord_ops)
				return cli_usage_error("%s: URLs are read as ArrayRecord only (--from arrayrecord)",
						       c->inputs[i]);
			c->ops[i] = from;
			continue;
		}
		ret = input_detect(c->inputs[i], &c->ops[i]);
		if (ret)
			return cli_library_error(ret); /* unsure: 2, give --from; unreadable: 1 */
		if (!c->ops[i])
			continue; /* empty */
		if (!from)
			from = c->ops[i], first = i;
		else if (c->ops[i] != from)
			return cli_usage_error("%s holds %s, but %s holds %s: give inputs of one format, or --from",
					       c->inputs[i], c->ops[i]->name, c->inputs[first], from->name);
	}
	/* Empty files take the others' format; all empty gives no records in any format. */
	for (i = 0; i < c->ninputs; i++)
		if (!c->ops[i])
			c->ops[i] = from ? from : &input_lines_ops;
	return 0;
}

static int input_open(struct convert *c, int i, struct input *in)
{
	memset(in, 0, sizeof(*in));
	in->ops = c->ops[i];
	in->path = c->inputs[i];
	in->check_data = c->check_data;
	return in->ops->open(in, in->path);
}

/* Count every INPUT's records, for the shard sizes: from footers or listings, else one pass of framing checks. */
static int count_records(struct convert *c, uint64_t *total)
{
	struct input in;
	const uint8_t *p;
	size_t n;
	int i, ret;

	*total = 0;
	for (i = 0; i < c->ninputs; i++) {
		uint64_t k = 0;

		ret = input_open(c, i, &in);
		if (ret)
			return ret;
		/* The data CRCs are checked on the writing pass; counting needs the framing only. */
		in.check_data = false;
		if (in.ops->count)
			ret = in.ops->count(&in, &k);
		else
			while ((ret = in.ops->next(&in, &p, &n)) > 0)
				k++;
		in.ops->close(&in);
		if (ret < 0)
			return ret;
		*total += k;
	}
	return 0;
}

static int open_shard(struct convert *c, uint64_t s)
{
	int ret;

	if (c->shards == 1)
		c->names[s] = strdup(c->out);
	else if (asprintf(&c->names[s], "%s-%05llu-of-%05llu", c->out, (unsigned long long)s,
			  (unsigned long long)c->shards) < 0)
		c->names[s] = NULL;
	if (!c->names[s])
		return grist_fail(-ENOMEM, "out of memory");
	ret = grist_writer_open(c->names[s], c->options, &c->w[s]);
	return ret;
}

/*
 * Rename every finished shard into place with the cleanup signals held, so
 * the set appears whole or (after a failed rename, whose predecessors are
 * removed again) not at all.
 */
static int commit_all(struct convert *c)
{
	sigset_t old;
	uint64_t s, k;
	int ret = 0;

	cli_signals_hold(&old);
	for (s = 0; s < c->shards; s++) {
		struct stat tmp, now;
		bool have_tmp = stat(grist_writer_temp_path(c->w[s]), &tmp) == 0;

		ret = grist_writer_commit(c->w[s]);
		c->w[s] = NULL;
		if (ret) {
			for (k = 0; k < s; k++)
				unlink(c->names[k]);
			/* Failing after its rename (syncing the folder), this shard is ours too; never a file we did not make. */
			if (have_tmp && stat(c->names[s], &now) == 0 && now.st_ino == tmp.st_ino && now.st_dev == tmp.st_dev)
				unlink(c->names[s]);
			break;
		}
	}
	cli_signals_release(&old);
	return ret;
}

static int run_convert(struct convert *c)
{
	struct input in = { 0 };
	uint64_t total = 0, s = 0, in_shard = 0;
	const uint8_t *p;
	size_t n;
	int i, ret;

	c->w = calloc(c->shards, sizeof(*c->w));
	c->names = calloc(c->shards, sizeof(*c->names));
	c->quota = calloc(c->shards, sizeof(*c->quota));
	if (!c->w || !c->names || !c->quota)
		return grist_fail(-ENOMEM, "out of memory");
	if (c->shards > 1) {
		ret = count_records(c, &total);
		if (ret)
			return ret;
		for (s = 0; s < c->shards; s++)
			c->quota[s] = total / c->shards + (s < total % c->shards);
		s = 0;
	} else {
		c->quota[0] = UINT64_MAX;
	}
	/* The ETA needs every input's size up front; a folder's is known only once listed. */
	for (i = 0; i < c->ninputs; i++) {
		struct stat st;

		if (!c->ops[i]->done_bytes || stat(c->inputs[i], &st) || !S_ISREG(st.st_mode)) {
			c->in_total = 0;
			break;
		}
		c->in_total += (uint64_t)st.st_size;
	}
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	c->last = c->start;
	ret = open_shard(c, 0);
	if (ret)
		return ret;
	for (i = 0; i < c->ninputs; i++) {
		ret = input_open(c, i, &in);
		if (ret)
			return ret;
		while ((ret = in.ops->next(&in, &p, &n)) > 0) {
			while (in_shard == c->quota[s]) {
				if (s + 1 == c->shards) {
					ret = grist_fail(-EBADMSG, "%s: more records than the counting pass found (%llu): did the input change?",
							 in.path, (unsigned long long)total);
					goto close_input;
				}
				ret = grist_writer_finish(c->w[s]);
				if (!ret)
					ret = open_shard(c, ++s);
				if (ret)
					goto close_input;
				in_shard = 0;
			}
			ret = grist_writer_write(c->w[s], p, n);
			if (ret)
				break;
			in_shard++;
			c->records++;
			c->bytes += n;
			if (c->progress && !(c->records & 1023) && cli_seconds_since(&c->last) >= 0.2) {
				clock_gettime(CLOCK_MONOTONIC, &c->last);
				show_progress(c, &in, false);
			}
		}
		if (!ret && c->in_total)
			c->in_done_before += in.ops->done_bytes(&in);
close_input:
		in.ops->close(&in);
		if (ret < 0)
			return ret;
	}
	if (c->shards > 1 && c->records != total)
		return grist_fail(-EBADMSG, "%s: %llu records, but the counting pass found %llu: did the input change?",
				  c->inputs[0], (unsigned long long)c->records, (unsigned long long)total);
	/* Shards past the last record (fewer records than shards) are written empty. */
	for (;;) {
		ret = grist_writer_finish(c->w[s]);
		if (ret || s + 1 == c->shards)
			break;
		ret = open_shard(c, ++s);
		if (ret)
			break;
	}
	if (!ret)
		ret = commit_all(c);
	if (!ret && c->progress)
		show_progress(c, NULL, true);
	return ret;
}

int cmd_convert(int argc, char **argv)
{
	struct convert c = { 0 };
	uint64_t s;
	int ret;

	ret = parse_args(argc, argv, &c);
	if (ret) {
		free(c.ops);
		return ret < 0 ? CLI_EXIT_OK : ret;
	}
	cli_cleanup_on_signals();
	ret = run_convert(&c);
	if (ret) {
		if (c.progress)
			fputc('\n', stderr);
		/* Input, output and memory failures alike are data errors: the options were checked already. */
		cli_library_error(ret);
		ret = CLI_EXIT_DATA;
	}
	for (s = 0; c.w && s < c.shards; s++)
		grist_writer_abort(c.w[s]);
	for (s = 0; c.names && s < c.shards; s++)
		free(c.names[s]);
	free(c.w);
	free(c.names);
	free(c.quota);
	free(c.ops);
	return ret;
}
