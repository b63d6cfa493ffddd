/* Tests for block math, block and chunk headers, and the Riegeli hash against the known file signature. */
#include <errno.h>
#include <string.h>

#include "helpers.h"
#include "grist/format.h"
#include "grist/error.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/hash.h"

/* The first 64 bytes of every Riegeli file, as the format documentation and the official files show. */
static const uint8_t signature[64] = {
	/* block header: hash, previous_chunk 0, next_chunk 64 */
	0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0,
	0x40, 0, 0, 0, 0, 0, 0, 0,
	/* chunk header: hash, data_size 0, data_hash (of nothing), type 's' with 0 records, decoded 0 */
	0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1, 0xa9, 0, 0, 0, 0, 0, 0, 0, 0,
	0xe1, 0x9f, 0x13, 0xc0, 0xe9, 0xb1, 0xc3, 0x72, 0x73, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0,
};

static void test_signature_bytes(void **state)
{
	struct grist_chunk_header h = { .type = GRIST_CHUNK_SIGNATURE, .data_hash = grist_hash("", 0) };
	uint8_t out[64];

	(void)state;
	assert_int_equal(grist_chunk_end(0, 0, 0), 64);
	grist_block_header_build(out, 0, 0, 64);
	grist_chunk_header_build(out + 24, &h);
	assert_memory_equal(out, signature, 64);
	assert_int_equal(grist_block_header_check(signature, 0, 0, 64, "sig"), 0);
	assert_int_equal(grist_chunk_header_parse(signature + 24, &h, "sig", 0), 0);
	assert_int_equal(h.type, 's');
}

static void test_position_arithmetic(void **state)
{
	(void)state;
	assert_int_equal(grist_block_remaining(0), 0);
	assert_int_equal(grist_block_remaining(1), 65535);
	assert_int_equal(grist_block_remaining(65536 * 3 - 5), 5);
	/* Writing from a boundary costs the header first. */
	assert_int_equal(grist_block_add_with_overhead(0, 40), 64);
	assert_int_equal(grist_block_add_with_overhead(65536, 1), 65536 + 25);
	/* Ending exactly at a boundary leaves that header to the next chunk. */
	assert_int_equal(grist_block_add_with_overhead(64, 65536 - 64), 65536);
	assert_int_equal(grist_block_add_with_overhead(64, 65536 - 63), 65536 + 25);
	assert_int_equal(grist_block_add_with_overhead(100, 3 * 65512), 100 + 3 * 65512 + 3 * 24);
	assert_int_equal(grist_block_round_up_chunk_boundary(65536), 65536);
	assert_int_equal(grist_block_round_up_chunk_boundary(65537), 65536 + 25);
	assert_int_equal(grist_block_round_up_chunk_boundary(65536 + 24), 65536 + 25);
	assert_int_equal(grist_block_round_up_chunk_boundary(65536 + 25), 65536 + 25);
	assert_true(grist_block_valid_chunk_begin(0));
	assert_true(grist_block_valid_chunk_begin(65536 + 25));
	assert_false(grist_block_valid_chunk_begin(65536 + 24));
	assert_false(grist_block_valid_chunk_begin(1));
	/* Many empty records: the chunk is padded to one byte per record. */
	assert_int_equal(grist_chunk_end(64, 10, 100000), grist_block_round_up_chunk_boundary(64 + 100000));
	assert_int_equal(grist_chunk_end(64, 1ull << 63, 0), UINT64_MAX);
}

static void test_block_header_checks(void **state)
{
	uint8_t hdr[24];

	(void)state;
	grist_block_header_build(hdr, 131072, 100, 200000);
	assert_int_equal(grist_block_header_check(hdr, 131072, 100, 200000, "f"), 0);
	assert_int_equal(grist_block_header_check(hdr, 131072, 100, 0, "f"), 0);
	assert_int_equal(grist_block_header_check(hdr, 131072, 101, 200000, "f"), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "f: byte 131072: "));
	assert_int_equal(grist_block_header_check(hdr, 131072, 100, 200001, "f"), -EBADMSG);
	hdr[3] ^= 1;
	assert_int_equal(grist_block_header_check(hdr, 131072, 100, 200000, "f"), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "hash mismatch"));
}

static void test_chunk_header_round_trip(void **state)
{
	struct grist_chunk_header h = { 123, 0x1122334455667788ull, (1ull << 56) - 1, 999, 'r' }, g;
	uint8_t out[40];
	int i;

	(void)state;
	grist_chunk_header_build(out, &h);
	/* 2^56 - 1 records is above the default chunk limit (grist_max_chunk_bytes()) */
	assert_int_equal(grist_chunk_header_parse(out, &g, "f", 64), -EFBIG);
	grist_set_max_chunk_bytes(UINT64_MAX);
	assert_int_equal(grist_chunk_header_parse(out, &g, "f", 64), 0);
	grist_set_max_chunk_bytes(0);
	assert_int_equal(g.data_size, 123);
	assert_int_equal(g.data_hash, h.data_hash);
	assert_int_equal(g.num_records, h.num_records);
	assert_int_equal(g.decoded_data_size, 999);
	assert_int_equal(g.type, 'r');
	for (i = 0; i < 40; i++) {
		out[i] ^= 0x80;
		assert_int_equal(grist_chunk_header_parse(out, &g, "f", 64), -EBADMSG);
		out[i] ^= 0x80;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signature_bytes),
		cmocka_unit_test(test_position_arithmetic),
		cmocka_unit_test(test_block_header_checks),
		cmocka_unit_test(test_chunk_header_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
