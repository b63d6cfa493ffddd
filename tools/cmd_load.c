/* `grist load`: run the loader over files and print digests, indices, stats; save and resume state. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "grist/loader.h"
#include "grist_config.h"
#if GRIST_HAVE_OPENCL
#include "grist/device.h"
#endif
#include "cli.h"
#include "commands.h"
#include "cli_iolog.h"
#include "common/error.h"
#include "common/open.h"

static const char load_usage[] =
	"usage: grist load FILE... [options]\n"
	"       grist load --mix W1,...,Wn FILE... [options]\n"
	"\n"
	"Run the loader: a global shuffle of the records of FILE... (one dataset, the files\n"
	"concatenated), sharded, batched, read by the chosen engine.\n"
	"\n"
	"With --mix, the FILEs are n datasets, shuffled and repeated each on its own and\n"
	"interleaved by weight (Grain's MapDataset.mix): dataset d is the d-th FILE, or, when\n"
	"a lone '+' argument appears, the d-th group of FILEs between '+' separators\n"
	"(grist load --mix 3,1 a1.ar a2.ar + b.ar). Datasets count from 0 in that order.\n"
	"With --epochs E the run ends just before a dataset would begin its (E+1)-th pass.\n"
	"A checkpoint holds the weights: --resume needs the same --mix and FILE groups.\n"
	"\n"
	"what is delivered:\n"
	"  --mix W1,...,Wn       mix n datasets with weights W > 0 (decimal numbers)\n"
	"  --batch-size B        records per batch (default 32)\n"
	"  --seed S              shuffle seed (default 0)\n"
	"  --epochs E            epochs, 0 = unbounded (default 1)\n"
	"  --shard I/K           deliver shard I of K (strided; default 0/1)\n"
	"  --contiguous-shards   Grain's contiguous split instead of strided\n"
	"  --no-shuffle          index order\n"
	"  --same-order          one permutation for every epoch\n"
	"  --granularity G       record (default) or chunk\n"
	"  --window W            chunk granularity: chunks shuffled together (default {default:window})\n"
	"  --drop-remainder      drop a short final batch\n"
	"  --layout L            ragged (default: records back to back), fixed:N (every record\n"
	"                        exactly N bytes; another size is an error) or padded:N (each\n"
	"                        record padded to N bytes, a longer one is an error; a short\n"
	"                        final batch is filled up with pad rows to the batch size)\n"
	"  --pad-value V         padded layout: the pad byte, {range:pad_value} (default {default:pad_value})\n"
	"  --pack first-fit:L[:BINS] | best-fit:L[:BINS] | concat-split:L\n"
	"                        pack token records into rows of L tokens with segment ids and\n"
	"                        positions, like Grain's FirstFitPackIterDataset or\n"
	"                        BestFitPackIterDataset (BINS rows open at once, default the batch\n"
	"                        size, shuffle_bins=False) or ConcatThenSplitIterDataset; first-fit\n"
	"                        and best-fit cut records longer than L to L, concat-split splits\n"
	"                        them across rows; --batch-size then counts rows. Not with --device\n"
	"  --pack-piece P        with --pack: cut each record into pieces of P tokens first, each\n"
	"                        packed as a sequence of its own (MaxText's TokenizeAndChunk)\n"
	"  --pack-bos ID         with --pack concat-split: the first token of every segment of a\n"
	"                        row becomes ID (Grain's REPLACE_FIRST_TOKEN_WITH_BOS)\n"
	"  --token-bytes N       with --pack: each token is an N-byte little-endian unsigned\n"
	"                        integer, N = 1, 2 or 4; a record of another length is an error\n"
	"output (stdout):\n"
	"  --digest              one line per batch: XXH64 (seed 0) of the batch's bytes, 16 hex\n"
	"                        digits; ragged: the records back to back; fixed and padded: the\n"
	"                        N-byte rows, pad bytes and the pad rows of a final batch included;\n"
	"                        packed: the token block, then the segment ids, then the positions\n"
	"                        (uint32 little-endian)\n"
	"  --print-packed        with --pack: one JSON line per row, {\"tokens\": [...],\n"
	"                        \"segment_ids\": [...], \"positions\": [...]}\n"
	"  --print-indices       the index of each delivered record within its dataset (its files\n"
	"                        counted in order), one per line; with several datasets D:INDEX\n"
	"  --stats               per-stage counters on stderr at the end; with several datasets\n"
	"                        also 'dataset D: N records' delivered by this run; with --pack\n"
	"                        'packing efficiency' (real tokens / row capacity)\n"
	"  --iolog FILE          write every read request the engine submitted to FILE as a fio\n"
	"                        version 2 iolog, to replay the same reads with fio --read_iolog\n"
	"checkpoints:\n"
	"  --stop-after N        stop after N batches\n"
	"  --save-state F        with --stop-after: write the loader state to F\n"
	"  --resume F            continue from a state saved by --save-state\n"
	"execution (never changes the output):\n"
	"  --engine E            uring (default; falls back to pread), pread or ref\n"
	"  --threads T           decode threads, {range:threads} (default: {default:threads})\n"
	"  --queue-depth Q       reads in flight per ring, {range:queue_depth} (default {default:queue_depth};\n"
	"                        deeper for URLs)\n"
	"  --io M                auto (default), direct, buffered or mmap (decode straight out of\n"
	"                        the page cache: fastest when the data is cached; a FILE that\n"
	"                        shrinks while mapped stops the run with exit 1 naming it);\n"
	"                        auto maps files that are cached, reads large ones direct and\n"
	"                        the rest buffered; uring and pread only: ref always reads\n"
	"                        through the page cache\n"
	"  --prefetch N          units assembled ahead, {range:prefetch} (default {default:prefetch}), and the most batches a\n"
	"                        consumer may hold at once\n"
	"  --max-batch-bytes N   no batch may be larger (default {default:max_batch_bytes}); bounds slot memory\n"
	"  --read-ahead BYTES    read buffers of all threads: how far reads run ahead of decoding\n"
	"                        (default {default:read_ahead})\n"
	"  --assembly-bytes BYTES  batches assembled ahead and held, in bytes; set, it holds (at\n"
	"                        least one batch), at some speed where threads then wait (default\n"
	"                        {default:assembly_bytes})\n"
	"  --remote-inflight N, --remote-inflight-min N, --remote-coalesce BYTES, --remote-split BYTES,\n"
	"  --remote-retries N, --remote-timeout-ms T, --remote-connect-timeout-ms T, --remote-backoff-ms T,\n"
	"  --remote-backoff-max-ms T, --remote-redirects N   this loader's GETs for URL FILEs\n"
	"                        (grist/remote.h); the global\n"
	"                        --remote OPTS sets them for every command, footers included\n"
	"checking (a sound file reads the same either way):\n"
	"  --verify V            all or headers (default {default:verify}). all: every hash the format\n"
	"                        has. headers: block and chunk headers, their hashes and the record\n"
	"                        sizes, not each chunk's data hash: 17-37% less CPU on cold\n"
	"                        uncompressed reads, and a flipped value byte of an uncompressed\n"
	"                        chunk goes through unnoticed (for data checked with 'grist verify')\n"
	"Sizes (BYTES, --max-batch-bytes, --layout N) take K, M, G, T or KiB, MiB, GiB, TiB,\n"
	"all powers of 1024: --read-ahead 4M is 4194304 bytes. Values and their bounds are the\n"
	"library's option table, shared with Python ('grist load --options' lists it); every\n"
	"option it lists is also a flag here: --record-bytes 1KiB --layout padded is --layout\n"
	"padded:1KiB, --shard-index/--shard-count/--shard-mode, --shuffle false, --pack-length,\n"
	"--pack-bins, --pack-piece.\n"
	"device stage (OpenCL):\n"
	"  --device D            opencl (GRIST_OPENCL_DEVICE or 0:0), opencl:P:D, or opencl:all\n"
	"                        (each batch split along its first axis across every device);\n"
	"                        --digest is then computed from bytes read back from the device;\n"
	"                        without --digest or --device-check each batch is only waited\n"
	"                        for on the device (its ready events), as a training step would\n"
	"  --device-check        compare every device batch with the host bytes; prints\n"
	"                        'mismatches: N' on stderr and exits 1 when N > 0\n";

/*
 * --save-state's folder, checked before the run rather than after it: the state is
 * written when the run stops, and a run of hours should not end in "cannot write". A URL
 * is refused by name: the state is a local file of 56 bytes, copied elsewhere by the user.
 */
