/* `grist convert`: the command line of grist_convert() (grist/convert.h), and its progress line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grist/convert.h"
#include "cli.h"
#include "commands.h"

static const char convert_usage[] =
	"usage: grist convert [--from tfrecord|lines|dir|arrayrecord] [--options OPTS] [--shards N]\n"
	"                     [--progress|--no-progress] [--no-check] INPUT... OUT\n"
	"       grist convert --from csv --features SPEC [options] CSV... OUT\n"
	"       grist convert --from imagefolder [--max-side N [--jpeg-quality Q]] [options] ROOT OUT_VERSION_FOLDER\n\n"
	"Write the records of every INPUT, in order, to the ArrayRecord file OUT (or to N shards).\n"
	"  --from FORMAT   tfrecord: TFRecord files, plain or GZIP (every CRC-32C checked);\n"
	"                  lines: one record per line, without the newline (plain or GZIP text);\n"
	"                  dir: one record per regular file under each folder, sorted bytewise by relative path;\n"
	"                  arrayrecord: re-encode ArrayRecord files with other options;\n"
	"                  csv: one tf.train.Example per row (a header row names the columns; needs --features);\n"
	"                  imagefolder: ROOT/<split>/<label>/<image> into a TFDS dataset folder (shards,\n"
	"                  features.json, dataset_info.json) that tfds.builder_from_directory() opens.\n"
	"                  Default: told by each INPUT's file type and first bytes.\n"
	"  --options OPTS  writer options, e.g. 'group_size:64,zstd:3,max_parallelism:4'\n"
	"                  (max_parallelism:N compresses N chunks at once; default: the official defaults)\n"
	"  --shards N      write OUT-00000-of-0000N ... : contiguous runs of records whose counts differ by\n"
	"                  at most one; their concatenation is the input\n"
	"  --progress      a progress line on stderr (the default when stderr is a terminal)\n"
	"  --no-progress   no progress line\n"
	"  --no-check      TFRecord: do not check each record's data CRC (lengths are still checked)\n"
	"  --features SPEC csv: the columns to write and their types, NAME:TYPE[,NAME:TYPE...] with TYPE\n"
	"                  int64, float32 or text, and [] after it for a list split at spaces\n"
	"                  (e.g. 'age:int64,score:float32,name:text,tags:text[]')\n"
	"  --max-side N    imagefolder: an image whose longer side is over N pixels is resized to N (Pillow's\n"
	"                  antialiased bilinear) and re-encoded as JPEG; smaller ones are written as read.\n"
	"                  A line then says how much smaller the images got\n"
	"  --jpeg-quality Q  the re-encoding's quality, 1..100 (default 90)\n\n"
	"Every output goes to a temporary in its folder and is renamed into place only when all are\n"
	"complete and synced: after an error or a signal nothing is left at OUT and no temporary remains.\n"
	"An OUT that is an INPUT (the same file by any name, or inside an INPUT folder) is refused.\n"
	"Exit status: 0 done, 1 bad input or an I/O error (the message names the file and byte or record),\n"
	"2 usage error.\n";

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
static int show_progress(const struct grist_convert_progress *p, void *arg)
{
	double t = p->seconds;
	char done[32], rate[32], eta[48] = "";

	(void)arg;
	human_bytes(done, sizeof(done), (double)p->bytes);
	human_bytes(rate, sizeof(rate), t > 0 ? (double)p->bytes / t : 0);
	if (p->input_bytes_total) {
		double f = (double)p->input_bytes_done / (double)p->input_bytes_total;

		if (f > 1)
			f = 1;
		if (p->done)
			snprintf(eta, sizeof(eta), "  100%%  %.1f s", t);
		else if (f > 0)
			snprintf(eta, sizeof(eta), "  %3.0f%%  ETA %.0f s", f * 100, t / f - t);
	}
	fprintf(stderr, "\r%s: %llu records  %s  %.0f records/s  %s/s%s\033[K%s", cli_command_name,
		(unsigned long long)p->records, done, t > 0 ? (double)p->records / t : 0, rate, eta,
		p->done ? "\n" : "");
	fflush(stderr);
	return 0;
}

int cmd_convert(int argc, char **argv)
{
	enum { OPT_FROM = 1, OPT_OPTIONS, OPT_SHARDS, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_NO_CHECK, OPT_FEATURES, OPT_MAX_SIDE,
	       OPT_JPEG_QUALITY, OPT_HELP };
	static const struct option longopts[] = {
		{ "from", required_argument, NULL, OPT_FROM },
		{ "options", required_argument, NULL, OPT_OPTIONS },
		{ "shards", required_argument, NULL, OPT_SHARDS },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
		{ "no-check", no_argument, NULL, OPT_NO_CHECK },
		{ "features", required_argument, NULL, OPT_FEATURES },
		{ "max-side", required_argument, NULL, OPT_MAX_SIDE },
		{ "jpeg-quality", required_argument, NULL, OPT_JPEG_QUALITY },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct grist_convert_options o;
	struct grist_convert_stats st;
	uint64_t v;
	bool progress = isatty(STDERR_FILENO);
	int opt, ret;

	grist_convert_options_init(&o);
	grist_convert_stats_init(&st);
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_FROM:
			if (!strcmp(optarg, "auto") || grist_convert_format_parse(optarg, &o.format))
				return cli_usage_error("--from: unknown format '%s' (tfrecord, lines, dir, arrayrecord, csv, imagefolder)", optarg);
			break;
		case OPT_OPTIONS:
			o.writer_options = optarg;
			break;
		case OPT_SHARDS:
			if (!cli_parse_u64(optarg, &o.shards) || o.shards < 1 || o.shards > GRIST_CONVERT_SHARDS_MAX)
				return cli_usage_error("--shards: expected 1..%d, got '%s'", GRIST_CONVERT_SHARDS_MAX, optarg);
			break;
		case OPT_PROGRESS:
			progress = true;
			break;
		case OPT_NO_PROGRESS:
			progress = false;
			break;
		case OPT_NO_CHECK:
			o.no_check = true;
			break;
		case OPT_FEATURES:
			o.features = optarg;
			break;
		case OPT_MAX_SIDE:
			if (!cli_parse_u64(optarg, &v) || v < 1 || v > 65535)
				return cli_usage_error("--max-side: expected 1..65535 pixels, got '%s'", optarg);
			o.max_side = (uint32_t)v;
			break;
		case OPT_JPEG_QUALITY:
			if (!cli_parse_u64(optarg, &v) || v < 1 || v > 100)
				return cli_usage_error("--jpeg-quality: expected 1..100, got '%s'", optarg);
			o.jpeg_quality = (int)v;
			break;
		case 'h':
		case OPT_HELP:
			fputs(convert_usage, stdout);
			return CLI_EXIT_OK;
		default:
			return cli_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind < 2)
		return cli_usage_error("need at least one INPUT and the OUT name");
	if (progress) {
		o.progress = show_progress;
		o.progress_interval = 0.2;
	}
	cli_cleanup_on_signals();
	ret = grist_convert((const char *const *)argv + optind, (size_t)(argc - optind - 1), argv[argc - 1], &o, &st);
	if (ret && progress)
		fputc('\n', stderr);
	if (!ret && o.max_side) {
		char in[32], out[32];

		human_bytes(in, sizeof(in), (double)st.image_bytes_in);
		human_bytes(out, sizeof(out), (double)st.image_bytes_out);
		printf("%llu of %llu images re-encoded at most %u pixels a side: images %s -> %s (%.1f%% smaller)\n",
		       (unsigned long long)st.images_resized, (unsigned long long)st.records, o.max_side, in, out,
		       st.image_bytes_in ? 100.0 * (1.0 - (double)st.image_bytes_out / (double)st.image_bytes_in) : 0.0);
	}
	/* -EINVAL: the request itself (options, formats, an OUT that is an INPUT), before anything was written: 2. */
	return ret ? cli_library_error(ret) : CLI_EXIT_OK;
}
