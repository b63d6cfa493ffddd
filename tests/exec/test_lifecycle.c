/*
 * A seeded, time-bounded lifecycle stress test of the loader (issue 35): random
 * sequences of next, release, release_after, holding up to the limit, save_state,
 * resume, an injected I/O error, and destroy at any point, over the three engines, host
 * and device mode (one PoCL device and two), the bytes and the features loaders, and
 * packing. Every next must give a batch, the end, or an error the sequence explains;
 * the sanitizer builds add "no report, no leak". A watchdog fails a hung sequence.
 *
 * Environment:
 *   GRIST_LIFECYCLE_SECONDS   time budget (default 12; no new sequence starts after it)
 *   GRIST_LIFECYCLE_SEED      first sequence's seed (default: from the clock); printed
 *   GRIST_LIFECYCLE_SEQUENCES run exactly this many sequences (replay: the seed and 1)
 *   GRIST_LIFECYCLE_WATCHDOG  seconds one sequence may take (default 120)
 * A failure prints the sequence's seed and its steps: GRIST_LIFECYCLE_SEED=<seed>
 * GRIST_LIFECYCLE_SEQUENCES=1 replays it (the steps, not the threads' timing).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "exec/loader_internal.h"
#include "grist/error.h"
#include "grist/features.h"
#include "grist/format.h"
#include "grist/loader.h"
#include "io/io.h"
#if GRIST_HAVE_OPENCL
#include "grist/device.h"
#endif

#define RECORDS 300
#define FEATURE_RECORDS 96
#define MAX_QUEUES 8 /* devices of one stage the test reads back from */

static struct {
	char *dir;
	char *bytes3;  /* "record N", group_size:3 */
	char *bytes1;  /* "record N", group_size:1 */
	char *mnist;   /* tf.train.Example records with a 28x28 PNG and a label */
	char *damaged; /* bytes3 with a byte of a chunk in its middle flipped: every engine's error */
	struct grist_features *spec;
	struct grist_features_decoder *dec;
	uint8_t *rows;  /* the features loader's row for each record index, decoded once */
	size_t row_bytes;
	bool device_ok;
} fx;

/* ---- the sequence log and the watchdog ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_cv = PTHREAD_COND_INITIALIZER;
static char seq_log[16384];
static size_t seq_log_len;
static uint64_t seq_seed, seq_generation;
static bool seq_running, watchdog_quit;
static unsigned watchdog_seconds = 120;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	int n;

	pthread_mutex_lock(&log_lock);
	if (seq_log_len < sizeof(seq_log) - 1) {
		va_start(ap, fmt);
		n = vsnprintf(seq_log + seq_log_len, sizeof(seq_log) - seq_log_len, fmt, ap);
		va_end(ap);
		if (n > 0)
			seq_log_len += (size_t)n < sizeof(seq_log) - seq_log_len ? (size_t)n : sizeof(seq_log) - 1 - seq_log_len;
	}
	pthread_mutex_unlock(&log_lock);
}

static void dump_sequence(const char *why)
{
	fprintf(stderr, "lifecycle: sequence seed %llu %s; replay with GRIST_LIFECYCLE_SEED=%llu "
		"GRIST_LIFECYCLE_SEQUENCES=1\nsteps: %s\n", (unsigned long long)seq_seed, why,
		(unsigned long long)seq_seed, seq_log);
}

/* A sequence that fails: print it and fail the test. */
#define seq_fail(...)                                                   \
	do {                                                            \
		char why_[512];                                         \
		snprintf(why_, sizeof(why_), __VA_ARGS__);              \
		pthread_mutex_lock(&log_lock);                          \
		dump_sequence(why_);                                    \
		pthread_mutex_unlock(&log_lock);                        \
		fail_msg("%s", why_);                                   \
	} while (0)

/*
 * A sanitizer report ends the process in the sanitizer's runtime: it calls this first,
 * so the report comes with the sequence that led to it (weak: absent in a plain build).
 */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void on_sanitizer_death(void)
{
	bool locked = pthread_mutex_trylock(&log_lock) == 0;

	dump_sequence("ended in the sanitizer report above");
	if (locked)
		pthread_mutex_unlock(&log_lock);
}

