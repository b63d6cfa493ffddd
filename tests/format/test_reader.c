/* Tests for the reader: round trips over codecs and group sizes, batch/sequential reads, damaged files. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "grist/format.h"
#include "format/dataset.h"

#define NREC 24

/* Record i: a size from a spread that includes 0 bytes and more than 1 MiB (spanning blocks). */
static size_t rec_size(size_t i)
{
	static const size_t sizes[] = { 0, 1, 17, 1000, 65536, 70000, (1u << 20) + 3, 5 };

	return sizes[i % 8] + (i % 8 == 6 && i > 8 ? 0 : i % 3);
}

static uint8_t *rec_make(size_t i, size_t *n)
{
	uint8_t *p;

	*n = rec_size(i);
	p = malloc(*n + 1);
	assert_non_null(p);
	t_fill(p, *n, i);
	if (*n > 100)
		memset(p, (int)i, *n / 2); /* compressible half */
	return p;
}

static void write_file(const char *path, const char *opts, size_t n)
{
	struct grist_writer *w;
	size_t i, len;

	assert_int_equal(grist_writer_open(path, opts, &w), 0);
	for (i = 0; i < n; i++) {
		uint8_t *p = rec_make(i, &len);

		assert_int_equal(grist_writer_write(w, p, len), 0);
		free(p);
	}
	assert_int_equal(grist_writer_close(w), 0);
}

static void check_record(const uint8_t *data, size_t len, size_t i)
{
	size_t n;
	uint8_t *p = rec_make(i, &n);

	assert_int_equal(len, n);
	assert_true(n == 0 || memcmp(data, p, n) == 0);
	free(p);
}

struct batch_ctx {
	const uint64_t *indices;
	size_t seen;
};

static int on_record(void *ctx, size_t position, uint64_t index, const uint8_t *data, size_t len)
{
	struct batch_ctx *b = ctx;

	assert_int_equal(b->indices[position], index);
	check_record(data, len, index);
	b->seen++;
	return 0;
}

static void read_all_ways(const char *path, size_t n)
{
	struct grist_reader *r;
	uint64_t idx[64];
	struct batch_ctx b = { idx, 0 };
	const uint8_t *data;
	size_t i, len;

	assert_int_equal(grist_reader_open(&path, 1, NULL, &r), 0);
	assert_int_equal(grist_reader_num_records(r), n);
	for (i = 0; i < n; i++) {
		assert_int_equal(grist_reader_read_next(r, &data, &len), 1);
		check_record(data, len, i);
	}
	assert_int_equal(grist_reader_read_next(r, &data, &len), 0);
	for (i = 0; i < n; i++) {
		size_t j = (i * 7 + 3) % n;

		assert_int_equal(grist_reader_read(r, j, &data, &len), 0);
		check_record(data, len, j);
	}
	for (i = 0; i < 64; i++)
		idx[i] = (i * 13 + 5) % n;
	assert_int_equal(grist_reader_read_batch(r, idx, 64, on_record, &b), 0);
	assert_int_equal(b.seen, 64);
	assert_int_equal(grist_reader_read(r, n, &data, &len), -ERANGE);
	idx[10] = n + 5;
	assert_int_equal(grist_reader_read_batch(r, idx, 64, on_record, &b), -ERANGE);
	grist_reader_close(r);
}

static void test_round_trips(void **state)
{
	static const char *const opts[] = {
		"uncompressed", "group_size:16,uncompressed", "group_size:65536,uncompressed",
		"", "group_size:16", "group_size:65536,zstd:1,window_log:25",
		"snappy", "group_size:16,snappy", "brotli:1", "group_size:16,brotli:2,window_log:25",
		"group_size:3,pad_to_block_boundary:true,zstd:1", "pad_to_block_boundary:true,uncompressed",
	};
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "rt.ar");
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		write_file(path, opts[i], NREC);
		read_all_ways(path, NREC);
		assert_int_equal(grist_file_verify(path, NULL), 0);
	}
	t_rmtree(dir);
}

