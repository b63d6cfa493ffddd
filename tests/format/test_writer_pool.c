/* Tests for the parallel writer: the pool's order and memory bound, identical files at any parallelism, finish/commit/abort, temporaries, their guard, abort_all. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "grist/format.h"
#include "codec/codec.h"
#include "format/temp_registry.h"
#include "format/writer_pool.h"

/* Fill job @i with @n records of varied, seeded sizes (some chunks 1 record, some 300). */
static void fill_job(struct grist_chunk_job *j, unsigned i)
{
	uint8_t rec[3000];
	unsigned k, n = 1 + (i * 37) % 300;

	for (k = 0; k < n; k++) {
		size_t len = (i * 131 + k * 17) % sizeof(rec);
		uint8_t v = (uint8_t)len;

		t_fill(rec, len, i * 1000 + k);
		/* Half compressible, half random. */
		if (k % 2)
			memset(rec, 'a' + (int)(k % 26), len / 2);
		assert_int_equal(grist_buf_append(&j->sizes, &v, 1), 0); /* not a real varint: the pool does not care */
		assert_int_equal(grist_buf_append(&j->values, rec, len), 0);
		j->num_records++;
	}
}

/* Encode @count jobs on a pool of @threads; return every chunk and hash, in order. */
static void run_pool(unsigned threads, unsigned count, struct grist_buf *chunks, uint64_t *hashes)
{
	struct grist_codec_params params = { .level = 3, .window_log = 20 };
	struct grist_chunk_pool *p;
	struct grist_chunk_job *j;
	unsigned submitted = 0, taken = 0, outstanding_max = 0;

	assert_int_equal(grist_chunk_pool_create(&grist_codec_zstd, &params, threads, &p), 0);
	while (taken < count) {
		if (submitted < count && !grist_chunk_pool_full(p)) {
			fill_job(grist_chunk_pool_job(p), submitted++);
			grist_chunk_pool_submit(p);
			if (submitted - taken > outstanding_max)
				outstanding_max = submitted - taken;
			continue;
		}
		/* Ring full (or all submitted): the oldest must come back, in order. */
		j = grist_chunk_pool_oldest(p, true);
		assert_non_null(j);
		assert_int_equal(j->ret, 0);
		assert_int_equal(grist_buf_append(&chunks[taken], j->chunk.data, j->chunk.len), 0);
		hashes[taken++] = j->hash;
		grist_chunk_pool_retire(p);
	}
	assert_null(grist_chunk_pool_oldest(p, true));
	/* Never more than 2 x threads chunks in memory (1 without threads). */
	assert_true(outstanding_max <= (threads >= 2 ? 2 * threads : 1));
	assert_true(outstanding_max == (threads >= 2 ? 2 * threads : 1));
	grist_chunk_pool_destroy(p);
}

static void test_pool_order_and_bound(void **state)
{
	enum { COUNT = 200 };
	struct grist_buf serial[COUNT] = { 0 }, par[COUNT] = { 0 };
	uint64_t hs[COUNT], hp[COUNT];
	unsigned threads[] = { 2, 3, 8 }, t, i;

	(void)state;
	run_pool(1, COUNT, serial, hs);
	for (t = 0; t < 3; t++) {
		run_pool(threads[t], COUNT, par, hp);
		for (i = 0; i < COUNT; i++) {
			assert_int_equal(par[i].len, serial[i].len);
			assert_memory_equal(par[i].data, serial[i].data, serial[i].len);
			assert_true(hp[i] == hs[i]);
			grist_buf_free(&par[i]);
		}
	}
	for (i = 0; i < COUNT; i++)
		grist_buf_free(&serial[i]);
}

/* A pool destroyed with jobs queued and running stops without waiting for them all. */
static void test_pool_destroy_busy(void **state)
{
	struct grist_codec_params params = { .level = 19, .window_log = 20 };
	struct grist_chunk_pool *p;

	(void)state;
	assert_int_equal(grist_chunk_pool_create(&grist_codec_zstd, &params, 2, &p), 0);
	while (!grist_chunk_pool_full(p)) {
		fill_job(grist_chunk_pool_job(p), 299);
		grist_chunk_pool_submit(p);
	}
	grist_chunk_pool_destroy(p);
}