static void *watchdog_main(void *arg)
{
	struct timespec deadline;
	uint64_t gen;

	(void)arg;
	pthread_mutex_lock(&log_lock);
	while (!watchdog_quit) {
		if (!seq_running) {
			pthread_cond_wait(&log_cv, &log_lock);
			continue;
		}
		gen = seq_generation;
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += watchdog_seconds;
		while (!watchdog_quit && seq_running && seq_generation == gen)
			if (pthread_cond_timedwait(&log_cv, &log_lock, &deadline) == ETIMEDOUT)
				break;
		if (!watchdog_quit && seq_running && seq_generation == gen) {
			char why[96];

			snprintf(why, sizeof(why), "HUNG (no end after %u s)", watchdog_seconds);
			dump_sequence(why);
			fflush(stderr);
			_exit(1);
		}
	}
	pthread_mutex_unlock(&log_lock);
	return NULL;
}

static void sequence_begin(uint64_t seed)
{
	pthread_mutex_lock(&log_lock);
	seq_seed = seed;
	seq_log_len = 0;
	seq_log[0] = 0;
	seq_generation++;
	seq_running = true;
	pthread_cond_broadcast(&log_cv);
	pthread_mutex_unlock(&log_lock);
}

static void sequence_end(void)
{
	pthread_mutex_lock(&log_lock);
	seq_running = false;
	pthread_cond_broadcast(&log_cv);
	pthread_mutex_unlock(&log_lock);
}

/* What the sequences did, printed at the end: each path the test means to exercise was. */
static struct {
	unsigned kinds[3], engines[3], devices[3], faults, resumes, saves, destroys_holding, oracle;
	unsigned long batches, ends, busy, errors, releases, device_read_back, device_events;
} tally;

/* ---- data ---- */

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned pick(uint64_t *s, unsigned n)
{
	return (unsigned)(rnd(s) % n);
}

static void write_mnist(const char *path)
{
	struct grist_writer *w;

	assert_int_equal(grist_writer_open(path, "group_size:4,zstd:3", &w), 0);
	for (int i = 0; i < FEATURE_RECORDS; i++) {
		char name[64];
		uint8_t *rec;
		size_t len;

		snprintf(name, sizeof(name), "features/mnist-%02d.pb", i % 32);
		rec = t_read_file(t_data(name), &len);
		assert_non_null(rec);
		assert_int_equal(grist_writer_write(w, rec, len), 0);
		free(rec);
	}
	assert_int_equal(grist_writer_close(w), 0);
}

static int group_setup(void **state)
{
	struct grist_dataset_spec ds = { 0 };
	struct grist_loader_config c;
	struct grist_loader *l;
	int i, ret;

	(void)state;
	fx.dir = t_mkdtemp();
	fx.bytes3 = t_write_numbered(fx.dir, "b3.array_record", "group_size:3,zstd:3", RECORDS);
	fx.bytes1 = t_write_numbered(fx.dir, "b1.array_record", "group_size:1,zstd:3", RECORDS);
	fx.damaged = t_write_numbered(fx.dir, "damaged.array_record", "group_size:3,zstd:3", RECORDS);
	{
		size_t len, at;
		uint8_t *file = t_read_file(fx.damaged, &len);

		/* a chunk about a tenth of the way in (its records' chunks end near 7 KiB): a read
		   fails, not the open, which checks the footer's end of the file */
		assert_non_null(file);
		at = 3000;
		assert_true(at < len);
		file[at] ^= 0x20;
		assert_int_equal(t_write_file(fx.damaged, file, len), 0);
		free(file);
	}
	fx.mnist = strdup(t_path(fx.dir, "mnist.array_record"));
	write_mnist(fx.mnist);
	assert_int_equal(grist_features_create(&fx.spec), 0);
	i = grist_features_add(fx.spec, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ 28, 28, 1 }, 3);
	assert_true(i >= 0);
	assert_int_equal(grist_features_set(fx.spec, (size_t)i, GRIST_FEATURE_DECODE, GRIST_DECODE_PNG), 0);
	assert_true(grist_features_add(fx.spec, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0) >= 0);
	assert_int_equal(grist_features_finish(fx.spec), 0);
	ds.paths = (const char **)&fx.mnist;
	ds.num_paths = 1;
	assert_int_equal(grist_features_decoder_create(fx.spec, &ds, 1, &fx.dec), 0);
	fx.row_bytes = grist_features_row_bytes(fx.spec);
	fx.rows = malloc(FEATURE_RECORDS * fx.row_bytes);
	assert_non_null(fx.rows);
	for (i = 0; i < FEATURE_RECORDS; i++) {
		char name[64];
		uint8_t *rec;
		size_t len, row_len;

		snprintf(name, sizeof(name), "features/mnist-%02d.pb", i % 32);
		rec = t_read_file(t_data(name), &len);
		assert_int_equal(grist_features_decode(fx.dec, rec, len, 0, (uint64_t)i, fx.rows + i * fx.row_bytes,
						       fx.row_bytes, &row_len), 0);
		free(rec);
	}

	/* device mode runs where an OpenCL platform is */
	grist_loader_config_init(&c);
	ds.paths = (const char **)&fx.bytes3;
	c.datasets = &ds;
	c.num_datasets = 1;
	c.batch_size = 4;
	c.device = "opencl";
	ret = grist_loader_create(&c, &l);
	fx.device_ok = ret == 0;
	if (ret)
		fprintf(stderr, "lifecycle: no device mode (%s)\n", grist_last_error());
	else
		grist_loader_destroy(l);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	grist_features_decoder_destroy(fx.dec);
	grist_features_destroy(fx.spec);
	free(fx.rows);
	free(fx.bytes3);
	free(fx.bytes1);
	free(fx.mnist);
	free(fx.damaged);
	t_rmtree(fx.dir);
	return 0;
}

