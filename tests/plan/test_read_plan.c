/* Tests for the read planner: coalescing of chunk extents into regions, O_DIRECT rounding, read buffer space, request pieces. */
#include "helpers.h"
#include "plan/read_plan.h"

/* Touching and overlapping extents join; a gap or an extent before the region does not. */
static void test_coalesce_touching(void **state)
{
	uint64_t len = 100;

	(void)state;
	assert_true(grist_read_coalesce(1000, &len, 1100, 1200)); /* right at the end */
	assert_int_equal(len, 200);
	assert_true(grist_read_coalesce(1000, &len, 1050, 1150)); /* inside: no growth */
	assert_int_equal(len, 200);
	assert_true(grist_read_coalesce(1000, &len, 1150, 1300)); /* overlapping the end */
	assert_int_equal(len, 300);
	assert_false(grist_read_coalesce(1000, &len, 1301, 1400)); /* one byte of gap */
	assert_false(grist_read_coalesce(1000, &len, 999, 1100));  /* before the region */
	assert_int_equal(len, 300);
}

/* A region grows up to GRIST_READ_REGION_MAX bytes and not one byte more. */
static void test_coalesce_bound(void **state)
{
	uint64_t len = GRIST_READ_REGION_MAX - 10;

	(void)state;
	assert_true(grist_read_coalesce(0, &len, len, GRIST_READ_REGION_MAX));
	assert_int_equal(len, GRIST_READ_REGION_MAX);
	assert_false(grist_read_coalesce(0, &len, len, GRIST_READ_REGION_MAX + 1));
	assert_int_equal(len, GRIST_READ_REGION_MAX);
	len = 4096;
	assert_false(grist_read_coalesce(4096, &len, 8192, 4096 + GRIST_READ_REGION_MAX + 1));
	/* a caller's bound (a streamed unit's regions): the same rule at that size */
	len = 4096;
	assert_true(grist_read_coalesce_max(0, &len, 4096, 8192, 8192));
	assert_int_equal(len, 8192);
	assert_false(grist_read_coalesce_max(0, &len, 8192, 8193, 8192));
	assert_int_equal(len, 8192);
}

static void test_align(void **state)
{
	uint64_t off = 5000, end = 9000;

	(void)state;
	grist_read_align(4096, &off, &end);
	assert_int_equal(off, 4096);
	assert_int_equal(end, 12288);
	grist_read_align(4096, &off, &end); /* aligned already: unchanged */
	assert_int_equal(off, 4096);
	assert_int_equal(end, 12288);
	off = 5000;
	end = 9000;
	grist_read_align(1, &off, &end);
	assert_int_equal(off, 5000);
	assert_int_equal(end, 9000);
}

/*
 * Read buffer space per region: O_DIRECT files take whole pages, URLs only up to the next
 * cache line, so a 616-byte chunk of a remote file takes 640 bytes of the read-ahead
 * window instead of 4 KiB, and a region of exact multiples is not padded at all.
 */
static void test_buf_len(void **state)
{
	(void)state;
	assert_int_equal(grist_read_buf_len(616, GRIST_READ_BUF_ALIGN_DIRECT), 4096);
	assert_int_equal(grist_read_buf_len(616, GRIST_READ_BUF_ALIGN_REMOTE), 640);
	assert_int_equal(grist_read_buf_len(640, GRIST_READ_BUF_ALIGN_REMOTE), 640);
	assert_int_equal(grist_read_buf_len(1, GRIST_READ_BUF_ALIGN_REMOTE), 64);
	assert_int_equal(grist_read_buf_len(0, GRIST_READ_BUF_ALIGN_REMOTE), 0);
	assert_int_equal(grist_read_buf_len(4097, GRIST_READ_BUF_ALIGN_DIRECT), 8192);
	assert_int_equal(grist_read_buf_len(GRIST_READ_REGION_MAX - 1, GRIST_READ_BUF_ALIGN_REMOTE),
			 GRIST_READ_REGION_MAX);
}

/* Pieces cover a region exactly, each at most GRIST_READ_PIECE_MAX bytes. */
static void test_pieces(void **state)
{
	const uint64_t lens[] = { 1, 4096, GRIST_READ_PIECE_MAX - 1, GRIST_READ_PIECE_MAX, GRIST_READ_PIECE_MAX + 1,
				  3ull * GRIST_READ_PIECE_MAX + 17, GRIST_READ_REGION_MAX };
	const size_t want[] = { 1, 1, 1, 1, 2, 4, 4 };

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint64_t done, sum = 0;
		size_t n = 0;

		assert_int_equal(grist_read_pieces(lens[i]), want[i]);
		for (done = 0; done < lens[i]; done += GRIST_READ_PIECE_MAX, n++) {
			uint32_t piece = grist_read_piece_len(lens[i], done);

			assert_true(piece > 0 && piece <= GRIST_READ_PIECE_MAX);
			sum += piece;
		}
		assert_int_equal(n, want[i]);
		assert_int_equal(sum, lens[i]);
	}
	assert_int_equal(grist_read_pieces(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalesce_touching),
		cmocka_unit_test(test_coalesce_bound),
		cmocka_unit_test(test_align),
		cmocka_unit_test(test_buf_len),
		cmocka_unit_test(test_pieces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
