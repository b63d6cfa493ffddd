/* grist-bench: measure the loader on generated or given files, beside fio, pread, Python and the codec. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "grist/options.h"
#include "grist/remote.h"
#include "cli.h"

static const char bench_usage[] =
	"usage: grist-bench [FILE...] [options]\n"
	"\n"
	"Measure the loader: records/s, bytes/s read and decoded, CPU, batch-time percentiles,\n"
	"time to first batch and where the time went. Without FILE a dataset is generated\n"
	"(text-like records, with the grist writer) and cached under --dir.\n"
	"\n"
	"dataset (without FILE):\n"
	"  --dir D               cache folder (default ./grist-bench-data)\n"
	"  --records N           records (default 262144)\n"
	"  --record-size S       bytes per record (default 1024; a size: 1KiB, 4K, ...)\n"
	"  --group-size G        records per chunk (default 1)\n"
	"  --compression C       zstd[:L] (default zstd:3), uncompressed, snappy or brotli[:L]\n"
	"run:\n"
	"  --seconds T           run for T seconds (default 10; per sweep point 3)\n"
	"  --repeat N            N rounds, grist and each baseline interleaved; medians are reported\n"
	"  --batches N           run for N batches instead\n"
	"  --batch-size B        records per batch (default 256)\n"
	"  --engine E            uring (default), pread or ref\n"
	"  --threads T           decode threads, {range:threads} (default: {default:threads})\n"
	"  --queue-depth Q       reads in flight per ring, {range:queue_depth} (default {default:queue_depth})\n"
	"  --prefetch N          batches assembled ahead, {range:prefetch} (default {default:prefetch})\n"
	"  --max-batch-bytes N   no batch may be larger (default {default:max_batch_bytes}); bounds slot memory\n"
	"  --read-ahead BYTES    read buffers of all threads: how far reads run ahead of decoding\n"
	"                        (default {default:read_ahead});\n"
	"                        sizes take K, M, G, T or KiB..TiB (powers of 1024); the loader's\n"
	"                        options are the library's table (grist load --options)\n"
	"  --io M                auto, direct, buffered or mmap (default auto; --cold forces direct)\n"
	"  --granularity G       record (default) or chunk\n"
	"  --window W            chunk granularity: chunks shuffled together (default {default:window})\n"
	"  --seed S              shuffle seed (default {default:seed})\n"
	"  --cold                O_DIRECT reads after dropping the page cache (root); default warm:\n"
	"                        the file is read once first so it is cached\n"
	"  --json                one JSON object on stdout instead of text\n"
	"vision (the training transform alone, no loader):\n"
	"  --vision[=fast]       RandomResizedCrop(224) + flip + normalize to float32 (grist/vision.h) on\n"
	"                        --threads threads for --seconds (default 5) x --repeat rounds: images/s,\n"
	"                        per core and per CPU-second (medians). FILEs are JPEG/PNG files or\n"
	"                        folders of them; without, --images N (default 256) photo-like JPEGs of\n"
	"                        ImageNet's sizes are generated in memory. =fast: decode=\"fast\"\n"
	"baselines and sweeps:\n"
	"  --compare             also run fio (io_uring randread), a pread loop, the official\n"
	"                        ArrayRecordReader.read(indices), a Grain pipeline and the file's\n"
	"                        codec on one core for as long, each printed with grist's ratio to\n"
	"                        it (and for the codec: grist decoded / (codec x decode threads)),\n"
	"                        and grist.Loader iterated from Python (the grist package)\n"
	"  --baselines LIST      --compare with only these: fio,pread,official,grain,codec,pyloader\n"
	"  --sweep[=AXES]        vary threads, queue depth, record size, group size and prefetch one\n"
	"                        at a time around this configuration; CSV and PNG plots into --out.\n"
	"                        AXES picks some (comma-separated), batch_size (1 to 256) included.\n"
	"                        With --compare each point also runs fio (only), alternating which\n"
	"                        goes first over --repeat rounds, and the plots show grist/fio\n"
	"  --out D               sweep output folder (default ./grist-bench-out)\n"
	"\n"
	"The Python baselines are found via GRIST_BENCH_PY (a folder), the source tree or the\n"
	"installed data folder. Exit status: 0 ok, 1 data or I/O error, 2 usage error.\n";

enum {
	OPT_DIR = 256, OPT_RECORDS, OPT_RECORD_SIZE, OPT_GROUP_SIZE, OPT_COMPRESSION, OPT_SECONDS, OPT_BATCHES,
	OPT_COLD, OPT_JSON, OPT_COMPARE, OPT_SWEEP, OPT_OUT, OPT_HELP, OPT_REPEAT, OPT_BASELINES, OPT_VISION,
	OPT_IMAGES,
};

static const struct option bench_options[] = {
	{ "dir", required_argument, NULL, OPT_DIR },
	{ "records", required_argument, NULL, OPT_RECORDS },
	{ "record-size", required_argument, NULL, OPT_RECORD_SIZE },
	{ "group-size", required_argument, NULL, OPT_GROUP_SIZE },
	{ "compression", required_argument, NULL, OPT_COMPRESSION },
	{ "seconds", required_argument, NULL, OPT_SECONDS },
	{ "batches", required_argument, NULL, OPT_BATCHES },
	{ "batch-size", required_argument, NULL, CLI_OPT_LOADER },
	{ "engine", required_argument, NULL, CLI_OPT_LOADER },
	{ "threads", required_argument, NULL, CLI_OPT_LOADER },
	{ "queue-depth", required_argument, NULL, CLI_OPT_LOADER },
	{ "prefetch", required_argument, NULL, CLI_OPT_LOADER },
	{ "max-batch-bytes", required_argument, NULL, CLI_OPT_LOADER },
	{ "read-ahead", required_argument, NULL, CLI_OPT_LOADER },
	{ "io", required_argument, NULL, CLI_OPT_LOADER },
	{ "granularity", required_argument, NULL, CLI_OPT_LOADER },
	{ "window", required_argument, NULL, CLI_OPT_LOADER },
	{ "seed", required_argument, NULL, CLI_OPT_LOADER },
	{ "cold", no_argument, NULL, OPT_COLD },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "compare", no_argument, NULL, OPT_COMPARE },
	{ "baselines", required_argument, NULL, OPT_BASELINES },
	{ "sweep", optional_argument, NULL, OPT_SWEEP },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "repeat", required_argument, NULL, OPT_REPEAT },
	{ "vision", optional_argument, NULL, OPT_VISION },
	{ "images", required_argument, NULL, OPT_IMAGES },
	{ NULL, 0, NULL, 0 },
};

struct bench_args {
	struct bench_data data;
	struct bench_config cfg;
	bool json, compare, sweep, seconds_set;
	const char *sweep_axes;    /* --sweep=LIST, or NULL */
	bool vision, vision_fast;  /* --vision[=fast] */
	uint64_t images;           /* --images N */
	unsigned repeat;
	const char *out_dir;
};

