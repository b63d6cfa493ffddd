/* Tests for the loader's device mode (device_feed.c): checkpoints at the end of the stream, and the hold limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "grist/device.h"
#include "grist/error.h"
#include "grist/format.h"
#include "grist/loader.h"

#define RECORDS 200
#define BIG_RECORDS 512
#define BIG_BYTES 1024

#define MIXED_RECORDS 1500
#define MIXED_BYTES 2048

static char *dir;
static const char *path, *big_path, *mixed_path;

static void write_file(void)
{
	struct grist_writer *w;
	static char rec[32 << 10];
	int i;

	dir = t_mkdtemp();
	path = strdup(t_path(dir, "e.array_record"));
	assert_int_equal(grist_writer_open(path, "group_size:1,zstd:3", &w), 0);
	for (i = 1; i <= RECORDS; i++) {
		int n = snprintf(rec, sizeof(rec), "%d", i);

		assert_int_equal(grist_writer_write(w, rec, (size_t)n), 0);
	}
	assert_int_equal(grist_writer_close(w), 0);
	/* 1 KiB records in chunks of 64: a device slot sized from the footers would be 64x a batch */
	big_path = strdup(t_path(dir, "big.array_record"));
	assert_int_equal(grist_writer_open(big_path, "group_size:64,zstd:3", &w), 0);
	for (i = 0; i < BIG_RECORDS; i++) {
		t_fill(rec, BIG_BYTES, (uint64_t)i + 1);
		assert_int_equal(grist_writer_write(w, rec, BIG_BYTES), 0);
	}
	assert_int_equal(grist_writer_close(w), 0);
	/* 2 KiB records and two of 32 KiB: batches of 32 are 64 KiB, or 94 KiB with a large one */
	mixed_path = strdup(t_path(dir, "mixed.array_record"));
	assert_int_equal(grist_writer_open(mixed_path, "group_size:4,zstd:3", &w), 0);
	for (i = 0; i < MIXED_RECORDS; i++) {
		size_t n = i == 700 || i == 1400 ? sizeof(rec) : MIXED_BYTES;

		t_fill(rec, n, (uint64_t)i + 7);
		assert_int_equal(grist_writer_write(w, rec, n), 0);
	}
	assert_int_equal(grist_writer_close(w), 0);
}

static void config(struct t_one_file *o)
{
	struct grist_loader_config *c = &o->c;

	t_one_file_init(o, path);
	c->batch_size = 8;
	c->epochs = 1;
	c->seed = 3;
	c->threads = 1;
	c->device = "opencl";
}

/* Create a device loader, or skip when this machine has no OpenCL platform. */
static struct grist_loader *open_device(const struct grist_loader_config *c)
{
	struct grist_loader *l;
	int ret;

