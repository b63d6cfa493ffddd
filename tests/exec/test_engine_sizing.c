/*
 * Engine sizing (grist_engine_size()): a pure function from the parameters and the files'
 * geometry to every count and byte budget. Its contracts over a sweep of configurations,
 * and the bounds of URL chunk windows (docs/tuning.md, run F): a claim window no deeper
 * than the read-ahead arena holds, and about 64 MiB of slots ahead of the consumer.
 */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "exec/engine.h"
#include "exec/options_table.h"
#include "io/remote.h"

struct setup {
	struct grist_plan_file file;
	struct grist_engine_source src;
	struct grist_layout layout;
	struct grist_engine_params p;
	struct grist_engine_geometry g;
};

/* One dataset of one file, @group records per chunk, a ragged layout, nothing mapped. */
static void setup(struct setup *s, uint64_t batch, enum grist_granularity gran, uint64_t group, bool remote)
{
	memset(s, 0, sizeof(*s));
	s->file = (struct grist_plan_file){ .num_records = 1u << 20, .group_size = group };
	s->src = (struct grist_engine_source){ .files = &s->file, .num_files = 1, .num_records = 1u << 20,
					       .weight = 1.0 };
	s->layout = (struct grist_layout){ .kind = GRIST_LAYOUT_RAGGED, .batch_size = batch,
					   .max_batch_bytes = 64u << 20 };
	s->p = (struct grist_engine_params){ .sources = &s->src, .num_sources = 1, .layout = &s->layout,
					     .batch_size = batch, .engine = GRIST_ENGINE_URING,
					     .granularity = gran, .shard_count = 1, .shuffled = true,
					     .threads = 2, .prefetch = 4 };
	/* about 1 KiB a record, zstd-compressed to half: 64 records make a 33 KB chunk */
	s->g = (struct grist_engine_geometry){ .online_cpus = 2, .any_remote = remote, .all_remote = remote,
					       .largest_extent = 520 * group + 600, .smallest_group = group,
					       .row_bytes = 1024, .max_chunk_decoded = 1024 * group };
}

static void check_contracts(const struct setup *t)
{
	struct grist_engine_sizes a, b;

	grist_engine_size(&t->p, &t->g, &a);
	grist_engine_size(&t->p, &t->g, &b);
	assert_memory_equal(&a, &b, sizeof(a)); /* pure: the device stage must get the engine's figures */
	assert_true(a.workers >= 1);
	if (t->p.engine == GRIST_ENGINE_REF)
		assert_int_equal(a.workers, 1);
	else if (t->p.threads && t->g.positions && t->p.granularity == GRIST_GRANULARITY_RECORD &&
		 (t->g.positions + t->p.batch_size - 1) / t->p.batch_size < t->p.threads)
		assert_int_equal(a.workers, (t->g.positions + t->p.batch_size - 1) / t->p.batch_size);
	else if (t->p.threads)
		assert_int_equal(a.workers, t->p.threads);
	assert_true(a.queue_depth >= 1);
	if (t->p.queue_depth)
		assert_int_equal(a.queue_depth, t->p.queue_depth);
	/* every chunk read fits the arena, whose length is whole pages */
	assert_true(a.read_ahead >= t->g.largest_extent);
	assert_int_equal(a.read_ahead % GRIST_ENGINE_MEM_ALIGN, 0);
	if (t->p.read_ahead_bytes && t->p.read_ahead_bytes / a.workers >= t->g.largest_extent + 2 * 4096)
		assert_true(a.read_ahead <= t->p.read_ahead_bytes / a.workers + GRIST_ENGINE_MEM_ALIGN);
	/* a run of known length: no worker's arena above twice what the whole run reads */
	if (t->g.positions && !t->p.read_ahead_bytes)
		assert_true(a.read_ahead <= t->g.positions * (t->g.largest_extent + 2 * 4096) + 4096 ||
			    a.read_ahead <= t->g.largest_extent + 3 * 4096);
	assert_int_equal(a.positions, t->g.positions);
	/* a unit is whole batches, and a chunk-granularity unit may stretch */
	assert_true(a.unit_items >= t->p.batch_size);
	assert_int_equal(a.unit_items % t->p.batch_size, 0);
	assert_true(a.max_unit_items >= a.unit_items);
	/* the claim window: a pipeline of at least two units per worker, at most MAX_WORKS */
	assert_true(a.works >= 2 && a.works <= 1024);
	assert_int_equal(a.nunits, t->p.prefetch + a.works * a.workers);
	assert_int_equal(a.slot_window, t->p.prefetch + 2 * a.workers);
	/* slots: never more than the units claimed, and enough for every worker to decode (a
	   budget the caller set: at least one) */
	assert_true(a.assembly <= a.nunits);
	if (t->p.assembly_bytes)
		assert_true(a.assembly >= 1);
	else
		assert_true(a.assembly >= (a.workers > 2 ? a.workers : 2) || a.assembly == a.nunits);
	if (a.assembly_in_bytes)
		assert_true(a.assembly < a.nunits);
	assert_true(a.device_slots >= 1);
}