/* ---- one sequence ---- */

enum kind { KIND_BYTES, KIND_FEATURES, KIND_PACK };

struct seq {
	uint64_t rng;
	struct grist_loader_config c;
	struct grist_dataset_spec ds[2];
	const char *path, *path2;
	struct grist_loader_hooks hooks;
	struct grist_io_fault faults[4];
	bool hooked, eio, two_devices;
	enum kind kind;

	struct grist_loader *l;
	struct grist_batch *held[16];
	unsigned nheld;
	int error;            /* the loader's sticky error, once it failed */
	bool ended;
	uint64_t next_seq;    /* the sequence number the next batch must have */
	uint8_t state[GRIST_STATE_MAX];
	size_t state_len;
	uint64_t state_seq;   /* batches delivered when it was saved */
	/* the checkpoint oracle: what the batch right after the save was, once it came */
	bool after_save_pending, after_save_known, resumed_check;
	uint64_t after_save;  /* digest_batch() of it, or 0: the end */
#if GRIST_HAVE_OPENCL
	/* device mode: the consumer's own queues, to read batches back and make done events */
	cl_command_queue queue[MAX_QUEUES];
	cl_device_id queue_device[MAX_QUEUES];
	unsigned num_queues;
#endif
};

static void check_content(const struct seq *q, const struct grist_batch *b, const char *when);

static const char *const engine_names[] = { "uring", "pread", "ref" };