static int state_folder_unwritable(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');

	if (grist_path_is_url(path))
		return cli_usage_error("--save-state takes a local file, not a URL ('%s'); copy the state file "
				       "to object storage after the run", path);
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path) ? (int)(slash - path) : 1, path) >=
		 (int)sizeof(dir))
		return cli_usage_error("--save-state: the path is too long");
	if (access(dir, W_OK | X_OK))
		return cli_usage_error("--save-state: cannot write a file in '%s': %s", dir, strerror(errno));
	return 0;
}

enum {
	OPT_DIGEST = 256, OPT_INDICES, OPT_STATS, OPT_STOP_AFTER, OPT_SAVE, OPT_RESUME, OPT_HELP,
	OPT_DEVICE, OPT_DEVICE_CHECK, OPT_MIX, OPT_PRINT_PACKED, OPT_LIST_OPTIONS, OPT_IOLOG,
};

static const struct option load_options[] = {
	{ "batch-size", required_argument, NULL, CLI_OPT_LOADER },
	{ "seed", required_argument, NULL, CLI_OPT_LOADER },
	{ "epochs", required_argument, NULL, CLI_OPT_LOADER },
	{ "shard", required_argument, NULL, CLI_OPT_LOADER },
	{ "contiguous-shards", no_argument, NULL, CLI_OPT_LOADER },
	{ "no-shuffle", no_argument, NULL, CLI_OPT_LOADER },
	{ "same-order", no_argument, NULL, CLI_OPT_LOADER },
	{ "granularity", required_argument, NULL, CLI_OPT_LOADER },
	{ "window", required_argument, NULL, CLI_OPT_LOADER },
	{ "layout", required_argument, NULL, CLI_OPT_LOADER },
	{ "pad-value", required_argument, NULL, CLI_OPT_LOADER },
	{ "mix", required_argument, NULL, OPT_MIX },
	{ "engine", required_argument, NULL, CLI_OPT_LOADER },
	{ "threads", required_argument, NULL, CLI_OPT_LOADER },
	{ "queue-depth", required_argument, NULL, CLI_OPT_LOADER },
	{ "io", required_argument, NULL, CLI_OPT_LOADER },
	{ "prefetch", required_argument, NULL, CLI_OPT_LOADER },
	{ "max-batch-bytes", required_argument, NULL, CLI_OPT_LOADER },
	{ "read-ahead", required_argument, NULL, CLI_OPT_LOADER },
	{ "assembly-bytes", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-timeout-ms", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-connect-timeout-ms", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-retries", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-backoff-ms", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-backoff-max-ms", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-coalesce", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-split", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-inflight", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-inflight-min", required_argument, NULL, CLI_OPT_LOADER },
	{ "remote-redirects", required_argument, NULL, CLI_OPT_LOADER },
	{ "drop-remainder", no_argument, NULL, CLI_OPT_LOADER },
	{ "verify", required_argument, NULL, CLI_OPT_LOADER },
	/* the table's other names, so that every option 'grist load --options' lists is a flag */
	{ "shuffle", required_argument, NULL, CLI_OPT_LOADER },
	{ "shard-index", required_argument, NULL, CLI_OPT_LOADER },
	{ "shard-count", required_argument, NULL, CLI_OPT_LOADER },
	{ "shard-mode", required_argument, NULL, CLI_OPT_LOADER },
	{ "record-bytes", required_argument, NULL, CLI_OPT_LOADER },
	{ "pack-length", required_argument, NULL, CLI_OPT_LOADER },
	{ "pack-bins", required_argument, NULL, CLI_OPT_LOADER },
	{ "pack-piece", required_argument, NULL, CLI_OPT_LOADER },
	{ "pack-bos", required_argument, NULL, CLI_OPT_LOADER },
	{ "digest", no_argument, NULL, OPT_DIGEST },
	{ "print-indices", no_argument, NULL, OPT_INDICES },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "stop-after", required_argument, NULL, OPT_STOP_AFTER },
	{ "save-state", required_argument, NULL, OPT_SAVE },
	{ "resume", required_argument, NULL, OPT_RESUME },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "options", no_argument, NULL, OPT_LIST_OPTIONS },
	{ "device", required_argument, NULL, OPT_DEVICE },
	{ "device-check", no_argument, NULL, OPT_DEVICE_CHECK },
	{ "pack", required_argument, NULL, CLI_OPT_LOADER },
	{ "token-bytes", required_argument, NULL, CLI_OPT_LOADER },
	{ "print-packed", no_argument, NULL, OPT_PRINT_PACKED },
	{ "iolog", required_argument, NULL, OPT_IOLOG },
	{ NULL, 0, NULL, 0 },
};