static void test_contracts_sweep(void **state)
{
	static const uint64_t batches[] = { 1, 16, 256 };
	static const uint64_t groups[] = { 1, 64 };
	static const unsigned threads[] = { 0, 1, 2, 16 };
	static const uint64_t read_ahead[] = { 0, 1u << 20, 256u << 20 };
	static const enum grist_engine_kind engines[] = { GRIST_ENGINE_URING, GRIST_ENGINE_REF };
	static const uint64_t positions[] = { 0, 5, 1u << 20 };
	struct setup t;
	int n = 0;

	(void)state;
	for (size_t pos = 0; pos < 3; pos++)
	for (size_t e = 0; e < 2; e++)
		for (int gran = 0; gran < 2; gran++)
			for (int remote = 0; remote < 3; remote++) /* local, URL, both */
				for (size_t b = 0; b < 3; b++)
					for (size_t gr = 0; gr < 2; gr++)
						for (size_t th = 0; th < 4; th++)
							for (size_t ra = 0; ra < 3; ra++) {
								setup(&t, batches[b],
								      gran ? GRIST_GRANULARITY_CHUNK
									   : GRIST_GRANULARITY_RECORD,
								      groups[gr], remote != 0);
								t.g.all_remote = remote == 1;
								t.p.engine = engines[e];
								t.p.threads = threads[th];
								t.p.read_ahead_bytes = read_ahead[ra];
								t.g.positions = positions[pos];
								check_contracts(&t);
								n++;
							}
	assert_int_equal(n, 3 * 2 * 2 * 3 * 3 * 2 * 4 * 3);
}

/*
 * URL datasets at chunk granularity (group_size 64, batches of 256): the backend lands a
 * GET's reads for many units at once, so a claim window sized by the queue depth alone
 * (457 units per worker) let the workers plan and decode hundreds of units ahead of the
 * consumer, each into a fresh slot. Now a worker claims no more units than its arena holds
 * the reads of, and slots ahead of the consumer hold about 64 MiB. Local files keep their
 * sizing.
 */
static void test_url_chunk_windows_bounded(void **state)
{
	struct grist_engine_sizes url, local;
	uint64_t unit_reads, slot_bytes;
	struct setup t;

	(void)state;
	setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, true);
	grist_engine_size(&t.p, &t.g, &url);
	check_contracts(&t);
	unit_reads = url.unit_items / 64 + 2;
	/* as many units as the arena holds the reads of (the arena rounds extents up: at most that) */
	assert_true(url.works <= 2 + url.read_ahead / (unit_reads * t.g.largest_extent));
	/* and still enough for the backend's window: more than a disk's 2 + 2 x depth / items */
	assert_true(url.works > 2 + 2 * (uint64_t)GRIST_DEFAULT_QUEUE_DEPTH / url.unit_items);
	slot_bytes = url.unit_items * t.g.row_bytes;
	assert_true(url.assembly_in_bytes);
	assert_true(url.assembly * slot_bytes <= (64u << 20));

	/* the same files on a local disk: the queue depth's window, and slots up to 512 MiB */
	setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, false);
	grist_engine_size(&t.p, &t.g, &local);
	assert_int_equal(local.works, 2 + 2 * local.queue_depth / local.unit_items);
	assert_false(local.assembly_in_bytes && local.assembly * slot_bytes <= (64u << 20));
	/*
	 * That alone holds for any budget (8 units claimed, fewer than 64 slots): with a window
	 * of more than 64 MiB of slots the local files keep every one of them (512 MiB budget).
	 */
	t.p.threads = 16;
	t.p.queue_depth = 4096;
	grist_engine_size(&t.p, &t.g, &local);
	assert_true((uint64_t)local.nunits * slot_bytes > (64u << 20));
	assert_true((uint64_t)local.nunits * slot_bytes <= (512u << 20));
	assert_int_equal(local.assembly, local.nunits);
	assert_false(local.assembly_in_bytes);
}