static void configure(struct seq *q)
{
	struct grist_loader_config *c = &q->c;
	uint64_t *r = &q->rng;

	grist_loader_config_init(c);
	memset(q->ds, 0, sizeof(q->ds));
	q->kind = (enum kind)pick(r, 3);
	q->path = q->kind == KIND_FEATURES ? fx.mnist : pick(r, 8) == 0 ? fx.damaged : pick(r, 2) ? fx.bytes3 : fx.bytes1;
	q->ds[0].paths = &q->path;
	q->ds[0].num_paths = 1;
	c->datasets = q->ds;
	c->num_datasets = 1;
	/* bytes: sometimes mixed with the other numbered file (record N in either) */
	if (q->kind == KIND_BYTES && q->path != fx.damaged && pick(r, 4) == 0) {
		q->path2 = q->path == fx.bytes3 ? fx.bytes1 : fx.bytes3;
		q->ds[1].paths = &q->path2;
		q->ds[1].num_paths = 1;
		q->ds[0].weight = 1 + pick(r, 3);
		q->ds[1].weight = 1 + pick(r, 3);
		c->num_datasets = 2;
	}
	if (pick(r, 5) == 0) { /* one shard of two or three */
		c->shard_count = 2 + pick(r, 2);
		c->shard_index = pick(r, (unsigned)c->shard_count);
	}
	c->engine = (enum grist_engine_kind)pick(r, 3);
	c->granularity = pick(r, 3) ? GRIST_GRANULARITY_RECORD : GRIST_GRANULARITY_CHUNK;
	c->threads = 1 + pick(r, 3);
	c->prefetch = 1 + pick(r, 6);
	c->batch_size = 2u << pick(r, 3); /* 2, 4, 8: even, so two devices split it */
	c->epochs = pick(r, 5) ? 1 + pick(r, 2) : 0;
	c->seed = rnd(r);
	c->drop_remainder = pick(r, 2);
	c->queue_depth = pick(r, 2) ? 0 : 1 + pick(r, 8);
	if (q->kind == KIND_FEATURES) {
		c->layout = GRIST_LAYOUT_FIXED;
		c->record_bytes = grist_features_row_bytes(fx.spec);
		c->map = grist_features_map;
		c->map_ctx = fx.dec;
		c->map_id = grist_features_id(fx.spec);
	} else if (q->kind == KIND_PACK) {
		c->pack = pick(r, 2) ? GRIST_PACK_FIRST_FIT : GRIST_PACK_CONCAT_SPLIT;
		c->pack_length = 8 + pick(r, 24);
		c->pack_token_bytes = 1;
	}
	/* device mode: not with packing, which needs host memory */
	q->two_devices = false;
	if (fx.device_ok && q->kind != KIND_PACK && pick(r, 3) == 0) {
		q->two_devices = pick(r, 2);
		c->device = q->two_devices ? "opencl:all" : "opencl";
	}
	/* an I/O error, or delays that move the threads' timing, at random reads */
	q->hooked = pick(r, 3) == 0;
	q->eio = false;
	if (q->hooked) {
		unsigned n = 1 + pick(r, 4);

		memset(&q->hooks, 0, sizeof(q->hooks));
		for (unsigned i = 0; i < n; i++) {
			bool eio = pick(r, 2);

			q->faults[i] = (struct grist_io_fault){ pick(r, 40), eio ? GRIST_IO_FAULT_EIO : GRIST_IO_FAULT_DELAY,
								eio ? 0 : 200 + pick(r, 3000) };
			q->eio |= eio;
		}
		q->hooks.io_override = true;
		q->hooks.io_kind = GRIST_IO_FAULT;
		q->hooks.io_config.fault.inner = pick(r, 2) ? GRIST_IO_URING : GRIST_IO_PREAD;
		q->hooks.io_config.fault.faults = q->faults;
		q->hooks.io_config.fault.nr_faults = n;
		c->read_mode = GRIST_READ_BUFFERED; /* auto would map the cached file: no reads to fail */
	}
	tally.kinds[q->kind]++;
	tally.engines[c->engine]++;
	tally.devices[c->device ? 1 + q->two_devices : 0]++;
	tally.faults += q->eio;
	note("%s%s shard=%llu/%llu engine=%s gran=%s threads=%u prefetch=%u batch=%llu epochs=%llu drop=%d qd=%u"
	     "%s%s%s%s faults=%u;",
	     q->kind == KIND_BYTES ? "bytes" : q->kind == KIND_FEATURES ? "features" : "pack",
	     c->num_datasets > 1 ? " mixed" : "", (unsigned long long)c->shard_index,
	     (unsigned long long)c->shard_count, engine_names[c->engine],
	     c->granularity == GRIST_GRANULARITY_CHUNK ? "chunk" : "record", c->threads, c->prefetch,
	     (unsigned long long)c->batch_size, (unsigned long long)c->epochs, c->drop_remainder, c->queue_depth,
	     c->device ? " device=" : "", c->device ? c->device : "",
	     q->path == fx.bytes1 ? " group1" : q->path == fx.damaged ? " damaged" : "",
	     q->kind == KIND_PACK ? (c->pack == GRIST_PACK_FIRST_FIT ? " first_fit" : " concat") : "",
	     q->hooked ? q->hooks.io_config.fault.nr_faults : 0);
	for (unsigned i = 0; q->hooked && i < q->hooks.io_config.fault.nr_faults; i++)
		note(" fault{read %llu %s}", (unsigned long long)q->faults[i].seq,
		     q->faults[i].type == GRIST_IO_FAULT_EIO ? "EIO" : "delay");
	note("\n");
}