static void test_dataset_of_files(void **state)
{
	char *dir = t_mkdtemp();
	const char *paths[3];
	struct grist_reader *r;
	struct grist_file_info fi;
	struct grist_record_loc loc;
	const uint8_t *data;
	size_t len;

	(void)state;
	paths[0] = strdup(t_path(dir, "a.ar"));
	paths[1] = strdup(t_path(dir, "b.ar"));
	paths[2] = strdup(t_path(dir, "c.ar"));
	write_file(paths[0], "group_size:4,uncompressed", 10);
	write_file(paths[1], "", 0);
	write_file(paths[2], "group_size:4", 3);
	assert_int_equal(grist_reader_open(paths, 3, NULL, &r), 0);
	assert_int_equal(grist_reader_num_records(r), 13);
	assert_int_equal(grist_reader_num_files(r), 3);
	assert_int_equal(grist_reader_file_info(r, 0, &fi), 0);
	assert_int_equal(fi.num_chunks, 3);
	assert_int_equal(fi.group_size, 4);
	assert_string_equal(fi.compression, "uncompressed");
	assert_int_equal(grist_reader_file_info(r, 1, &fi), 0);
	assert_int_equal(fi.num_records, 0);
	assert_int_equal(fi.file_size, 131072);
	assert_int_equal(grist_reader_file_info(r, 2, &fi), 0);
	assert_int_equal(fi.first_record, 10);
	assert_string_equal(fi.compression, "zstd");
	assert_string_equal(fi.writer_options,
			    "group_size:4,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1");
	assert_int_equal(grist_reader_file_info(r, 3, &fi), -ERANGE);
	assert_int_equal(grist_reader_locate(r, 9, &loc), 0);
	assert_int_equal(loc.file, 0);
	assert_int_equal(loc.chunk, 2);
	assert_int_equal(loc.record_in_chunk, 1);
	assert_int_equal(grist_file_chunk_records(grist_reader_file_geom(r, 0), 2), 2);
	assert_int_equal(grist_reader_locate(r, 10, &loc), 0);
	assert_int_equal(loc.file, 2);
	assert_int_equal(loc.record_in_chunk, 0);
	assert_int_equal(grist_reader_read(r, 11, &data, &len), 0);
	check_record(data, len, 1);
	assert_int_equal(grist_reader_seek(r, 9), 0);
	assert_int_equal(grist_reader_read_next(r, &data, &len), 1);
	check_record(data, len, 9);
	assert_int_equal(grist_reader_read_next(r, &data, &len), 1);
	check_record(data, len, 0);
	assert_int_equal(grist_reader_seek(r, 14), -ERANGE);
	grist_reader_close(r);
	free((void *)paths[0]);
	free((void *)paths[1]);
	free((void *)paths[2]);
	t_rmtree(dir);
}

/* Open and read everything; must either fail cleanly or give exactly the records written. */
static int open_and_read(const char *path, size_t n)
{
	struct grist_reader *r;
	const uint8_t *data;
	size_t i, len;
	int ret;

	ret = grist_reader_open(&path, 1, NULL, &r);
	if (ret) {
		assert_true(ret < 0);
		assert_true(strlen(grist_last_error()) > 0);
		return ret;
	}
	if (grist_reader_num_records(r) != n) {
		grist_reader_close(r);
		return 1; /* a flip that changes the count must not survive: caught by the caller */
	}
	for (i = 0; i < n; i++) {
		ret = grist_reader_read(r, i, &data, &len);
		if (ret) {
			assert_true(ret < 0);
			break;
		}
		check_record(data, len, i);
	}
	grist_reader_close(r);
	return ret;
}

static void test_truncated(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "t.ar");
	const char *cut = t_path(dir, "cut.ar");
	uint64_t lens[] = { 0, 1, 100, 65535, 65536, 65537, 131071, 131072 + 64, 200000 };
	uint8_t *all;
	size_t len, i;

	(void)state;
	write_file(path, "group_size:2", 12);
	all = t_read_file(path, &len);
	assert_non_null(all);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		if (lens[i] >= len)
			continue;
		assert_int_equal(t_write_file(cut, all, lens[i]), 0);
		assert_int_equal(open_and_read(cut, 12), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "cut.ar"));
		assert_int_equal(grist_file_verify(cut, NULL), -EBADMSG);
	}
	/* Wrong magic. */
	all[len - 65536 + 64 + 5 + 12 - 1] ^= 1;
	assert_int_equal(t_write_file(cut, all, len), 0);
	assert_int_equal(open_and_read(cut, 12), -EBADMSG);
	free(all);
	t_rmtree(dir);
}