	ret = grist_loader_create(c, &l);
	if (ret == -ENODEV || ret == -ENOTSUP) {
		fprintf(stderr, "skipped: %s\n", grist_last_error());
		skip();
	}
	assert_int_equal(ret, 0);
	return l;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * A checkpoint saved after the last batch resumes to nothing, also when the feeder
 * reached the end of the stream long before the consumer did (it used to record the
 * consumer's position at that moment as the end, and a resume replayed the rest).
 */
static void test_end_checkpoint(void **state)
{
	struct t_one_file o;
	struct grist_loader *l;
	struct grist_batch *b;
	uint8_t st[256];
	size_t len;
	int n = 0, g;

	(void)state;
	/* record granularity (workers fill device slots) and chunk (helpers copy into them) */
	for (g = 0; g < 2; g++) {
		n = 0;
		config(&o);
		o.c.granularity = g ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		o.c.prefetch = 32; /* enough device slots that the feeder pulls every batch at once */
		l = open_device(&o.c);
		assert_int_equal(grist_loader_next(l, &b), 0);
		assert_non_null(b);
		grist_loader_release(l, b);
		sleep_ms(300); /* let the feeder run to the end of the stream */
		for (;;) {
			assert_int_equal(grist_loader_next(l, &b), 0);
			if (!b)
				break;
			n++;
			grist_loader_release(l, b);
		}
		assert_int_equal(n, RECORDS / 8 - 1);
		assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
		grist_loader_destroy(l);

		o.c.resume_state = st;
		o.c.resume_state_len = len;
		l = open_device(&o.c);
		assert_int_equal(grist_loader_next(l, &b), 0);
		assert_null(b);
		grist_loader_destroy(l);
	}
}

/*
 * A caller may hold up to prefetch batches in device mode too; one more is refused
 * with -EBUSY at once. It used to block forever once every device slot was held.
 */
static void test_hold_limit(void **state)
{
	static const struct {
		enum grist_engine_kind engine;
		enum grist_granularity granularity;
		unsigned prefetch;
	} cases[] = {
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_RECORD, 0 }, /* the default prefetch, 4 */
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_RECORD, 1 },
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_CHUNK, 4 },
		{ GRIST_ENGINE_PREAD, GRIST_GRANULARITY_RECORD, 7 },
		{ GRIST_ENGINE_REF, GRIST_GRANULARITY_RECORD, 4 },
	};
	struct t_one_file o;
	struct grist_batch *b[64], *extra;
	struct grist_loader *l;
	unsigned i, k, limit;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		config(&o);
		o.c.batch_size = 4;
		o.c.engine = cases[i].engine;
		o.c.granularity = cases[i].granularity;
		o.c.prefetch = cases[i].prefetch;
		limit = o.c.prefetch ? o.c.prefetch : 4;
		l = open_device(&o.c);
		for (k = 0; k < limit; k++) {
			assert_int_equal(grist_loader_next(l, &b[k]), 0);
			assert_non_null(b[k]);
			assert_int_equal(b[k]->sequence, k);
		}
		assert_int_equal(grist_loader_next(l, &extra), -EBUSY);
		assert_non_null(strstr(grist_last_error(), "held"));
		/* the refusal is not an error state: release one and go on */
		grist_loader_release(l, b[0]);
		assert_int_equal(grist_loader_next(l, &b[0]), 0);
		assert_non_null(b[0]);
		assert_int_equal(b[0]->sequence, limit);
		for (k = 0; k < limit; k++)
			grist_loader_release(l, b[k]);
		grist_loader_destroy(l);
	}
}

/*
 * Destroy right after the hold-limit refusal, with every batch still held (issue 35):
 * a held batch belongs to the caller's held table alone, so destroy hands each back to
 * the engine once. It used to stay in the feeder's slot map too, and destroy gave it
 * back from both: a slot pooled twice, freed twice (ASan: heap-use-after-free in
 * grist_async_pool_free; a release build aborted with "double free" about 1 run in 6).
 */
static void test_destroy_holding_after_limit(void **state)
{
	static const struct {
		enum grist_engine_kind engine;
		enum grist_granularity granularity;
	} cases[] = {
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_RECORD },
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_CHUNK },
		{ GRIST_ENGINE_PREAD, GRIST_GRANULARITY_RECORD },
		{ GRIST_ENGINE_REF, GRIST_GRANULARITY_RECORD },
	};
	static const unsigned kept[] = { 4, 3, 1 }; /* of the four: destroy frees those, and no more */
	struct t_one_file o;
	struct grist_batch *b[4], *extra;
	struct grist_loader *l;
	unsigned i, j, k;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (j = 0; j < sizeof(kept) / sizeof(kept[0]); j++) {
			config(&o);
			o.c.batch_size = 4;
			o.c.engine = cases[i].engine;
			o.c.granularity = cases[i].granularity;
			l = open_device(&o.c);
			for (k = 0; k < 4; k++) {
				assert_int_equal(grist_loader_next(l, &b[k]), 0);
				assert_non_null(b[k]);
			}
			assert_int_equal(grist_loader_next(l, &extra), -EBUSY);
			for (k = kept[j]; k < 4; k++)
				grist_loader_release(l, b[k]);
			grist_loader_destroy(l);
		}
	}
}

/*
 * A batch that does not fit a device slot fails the loader only after every batch
 * before it was delivered, in order: record granularity (workers decode into the
 * slots: -ENOMEM from the engine) and chunk granularity (helpers copy into slots
 * sized per batch: -EMSGSIZE), whatever ran ahead on the feeder and helper threads.
 */
