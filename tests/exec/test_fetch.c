/* Tests for the fetcher: batched random access against grist_reader_read() on the golden files. */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "format/dataset.h"
#include "grist/fetch.h"
#include "grist/format.h"
#include "io/io.h"

static const char *const golden[] = {
	"golden/uncompressed_g1.array_record", "golden/zstd_default_g1.array_record",
	"golden/big_zstd_g1.array_record",     "golden/big_uncompressed_g2.array_record",
	"golden/brotli_g1.array_record",       "golden/brotli_large_window_g16.array_record",
	"golden/padded_zstd_g16.array_record", "golden/zstd1_wl25_g16.array_record",
	"golden/zstd_g65536.array_record",
};

static const char *const multi[] = {
	"golden/multi-00000-of-00003.array_record",
	"golden/multi-00001-of-00003.array_record",
	"golden/multi-00002-of-00003.array_record",
};

static struct grist_reader *open_reader(const char *const *names, size_t n)
{
	const char *paths[8];
	char *copies[8];
	struct grist_reader *r = NULL;
	size_t i;

	assert_true(n <= 8);
	for (i = 0; i < n; i++) {
		copies[i] = strdup(t_data(names[i])); /* t_data's buffer rotates */
		paths[i] = copies[i];
	}
	assert_int_equal(grist_reader_open(paths, n, NULL, &r), 0);
	for (i = 0; i < n; i++)
		free(copies[i]);
	return r;
}

/* @n record indices below 199, scattered: no two adjacent chunks in a row. */
static void scattered(uint64_t *idx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = (i * 37) % 199;
}

/* Each out[i] must be exactly what grist_reader_read() gives for indices[i]. */
static void check_against_reader(struct grist_reader *r, const uint64_t *indices, size_t n,
				 const struct grist_fetch_record *out)
{
	const uint8_t *data;
	size_t i, len;

	for (i = 0; i < n; i++) {
		assert_int_equal(grist_reader_read(r, indices[i], &data, &len), 0);
		assert_int_equal(out[i].len, len);
		assert_true(len == 0 || memcmp(out[i].data, data, len) == 0);
	}
}

/* Requests of every shape: all in order, reversed, random with repeats, one, none. */
static void run_requests(struct grist_reader *r, const struct grist_fetcher_options *opts)
{
	uint64_t total = grist_reader_num_records(r), seed = 0x9e3779b97f4a7c15ull, *idx;
	struct grist_fetch_record *out;
	struct grist_fetcher *f;
	struct grist_fetcher_stats st;
	size_t n = (size_t)(total * 2 + 3), i;

	assert_true(total > 0);
	idx = calloc(n, sizeof(*idx));
	out = calloc(n, sizeof(*out));
	assert_non_null(idx);
	assert_non_null(out);
	assert_int_equal(grist_fetcher_create(r, opts, &f), 0);

	for (i = 0; i < total; i++)
		idx[i] = i;
	assert_int_equal(grist_fetcher_read(f, idx, (size_t)total, out), 0);
	check_against_reader(r, idx, (size_t)total, out);

	for (i = 0; i < total; i++)
		idx[i] = total - 1 - i;
	assert_int_equal(grist_fetcher_read(f, idx, (size_t)total, out), 0);
	check_against_reader(r, idx, (size_t)total, out);

	for (i = 0; i < n; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		idx[i] = seed % (total < 40 + total / 3 ? total : 40 + total / 3); /* biased low: many repeats */
	}
	idx[n - 1] = idx[0];
	assert_int_equal(grist_fetcher_read(f, idx, n, out), 0);
	check_against_reader(r, idx, n, out);
	assert_ptr_equal(out[n - 1].data, out[0].data); /* a repeat shares its copy */

	idx[0] = total - 1;
	assert_int_equal(grist_fetcher_read(f, idx, 1, out), 0);
	check_against_reader(r, idx, 1, out);
	assert_int_equal(grist_fetcher_read(f, NULL, 0, NULL), 0);

	grist_fetcher_stats(f, &st);
	assert_int_equal(st.requests, 5);
	assert_int_equal(st.records, 2 * total + n + 1);
	/* AUTO maps the small datasets of small chunks (test_small_dataset_mapped); otherwise reads */
	if (st.mapped_files) {
		assert_true(!opts || (opts->io == GRIST_FETCH_IO_AUTO && !opts->never_map));
		assert_true(st.mapped_files == grist_reader_num_files(r) && st.reads == 0 && st.submissions == 0);
	} else {
		assert_true(st.reads > 0 && st.submissions > 0 && st.bytes_read > 0);
	}
	if (opts && opts->io == GRIST_FETCH_IO_PREAD)
		assert_string_equal(st.backend, "pread");
	grist_fetcher_destroy(f);
	free(idx);
	free(out);
}

