/*
 * A run shorter than the engine's buffers maps and faults in only what it uses (issue 37):
 * 44 records of 1 MiB (one unit at batch 256, 2 threads, depth 32) used to get two
 * read-ahead arenas of 64 MiB, pinned at start-up, and a 256 MiB batch slot for 44 MiB of
 * rows: 384 MiB for a 44 MiB run. Now one worker, an arena of the run's reads and a slot of
 * its rows. Checked two ways: the loader's own count of its memory (stats.memory_bytes),
 * and the minor page faults the process took while the loader ran (getrusage), which
 * count what mlock and the first touches brought in. The sizing itself is checked
 * directly in test_engine_sizing.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "grist/format.h"
#include "grist/loader.h"
#include "helpers.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SIZED_RUN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SIZED_RUN_SANITIZED 1
#endif

#define RECORDS 44
#define RECORD_BYTES (1u << 20)
#define MIB (1ull << 20)

static char *dir;
static char path[4096];

static int setup(void **state)
{
	struct grist_writer *w;
	uint8_t *rec = malloc(RECORD_BYTES);

	(void)state;
	dir = t_mkdtemp();
	snprintf(path, sizeof(path), "%s/short.ar", dir);
	if (!rec || grist_writer_open(path, "group_size:1,uncompressed", &w))
		return -1;
	for (int i = 0; i < RECORDS; i++) {
		t_fill(rec, RECORD_BYTES, (uint64_t)i + 1);
		if (grist_writer_write(w, rec, RECORD_BYTES))
			return -1;
	}
	free(rec);
	return grist_writer_close(w);
}

static int teardown(void **state)
{
	(void)state;
	t_rmtree(dir);
	return 0;
}

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* One epoch of the file, seed 1: what every run here shares. */
static void base_config(struct t_one_file *o)
{
	t_one_file_init(o, path);
	o->c.epochs = 1;
	o->c.seed = 1;
}

static void short_run(enum grist_engine_kind engine)
{
	struct t_one_file o;
	struct grist_loader_stats st;
	struct grist_loader *l;
	struct grist_batch *b;
	uint64_t records = 0, bound = 2 * RECORDS * MIB + 24 * MIB; /* a slot and an arena, and slack */
	long faults = minor_faults();

	base_config(&o);
	o.c.batch_size = 256;
	o.c.max_batch_bytes = 256 * MIB;
	o.c.engine = engine;
	o.c.read_mode = GRIST_READ_BUFFERED;
	o.c.threads = 2;
	o.c.queue_depth = 32;
	l = t_one_file_open(&o);
	while (grist_loader_next(l, &b) == 0 && b) {
		records += b->num_records;
		grist_loader_release(l, b);
	}
	assert_int_equal(records, RECORDS);
	grist_loader_stats(l, &st);
	grist_loader_destroy(l);
	faults = minor_faults() - faults;
	printf("engine %s, %u threads: memory %llu bytes, %ld minor faults (%llu MiB), bound %llu MiB\n", st.engine,
	       st.threads, (unsigned long long)st.memory_bytes, faults, (unsigned long long)faults * 4096 / MIB,
	       (unsigned long long)(bound / MIB));
	assert_true(st.memory_bytes <= bound);
#ifdef SIZED_RUN_SANITIZED
	/* a sanitizer's shadow memory faults in with the process's (TSan: 4 times over) */
	(void)faults;
#else
	assert_true((uint64_t)faults * 4096 <= bound + bound / 4);
#endif
}

static void test_short_run_uring(void **state)
{
	(void)state;
	short_run(GRIST_ENGINE_URING); /* the pread thread pool where io_uring is refused: the same arenas */
}

static void test_short_run_pread(void **state)
{
	(void)state;
	short_run(GRIST_ENGINE_PREAD);
}

/*
 * The memory the engine holds in the middle of a run of 4-record batches, one slot at a time
 * (assembly_bytes 1), read as @mode asks. Its worker cannot end before the caller takes
 * more batches, so its read arena, if it has one, is still counted.
 */
static uint64_t memory_mid_run(enum grist_read_mode mode, bool *registered)
{
	struct t_one_file o;
	struct grist_loader_stats st;
	struct grist_loader *l;
	struct grist_batch *b;

	base_config(&o);
	o.c.batch_size = 4;
	o.c.read_mode = mode;
	o.c.threads = 1;
	o.c.prefetch = 1;
	o.c.assembly_bytes = 1;
	l = t_one_file_open(&o);
	assert_int_equal(grist_loader_next(l, &b), 0);
	assert_non_null(b);
	grist_loader_stats(l, &st);
	grist_loader_release(l, b);
	grist_loader_destroy(l);
	*registered = st.registered_buffers;
	printf("read mode %d: memory %llu bytes mid-run, registered buffers %d\n", (int)mode,
	       (unsigned long long)st.memory_bytes, st.registered_buffers);
	return st.memory_bytes;
}

/*
 * When every file is mapped nothing is read, so a worker maps no read arena: each one used
 * to map and pin read-ahead bytes it never touched (here the run's 44 MiB). The slots
 * (4 MiB batches, a few of them) are all that is left.
 */
static void test_mapped_run_has_no_arena(void **state)
{
	bool registered;
	uint64_t read = memory_mid_run(GRIST_READ_BUFFERED, &registered), mapped;

	(void)state;
	assert_true(read >= RECORDS * MIB); /* the control: an arena of the run's reads */
	mapped = memory_mid_run(GRIST_READ_MMAP, &registered);
	assert_false(registered);
	assert_true(mapped <= 4 * 4 * MIB + MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_run_uring),
		cmocka_unit_test(test_short_run_pread),
		cmocka_unit_test(test_mapped_run_has_no_arena),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