static void test_flip_every_byte(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "f.ar");
	struct grist_verify_report rep;
	uint8_t b, *orig;
	size_t len, i, ok = 0, tried = 0;
	int fd, ret;

	(void)state;
	{
		struct grist_writer *w;

		assert_int_equal(grist_writer_open(path, "group_size:2,uncompressed", &w), 0);
		for (i = 0; i < 5; i++)
			assert_int_equal(grist_writer_write(w, "abcdefgh", i), 0);
		assert_int_equal(grist_writer_close(w), 0);
	}
	orig = t_read_file(path, &len);
	assert_non_null(orig);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	for (i = 0; i < len; i++) {
		/*
		 * Every byte of the chunks that carry data (signature, records, footer,
		 * postscript) is flipped; inside the long zero padding runs, every 61st.
		 */
		if (!(i < 2048 || (i >= len - 65536 && i < len - 65536 + 512) || i % 61 == 0))
			continue;
		tried++;
		b = orig[i] ^ 0x21;
		assert_int_equal(pwrite(fd, &b, 1, (off_t)i), 1);
		{
			struct grist_reader *r;
			const uint8_t *data;
			size_t n;

			ret = grist_reader_open(&path, 1, NULL, &r);
			if (!ret) {
				size_t k;

				/* Either an error on read or exactly the records written. */
				assert_int_equal(grist_reader_num_records(r), 5);
				for (k = 0; k < 5 && !ret; k++) {
					ret = grist_reader_read(r, k, &data, &n);
					if (!ret) {
						assert_int_equal(n, k);
						assert_memory_equal(data, "abcdefgh", k);
					}
				}
				grist_reader_close(r);
				ok += !ret;
			}
			assert_true(ret <= 0);
		}
		/* verify reads every byte that belongs to a chunk: any flip there is caught. */
		ret = grist_file_verify(path, &rep);
		assert_true(ret < 0 || ret == 0);
		assert_int_equal(pwrite(fd, &orig[i], 1, (off_t)i), 1);
	}
	/* Flips in padding bytes are invisible to random reads; the rest is caught. */
	assert_true(ok > 0 && ok < tried);
	close(fd);
	free(orig);
	t_rmtree(dir);
}

static void test_bad_arguments(void **state)
{
	struct grist_reader *r;
	const char *missing = "/nonexistent/grist.ar";

	(void)state;
	assert_int_equal(grist_reader_open(NULL, 0, NULL, &r), -EINVAL);
	assert_int_equal(grist_reader_open(&missing, 1, NULL, &r), -ENOENT);
	assert_non_null(strstr(grist_last_error(), missing));
}

static void test_max_chunk_bytes(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "m.ar");
	struct grist_reader_options o = { .size = sizeof(o), .max_chunk_bytes = 4096 };
	struct grist_reader *r;
	const uint8_t *data;
	size_t len;

	(void)state;
	write_file(path, "uncompressed", 8);
	assert_int_equal(grist_reader_open(&path, 1, &o, &r), 0);
	assert_int_equal(grist_reader_read(r, 3, &data, &len), 0);
	assert_int_equal(grist_reader_read(r, 4, &data, &len), -EFBIG);
	assert_non_null(strstr(grist_last_error(), path));
	grist_reader_close(r);
	/* the process-wide limit applies without the option, and to grist_reader_locate() */
	assert_int_equal(grist_reader_open(&path, 1, NULL, &r), 0);
	grist_set_max_chunk_bytes(4000);
	{
		struct grist_record_loc loc;

		assert_int_equal(grist_reader_read(r, 3, &data, &len), 0);
		assert_int_equal(grist_reader_read(r, 4, &data, &len), -EFBIG);
		assert_non_null(strstr(grist_last_error(), path));
		/* locate() bounds the extent on disk: a 1 MiB chunk cannot hold 4000 bytes of data */
		assert_int_equal(grist_reader_locate(r, 6, &loc), -EFBIG);
		assert_non_null(strstr(grist_last_error(), path));
		assert_int_equal(grist_reader_locate(r, 3, &loc), 0);
	}
	grist_set_max_chunk_bytes(0);
	assert_int_equal(grist_reader_read(r, 4, &data, &len), 0);
	grist_reader_close(r);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_dataset_of_files),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_flip_every_byte),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_max_chunk_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