static const struct grist_fetcher_options variants[] = {
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_AUTO },
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_PREAD, .pread_threads = 3 },
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_AUTO, .queue_depth = 2, .max_read_bytes = 1 }, /* many waves, tiny caps */
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_AUTO, .queue_depth = 2, .max_read_bytes = 1,
	  .never_map = true },
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_PREAD, .queue_depth = 1, .max_read_bytes = 4096 },
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_AUTO, .decode_threads = 2 },
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_AUTO, .decode_threads = 2, .never_map = true },
	{ .size = sizeof(struct grist_fetcher_options), .io = GRIST_FETCH_IO_PREAD, .decode_threads = 3, .max_read_bytes = 1 << 16 },
};

static void test_golden_files(void **state)
{
	size_t i, v;

	(void)state;
	for (i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
		struct grist_reader *r = open_reader(&golden[i], 1);

		for (v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
			run_requests(r, &variants[v]);
		grist_reader_close(r);
	}
}

static void test_multi_file_dataset(void **state)
{
	struct grist_reader *r = open_reader(multi, 3);
	size_t v;

	(void)state;
	for (v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
		run_requests(r, &variants[v]);
	grist_reader_close(r);
}

/* A request goes to the io stage in one batched submission when the queue depth holds it. */
static void test_one_submission(void **state)
{
	struct grist_reader *r = open_reader(&golden[0], 1); /* group_size 1: a chunk per record */
	uint64_t idx[100];
	struct grist_fetch_record out[100];
	struct grist_fetcher *f;
	struct grist_fetcher_stats st;
	struct grist_fetcher_options small = { .size = sizeof(small), .queue_depth = 8, .never_map = true };
	struct grist_fetcher_options reads = { .size = sizeof(reads), .never_map = true };
	size_t i;

	(void)state;
	scattered(idx, 100);
	assert_int_equal(grist_fetcher_create(r, &reads, &f), 0);
	assert_int_equal(grist_fetcher_read(f, idx, 100, out), 0);
	grist_fetcher_stats(f, &st);
	assert_int_equal(st.submissions, 1);
	assert_int_equal(st.chunks_decoded, 100);
	assert_true(st.reads <= 100);
	check_against_reader(r, idx, 100, out);
	grist_fetcher_destroy(f);

	/* adjacent chunks coalesce: records 0..49 are 50 touching extents, one read */
	for (i = 0; i < 50; i++)
		idx[i] = 49 - i;
	assert_int_equal(grist_fetcher_create(r, &reads, &f), 0);
	assert_int_equal(grist_fetcher_read(f, idx, 50, out), 0);
	grist_fetcher_stats(f, &st);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.chunks_decoded, 50);
	check_against_reader(r, idx, 50, out);
	grist_fetcher_destroy(f);

	/* a queue depth of 8 takes 100 scattered reads in several submissions, all correct */
	scattered(idx, 100);
	assert_int_equal(grist_fetcher_create(r, &small, &f), 0);
	assert_int_equal(grist_fetcher_read(f, idx, 100, out), 0);
	grist_fetcher_stats(f, &st);
	assert_true(st.submissions > 1);
	check_against_reader(r, idx, 100, out);
	grist_fetcher_destroy(f);
	grist_reader_close(r);
}

/* AUTO maps a small dataset of small chunks (grist_io_map_small): no io at all, same records. */
static void test_small_dataset_mapped(void **state)
{
	struct grist_reader *r = open_reader(&golden[0], 1); /* group_size 1: a chunk per record */
	uint64_t idx[100];
	struct grist_fetch_record out[100];
	struct grist_fetcher *f;
	struct grist_fetcher_stats st;

	(void)state;
	scattered(idx, 100);
	assert_int_equal(grist_fetcher_create(r, NULL, &f), 0);
	assert_int_equal(grist_fetcher_read(f, idx, 100, out), 0);
	check_against_reader(r, idx, 100, out);
	assert_int_equal(grist_fetcher_read(f, idx + 7, 1, out), 0);
	check_against_reader(r, idx + 7, 1, out);
	grist_fetcher_stats(f, &st);
	assert_int_equal(st.mapped_files, 1);
	assert_int_equal(st.reads, 0);
	assert_int_equal(st.submissions, 0);
	assert_int_equal(st.chunks_decoded, 101);
	grist_fetcher_destroy(f);
	grist_reader_close(r);
}

static void test_out_of_range(void **state)
{
	struct grist_reader *r = open_reader(&golden[0], 1);
	uint64_t idx[3] = { 5, 200, 7 };
	struct grist_fetch_record out[3];
	struct grist_fetcher *f;
	struct grist_fetcher_stats st;

	(void)state;
	assert_int_equal(grist_fetcher_create(r, NULL, &f), 0);
	assert_int_equal(grist_fetcher_read(f, idx, 3, out), -ERANGE);
	assert_non_null(strstr(grist_last_error(), "200"));
	grist_fetcher_stats(f, &st);
	assert_int_equal(st.reads, 0); /* checked before anything is read */
	idx[1] = 199;
	assert_int_equal(grist_fetcher_read(f, idx, 3, out), 0);
	check_against_reader(r, idx, 3, out);
	grist_fetcher_destroy(f);
	grist_reader_close(r);
}

/* A flipped byte inside one chunk fails the request naming the file and offset; others still read. */
static void test_corrupt_chunk(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "flipped.array_record");
	struct grist_reader *r = NULL, *good = open_reader(&golden[1], 1);
	struct grist_record_loc loc;
	struct grist_fetch_record out[4];
	struct grist_fetcher *f;
	uint64_t idx[4] = { 3, 120, 60, 3 };
	uint8_t *bytes;
	size_t len;
	size_t v;

	(void)state;
	bytes = t_read_file(t_data(golden[1]), &len);
	assert_non_null(bytes);
	assert_int_equal(grist_reader_locate(good, 120, &loc), 0);
	bytes[loc.chunk_begin + 41] ^= 0x20;
	assert_int_equal(t_write_file(path, bytes, len), 0);
	free(bytes);
	assert_int_equal(grist_reader_open(&path, 1, NULL, &r), 0);
	for (v = 0; v < 4; v++) {
		struct grist_fetcher_options o = { .size = sizeof(o), .io = v & 1 ? GRIST_FETCH_IO_PREAD : GRIST_FETCH_IO_AUTO,
						   .decode_threads = v < 2 ? 1 : 2 };
		uint64_t many[64];
		struct grist_fetch_record mout[64];
		size_t k;

		assert_int_equal(grist_fetcher_create(r, &o, &f), 0);
		assert_int_equal(grist_fetcher_read(f, idx, 4, out), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "flipped.array_record"));
		assert_non_null(strstr(grist_last_error(), "byte "));
		/* the same fetcher goes on: the other chunks are sound */
		idx[1] = 121;
		assert_int_equal(grist_fetcher_read(f, idx, 4, out), 0);
		check_against_reader(good, idx, 4, out);
		idx[1] = 120;
		/* with enough chunks to share among threads, the failing one still reports */
		for (k = 0; k < 64; k++)
			many[k] = (k * 7) % 200;
		many[40] = 120;
		assert_int_equal(grist_fetcher_read(f, many, 64, mout), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "flipped.array_record"));
		grist_fetcher_destroy(f);
	}
	grist_reader_close(r);
	grist_reader_close(good);
	t_rmtree(dir);
}

