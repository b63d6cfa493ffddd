/* Tests for the writer: exact bytes of a small file built by hand from the spec, crash safety, options. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "grist/format.h"
#include "format/hash.h"

/* Little helpers that build Riegeli bytes independently of the writer's own code. */
static void put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void block_header(uint8_t *p, uint64_t prev, uint64_t next)
{
	put64(p + 8, prev);
	put64(p + 16, next);
	put64(p, grist_hash(p + 8, 16));
}

static size_t chunk(uint8_t *p, uint8_t type, const uint8_t *data, uint64_t size, uint64_t records,
		    uint64_t decoded)
{
	put64(p + 8, size);
	put64(p + 16, grist_hash(data, size));
	put64(p + 24, type | records << 8);
	put64(p + 32, decoded);
	put64(p, grist_hash(p + 8, 32));
	memcpy(p + 40, data, size);
	return 40 + size;
}

/*
 * One record "0", group_size:1, uncompressed: signature, data chunk at 64,
 * footer at 108, padding to 65536, postscript at 65536, padding to 131072.
 */
static void test_exact_bytes(void **state)
{
	static const char opts[] = "group_size:1,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1";
	static uint8_t want[131072], zeros[65536];
	uint8_t data[256], ps[13 * 3];
	struct grist_writer *w;
	size_t pos, n, len;
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "one.ar");
	uint8_t *got;

	(void)state;
	memset(want, 0, sizeof(want));
	block_header(want, 0, 64);
	pos = 24 + chunk(want + 24, 's', zeros, 0, 0, 0);
	assert_int_equal(pos, 64);
	/* Data chunk: type 0, sizes_len 1, size 1, value '0'. */
	pos += chunk(want + pos, 'r', (const uint8_t *)"\x00\x01\x01\x30", 4, 1, 1);
	assert_int_equal(pos, 108);
	/* Footer records: metadata, then the entry {offset 64, 1 byte, 1 record}. */
	n = 0;
	data[n++] = 0;
	data[n++] = 2;
	data[n++] = 2 + 8 + sizeof(opts) - 1;
	data[n++] = 6;
	memcpy(data + n, "\x0a", 1);
	n++;
	data[n++] = (uint8_t)(8 + sizeof(opts) - 1);
	memcpy(data + n, "\x08\x01\x10\x01\x18\x01\x22", 7);
	n += 7;
	data[n++] = sizeof(opts) - 1;
	memcpy(data + n, opts, sizeof(opts) - 1);
	n += sizeof(opts) - 1;
	memcpy(data + n, "\x08\x40\x10\x01\x18\x01", 6);
	n += 6;
	pos += chunk(want + pos, 'r', data, n, 2, n - 4);
	/* Padding chunk up to the block boundary. */
	len = 65536 - pos - 40;
	pos += chunk(want + pos, 'p', zeros, len, 0, 0);
	assert_int_equal(pos, 65536);
	/* Postscript: three copies of {footer_offset 108, magic}, stored. */
	memcpy(ps, "\x08\x6c\x10\xde\xc0\xeb\xfe\x84\xce\xc3\xc9\x71", 12);
	memcpy(ps + 12, ps, 12);
	memcpy(ps + 24, ps, 12);
	n = 0;
	data[n++] = 0;
	data[n++] = 3;
	data[n++] = 12;
	data[n++] = 12;
	data[n++] = 12;
	memcpy(data + n, ps, 36);
	n += 36;
	block_header(want + pos, 0, 24 + 40 + n);
	pos += 24;
	pos += chunk(want + pos, 'r', data, n, 3, 36);
	len = 131072 - pos - 40;
	pos += chunk(want + pos, 'p', zeros, len, 0, 0);
	assert_int_equal(pos, 131072);

	assert_int_equal(grist_writer_open(path, "uncompressed", &w), 0);
	assert_string_equal(grist_writer_options_text(w), opts);
	assert_int_equal(grist_writer_write(w, "0", 1), 0);
	assert_int_equal(grist_writer_close(w), 0);
	got = t_read_file(path, &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(got, want, sizeof(want));
	free(got);
	t_rmtree(dir);
}

static void test_crash_safety(void **state)
{
	struct grist_writer *w;
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "x.ar");
	uint8_t rec[5000];

	(void)state;
	t_fill(rec, sizeof(rec), 3);
	assert_int_equal(grist_writer_open(path, "group_size:2", &w), 0);
	assert_int_equal(grist_writer_write(w, rec, sizeof(rec)), 0);
	/* While writing, only the hidden temporary exists. */
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(t_count_entries(dir), 1);
	grist_writer_abort(w);
	assert_int_equal(t_count_entries(dir), 0);
	/* A committed file replaces an old one atomically and leaves no temporary. */
	assert_int_equal(t_write_file(path, "old", 3), 0);
	assert_int_equal(grist_writer_open(path, NULL, &w), 0);
	assert_int_equal(grist_writer_write(w, rec, 10), 0);
	assert_int_equal(grist_writer_close(w), 0);
	assert_int_equal(t_count_entries(dir), 1);
	/* Failing options create nothing. */
	assert_int_equal(grist_writer_open(path, "transpose:true", &w), -EINVAL);
	assert_null(w);
	assert_int_equal(grist_writer_open(t_path(dir, "nope/x.ar"), NULL, &w), -ENOENT);
	assert_int_equal(t_count_entries(dir), 1);
	t_rmtree(dir);
}

static void test_empty_file(void **state)
{
	struct grist_writer *w;
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "e.ar");
	uint8_t *got;
	size_t len;

	(void)state;
	assert_int_equal(grist_writer_open(path, "brotli", &w), 0);
	assert_int_equal(grist_writer_close(w), 0);
	got = t_read_file(path, &len);
	assert_int_equal(len, 131072);
	free(got);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_bytes),
		cmocka_unit_test(test_crash_safety),
		cmocka_unit_test(test_empty_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