#if GRIST_HAVE_OPENCL
/* Device mode: the consumer's own in-order queue on each device of the loader's stage. */
static void open_queues(struct seq *q)
{
	const struct grist_device_stage *st = grist_loader_device_stage(q->l);
	unsigned n = st ? grist_device_stage_num_devices(st) : 0;
	cl_int err;

	q->num_queues = 0;
	if (n > MAX_QUEUES)
		seq_fail("%u devices, the test reads back from %d", n, MAX_QUEUES);
	for (unsigned k = 0; k < n; k++) {
		q->queue_device[k] = grist_device_stage_device(st, k);
		q->queue[k] = clCreateCommandQueue(grist_device_stage_context(st), q->queue_device[k], 0, &err);
		if (err != CL_SUCCESS)
			seq_fail("clCreateCommandQueue: %d", err);
		q->num_queues++;
	}
}

/* Once the loader is gone (its stage waited for every done event made on these queues). */
static void close_queues(struct seq *q)
{
	for (unsigned k = 0; k < q->num_queues; k++)
		clReleaseCommandQueue(q->queue[k]);
	q->num_queues = 0;
}

static cl_command_queue queue_of(const struct seq *q, cl_device_id dev)
{
	for (unsigned k = 0; k < q->num_queues; k++)
		if (q->queue_device[k] == dev)
			return q->queue[k];
	seq_fail("a batch part on a device the stage did not list");
	return NULL;
}

/* A device batch read back, part by part after its ready event, and checked as a host batch is. */
static void check_device_content(const struct seq *q, const struct grist_batch *b, const char *when)
{
	const struct grist_device_batch *db = b->device;
	size_t row = 0;
	char want[32];

	for (unsigned k = 0; k < db->num_parts; k++) {
		const struct grist_device_part *p = &db->parts[k];
		uint8_t *host = malloc(p->bytes ? p->bytes : 1);
		cl_int err = CL_SUCCESS;

		assert_non_null(host);
		if (p->bytes)
			err = clEnqueueReadBuffer(queue_of(q, p->device), p->data, CL_TRUE, p->offset, p->bytes, host, 1,
						  &p->ready, NULL);
		if (err != CL_SUCCESS) {
			free(host);
			seq_fail("%s: reading batch %llu part %u back: %d", when, (unsigned long long)b->sequence, k, err);
		}
		for (size_t r = 0; r < p->rows && row < b->num_records; r++, row++) {
			uint64_t i = b->indices[row];
			bool same;

			if (q->kind == KIND_FEATURES) {
				same = i < FEATURE_RECORDS &&
				       !memcmp(host + r * fx.row_bytes, fx.rows + i * fx.row_bytes, fx.row_bytes);
			} else {
				size_t n = (size_t)snprintf(want, sizeof(want), "record %llu", (unsigned long long)i);

				same = p->row_offsets[r + 1] - p->row_offsets[r] == n &&
				       !memcmp(host + p->row_offsets[r], want, n);
			}
			if (!same) {
				free(host);
				seq_fail("%s: device batch %llu row %zu (part %u) is not record %llu's", when,
					 (unsigned long long)b->sequence, row, k, (unsigned long long)i);
			}
		}
		free(host);
	}
	tally.device_read_back++;
}

/*
 * release_after() with the consumer's own events: a marker on each part's device queue
 * behind the part's ready event, as a kernel reading the batch would leave. The stage
 * waits for them before the slot is written again, or at destroy.
 */