static void write_file(const char *path, const char *opts, unsigned n)
{
	struct grist_writer *w;
	struct grist_writer_stats st;
	uint8_t rec[5000];
	uint64_t bytes = 0;
	unsigned i;

	assert_int_equal(grist_writer_open(path, opts, &w), 0);
	for (i = 0; i < n; i++) {
		size_t len = (i * 7919) % sizeof(rec);

		t_fill(rec, len, i);
		if (i % 3)
			memset(rec, 'x', len / 2);
		assert_int_equal(grist_writer_write(w, rec, len), 0);
		bytes += len;
	}
	grist_writer_get_stats(w, &st);
	assert_int_equal(st.records, n);
	assert_int_equal(st.record_bytes, bytes);
	assert_true(st.file_bytes > 0);
	assert_int_equal(grist_writer_close(w), 0);
}

/* Any max_parallelism writes the same bytes; the stored options keep saying 1. */
static void test_writer_parallel_identical(void **state)
{
	static const char *const codecs[] = { "zstd:3", "brotli:4", "snappy", "uncompressed" };
	char *dir = t_mkdtemp(), opts[128];
	uint8_t *a, *b;
	size_t alen, blen;
	unsigned c, par[] = { 2, 4, 7 }, k;

	(void)state;
	for (c = 0; c < 4; c++) {
		snprintf(opts, sizeof(opts), "group_size:5,%s", codecs[c]);
		write_file(t_path(dir, "serial"), opts, 1500);
		a = t_read_file(t_path(dir, "serial"), &alen);
		assert_non_null(a);
		for (k = 0; k < 3; k++) {
			struct grist_reader *r;
			const char *p = t_path(dir, "par");
			struct grist_file_info fi;

			snprintf(opts, sizeof(opts), "group_size:5,%s,max_parallelism:%u", codecs[c], par[k]);
			write_file(p, opts, 1500);
			b = t_read_file(p, &blen);
			assert_non_null(b);
			assert_int_equal(alen, blen);
			assert_memory_equal(a, b, alen);
			free(b);
			assert_int_equal(grist_reader_open(&p, 1, NULL, &r), 0);
			assert_int_equal(grist_reader_num_records(r), 1500);
			assert_int_equal(grist_reader_file_info(r, 0, &fi), 0);
			assert_non_null(strstr(fi.writer_options, ",max_parallelism:1"));
			grist_reader_close(r);
		}
		free(a);
	}
	t_rmtree(dir);
}

/* finish keeps the temporary, commit renames it, abort after finish removes it. */
static void test_finish_commit_abort(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_writer *w1, *w2;
	struct stat st;

	(void)state;
	assert_int_equal(grist_writer_open(t_path(dir, "one"), "max_parallelism:2", &w1), 0);
	assert_int_equal(grist_writer_open(t_path(dir, "two"), NULL, &w2), 0);
	assert_int_equal(grist_writer_write(w1, "a", 1), 0);
	assert_int_equal(grist_writer_write(w2, "b", 1), 0);
	assert_int_equal(grist_writer_finish(w1), 0);
	assert_int_equal(grist_writer_finish(w1), 0);
	assert_int_equal(grist_writer_write(w1, "c", 1), -EINVAL);
	assert_int_equal(grist_writer_finish(w2), 0);
	assert_int_equal(stat(grist_writer_temp_path(w1), &st), 0);
	assert_int_equal(t_count_entries(dir), 2);       /* two temporaries, no final names */
	assert_int_equal(grist_writer_commit(w1), 0);
	assert_int_equal(stat(t_path(dir, "one"), &st), 0);
	grist_writer_abort(w2);
	assert_int_equal(t_count_entries(dir), 1);       /* only "one" */
	t_rmtree(dir);
}

/* grist_writer_remove_temporaries() unlinks exactly the live writers' temporaries. */
static void test_remove_temporaries(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_writer *w[5];
	char *keep;
	unsigned i;

	(void)state;
	for (i = 0; i < 5; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(grist_writer_open(t_path(dir, name), i % 2 ? "max_parallelism:2" : NULL, &w[i]), 0);
		assert_int_equal(grist_writer_write(w[i], name, strlen(name)), 0);
	}
	assert_int_equal(grist_writer_close(w[0]), 0);   /* committed: not touched */
	grist_writer_abort(w[1]);                         /* gone already */
	keep = strdup(t_path(dir, "f0"));
	assert_int_equal(t_count_entries(dir), 4);
	grist_writer_remove_temporaries();
	assert_int_equal(t_count_entries(dir), 1);
	assert_int_equal(access(keep, F_OK), 0);
	/* Their writers can still be dropped (the unlink finds nothing) and entries are reused. */
	for (i = 2; i < 5; i++)
		grist_writer_abort(w[i]);
	assert_int_equal(grist_writer_open(t_path(dir, "again"), NULL, &w[0]), 0);
	grist_writer_remove_temporaries();
	assert_int_equal(t_count_entries(dir), 1);
	grist_writer_abort(w[0]);
	free(keep);
	t_rmtree(dir);
}