/*
 * URL datasets: the workers' reads wait in one GET scheduler per process, so the default
 * read-ahead and queue depth are the process's, shared by its workers (never below a
 * worker's own default): one worker on a 103 MB object sent 2.4-3.0 bytes of GET body per
 * byte wanted with 64 MiB, four 1.20-1.27 with 64 MiB each (docs/tuning.md, run H). The
 * share above a worker's default is at most twice the URL files' bytes; local files keep
 * theirs.
 */
static void test_url_read_ahead_per_process(void **state)
{
	static const unsigned threads[] = { 1, 2, 4, 16 };
	struct grist_engine_sizes sz, local, local4, four;
	struct setup t;

	(void)state;
	setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, true);
	t.p.threads = 4;
	t.g.remote_bytes = 103u << 20;
	grist_engine_size(&t.p, &t.g, &four);
	setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, false);
	t.p.threads = 4;
	grist_engine_size(&t.p, &t.g, &local4);
	for (size_t i = 0; i < 4; i++) {
		setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, true);
		t.p.threads = threads[i];
		t.g.remote_bytes = 103u << 20;
		check_contracts(&t);
		grist_engine_size(&t.p, &t.g, &sz);
		if (threads[i] <= 4)
			assert_int_equal((uint64_t)sz.read_ahead * sz.workers, 256u << 20);
		else
			assert_int_equal(sz.read_ahead, 64u << 20);
		assert_true((uint64_t)sz.queue_depth * sz.workers >= 16384);
		/* units read ahead: as many in all as four workers' (each worker's 2 units of slack apart) */
		assert_true(sz.works * sz.workers + 2 * 4 >= four.works * 4);

		/* a 10 MB dataset: no more than the default and two passes over it */
		t.g.remote_bytes = 10u << 20;
		grist_engine_size(&t.p, &t.g, &sz);
		assert_true(sz.read_ahead <= (64u << 20) + (20u << 20) + GRIST_ENGINE_MEM_ALIGN);
		assert_true(sz.read_ahead >= (64u << 20));

		/* the same file on a local disk: a worker's own default, whatever the threads */
		setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, false);
		t.p.threads = threads[i];
		grist_engine_size(&t.p, &t.g, &local);
		assert_int_equal(local.read_ahead, local4.read_ahead);
		assert_int_equal(local.queue_depth, local4.queue_depth);
	}
}

/*
 * URL datasets of tiny chunks (group_size 1, 611-byte chunks of a 122 MB object): the
 * queue depth is what the read-ahead holds, not 16,384 reads. That cap held the reads
 * waiting in the GET scheduler to 11 MB of the object, and each GET carried 8.5-8.7 bytes
 * of body per byte wanted (docs/tuning.md, "group_size 1: the read-ahead in bytes"). The
 * reads the process keeps out are the same whatever its threads, and bounded: at most
 * GRIST_IO_MAX_REMOTE_QUEUE_DEPTH in all. Large chunks keep today's depth.
 */