static int release_after_events(struct seq *q, struct grist_batch *b)
{
	const struct grist_device_batch *db = b->device;
	cl_event ev[MAX_QUEUES];
	unsigned n = 0;
	int ret;

	for (unsigned k = 0; k < db->num_parts && k < MAX_QUEUES; k++) {
		cl_command_queue cq = queue_of(q, db->parts[k].device);
		cl_int err = clEnqueueMarkerWithWaitList(cq, 1, &db->parts[k].ready, &ev[n]);

		if (err != CL_SUCCESS)
			seq_fail("clEnqueueMarkerWithWaitList: %d", err);
		clFlush(cq);
		n++;
	}
	ret = grist_loader_release_after(q->l, b, n, (void *const *)ev);
	tally.device_events++;
	for (unsigned k = 0; k < n; k++)
		clReleaseEvent(ev[k]);
	return ret;
}
#endif

static void open_loader(struct seq *q, bool resume)
{
	int ret;

	q->c.resume_state = resume ? q->state : NULL;
	q->c.resume_state_len = resume ? q->state_len : 0;
	ret = grist_loader_create_hooked(&q->c, q->hooked ? &q->hooks : NULL, &q->l);
	if (ret)
		seq_fail("create%s: %d %s", resume ? " (resume)" : "", ret, grist_last_error());
	q->nheld = 0;
	q->error = 0;
	q->ended = false;
	q->next_seq = resume ? q->state_seq : 0;
#if GRIST_HAVE_OPENCL
	open_queues(q);
#endif
}

static void destroy(struct seq *q)
{
	for (unsigned k = 0; k < q->nheld; k++)
		check_content(q, q->held[k], "held until destroy");
	tally.destroys_holding += q->nheld > 0;
	grist_loader_destroy(q->l); /* with whatever is still held */
	q->l = NULL;
#if GRIST_HAVE_OPENCL
	close_queues(q);
#endif
	q->nheld = 0;
}

/* An error the sequence explains: an injected EIO, or a last batch two devices cannot split. */
static bool explained(const struct seq *q, int ret)
{
	if (ret == -EIO && q->eio)
		return true;
	if (q->path == fx.damaged && strstr(grist_last_error(), "damaged.array_record"))
		return true;
	return ret == -EMSGSIZE && q->two_devices && !q->c.drop_remainder &&
	       strstr(grist_last_error(), "split evenly");
}

/* FNV-1a over what identifies a batch's content: its rows, indices and (host) bytes. */
static uint64_t digest_batch(const struct grist_batch *b)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

#define MIX(p, n)                                               \
	for (i = 0; i < (n); i++)                                \
		h = (h ^ ((const uint8_t *)(p))[i]) * 0x100000001b3ull
	MIX(&b->num_rows, sizeof(b->num_rows));
	if (b->indices)
		MIX(b->indices, b->num_records * sizeof(*b->indices));
	if (b->data)
		MIX(b->data, b->bytes);
#undef MIX
	return h | 1; /* never 0, which stands for the end */
}

/*
 * The batch holds what its indices say, now and until it is released: "record N" for
 * the bytes loader, the row decoded up front for the features loader (packed rows and
 * device batches, whose bytes are on the device, are not looked into).
 */
static void check_content(const struct seq *q, const struct grist_batch *b, const char *when)
{
	char want[32];
	size_t r, n;

#if GRIST_HAVE_OPENCL
	if (b->device) {
		check_device_content(q, b, when);
		return;
	}
#endif
	if (!b->data || q->kind == KIND_PACK)
		return;
	for (r = 0; r < b->num_records; r++) {
		uint64_t i = b->indices[r];

		if (q->kind == KIND_FEATURES) {
			if (i >= FEATURE_RECORDS || memcmp(b->data + r * fx.row_bytes, fx.rows + i * fx.row_bytes,
							   fx.row_bytes))
				seq_fail("%s: batch %llu row %zu is not record %llu's", when,
					 (unsigned long long)b->sequence, r, (unsigned long long)i);
			continue;
		}
		n = (size_t)snprintf(want, sizeof(want), "record %llu", (unsigned long long)i);
		if (b->offsets[r + 1] - b->offsets[r] != n || memcmp(b->data + b->offsets[r], want, n))
			seq_fail("%s: batch %llu row %zu is not \"%s\"", when, (unsigned long long)b->sequence, r, want);
	}
}