static volatile sig_atomic_t handler_ran;

static void remove_in_handler(int sig)
{
	(void)sig;
	grist_writer_remove_temporaries();
	handler_ran = 1;
}

/*
 * The guard's other half: a program's own handler, which calls
 * grist_writer_remove_temporaries() on the guarded thread, runs only after the step.
 */
static void test_guard_holds_signals(void **state)
{
	struct sigaction sa = { .sa_handler = remove_in_handler }, old;
	struct grist_temp_guard g;
	char *dir = t_mkdtemp();
	struct grist_writer *w;
	int ran;
	unsigned entries;

	(void)state;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	assert_int_equal(grist_writer_open(t_path(dir, "a"), NULL, &w), 0);
	assert_int_equal(grist_temp_guard_enter(&g), 0);
	assert_int_equal(pthread_kill(pthread_self(), SIGUSR1), 0);
	ran = handler_ran;
	entries = t_count_entries(dir);
	grist_temp_guard_leave(&g);                       /* before any assert: a failed test must not keep the hold */
	assert_int_equal(ran, 0);
	assert_int_equal(entries, 1);
	assert_int_equal(handler_ran, 1);                 /* delivered as the mask came off */
	assert_int_equal(t_count_entries(dir), 0);
	grist_writer_abort(w);
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	t_rmtree(dir);
}

static int abort_all_ret = 1;

static void *run_abort_all(void *arg)
{
	(void)arg;
	__atomic_store_n(&abort_all_ret, grist_writer_abort_all(1000), __ATOMIC_RELEASE);
	return NULL;
}

/*
 * grist_writer_abort_all() waits for a guarded step under way (grist_temp_guard_enter()), then unlinks
 * every live temporary; afterwards no writer makes a temporary and no commit starts. Last:
 * it closes the process's writers for good.
 */
static void test_abort_all(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_writer *w[2], *late;
	struct grist_temp_guard g, g2;
	pthread_t t;

	(void)state;
	assert_int_equal(grist_writer_open(t_path(dir, "a"), NULL, &w[0]), 0);
	assert_int_equal(grist_writer_open(t_path(dir, "b"), "max_parallelism:2", &w[1]), 0);
	assert_int_equal(grist_writer_write(w[1], "x", 1), 0);
	assert_int_equal(t_count_entries(dir), 2);
	assert_int_equal(grist_temp_guard_enter(&g), 0);
	assert_int_equal(pthread_create(&t, NULL, run_abort_all, NULL), 0);
	usleep(200 * 1000);
	/* held: nothing removed yet, and it has not returned */
	assert_int_equal(__atomic_load_n(&abort_all_ret, __ATOMIC_ACQUIRE), 1);
	assert_int_equal(t_count_entries(dir), 2);
	grist_temp_guard_leave(&g);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(abort_all_ret, 0);              /* no upload to abort */
	assert_int_equal(t_count_entries(dir), 0);
	assert_int_equal(grist_writer_open(t_path(dir, "late"), NULL, &late), -ECANCELED);
	assert_non_null(strstr(grist_last_error(), "grist_writer_abort_all()"));
	assert_int_equal(t_count_entries(dir), 0);
	assert_int_equal(grist_temp_guard_enter(&g2), -ECANCELED);
	/* the writers whose temporaries went cannot commit, and are still dropped cleanly */
	assert_int_not_equal(grist_writer_close(w[0]), 0);
	grist_writer_abort(w[1]);
	assert_int_equal(t_count_entries(dir), 0);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_order_and_bound),
		cmocka_unit_test(test_pool_destroy_busy),
		cmocka_unit_test(test_writer_parallel_identical),
		cmocka_unit_test(test_finish_commit_abort),
		cmocka_unit_test(test_remove_temporaries),
		cmocka_unit_test(test_guard_holds_signals),
		cmocka_unit_test(test_abort_all), /* last: it closes the process's writers */
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