static void test_uring_or_refusal(void **state)
{
	struct grist_reader *r = open_reader(&golden[0], 1);
	struct grist_fetcher_options o = { .size = sizeof(o), .io = GRIST_FETCH_IO_URING };
	struct grist_fetcher *f = NULL;
	struct grist_fetcher_stats st;
	int ret;

	(void)state;
	ret = grist_fetcher_create(r, &o, &f);
	if (grist_io_probe(NULL, 0) == 0) {
		assert_int_equal(ret, 0);
		grist_fetcher_stats(f, &st);
		assert_string_equal(st.backend, "uring");
		/* and AUTO takes it too */
		grist_fetcher_destroy(f);
		assert_int_equal(grist_fetcher_create(r, NULL, &f), 0);
		grist_fetcher_stats(f, &st);
		assert_string_equal(st.backend, "uring");
	} else {
		/* where io_uring is unavailable, asking for it fails, and AUTO takes the pread pool */
		assert_true(ret < 0);
		assert_null(f);
		assert_int_equal(grist_fetcher_create(r, NULL, &f), 0);
		grist_fetcher_stats(f, &st);
		assert_string_equal(st.backend, "pread");
	}
	grist_fetcher_destroy(f);
	o.io = 7;
	assert_int_equal(grist_fetcher_create(r, &o, &f), -EINVAL);
	o.io = GRIST_FETCH_IO_AUTO;
	o.decode_threads = 65;
	assert_int_equal(grist_fetcher_create(r, &o, &f), -EINVAL);
	grist_reader_close(r);
}

struct thread_call {
	struct grist_fetcher *f;
	uint64_t idx[4];
	struct grist_fetch_record out[4];
	int ret;
};

static void *call_on_thread(void *arg)
{
	struct thread_call *c = arg;

	c->ret = grist_fetcher_read(c->f, c->idx, 4, c->out);
	return NULL;
}