static void test_oversized_batch_after_the_others(void **state)
{
	static const struct {
		const char **file;
		size_t batch, limit;
		enum grist_granularity granularity;
		unsigned threads;
		int code;
	} cases[] = {
		{ &path, 8, 16, GRIST_GRANULARITY_RECORD, 1, -ENOMEM },
		{ &path, 8, 16, GRIST_GRANULARITY_CHUNK, 1, -EMSGSIZE },
		{ &path, 8, 16, GRIST_GRANULARITY_CHUNK, 9, -EMSGSIZE }, /* two copy helpers */
		/* larger batches: copies take long enough that batches are queued at the failure */
		{ &mixed_path, 32, 80 << 10, GRIST_GRANULARITY_RECORD, 2, -ENOMEM },
		{ &mixed_path, 32, 80 << 10, GRIST_GRANULARITY_CHUNK, 1, -EMSGSIZE },
		{ &mixed_path, 32, 80 << 10, GRIST_GRANULARITY_CHUNK, 9, -EMSGSIZE },
	};
	struct t_one_file o;
	struct grist_loader *l;
	struct grist_batch *b;
	unsigned i, good, k;
	int ret;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* the host run says which batch is the first larger than the limit */
		config(&o);
		o.paths[0] = *cases[i].file;
		o.c.batch_size = cases[i].batch;
		o.c.device = NULL;
		o.c.granularity = cases[i].granularity;
		o.c.threads = cases[i].threads;
		o.c.prefetch = 8;
		assert_int_equal(grist_loader_create(&o.c, &l), 0);
		for (good = 0; grist_loader_next(l, &b) == 0 && b && b->bytes <= cases[i].limit; good++)
			grist_loader_release(l, b);
		assert_non_null(b); /* some batch is larger */
		grist_loader_release(l, b);
		grist_loader_destroy(l);

		config(&o);
		o.paths[0] = *cases[i].file;
		o.c.batch_size = cases[i].batch;
		o.c.granularity = cases[i].granularity;
		o.c.threads = cases[i].threads;
		o.c.prefetch = 8;
		o.c.device_slot_bytes = cases[i].limit;
		l = open_device(&o.c);
		for (k = 0; (ret = grist_loader_next(l, &b)) == 0 && b; k++) {
			assert_true(b->bytes <= cases[i].limit);
			assert_int_equal(b->sequence, k);
			grist_loader_release(l, b);
		}
		if (ret != cases[i].code || k != good)
			fail_msg("case %u: %u batches then %d (%s); the host run has %u batches before the large one",
				 i, k, ret, grist_last_error(), good);
		assert_non_null(strstr(grist_last_error(), "device slot"));
		grist_loader_destroy(l);
	}
}

/*
 * At chunk granularity the device slots get memory for the batches that go through
 * them, not for the bound the footers give (64 records of 1 KiB per chunk: 64x a
 * batch), and only the slots a run keeps busy get any.
 */
static void test_chunk_slots_sized_to_batches(void **state)
{
	struct t_one_file o;
	struct grist_device_stats st;
	struct grist_loader *l;
	struct grist_batch *b;
	uint64_t n = 0, per_slot_bound;

	(void)state;
	config(&o);
	o.paths[0] = big_path;
	o.c.granularity = GRIST_GRANULARITY_CHUNK;
	o.c.batch_size = 16;
	o.c.epochs = 2;
	o.c.threads = 2;
	l = open_device(&o.c);
	while (grist_loader_next(l, &b) == 0 && b) {
		assert_int_equal(b->bytes, 16 * BIG_BYTES);
		n += b->num_records;
		grist_loader_release(l, b);
	}
	assert_int_equal(n, 2 * BIG_RECORDS);
	grist_device_stage_stats(grist_loader_device_stage(l), &st);
	assert_true(st.slots_allocated >= 1);
	assert_true(st.slots_allocated <= st.slots);
	/* each slot's rows fit 16 KiB + a quarter, rounded to 64 KiB; the footers' bound is 1 MiB */
	per_slot_bound = (uint64_t)(64 << 10) * 2 * (1 + grist_device_stage_num_devices(grist_loader_device_stage(l)));
	assert_true(st.memory_bytes <= st.slots_allocated * per_slot_bound);
	grist_loader_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_end_checkpoint),
		cmocka_unit_test(test_hold_limit),
		cmocka_unit_test(test_destroy_holding_after_limit),
		cmocka_unit_test(test_oversized_batch_after_the_others),
		cmocka_unit_test(test_chunk_slots_sized_to_batches),
	};
	int ret;

	write_file();
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	t_rmtree(dir);
	return ret;
}