/* A whole number in [@lo, @hi]. */
static bool parse_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	return cli_parse_u64(s, out) && *out >= lo && *out <= hi;
}

static bool parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s || *s == '-')
		return false;
	v = strtod(s, &end);
	if (*end || !isfinite(v) || v <= 0 || v > 86400)
		return false;
	*out = v;
	return true;
}

/* A comma-separated list of bench_baseline_keys as a bit mask; false on an unknown or empty name. */
static bool parse_baselines(const char *s, unsigned *mask)
{
	*mask = 0;
	for (;;) {
		size_t n = strcspn(s, ","), i;

		for (i = 0; i < BENCH_BASELINES; i++)
			if (strlen(bench_baseline_keys[i]) == n && !strncmp(s, bench_baseline_keys[i], n))
				break;
		if (i == BENCH_BASELINES)
			return false;
		*mask |= 1u << i;
		if (!s[n])
			return true;
		s += n + 1;
	}
}

static int parse_bench_args(int argc, char **argv, struct bench_args *a)
{
	struct grist_loader_config *c = &a->cfg.loader;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int opt, idx, ret;

	a->data = (struct bench_data){ .dir = "./grist-bench-data", .records = 262144, .record_size = 1024,
				       .group_size = 1, .compression = "zstd:3" };
	grist_loader_config_init(c);
	a->cfg.seconds = 10;
	a->cfg.baselines = (1u << BENCH_BASELINES) - 1;
	a->out_dir = "./grist-bench-out";
	/*
	 * Explicit values, so reports and the fio baseline name the values really used: the
	 * library's defaults, read from its option table rather than repeated here.
	 */
	c->batch_size = 256;
	c->threads = ncpu > 0 ? (unsigned)ncpu : 1;
	if ((ret = cli_loader_option_default("queue_depth", c)) || (ret = cli_loader_option_default("prefetch", c)))
		return ret;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", bench_options, &idx)) != -1) {
		switch (opt) {
		case CLI_OPT_LOADER:
			ret = cli_loader_option(bench_options[idx].name, optarg, c);
			if (ret)
				return ret;
			break;
		case OPT_DIR:
			a->data.dir = optarg;
			break;
		case OPT_RECORDS:
			if (!parse_range(optarg, 1, (uint64_t)1 << 40, &a->data.records))
				return cli_usage_error("--records: '%s' is not a number >= 1", optarg);
			break;
		case OPT_RECORD_SIZE:
			/* a size like every other (grist_parse_size()): 1KiB is the default 1024 */
			if (grist_parse_size(optarg, &a->data.record_size) || a->data.record_size < 1 ||
			    a->data.record_size > (uint64_t)1 << 30)
				return cli_usage_error("--record-size: '%s' is not a size in 1..1GiB (bytes, or with K, M, "
						       "G or KiB, MiB, GiB: powers of 1024)", optarg);
			break;
		case OPT_GROUP_SIZE:
			if (!parse_range(optarg, 1, (uint64_t)1 << 20, &a->data.group_size))
				return cli_usage_error("--group-size: '%s' is not a number in 1..2^20", optarg);
			break;
		case OPT_COMPRESSION:
			if (!*optarg || strchr(optarg, ','))
				return cli_usage_error("--compression: '%s' is not one codec option", optarg);
			a->data.compression = optarg;
			break;
		case OPT_REPEAT: {
			uint64_t n;

			if (!parse_range(optarg, 1, 99, &n))
				return cli_usage_error("--repeat: '%s' is not a number in 1..99", optarg);
			a->repeat = (unsigned)n;
			break;
		}
		case OPT_SECONDS:
			if (!parse_seconds(optarg, &a->cfg.seconds))
				return cli_usage_error("--seconds: '%s' is not a duration in (0, 86400]", optarg);
			a->seconds_set = true;
			break;
		case OPT_BATCHES:
			if (!parse_range(optarg, 1, UINT64_MAX, &a->cfg.batches))
				return cli_usage_error("--batches: '%s' is not a number >= 1", optarg);
			break;
		case OPT_COLD:
			a->cfg.cold = true;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case OPT_COMPARE:
			a->compare = true;
			break;
		case OPT_BASELINES:
			if (!parse_baselines(optarg, &a->cfg.baselines))
				return cli_usage_error("--baselines: '%s' is not a list of fio, pread, official, grain, codec, pyloader",
						       optarg);
			a->compare = true;
			break;
		case OPT_SWEEP:
			a->sweep = true;
			a->sweep_axes = optarg;
			break;
		case OPT_OUT:
			a->out_dir = optarg;
			break;
		case OPT_VISION:
			if (optarg && strcmp(optarg, "exact") && strcmp(optarg, "fast"))
				return cli_usage_error("--vision: '%s' is not exact or fast", optarg);
			a->vision = true;
			a->vision_fast = optarg && !strcmp(optarg, "fast");
			break;
		case OPT_IMAGES:
			if (!parse_range(optarg, 1, 1u << 20, &a->images))
				return cli_usage_error("--images: '%s' is not a number in 1..2^20", optarg);
			break;
		case OPT_HELP:
		case 'h':
			cli_print_help(stdout, bench_usage);
			return -1;
		default:
			if (optopt >= OPT_DIR)
				return cli_usage_error("option '%s' needs a value", argv[optind - 1]);
			return cli_usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (a->cfg.cold && c->read_mode == GRIST_READ_BUFFERED)
		return cli_usage_error("--cold reads with O_DIRECT; it cannot be combined with --io buffered");
	if (a->sweep && !a->seconds_set)
		a->cfg.seconds = 3;
	return 0;
}

static const char *human_rate(double v, char *buf, size_t cap)
{
	if (v >= 1e9)
		snprintf(buf, cap, "%.2f G", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, cap, "%.2f M", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, cap, "%.1f k", v / 1e3);
	else
		snprintf(buf, cap, "%.1f ", v);
	return buf;
}

static void print_result_text(const struct bench_result *r, const struct bench_config *c)
{
	const struct grist_loader_stats *s = &r->stats;
	char b1[32], b2[32], b3[32], b4[32];

	printf("grist      engine %s, %s reads, %u threads, batch %llu, queue depth %u, prefetch %u, %s\n",
	       s->engine ? s->engine : "?", s->read_mode ? s->read_mode : "?", s->threads,
	       (unsigned long long)c->loader.batch_size, c->loader.queue_depth, c->loader.prefetch,
	       c->cold ? "cold" : "warm");
	printf("  records/s       %srecords/s (%llu records, %llu batches in %.2f s; %.1f batches/s)\n",
	       human_rate(r->records_per_s, b1, sizeof(b1)), (unsigned long long)r->records,
	       (unsigned long long)r->batches, r->seconds, r->batches_per_s);
	printf("  bytes/s         read %sB/s, delivered %sB/s, decoded %sB/s\n",
	       human_rate(r->read_bytes_per_s, b2, sizeof(b2)), human_rate(r->delivered_bytes_per_s, b3, sizeof(b3)),
	       human_rate(r->decoded_bytes_per_s, b4, sizeof(b4)));
	printf("  cpu             %.2f cores (user + sys over wall)\n", r->cpu_cores);
	printf("  batch time      p50 %.3f ms, p99 %.3f ms (between consecutive next() returns)\n",
	       r->batch_p50_s * 1e3, r->batch_p99_s * 1e3);
	printf("  first batch     %.1f ms after create\n", r->first_batch_s * 1e3);
	printf("  time shares     consumer stalled %.1f%% of wall; per worker: io wait %.1f%%, decode %.1f%%,"
	       " producer stalled %.1f%%\n",
	       100 * r->consumer_stall_share, 100 * r->io_wait_share, 100 * r->decode_share,
	       100 * r->producer_stall_share);
}

/* Grist's bytes/s of the kind @b counts: decoded for the codec, read for the others. */
static double grist_bytes_per_s(const struct bench_result *r, const struct bench_baseline *b)
{
	return b->decoded ? r->decoded_bytes_per_s : r->read_bytes_per_s;
}

/* The workers that decoded: what the engine reports, else what was asked for. */
static unsigned decode_threads(const struct bench_result *r, const struct bench_config *c)
{
	return r->stats.threads ? r->stats.threads : c->loader.threads ? c->loader.threads : 1;
}

/*
 * The figure: grist's decoded bytes/s over what @threads cores could
 * decompress if each ran as fast as the codec alone runs on one.
 */
static double decode_efficiency(const struct bench_result *r, const struct bench_baseline *b, unsigned threads)
{
	return b->bytes_per_s > 0 ? r->decoded_bytes_per_s / (b->bytes_per_s * threads) : 0.0;
}

static void print_baselines_text(const struct bench_result *r, const struct bench_config *c,
				 const struct bench_baseline *bl, size_t n)
{
	char b1[32], b2[32];
	size_t i;

	printf("\nbaselines (ratio = grist / baseline)\n");
	printf("  %-16s %14s %8s %14s %8s\n", "", "records/s", "ratio", "bytes/s", "ratio");
	printf("  %-16s %14s %8s %14s %8s\n", "grist", human_rate(r->records_per_s, b1, sizeof(b1)), "",
	       human_rate(r->read_bytes_per_s, b2, sizeof(b2)), "");
	for (i = 0; i < n; i++) {
		if (bl[i].skipped)
			continue;
		if (!bl[i].ran) {
			printf("  %-16s not run: %s\n", bl[i].name, bl[i].why);
			continue;
		}
		printf("  %-16s %14s %8.2f", bl[i].name, human_rate(bl[i].records_per_s, b1, sizeof(b1)),
		       bl[i].records_per_s > 0 ? r->records_per_s / bl[i].records_per_s : 0.0);
		if (bl[i].bytes_per_s > 0)
			printf(" %13sB %8.2f%s", human_rate(bl[i].bytes_per_s, b2, sizeof(b2)),
			       grist_bytes_per_s(r, &bl[i]) / bl[i].bytes_per_s, bl[i].decoded ? " (decoded)" : "");
		printf("\n  %-16s   %s\n", "", bl[i].note);
		if (bl[i].decoded) {
			unsigned t = decode_threads(r, c);

			printf("  %-16s   decode efficiency: grist decoded bytes/s / (one-core codec bytes/s x decode "
			       "threads) = %sB/s / (%sB/s x %u) = %.3f\n",
			       "", human_rate(r->decoded_bytes_per_s, b1, sizeof(b1)),
			       human_rate(bl[i].bytes_per_s, b2, sizeof(b2)), t, decode_efficiency(r, &bl[i], t));
			if (bl[i].shuffled_bytes_per_s > 0)
				printf("  %-16s   the codec on the same frames in a shuffled order: %sB/s on one core; "
				       "against that: %.3f\n",
				       "", human_rate(bl[i].shuffled_bytes_per_s, b2, sizeof(b2)),
				       r->decoded_bytes_per_s / (bl[i].shuffled_bytes_per_s * t));
		}
	}
}

/* JSON string body: quotes, backslashes and control bytes escaped. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void print_json(const struct bench_args *a, char **files, size_t nfiles, const struct bench_result *r,
		       const char *cache_note, const struct bench_baseline *bl, size_t nbl)
{
	size_t i;

	printf("{\"files\": [");
	for (i = 0; i < nfiles; i++) {
		if (i)
			printf(", ");
		json_str(stdout, files[i]);
	}
	printf("], \"mode\": \"%s\", \"cache_note\": ", a->cfg.cold ? "cold" : "warm");
	json_str(stdout, cache_note);
	printf(", \"batch_size\": %llu, \"queue_depth\": %u, \"prefetch\": %u, \"result\": ",
	       (unsigned long long)a->cfg.loader.batch_size, a->cfg.loader.queue_depth, a->cfg.loader.prefetch);
	bench_print_result_json(stdout, r);
	/* The headline figures again at the top level, so scripts need not dig. */
	printf(", \"records_per_s\": %.1f, \"bytes_read_per_s\": %.1f, \"bytes_decoded_per_s\": %.1f, "
	       "\"bytes_delivered_per_s\": %.1f, \"batches_per_s\": %.2f, \"cpu_cores\": %.3f, "
	       "\"batch_p50_ms\": %.4f, \"batch_p99_ms\": %.4f, \"first_batch_ms\": %.3f",
	       r->records_per_s, r->read_bytes_per_s, r->decoded_bytes_per_s, r->delivered_bytes_per_s,
	       r->batches_per_s, r->cpu_cores, r->batch_p50_s * 1e3, r->batch_p99_s * 1e3, r->first_batch_s * 1e3);
	if (nbl) {
		bool first = true;

		printf(", \"baselines\": [");
		for (i = 0; i < nbl; i++) {
			if (bl[i].skipped)
				continue;
			printf("%s{\"name\": ", first ? "" : ", ");
			first = false;
			json_str(stdout, bl[i].name);
			printf(", \"ran\": %s", bl[i].ran ? "true" : "false");
			if (!bl[i].ran) {
				printf(", \"why\": ");
				json_str(stdout, bl[i].why);
			} else {
				printf(", \"records_per_s\": %.1f, \"ratio_records\": %.4f", bl[i].records_per_s,
				       bl[i].records_per_s > 0 ? r->records_per_s / bl[i].records_per_s : 0.0);
				if (bl[i].bytes_per_s > 0)
					printf(", \"bytes_per_s\": %.1f, \"ratio_bytes\": %.4f", bl[i].bytes_per_s,
					       grist_bytes_per_s(r, &bl[i]) / bl[i].bytes_per_s);
				if (bl[i].decoded) {
					unsigned t = decode_threads(r, &a->cfg);

					printf(", \"bytes\": \"decoded\", \"decode_threads\": %u, "
					       "\"decode_efficiency\": %.4f", t, decode_efficiency(r, &bl[i], t));
					if (bl[i].shuffled_bytes_per_s > 0)
						printf(", \"shuffled_bytes_per_s\": %.1f, \"decode_efficiency_shuffled\": %.4f",
						       bl[i].shuffled_bytes_per_s,
						       r->decoded_bytes_per_s / (bl[i].shuffled_bytes_per_s * t));
				}
				printf(", \"how\": ");
				json_str(stdout, bl[i].note);
			}
			printf("}");
		}
		printf("]");
	}
	printf("}\n");
}

