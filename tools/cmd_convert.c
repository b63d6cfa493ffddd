/* `grist convert`: the command line of grist_convert() (grist/convert.h), and its progress line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grist/convert.h"
#include "grist/text.h"
#include "cli.h"
#include "commands.h"

static const char convert_usage[] =
	"usage: grist convert [--from tfrecord|lines|dir|arrayrecord] [--options OPTS] [--shards N]\n"
	"                     [--progress|--no-progress] [--no-check] INPUT... OUT\n"
	"       grist convert --from csv --features SPEC [options] CSV... OUT\n"
	"       grist convert --from imagefolder [--max-side N [--jpeg-quality Q]] [options] ROOT OUT_VERSION_FOLDER\n"
	"       grist convert --tokenize FILE [--feature NAME] [--pattern P] [--add-bos] [--add-eos]\n"
	"                     [--bos-id N] [--eos-id N] [--max-length N] [options] INPUT... OUT\n\n"
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
	"  --tokenize FILE write each record's text as its token ids instead: raw little-endian int32\n"
	"                  records, what grist.Loader(pack=..., token_bytes=4) packs; FILE a SentencePiece\n"
	"                  model (.model), a tekken JSON (.json) or a tiktoken ranks file. The loader's\n"
	"                  text stage (grist_text_map) makes them, so the ids equal text=TextSpec(...)'s\n"
	"  --feature NAME  --tokenize: the text is the first value of this bytes feature of each record's\n"
	"                  tf.train.Example (default: the whole record is the text)\n"
	"  --pattern P     --tokenize, ranks files: the split pattern (gpt2, cl100k, o200k, llama3, tekken,\n"
	"                  or the regex string)\n"
	"  --add-bos, --add-eos  --tokenize: put the BOS id first, the EOS id last (the tokenizer's, or:)\n"
	"  --bos-id N, --eos-id N  --tokenize: the ids --add-bos and --add-eos put\n"
	"  --max-length N  --tokenize: keep each record's first N ids, BOS and EOS counted (default: all,\n"
	"                  up to 16M ids a record)\n"
	"  --max-side N    imagefolder: an image whose longer side is over N pixels is resized to N (Pillow's\n"
	"                  antialiased bilinear) and re-encoded as JPEG; smaller ones are written as read.\n"
	"                  A line then says how much smaller the images got\n"
	"  --jpeg-quality Q  the re-encoding's quality, 1..100 (default 90)\n\n"
	"Every output goes to a temporary in its folder and is renamed into place only when all are\n"
	"complete and synced: after an error or a signal nothing is left at OUT and no temporary remains.\n"
	"An OUT that is an s3:// or gs:// URL is written by multipart upload (--remote part:16M,\n"
	"upload_inflight:4), completed only when every shard is complete; an error or a signal aborts\n"
	"every upload (nothing at OUT, no parts left).\n"
	"An OUT that is an INPUT (the same file by any name, or inside an INPUT folder) is refused.\n"
	"Invalid UTF-8 or a record without the feature stops --tokenize, naming the input and record.\n"
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

/* --tokenize: the tokenizer and the loader's text map over it, the bos/eos ids the tokenizer's unless given. */
static int tokenizer_map(const char *path, const struct grist_tokenizer_options *to, struct grist_text_map_options *mo,
			 struct grist_tokenizer **tok, struct grist_text_map **map)
{
	struct grist_tokenizer_info info = { .size = sizeof(info) };
	int ret = grist_tokenizer_open(path, to, tok);

	if (ret)
		return cli_library_error(ret);
	grist_tokenizer_get_info(*tok, &info);
	if (mo->bos_id < 0)
		mo->bos_id = info.bos_id;
	if (mo->eos_id < 0)
		mo->eos_id = info.eos_id;
	mo->tokenizer = *tok;
	ret = grist_text_map_create(mo, map);
	if (ret) {
		grist_tokenizer_close(*tok);
		*tok = NULL;
		return cli_library_error(ret);
	}
	return 0;
}