struct load_args {
	bool digest, indices, stats, device_check, pad_value, print_packed;
	uint64_t stop_after;
	const char *save_state, *resume, *iolog;
	double *weights;           /* --mix, else NULL */
	size_t num_weights;
};

static int parse_load_args(int argc, char **argv, struct grist_loader_config *c, struct load_args *a)
{
	int opt, idx, ret;

	c->batch_size = 32;
	c->epochs = 1;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", load_options, &idx)) != -1) {
		switch (opt) {
		case CLI_OPT_LOADER:
			ret = cli_loader_option(load_options[idx].name, optarg, c);
			if (ret)
				return ret;
			if (!strcmp(load_options[idx].name, "pad-value"))
				a->pad_value = true;
			break;
		case OPT_MIX:
			free(a->weights);
			ret = cli_parse_weights(optarg, &a->weights, &a->num_weights);
			if (ret)
				return ret;
			break;
		case OPT_DIGEST:
			a->digest = true;
			break;
		case OPT_INDICES:
			a->indices = true;
			break;
		case OPT_STATS:
			a->stats = true;
			break;
		case OPT_STOP_AFTER:
			if (!cli_parse_u64(optarg, &a->stop_after) || a->stop_after == 0)
				return cli_usage_error("--stop-after: '%s' is not a number >= 1", optarg);
			break;
		case OPT_SAVE:
			a->save_state = optarg;
			break;
		case OPT_RESUME:
			a->resume = optarg;
			break;
		case OPT_DEVICE:
			c->device = optarg;
			break;
		case OPT_DEVICE_CHECK:
			a->device_check = true;
			c->device_host_digest = true;
			break;
		case OPT_PRINT_PACKED:
			a->print_packed = true;
			break;
		case OPT_IOLOG:
			a->iolog = optarg;
			break;
		case OPT_LIST_OPTIONS:
			cli_print_loader_options(stdout);
			return -1;
		case OPT_HELP:
		case 'h':
			cli_print_help(stdout, load_usage);
			return -1;
		default:
			return cli_usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_error("no input file");
	if (a->save_state && !a->stop_after)
		return cli_usage_error("--save-state needs --stop-after N");
	if (a->save_state && state_folder_unwritable(a->save_state))
		return CLI_EXIT_USAGE; /* said */
	if (a->device_check && !c->device)
		return cli_usage_error("--device-check needs --device");
	if (a->pad_value && c->layout != GRIST_LAYOUT_PADDED)
		return cli_usage_error("--pad-value needs --layout padded:N");
	if (c->pack && !c->pack_token_bytes)
		return cli_usage_error("--pack needs --token-bytes N (1, 2 or 4)");
	if (!c->pack && (c->pack_token_bytes || a->print_packed))
		return cli_usage_error("%s needs --pack", a->print_packed ? "--print-packed" : "--token-bytes");
	if (c->pack && a->indices)
		return cli_usage_error("--print-indices lists records; packed rows have none (use --print-packed)");
	if (c->pack && c->layout != GRIST_LAYOUT_RAGGED)
		return cli_usage_error("--pack makes its own rows; it cannot be combined with --layout");
	if (c->pack && c->device)
		return cli_usage_error("--pack does not run with --device yet");
	return 0;
}

#if GRIST_HAVE_OPENCL
/* Reads device batches back to the host, one in-order queue per device of the stage. */
struct device_reader {
	cl_command_queue *queues;
	unsigned n;
	uint8_t *buf;
	size_t cap;
};

static int device_reader_init(struct device_reader *r, struct grist_device_stage *stage)
{
	cl_int err;
	unsigned k;

	r->n = grist_device_stage_num_devices(stage);
	r->queues = calloc(r->n, sizeof(*r->queues));
	if (!r->queues)
		return -ENOMEM;
	for (k = 0; k < r->n; k++) {
		r->queues[k] = clCreateCommandQueue(grist_device_stage_context(stage), grist_device_stage_device(stage, k),
						    0, &err);
		if (err != CL_SUCCESS) {
			fprintf(stderr, "%s: cannot create a read-back queue on device %u (OpenCL error %d)\n",
				cli_command_name, k, (int)err);
			return -EIO;
		}
	}
	return 0;
}

static void device_reader_free(struct device_reader *r)
{
	unsigned k;

	for (k = 0; r->queues && k < r->n; k++)
		if (r->queues[k])
			clReleaseCommandQueue(r->queues[k]);
	free(r->queues);
	free(r->buf);
}

/*
 * Wait until every part of @db is on its device. Without --digest this is all the
 * CLI does with a batch, as a training step would make its kernels wait on the
 * same events; reading each batch back would time the copy back, not the loader.
 */
static int device_wait_ready(const struct grist_device_batch *db)
{
	unsigned k;
	cl_int err;

	for (k = 0; k < db->num_parts; k++) {
		err = clWaitForEvents(1, &db->parts[k].ready);
		if (err != CL_SUCCESS) {
			fprintf(stderr, "%s: batch %llu did not reach device %u (OpenCL error %d)\n", cli_command_name,
				(unsigned long long)db->seq, k, (int)err);
			return -EIO;
		}
	}
	return 0;
}

static void print_device_stats(struct grist_device_stage *stage, double consumer_s)
{
	struct grist_device_stats d;
	double n;

	grist_device_stage_stats(stage, &d);
	n = d.batches ? (double)d.batches : 1.0;
	fprintf(stderr,
		"device: %s strategy, %u device(s); stage created in %.3f s\n"
		"device transfers: %llu batches, %llu bytes, %llu commands; enqueue %.3f s (max %.3f ms), "
		"flush %.3f s (max %.3f ms)\n"
		"device slots: %llu in the ring, %llu with memory (%llu bytes host and device, made or grown %llu "
		"times); in flight mean %.2f, max %llu; filling mean %.2f, max %llu\n"
		"device waits: acquires %llu (%llu found the ring full), slot wait %.3f s, fill wait %.3f s; "
		"next() wait %.3f s; batches held %.3f s, of which ready wait or read-back %.3f s\n",
		grist_device_strategy_name(grist_device_stage_strategy(stage)), grist_device_stage_num_devices(stage),
		d.create_ns / 1e9, (unsigned long long)d.batches, (unsigned long long)d.bytes,
		(unsigned long long)d.commands, d.enqueue_ns / 1e9, d.enqueue_max_ns / 1e6, d.flush_ns / 1e9,
		d.flush_max_ns / 1e6, (unsigned long long)d.slots, (unsigned long long)d.slots_allocated,
		(unsigned long long)d.memory_bytes, (unsigned long long)d.slots_grown, (double)d.in_flight_sum / n,
		(unsigned long long)d.in_flight_max, (double)d.filling_sum / n, (unsigned long long)d.filling_max,
		(unsigned long long)d.acquires, (unsigned long long)d.acquires_blocked, d.slot_wait_ns / 1e9,
		d.fill_wait_ns / 1e9, d.consumer_wait_ns / 1e9, d.hold_ns / 1e9, consumer_s);
}

/* Copy every part of @db back, in row order; the read waits on the part's ready event. */
static int device_read_back(struct device_reader *r, const struct grist_device_batch *db, size_t *len)
{
	size_t pos = 0;
	unsigned k;
	cl_int err;

	if (db->bytes > r->cap) {
		uint8_t *p = realloc(r->buf, db->bytes);

		if (!p)
			return -ENOMEM;
		r->buf = p;
		r->cap = db->bytes;
	}
	for (k = 0; k < db->num_parts; k++) {
		const struct grist_device_part *part = &db->parts[k];

		if (!part->bytes)
			continue;
		err = clEnqueueReadBuffer(r->queues[k], part->data, CL_TRUE, part->offset, part->bytes, r->buf + pos, 1,
					  &part->ready, NULL);
		if (err != CL_SUCCESS) {
			fprintf(stderr, "%s: reading batch %llu back from device %u failed (OpenCL error %d)\n",
				cli_command_name, (unsigned long long)db->seq, k, (int)err);
			return -EIO;
		}
		pos += part->bytes;
	}
	*len = pos;
	return 0;
}
#endif

/*
 * Read a whole (small) state file: returns bytes read, or a negative errno with the
 * message recorded (a FIFO or other non-regular file is refused, never waited on).
 */
static ssize_t read_state_file(const char *path, uint8_t *buf, size_t cap)
{
	size_t n = 0;
	ssize_t got;
	int fd, ret;

	fd = grist_open_regular(path, 0, NULL);
	if (fd < 0)
		return fd;
	while (n < cap) {
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = grist_fail(-errno, "%s: cannot read the state file: %s", path, strerror(errno));
			close(fd);
			return ret;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	return (ssize_t)n;
}

/* Write the state next to its final name, then rename: a crash never leaves half a state. */
static int write_state_file(const char *path, const uint8_t *buf, size_t len)
{
	char tmp[4096];
	int fd, ok;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ok = write(fd, buf, len) == (ssize_t)len && fsync(fd) == 0;
	ok = close(fd) == 0 && ok;
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void print_stats(const struct grist_loader_stats *s, double seconds, const struct grist_loader_config *c)
{
	double b = s->batches ? (double)s->batches : 1.0;

	fprintf(stderr,
		"engine: %s (%s reads, %u threads)\n"
		"batches: %llu\nrecords: %llu (filtered %llu)\nseconds: %.3f\nrecords/s: %.0f\n"
		"reads issued: %llu\nbytes read: %llu\nchunks decoded: %llu\nbytes decoded: %llu\n"
		"io wait: %.3f s\ndecode: %.3f s\nassemble: %.3f s\nconsumer stall: %.3f s\nproducer stall: %.3f s\n"
		"reads in flight: mean %.1f, max %llu per ring\n"
		"queue occupancy: %.2f units ready per next()\nmemory: %llu bytes (pinned: %s, registered buffers: %s)\n"
		"slot maps: %llu\n",
		s->engine ? s->engine : "?", s->read_mode ? s->read_mode : "?", s->threads,
		(unsigned long long)s->batches, (unsigned long long)s->records,
		(unsigned long long)s->records_filtered, seconds, seconds > 0 ? (double)s->records / seconds : 0.0,
		(unsigned long long)s->reads_issued, (unsigned long long)s->bytes_read,
		(unsigned long long)s->chunks_decoded, (unsigned long long)s->bytes_decoded, s->io_wait_ns / 1e9,
		s->decode_ns / 1e9, s->assemble_ns / 1e9, s->consumer_stall_ns / 1e9, s->producer_stall_ns / 1e9,
		s->reads_in_flight_mean, (unsigned long long)s->reads_in_flight_max,
		(double)s->queue_occupancy_sum / b, (unsigned long long)s->memory_bytes, s->pinned ? "yes" : "no",
		s->registered_buffers ? "yes" : "no", (unsigned long long)s->slot_maps);
	if (s->remote.requests) {
		int k;

		fprintf(stderr, "remote: %llu GETs, %llu bytes, in flight mean %.1f max %llu, latency p50 %.3f ms "
			"p99 %.3f ms, errors %llu\nremote retries:", (unsigned long long)s->remote.requests,
			(unsigned long long)s->remote.bytes, s->remote.inflight_mean,
			(unsigned long long)s->remote.inflight_max, s->remote.latency_p50_us / 1e3,
			s->remote.latency_p99_us / 1e3, (unsigned long long)s->remote.errors);
		for (k = 0; k < GRIST_REMOTE_RETRY_CAUSES; k++)
			fprintf(stderr, " %s %llu", grist_remote_retry_cause_name(k),
				(unsigned long long)s->remote.retries[k]);
		fprintf(stderr, "\nremote budget: %llu bytes now (peak %llu per endpoint), rtt %.3f ms, %.1f MB/s per "
			"endpoint; in flight mean %.0f bytes, waiting for the budget mean %.0f bytes\n",
			(unsigned long long)s->remote_budget.budget_bytes, (unsigned long long)s->remote_budget.budget_max_bytes,
			s->remote_budget.rtt_us / 1e3, s->remote_budget.bandwidth / 1e6, s->remote_budget.inflight_bytes_mean,
			s->remote_budget.ahead_bytes_mean);
		/* the GET scheduler's waste: gaps fetched to join reads, and reads fetched twice */
		if (s->bytes_read)
			fprintf(stderr, "remote body: %.2f bytes of GET body per byte read (%llu of %llu)\n",
				(double)s->remote.bytes / (double)s->bytes_read, (unsigned long long)s->remote.bytes,
				(unsigned long long)s->bytes_read);
	}
	if (c->engine == GRIST_ENGINE_REF && (c->read_mode == GRIST_READ_DIRECT || c->read_mode == GRIST_READ_MMAP))
		fprintf(stderr, "note: --io %s does not apply to --engine ref, which reads with pread through the "
			"page cache\n", c->read_mode == GRIST_READ_DIRECT ? "direct" : "mmap");
}

/*
 * --digest of a packed batch: the token block, then the segment ids, then the positions,
 * as they lie in memory (the ids and positions are uint32 in host order; every platform
 * grist builds for is little-endian, which is what the help text promises).
 */
static int packed_digest(const struct grist_batch *b, unsigned token_bytes, uint64_t *out)
{
	size_t cells = b->bytes / token_bytes;
	XXH64_state_t *st = XXH64_createState();

	if (!st)
		return -ENOMEM;
	XXH64_reset(st, 0);
	XXH64_update(st, b->data, b->bytes);
	XXH64_update(st, b->segment_ids, cells * sizeof(uint32_t));
	XXH64_update(st, b->positions, cells * sizeof(uint32_t));
	*out = XXH64_digest(st);
	XXH64_freeState(st);
	return 0;
}

static uint64_t token_at(const uint8_t *p, unsigned token_bytes)
{
	uint64_t v = 0;
	unsigned i;

	for (i = token_bytes; i-- > 0;)
		v = (v << 8) | p[i];
	return v;
}

static void print_u32_list(const char *name, const uint32_t *v, size_t n, const char *end)
{
	size_t i;

	printf("\"%s\": [", name);
	for (i = 0; i < n; i++)
		printf(i ? ", %u" : "%u", v[i]);
	printf("]%s", end);
}

/* --print-packed: one JSON line per row. */
static void print_packed_rows(const struct grist_batch *b, unsigned token_bytes)
{
	size_t L = b->record_bytes / token_bytes, r, i;
	const uint8_t *row;

	for (r = 0; r < b->num_rows; r++) {
		row = b->data + r * b->record_bytes;
		printf("{\"tokens\": [");
		for (i = 0; i < L; i++)
			printf(i ? ", %llu" : "%llu", (unsigned long long)token_at(row + i * token_bytes, token_bytes));
		printf("], ");
		print_u32_list("segment_ids", b->segment_ids + r * L, L, ", ");
		print_u32_list("positions", b->positions + r * L, L, "}\n");
	}
}

/* What --print-indices writes for one record: INDEX, or D:INDEX when datasets are mixed. */
static void print_index(const struct grist_batch *b, size_t i, size_t num_datasets)
{
	if (num_datasets > 1)
		printf("%u:%llu\n", b->datasets[i], (unsigned long long)b->indices[i]);
	else
		printf("%llu\n", (unsigned long long)b->indices[i]);
}

int cmd_load(int argc, char **argv)
{
	struct grist_loader_config cfg = { .size = sizeof(cfg) };
	struct grist_dataset_spec *specs = NULL;
	struct load_args a = { 0 };
	uint8_t state[GRIST_STATE_MAX];
	struct grist_loader_stats st;
	struct cli_iolog iolog;
	struct grist_loader *l = NULL;
	struct grist_batch *b;
	struct timespec t0, t1;
	double first_batch_s = 0, create_s = 0, create_cpu_s = 0;
	uint64_t delivered = 0, mismatches = 0, digest = 0, *per_dataset = NULL;
	size_t state_len, num_specs = 0, i, d;
	ssize_t n;
	int ret, rc = CLI_EXIT_OK;
#if GRIST_HAVE_OPENCL
	struct device_reader dr = { 0 };
	double consumer_s = 0; /* waiting for device batches, or reading them back */
#endif

	ret = parse_load_args(argc, argv, &cfg, &a);
	if (ret) {
		rc = ret < 0 ? CLI_EXIT_OK : ret;
		goto out;
	}
	rc = cli_group_datasets((const char *const *)(argv + optind), (size_t)(argc - optind), a.weights,
				a.num_weights, &specs, &num_specs);
	if (rc)
		goto out;
	cfg.datasets = specs;
	cfg.num_datasets = num_specs;
	per_dataset = calloc(num_specs, sizeof(*per_dataset));
	if (!per_dataset) {
		rc = cli_library_error(-ENOMEM);
		goto out;
	}
	if (a.resume) {
		n = read_state_file(a.resume, state, sizeof(state));
		if (n < 0) {
			rc = cli_library_error((int)n);
			goto out;
		}
		cfg.resume_state = state;
		cfg.resume_state_len = (size_t)n;
	}
	if (a.iolog)
		cli_iolog_attach(&iolog, &cfg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = grist_loader_create(&cfg, &l);
	if (ret) {
		rc = cli_library_error(ret);
		goto out;
	}
	create_s = cli_seconds_since(&t0);
	create_cpu_s = cli_cpu_seconds();
#if GRIST_HAVE_OPENCL
	if (cfg.device && device_reader_init(&dr, grist_loader_device_stage(l))) {
		rc = CLI_EXIT_DATA;
		goto out;
	}
#endif
	for (;;) {
		if (a.stop_after && delivered == a.stop_after)
			break;
		/* a created loader never fails with -EINVAL (grist/error.h): an error exits 1 */
		rc = cli_loader_next(l, &b);
		if (rc || !b)
			break;
		if (!delivered)
			first_batch_s = cli_seconds_since(&t0);
		if (b->device) {
#if GRIST_HAVE_OPENCL
			struct timespec tc;
			size_t len = 0;

			clock_gettime(CLOCK_MONOTONIC, &tc);
			if (!a.digest && !a.device_check) {
				ret = device_wait_ready(b->device);
				consumer_s += cli_seconds_since(&tc);
				if (ret) {
					grist_loader_release(l, b);
					rc = CLI_EXIT_DATA;
					break;
				}
			} else {
				if (device_read_back(&dr, b->device, &len)) {
					grist_loader_release(l, b);
					rc = CLI_EXIT_DATA;
					break;
				}
				digest = XXH64(dr.buf, len, 0);
				if (a.device_check && (len != b->bytes || digest != b->host_digest)) {
					mismatches++;
					fprintf(stderr, "%s: batch %llu: device bytes differ from the host bytes\n",
						cli_command_name, (unsigned long long)b->sequence);
				}
				consumer_s += cli_seconds_since(&tc);
			}
#endif
		} else if (a.digest && b->segment_ids) {
			if (packed_digest(b, cfg.pack_token_bytes, &digest)) {
				grist_loader_release(l, b);
				rc = cli_library_error(-ENOMEM);
				break;
			}
		} else if (a.digest) {
			digest = XXH64(b->data, b->bytes, 0);
		}
		if (a.digest)
			printf("%016llx\n", (unsigned long long)digest);
		if (a.print_packed)
			print_packed_rows(b, cfg.pack_token_bytes);
		for (i = 0; b->datasets && i < b->num_records; i++) {
			if (a.indices)
				print_index(b, i, num_specs);
			if (b->datasets[i] < num_specs)
				per_dataset[b->datasets[i]]++;
		}
		grist_loader_release(l, b);
		delivered++;
		if (cli_stdout_failed()) {
			rc = CLI_EXIT_DATA; /* main() says why */
			break;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* output that did not reach its destination was not delivered: no checkpoint past it */
	if (rc == CLI_EXIT_OK && (fflush(stdout) == EOF || cli_stdout_failed()))
		rc = CLI_EXIT_DATA;
	if (rc == CLI_EXIT_OK && a.save_state) {
		ret = grist_loader_save_state(l, state, sizeof(state), &state_len);
		if (ret)
			rc = cli_library_error(ret);
		else if (write_state_file(a.save_state, state, state_len)) {
			fprintf(stderr, "%s: %s: cannot write the state file: %s\n", cli_command_name, a.save_state,
				strerror(errno));
			rc = CLI_EXIT_DATA;
		}
	}
	if (a.stats) {
		grist_loader_stats(l, &st);
		print_stats(&st, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, &cfg);
		fprintf(stderr, "first batch: %.3f s after start\n", first_batch_s);
		fprintf(stderr, "start-up: %.3f s (%.3f s of CPU) in grist_loader_create()\n", create_s, create_cpu_s);
#if GRIST_HAVE_OPENCL
		if (cfg.device)
			print_device_stats(grist_loader_device_stage(l), consumer_s);
#endif
		if (cfg.pack)
			fprintf(stderr, "packed tokens: %llu of %llu\npacking efficiency: %.6f\n",
				(unsigned long long)st.pack_tokens, (unsigned long long)st.pack_capacity,
				st.pack_capacity ? (double)st.pack_tokens / (double)st.pack_capacity : 0.0);
		for (d = 0; num_specs > 1 && d < num_specs; d++)
			fprintf(stderr, "dataset %zu: %llu records\n", d, (unsigned long long)per_dataset[d]);
	}
	if (a.device_check) {
		fprintf(stderr, "mismatches: %llu\n", (unsigned long long)mismatches);
		if (mismatches && rc == CLI_EXIT_OK)
			rc = CLI_EXIT_DATA;
	}
out:
	grist_loader_destroy(l);
	if (a.iolog && cfg.read_trace) {
		/* after destroy: no worker submits any more */
		if (rc == CLI_EXIT_OK && cli_iolog_write(&iolog, a.iolog))
			rc = CLI_EXIT_DATA;
		cli_iolog_free(&iolog);
	}
#if GRIST_HAVE_OPENCL
	device_reader_free(&dr);
#endif
	free(per_dataset);
	free(specs);
	free(a.weights);
	return rc;
}