/* The first batch (or the end) after a save, and after a resume from it, must be the same. */
static void oracle(struct seq *q, const struct grist_batch *b)
{
	uint64_t d = b ? digest_batch(b) : 0;

	if (q->after_save_pending) {
		q->after_save_pending = false;
		q->after_save_known = true;
		q->after_save = d;
	}
	if (q->resumed_check) {
		q->resumed_check = false;
		if (d != q->after_save)
			seq_fail("resumed from a checkpoint, the next %s is not the one that came after it",
				 b ? "batch" : "end");
		tally.oracle++;
	}
}

static void op_next(struct seq *q)
{
	struct grist_batch *b = NULL;
	int ret = grist_loader_next(q->l, &b);
	bool full = q->nheld >= q->c.prefetch;

	note(" next=%d%s", ret, ret == 0 && !b ? "(end)" : "");
	if (full) { /* the hold limit, whatever state the loader is in */
		if (ret != -EBUSY && !(ret == 0 && !b && q->ended) && !(ret < 0 && q->error))
			seq_fail("next with %u batches held (prefetch %u) gave %d, not -EBUSY: %s", q->nheld,
				 q->c.prefetch, ret, ret ? grist_last_error() : "a batch");
		tally.busy += ret == -EBUSY;
		return;
	}
	if (ret == -EBUSY)
		seq_fail("next refused with %u held, under prefetch %u: %s", q->nheld, q->c.prefetch,
			 grist_last_error());
	if (ret < 0) {
		if (!q->error && !explained(q, ret))
			seq_fail("next failed: %d %s", ret, grist_last_error());
		if (q->error && ret != q->error)
			seq_fail("next after error %d gave %d: %s", q->error, ret, grist_last_error());
		q->error = ret;
		tally.errors++;
		return;
	}
	if (q->error)
		seq_fail("next after error %d gave %s", q->error, b ? "a batch" : "the end");
	if (!b) {
		q->ended = true;
		tally.ends++;
		oracle(q, NULL);
		return;
	}
	if (q->ended)
		seq_fail("a batch after the end");
	if (b->num_rows == 0 || b->num_rows > q->c.batch_size)
		seq_fail("a batch of %zu rows (batch size %llu)", b->num_rows, (unsigned long long)q->c.batch_size);
	if (b->sequence != q->next_seq)
		seq_fail("batch sequence %llu, %llu expected", (unsigned long long)b->sequence,
			 (unsigned long long)q->next_seq);
	q->next_seq = b->sequence + 1;
	check_content(q, b, "delivered");
	oracle(q, b);
	q->held[q->nheld++] = b;
	tally.batches++;
}

static void op_release(struct seq *q, bool after)
{
	unsigned k;
	int ret = 0;

	if (!q->nheld)
		return;
	k = pick(&q->rng, q->nheld);
	note(" %s#%llu", after ? "release_after" : "release", (unsigned long long)q->held[k]->sequence);
	check_content(q, q->held[k], "held until its release");
#if GRIST_HAVE_OPENCL
	if (after && q->held[k]->device)
		ret = release_after_events(q, q->held[k]);
	else
#endif
	if (after)
		ret = grist_loader_release_after(q->l, q->held[k], 0, NULL);
	else
		grist_loader_release(q->l, q->held[k]);
	if (ret)
		seq_fail("release_after: %d %s", ret, grist_last_error());
	q->held[k] = q->held[--q->nheld];
	tally.releases++;
}

static void op_save(struct seq *q)
{
	int ret = grist_loader_save_state(q->l, q->state, sizeof(q->state), &q->state_len);

	note(" save=%d", ret);
	if (ret)
		seq_fail("save_state: %d %s", ret, grist_last_error());
	q->state_seq = q->next_seq;
	q->after_save_pending = true;
	q->after_save_known = false;
	tally.saves++;
}