/* One thread at a time, but not always the same one: an io_uring fetcher is not tied to its first thread. */
static void test_passes_between_threads(void **state)
{
	struct grist_reader *r = open_reader(&golden[1], 1);
	struct thread_call c = { .idx = { 9, 1, 150, 9 } };
	pthread_t t;
	int k;

	(void)state;
	assert_int_equal(grist_fetcher_create(r, NULL, &c.f), 0);
	for (k = 0; k < 3; k++) {
		assert_int_equal(grist_fetcher_read(c.f, c.idx, 4, c.out), 0); /* this thread */
		c.ret = -1;
		assert_int_equal(pthread_create(&t, NULL, call_on_thread, &c), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(c.ret, 0);
		check_against_reader(r, c.idx, 4, c.out);
		c.idx[2] = (uint64_t)(k * 61);
	}
	grist_fetcher_destroy(c.f);
	grist_reader_close(r);
}

/*
 * grist_reader_options.verify: a fetcher checks what its reader was opened to check, on
 * every io path and thread count, as the reader itself does. A flipped value byte of an
 * uncompressed chunk fails under GRIST_VERIFY_ALL (the default, also for an older caller
 * whose struct ends before verify) and is delivered as it is under GRIST_VERIFY_HEADERS.
 * A value that is neither is refused at open, naming it.
 */
static void test_verify_follows_the_reader(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "flipped.array_record");
	struct grist_reader *good = open_reader(&golden[0], 1), *r;
	struct grist_reader_options o;
	struct grist_fetch_record out[3];
	struct grist_fetcher *f;
	const uint8_t *got;
	uint8_t *bytes, *at, *want;
	uint64_t idx[3] = { 7, 120, 7 };
	size_t len, want_len, got_len, v;

	(void)state;
	bytes = t_read_file(t_data(golden[0]), &len);
	assert_non_null(bytes);
	assert_int_equal(grist_reader_read(good, 120, &got, &want_len), 0);
	assert_true(want_len > 0);
	want = malloc(want_len); /* the reader's buffer lasts until its next call */
	assert_non_null(want);
	memcpy(want, got, want_len);
	at = memmem(bytes, len, want, want_len);
	assert_non_null(at); /* the record's bytes, whole between block headers */
	assert_null(memmem(at + 1, len - (size_t)(at + 1 - bytes), want, want_len));
	at[want_len - 1] ^= 0x04;
	assert_int_equal(t_write_file(path, bytes, len), 0);
	free(bytes);

	/* the default, and an older caller's options (before verify): every data hash */
	for (v = 0; v < 2; v++) {
		grist_reader_options_init(&o);
		if (v)
			o.size = offsetof(struct grist_reader_options, verify);
		assert_int_equal(grist_reader_open(&path, 1, &o, &r), 0);
		assert_int_equal(grist_reader_read(r, 120, &got, &got_len), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "data hash mismatch"));
		assert_int_equal(grist_fetcher_create(r, NULL, &f), 0);
		assert_int_equal(grist_fetcher_read(f, idx, 3, out), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "flipped.array_record"));
		grist_fetcher_destroy(f);
		grist_reader_close(r);
	}

	grist_reader_options_init(&o);
	o.verify = GRIST_VERIFY_HEADERS;
	assert_int_equal(grist_reader_open(&path, 1, &o, &r), 0);
	assert_int_equal(grist_reader_read(r, 120, &got, &got_len), 0);
	assert_int_equal(got_len, want_len);
	assert_memory_equal(got, want, want_len - 1);
	assert_int_equal(got[want_len - 1] ^ want[want_len - 1], 0x04);
	for (v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		assert_int_equal(grist_fetcher_create(r, &variants[v], &f), 0);
		assert_int_equal(grist_fetcher_read(f, idx, 3, out), 0);
		assert_int_equal(out[1].len, want_len);
		assert_memory_equal(out[1].data, want, want_len - 1);
		assert_int_equal(out[1].data[want_len - 1] ^ want[want_len - 1], 0x04);
		check_against_reader(good, idx, 1, out);
		grist_fetcher_destroy(f);
	}
	grist_reader_close(r);

	o.verify = (enum grist_verify)7;
	assert_int_equal(grist_reader_open(&path, 1, &o, &r), -EINVAL);
	assert_null(r);
	assert_non_null(strstr(grist_last_error(), "verify 7"));
	grist_reader_close(good);
	free(want);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_files),
		cmocka_unit_test(test_multi_file_dataset),
		cmocka_unit_test(test_one_submission),
		cmocka_unit_test(test_small_dataset_mapped),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_corrupt_chunk),
		cmocka_unit_test(test_uring_or_refusal),
		cmocka_unit_test(test_passes_between_threads),
		cmocka_unit_test(test_verify_follows_the_reader),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