/* Warm: read every file once; cold: drop the page cache. @note says what happened. */
static void prepare_cache(char **files, size_t n, bool cold, char *note, size_t cap)
{
	char why[200];
	size_t i;
	int ret;

	if (cold) {
		if (bench_drop_caches(why, sizeof(why)))
			snprintf(note, cap, "could not drop the page cache: %s (reads still use O_DIRECT)", why);
		else
			snprintf(note, cap, "page cache dropped; O_DIRECT reads");
		return;
	}
	size_t urls = 0;

	for (i = 0; i < n; i++) {
		if (grist_path_is_url(files[i])) {
			urls++;
			continue; /* a URL has no page cache here: every run reads through the network */
		}
		ret = bench_warm_file(files[i]);
		if (ret) {
			snprintf(note, cap, "could not pre-read %s: %s", files[i], strerror(-ret));
			return;
		}
	}
	if (urls == n && n)
		snprintf(note, cap, "URLs: no page cache, every run reads through the network");
	else if (urls)
		snprintf(note, cap, "local files read once first (page cache warm); URLs read through the network");
	else
		snprintf(note, cap, "files read once first (page cache warm)");
}

/* The run with the median records/s (the lower middle one for an even count). */
static size_t median_index(const struct bench_result *runs, unsigned n)
{
	double rate[99];
	unsigned k;

	for (k = 0; k < n; k++)
		rate[k] = runs[k].records_per_s;
	return bench_median_index(rate, n);
}