static void run_sequence(uint64_t seed)
{
	static struct seq one; /* static: a failed sequence longjmps out, and leaks nothing then */
	struct seq *q = &one;
	unsigned ops, i;

	memset(q, 0, sizeof(*q));
	q->rng = seed;
	sequence_begin(seed);
	configure(q);
	open_loader(q, false);
	ops = 1 + pick(&q->rng, 80);
	for (i = 0; i < ops && q->l; i++) {
		unsigned r = pick(&q->rng, 21);

		if (r == 20) { /* drain: batch after batch, released at once, to the end (or an error) */
			note(" drain:");
			for (unsigned k = 0; k < 400 && !q->ended && !q->error; k++) {
				op_next(q);
				if (q->nheld >= q->c.prefetch || (q->nheld && pick(&q->rng, 2)))
					op_release(q, pick(&q->rng, 2));
			}
		} else if (r < 9) {
			op_next(q);
		} else if (r < 11) { /* hold k: next k times, up to the limit and past it */
			unsigned k = 1 + pick(&q->rng, q->c.prefetch + 1);

			note(" hold%u:", k);
			while (k--)
				op_next(q);
		} else if (r < 14) {
			op_release(q, false);
		} else if (r < 16) {
			op_release(q, true);
		} else if (r < 17) {
			op_save(q);
		} else if (r < 18) { /* stats: read while the engine's threads run */
			struct grist_loader_stats st;

			note(" stats");
			grist_loader_stats(q->l, &st);
			if (st.batches > q->next_seq)
				seq_fail("stats count %llu batches, %llu delivered", (unsigned long long)st.batches,
					 (unsigned long long)q->next_seq);
		} else if (r < 19) { /* resume from the last save (or from the start): the old loader goes, holding */
			note(" resume%s", q->state_len ? "" : "(start)");
			destroy(q);
			open_loader(q, q->state_len != 0);
			/* compared when the batch after the save was seen (an error or a resume first leaves none) */
			q->resumed_check = q->state_len && q->after_save_known;
			q->after_save_pending = false;
			tally.resumes++;
		} else {
			note(" destroy");
			destroy(q);
		}
	}
	if (q->l) {
		note(" destroy");
		destroy(q);
	}
	note("\n");
	sequence_end();
}

static unsigned env_unsigned(const char *name, unsigned def)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 10) : def;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_lifecycle(void **state)
{
	unsigned budget = env_unsigned("GRIST_LIFECYCLE_SECONDS", 12),
		 count = env_unsigned("GRIST_LIFECYCLE_SEQUENCES", 0), n = 0;
	const char *s = getenv("GRIST_LIFECYCLE_SEED");
	uint64_t seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 1000 + (uint64_t)getpid() % 1000;
	double t0 = now_s();
	pthread_t dog;

	(void)state;
	watchdog_seconds = env_unsigned("GRIST_LIFECYCLE_WATCHDOG", 120);
	fprintf(stderr, "lifecycle: seed %llu, %s %u %s (GRIST_LIFECYCLE_SEED, _SECONDS, _SEQUENCES)\n",
		(unsigned long long)seed, count ? "exactly" : "for", count ? count : budget,
		count ? "sequences" : "seconds");
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(on_sanitizer_death);
	assert_int_equal(pthread_create(&dog, NULL, watchdog_main, NULL), 0);
	while (count ? n < count : now_s() - t0 < budget)
		run_sequence(seed + n++);
	pthread_mutex_lock(&log_lock);
	watchdog_quit = true;
	pthread_cond_broadcast(&log_cv);
	pthread_mutex_unlock(&log_lock);
	pthread_join(dog, NULL);
	fprintf(stderr, "lifecycle: %u sequences from seed %llu in %.1f s, every one clean\n", n,
		(unsigned long long)seed, now_s() - t0);
	fprintf(stderr, "lifecycle: bytes/features/pack %u/%u/%u, uring/pread/ref %u/%u/%u, host/device/2 devices "
		"%u/%u/%u, with EIO %u; %lu batches, %lu ends, %lu errors, %lu refused as held, %lu releases, "
		"%u saves, %u resumes (%u compared), %u destroys holding; device batches read back %lu, released after "
		"events %lu\n", tally.kinds[0], tally.kinds[1], tally.kinds[2],
		tally.engines[0], tally.engines[1], tally.engines[2], tally.devices[0], tally.devices[1],
		tally.devices[2], tally.faults, tally.batches, tally.ends, tally.errors, tally.busy, tally.releases,
		tally.saves, tally.resumes, tally.oracle, tally.destroys_holding, tally.device_read_back,
		tally.device_events);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lifecycle),
	};

	/* two PoCL CPU devices: "opencl" takes one, "opencl:all" splits batches across both */
	setenv("POCL_DEVICES", "pthread pthread", 0);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