static void test_url_depth_by_bytes(void **state)
{
	static const unsigned threads[] = { 1, 2, 4, 16 };
	struct grist_engine_sizes sz, g64;
	uint64_t total = 0;
	struct setup t;

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		setup(&t, 256, GRIST_GRANULARITY_CHUNK, 1, true);
		t.g.largest_extent = 704;
		t.g.remote_bytes = 122u << 20;
		t.p.threads = threads[i];
		check_contracts(&t);
		grist_engine_size(&t.p, &t.g, &sz);
		/* the arena holds every read out and as many landed */
		assert_true(2 * (uint64_t)sz.queue_depth * 704 <= sz.read_ahead + 2 * 704 * 64);
		/* the process's reads are bounded, whatever its threads (above the depth's floor) */
		assert_true((uint64_t)sz.queue_depth * sz.workers <= GRIST_IO_MAX_REMOTE_QUEUE_DEPTH ||
			    sz.queue_depth == 16384 / sz.workers);
		if (threads[i] == 1) {
			assert_true(sz.queue_depth > 16384 * 8); /* most of the object's 200,000 chunks */
			total = (uint64_t)sz.queue_depth;
		} else if (threads[i] <= 4) {
			assert_true((uint64_t)sz.queue_depth * sz.workers * 100 >= total * 99);
			assert_true((uint64_t)sz.queue_depth * sz.workers <= total);
		}
	}
	/* a 1 MB dataset: the depth of a read-ahead no larger than two passes over it */
	t.g.remote_bytes = 1u << 20;
	t.p.threads = 1;
	grist_engine_size(&t.p, &t.g, &sz);
	assert_true((uint64_t)sz.queue_depth * 704 <= (64u << 20) + (2u << 20));
	/* group_size 64 (33 KB chunks): the depth is the reads' count floor, as before */
	setup(&t, 256, GRIST_GRANULARITY_CHUNK, 64, true);
	t.g.remote_bytes = 103u << 20;
	t.p.threads = 1;
	grist_engine_size(&t.p, &t.g, &g64);
	assert_int_equal(g64.queue_depth, 16384);
}

/*
 * URL files whose chunks are all above grist_max_chunk_bytes() (or that have none) leave
 * largest_extent 0: such a chunk is refused with its file and offset when a unit reaches
 * it, so sizing must not divide by the extent first (SIGFPE before any message).
 */
static void test_url_no_extent(void **state)
{
	struct setup t;

	(void)state;
	for (int gran = 0; gran < 2; gran++)
		for (size_t ra = 0; ra < 2; ra++) {
			setup(&t, 256, gran ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD, 64, true);
			t.g.largest_extent = 0;
			t.p.read_ahead_bytes = ra ? 8u << 20 : 0;
			check_contracts(&t);
		}
}

/*
 * Sized to the work (issue 37): 1 MiB records, group_size 1, uncompressed, batch 256,
 * depth 32, 2 threads, as cold.py's batch-256 case. An unbounded run and the 768-record
 * file keep 64 MiB of read-ahead per worker and two 256 MiB slots (the caller's batch and
 * the one being built: both used). A run of 44 records (44 MiB) is one unit: one worker,
 * whose arena holds that unit's reads, not two workers of 64 MiB each (a 300-record run,
 * two units, keeps both); its slot is sized for its 44 rows (engine_async_consumer.c).
 */
static void test_sized_to_the_work(void **state)
{
	const uint64_t mib = 1u << 20, extent = mib + 5 + 40 + 512; /* a record, its chunk header, 512-aligned */
	struct grist_engine_sizes unbounded, judged, shorter, one;
	struct setup t;

	(void)state;
	setup(&t, 256, GRIST_GRANULARITY_RECORD, 1, false);
	t.layout.max_batch_bytes = 256 * mib;
	t.p.queue_depth = 32;
	t.g.largest_extent = extent;
	t.g.row_bytes = mib;
	t.g.max_chunk_decoded = mib;
	grist_engine_size(&t.p, &t.g, &unbounded);
	assert_int_equal(unbounded.read_ahead, 64 * mib);
	assert_int_equal(unbounded.assembly, 2);

	t.g.positions = 768;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &judged);
	assert_int_equal(judged.read_ahead, 64 * mib);
	assert_int_equal(judged.assembly, 2);
	assert_int_equal(judged.positions, 768);

	t.g.positions = 44;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &shorter);
	/* one unit: one worker, its arena for the unit's reads (whole pages), not 2 x 64 MiB */
	assert_int_equal(shorter.workers, 1);
	assert_int_equal(shorter.read_ahead, (44 * (extent + 2 * 4096) + 4095) / 4096 * 4096);
	assert_true(shorter.assembly >= 2);
	assert_int_equal(shorter.unit_items, 256);

	t.g.positions = 300; /* two units: 256 and 44 */
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &shorter);
	assert_int_equal(shorter.workers, 2);
	assert_int_equal(shorter.read_ahead, 64 * mib);

	t.g.positions = 1;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &one);
	assert_true(one.read_ahead >= extent && one.read_ahead <= 2 * (extent + 2 * 4096) + 4096);
}