int cmd_convert(int argc, char **argv)
{
	enum { OPT_FROM = 1, OPT_OPTIONS, OPT_SHARDS, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_NO_CHECK, OPT_FEATURES, OPT_HELP,
	       OPT_TOKENIZE, OPT_FEATURE, OPT_PATTERN, OPT_ADD_BOS, OPT_ADD_EOS, OPT_BOS_ID, OPT_EOS_ID, OPT_MAX_LENGTH,
	       OPT_MAX_SIDE, OPT_JPEG_QUALITY };
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
		{ "tokenize", required_argument, NULL, OPT_TOKENIZE },
		{ "feature", required_argument, NULL, OPT_FEATURE },
		{ "pattern", required_argument, NULL, OPT_PATTERN },
		{ "add-bos", no_argument, NULL, OPT_ADD_BOS },
		{ "add-eos", no_argument, NULL, OPT_ADD_EOS },
		{ "bos-id", required_argument, NULL, OPT_BOS_ID },
		{ "eos-id", required_argument, NULL, OPT_EOS_ID },
		{ "max-length", required_argument, NULL, OPT_MAX_LENGTH },
		{ NULL, 0, NULL, 0 },
	};
	struct grist_convert_options o;
	struct grist_tokenizer_options to;
	struct grist_text_map_options mo;
	struct grist_tokenizer *tok = NULL;
	struct grist_text_map *map = NULL;
	const char *tokenize = NULL;
	struct grist_convert_stats st;
	uint64_t v;
	bool progress = isatty(STDERR_FILENO);
	int opt, ret;

	/* first, before any thread is made (a tokenizer's, the conversion's): they all inherit the blocked signals */
	cli_cleanup_on_signals();
	grist_convert_options_init(&o);
	grist_tokenizer_options_init(&to);
	grist_text_map_options_init(&mo);
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
		case OPT_TOKENIZE:
			tokenize = optarg;
			break;
		case OPT_FEATURE:
			mo.feature = optarg;
			break;
		case OPT_PATTERN:
			to.pattern = optarg;
			break;
		case OPT_ADD_BOS:
			mo.add_bos = true;
			break;
		case OPT_ADD_EOS:
			mo.add_eos = true;
			break;
		case OPT_BOS_ID:
		case OPT_EOS_ID:
			if (!cli_parse_u64(optarg, &v) || v > INT32_MAX)
				return cli_usage_error("--%s: expected an id 0..%d, got '%s'",
						       opt == OPT_BOS_ID ? "bos-id" : "eos-id", INT32_MAX, optarg);
			*(opt == OPT_BOS_ID ? &mo.bos_id : &mo.eos_id) = (int32_t)v;
			break;
		case OPT_MAX_LENGTH:
			if (!cli_parse_u64(optarg, &v) || v < 1 || v > (1u << 28))
				return cli_usage_error("--max-length: expected 1..%u, got '%s'", 1u << 28, optarg);
			mo.max_length = (size_t)v;
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
	if (!tokenize && (mo.feature || to.pattern || mo.add_bos || mo.add_eos || mo.bos_id >= 0 || mo.eos_id >= 0 ||
			  mo.max_length))
		return cli_usage_error("--feature, --pattern, --add-bos, --add-eos, --bos-id, --eos-id and --max-length "
				       "go with --tokenize");
	if (tokenize) {
		ret = tokenizer_map(tokenize, &to, &mo, &tok, &map);
		if (ret)
			return ret;
		o.map = grist_text_map;
		o.map_ctx = map;
		/* one record's ids, 4 bytes each: without --max-length at most 16M of them (a longer text is
		 * an error naming it), so the buffer stays bounded */
		o.map_out_max = 4 * (mo.max_length ? mo.max_length : (size_t)1 << 24);
	}
	if (progress) {
		o.progress = show_progress;
		o.progress_interval = 0.2;
	}
	ret = grist_convert((const char *const *)argv + optind, (size_t)(argc - optind - 1), argv[argc - 1], &o, &st);
	if (ret && progress)
		fputc('\n', stderr);
	grist_text_map_destroy(map);
	grist_tokenizer_close(tok);
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