/*
 * Baseline @b's median over the rounds in which it ran (or its failure if it never ran),
 * with the codec's shuffled-order figure the median of the rounds that measured it (0: none).
 */
static struct bench_baseline median_baseline(struct bench_baseline (*runs)[BENCH_BASELINES], unsigned n, size_t b)
{
	struct bench_baseline med;
	double rate[99], shuffled[99];
	unsigned k, m = 0, ms = 0, round[99];

	for (k = 0; k < n; k++) {
		if (!runs[k][b].ran)
			continue;
		round[m] = k;
		rate[m++] = runs[k][b].records_per_s;
		if (runs[k][b].shuffled_bytes_per_s > 0)
			shuffled[ms++] = runs[k][b].shuffled_bytes_per_s;
	}
	if (!m)
		return runs[0][b];
	med = runs[round[bench_median_index(rate, m)]][b];
	med.shuffled_bytes_per_s = ms ? shuffled[bench_median_index(shuffled, ms)] : 0.0;
	return med;
}

static int bench_main(int argc, char **argv)
{
	struct bench_baseline bl[BENCH_BASELINES];
	struct bench_args a = { 0 };
	struct bench_result r;
	char gen_path[4096], note[300];
	char *gen_argv[1];
	char **files;
	size_t nfiles, nbl = 0;
	int ret;

	ret = parse_bench_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	a.cfg.progress = true;
	if (a.vision) {
		struct bench_vision_opts vo = { .images = a.images ? a.images : 256, .threads = a.cfg.loader.threads,
						.repeat = a.repeat, .seconds = a.seconds_set ? a.cfg.seconds : 5,
						.fast = a.vision_fast, .json = a.json };

		return bench_run_vision((const char *const *)argv + optind, (size_t)(argc - optind), &vo);
	}
	if (optind < argc) {
		files = argv + optind;
		nfiles = (size_t)(argc - optind);
	} else {
		ret = bench_dataset_ensure(&a.data, gen_path, sizeof(gen_path), true);
		if (ret)
			return ret;
		gen_argv[0] = gen_path;
		files = gen_argv;
		nfiles = 1;
	}
	if (a.sweep) {
		struct bench_sweep_opts so = { .axes = a.sweep_axes, .out_dir = a.out_dir, .json = a.json,
					       .compare = a.compare, .repeat = a.repeat };

		return bench_sweep((const char *const *)files, nfiles, optind < argc ? NULL : &a.data, &a.cfg, &so);
	}
	if (!a.repeat)
		a.repeat = 1;
	if (a.compare && nfiles > 1)
		fprintf(stderr, "%s: --compare: baselines read the first file only, %s\n", cli_command_name, files[0]);
	/*
	 * The machines are shared and noisy: run grist and each baseline in turn, round
	 * after round, and report the median of each (ratios, the codec line's decode efficiency
	 * included, are of medians).
	 */
	struct bench_result runs[99];
	struct bench_baseline blruns[99][BENCH_BASELINES];

	for (unsigned k = 0; k < a.repeat; k++) {
		prepare_cache(files, nfiles, a.cfg.cold, note, sizeof(note));
		if (!a.json && k == 0)
			fprintf(stderr, "%s: %s\n", cli_command_name, note);
		ret = bench_run_loader((const char *const *)files, nfiles, &a.cfg, &runs[k]);
		if (ret)
			return ret;
		if (a.compare) {
			struct bench_config bc = a.cfg;

			/* Baselines run as long as grist did, also when --batches bounded it. */
			if (a.cfg.batches)
				bc.seconds = runs[k].seconds > 0.1 ? runs[k].seconds : 0.1;
			if (a.cfg.cold)
				prepare_cache(files, nfiles, true, note, sizeof(note));
			bench_run_baselines(files[0], &bc, blruns[k]);
			nbl = BENCH_BASELINES;
		}
	}
	r = runs[median_index(runs, a.repeat)];
	for (size_t b = 0; b < nbl; b++)
		bl[b] = median_baseline(blruns, a.repeat, b);
	if (a.repeat > 1 && !a.json)
		fprintf(stderr, "%s: medians of %u rounds\n", cli_command_name, a.repeat);
	if (a.json) {
		print_json(&a, files, nfiles, &r, note, bl, nbl);
	} else {
		printf("file%s     ", nfiles > 1 ? "s" : " ");
		for (size_t i = 0; i < nfiles; i++)
			printf("%s%s", i ? " " : "", files[i]);
		printf("\n");
		print_result_text(&r, &a.cfg);
		if (nbl)
			print_baselines_text(&r, &a.cfg, bl, nbl);
	}
	return CLI_EXIT_OK; /* main() checks that stdout was written */
}

int main(int argc, char **argv)
{
	cli_command_name = "grist-bench";
	/* The loader may map the files (--io mmap/auto): a file shrinking under it is an error, not a death. */
	cli_install_sigbus();
	{
		/* FILE may be a URL, and --remote OPTS tunes its reads, as for `grist load` */
		int ret = cli_remote_args(&argc, &argv);

		if (ret)
			return ret;
	}
	return cli_finish_stdout(bench_main(argc, argv));
}