/*
 * A map makes decoding CPU work, so every worker gets room for two units plus the batches
 * the caller may hold (docs/tuning.md, "The loader's serial share"): RandomResizedCrop(224)
 * to float32 at batch 64 is a 38.5 MB slot, and the 512 MiB budget alone gave 16 threads
 * 16 slots, one a worker, which left half of them waiting for the consumer. Now 36 (1.39 GB).
 * Without a map, or where the budget already covers the claim window (2 threads), nothing
 * changes.
 */
static int no_map(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t out_cap, size_t *out_len)
{
	(void)ctx, (void)in, (void)out, (void)out_cap, (void)out_len;
	return 0; /* never called: sizing only asks whether there is a map */
}

static void test_map_two_units_a_worker(void **state)
{
	const uint64_t row = 224 * 224 * 3 * 4 + 8; /* the image and its label */
	struct grist_engine_sizes a;
	struct setup t;

	(void)state;
	setup(&t, 64, GRIST_GRANULARITY_RECORD, 1, false);
	t.layout = (struct grist_layout){ .kind = GRIST_LAYOUT_FIXED, .record_bytes = row, .batch_size = 64,
					  .max_batch_bytes = 64u << 20 };
	t.p.threads = 16;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_true(a.assembly_in_bytes);
	assert_int_equal(a.assembly, 16); /* no map: the budget, floored at one a worker */

	t.layout.map = no_map;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_true(a.assembly_in_bytes);
	assert_int_equal(a.assembly, 4 + 2 * 16);
	assert_int_equal(a.assembly, a.slot_window);
	assert_true(a.assembly * 64 * row < 1400000000ull);

	t.p.threads = 2; /* the budget's 13 slots are more than the 12 units claimed at once */
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_false(a.assembly_in_bytes);
	assert_int_equal(a.assembly, a.nunits);
}

/*
 * assembly_bytes set by the caller holds: the floors of the default (one slot a worker, with
 * a map the slot window) only buy speed, and a caller who bounds the memory chose that
 * trade. The same 16 threads with a map as above: 8 slots' worth gives 8, not 36; less than
 * one slot gives one; no map, 4 slots' worth gives 4, not one a worker; a budget larger than
 * the claim window changes nothing; the default keeps its floors.
 */
static void test_set_budget_holds(void **state)
{
	const uint64_t row = 224 * 224 * 3 * 4 + 8, slot = 64 * row;
	struct grist_engine_sizes a;
	struct setup t;

	(void)state;
	setup(&t, 64, GRIST_GRANULARITY_RECORD, 1, false);
	t.layout = (struct grist_layout){ .kind = GRIST_LAYOUT_FIXED, .record_bytes = row, .batch_size = 64,
					  .max_batch_bytes = 64u << 20, .map = no_map };
	t.p.threads = 16;
	grist_engine_size(&t.p, &t.g, &a);
	assert_int_equal(a.assembly, 4 + 2 * 16); /* the default: the map's floor */
	t.p.assembly_bytes = 8 * slot + slot / 2;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_true(a.assembly_in_bytes);
	assert_int_equal(a.assembly, 8);
	t.p.assembly_bytes = slot - 1;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_true(a.assembly_in_bytes);
	assert_int_equal(a.assembly, 1);
	t.p.assembly_bytes = (uint64_t)1 << 40;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_false(a.assembly_in_bytes);
	assert_int_equal(a.assembly, a.nunits);
	t.layout.map = NULL;
	t.p.assembly_bytes = 4 * slot;
	check_contracts(&t);
	grist_engine_size(&t.p, &t.g, &a);
	assert_true(a.assembly_in_bytes);
	assert_int_equal(a.assembly, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_contracts_sweep),
		cmocka_unit_test(test_url_chunk_windows_bounded),
		cmocka_unit_test(test_url_no_extent),
		cmocka_unit_test(test_url_depth_by_bytes),
		cmocka_unit_test(test_url_read_ahead_per_process),
		cmocka_unit_test(test_sized_to_the_work),
		cmocka_unit_test(test_map_two_units_a_worker),
		cmocka_unit_test(test_set_budget_holds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
