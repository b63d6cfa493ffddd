/* Tests for the codec table: round trips, exact-size decoding, corrupt streams, bounds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "codec/codec.h"

static const struct grist_codec_ops *const all[] = {
	&grist_codec_none, &grist_codec_zstd, &grist_codec_snappy, &grist_codec_brotli,
};

static void round_trip(const struct grist_codec_ops *c, void *ctx, const struct grist_codec_params *p,
		       const uint8_t *src, size_t n)
{
	struct grist_buf out = { 0 };
	uint64_t bound;
	uint8_t *back = malloc(n + 1);

	assert_non_null(back);
	assert_int_equal(c->compress(ctx, p, src, n, &out), 0);
	assert_int_equal(c->bound(out.data, out.len, &bound), 0);
	assert_true(bound >= n);
	assert_int_equal(c->decompress(ctx, out.data, out.len, back, n), 0);
	assert_true(n == 0 || memcmp(src, back, n) == 0);
	/* One byte more or less than the stream holds is corruption, never a partial success. */
	if (n)
		assert_int_equal(c->decompress(ctx, out.data, out.len, back, n - 1), -EBADMSG);
	assert_int_equal(c->decompress(ctx, out.data, out.len, back, n + 1), -EBADMSG);
	free(back);
	grist_buf_free(&out);
}

static void test_round_trips(void **state)
{
	static const size_t sizes[] = { 0, 1, 7, 1000, 65536, 1u << 20 | 13 };
	struct grist_codec_params params[] = { { 3, 20 }, { 1, 25 }, { 6, 0 }, { 0, 10 } };
	struct grist_codec_set set = { 0 };
	uint8_t *src = malloc(sizes[5]);
	size_t c, s, p;

	(void)state;
	assert_non_null(src);
	t_fill(src, sizes[5], 42);
	/* Half random, half repetitive, so compressors have something to find. */
	memset(src + sizes[5] / 2, 'a', sizes[5] / 4);
	for (c = 0; c < 4; c++) {
		void *ctx;

		assert_int_equal(grist_codec_set_get(&set, all[c], &ctx), 0);
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (p = 0; p < 4; p++) {
				struct grist_codec_params q = params[p];

				if (all[c] == &grist_codec_brotli && q.level > 11)
					continue;
				round_trip(all[c], ctx, &q, src, sizes[s]);
			}
	}
	grist_codec_set_clear(&set);
	free(src);
}

static void test_find(void **state)
{
	(void)state;
	assert_ptr_equal(grist_codec_find(0), &grist_codec_none);
	assert_ptr_equal(grist_codec_find('z'), &grist_codec_zstd);
	assert_ptr_equal(grist_codec_find('s'), &grist_codec_snappy);
	assert_ptr_equal(grist_codec_find('b'), &grist_codec_brotli);
	assert_null(grist_codec_find('x'));
}

static void test_corrupt_streams(void **state)
{
	struct grist_codec_set set = { 0 };
	struct grist_codec_params p = { 3, 0 };
	uint8_t src[4096], back[4096];
	size_t c, i;

	(void)state;
	t_fill(src, sizeof(src), 7);
	memset(src, 0, 2048);
	for (c = 1; c < 4; c++) {
		struct grist_buf out = { 0 };
		void *ctx;

		assert_int_equal(grist_codec_set_get(&set, all[c], &ctx), 0);
		assert_int_equal(all[c]->compress(ctx, &p, src, sizeof(src), &out), 0);
		/* Trailing bytes after one whole stream are corruption (zstd: one frame only). */
		assert_int_equal(grist_buf_append(&out, "\0\0\0\0", 4), 0);
		assert_int_equal(all[c]->decompress(ctx, out.data, out.len, back, sizeof(back)), -EBADMSG);
		out.len -= 4;
		/* Every truncation fails cleanly. */
		for (i = 0; i < out.len; i += 1 + out.len / 64)
			assert_int_equal(all[c]->decompress(ctx, out.data, i, back, sizeof(back)), -EBADMSG);
		/* Flipped bytes give an error or, rarely, other bytes; never a crash. */
		for (i = 0; i < out.len; i++) {
			out.data[i] ^= 0x5a;
			(void)all[c]->decompress(ctx, out.data, out.len, back, sizeof(back));
			out.data[i] ^= 0x5a;
		}
		assert_int_equal(all[c]->decompress(ctx, out.data, out.len, back, sizeof(back)), 0);
		assert_memory_equal(src, back, sizeof(src));
		grist_buf_free(&out);
	}
	grist_codec_set_clear(&set);
}

static void test_bounds_reject_absurd_sizes(void **state)
{
	struct grist_codec_set set = { 0 };
	struct grist_codec_params p = { 3, 0 };
	struct grist_buf out = { 0 };
	uint8_t src[100] = { 0 };
	uint64_t bound;
	void *ctx;

	(void)state;
	assert_int_equal(grist_codec_set_get(&set, &grist_codec_zstd, &ctx), 0);
	assert_int_equal(grist_codec_zstd.compress(ctx, &p, src, sizeof(src), &out), 0);
	assert_int_equal(grist_codec_zstd.bound(out.data, out.len, &bound), 0);
	assert_true(bound < (1ull << 20));
	assert_int_equal(grist_codec_zstd.bound((const uint8_t *)"garbage!", 8, &bound), -EBADMSG);
	assert_int_equal(grist_codec_snappy.bound((const uint8_t *)"\xff\xff\xff\xff\xff\xff", 6, &bound), -EBADMSG);
	assert_int_equal(grist_codec_brotli.bound(src, 10, &bound), 0);
	assert_true(bound < (1ull << 60));
	grist_buf_free(&out);
	grist_codec_set_clear(&set);
}

/*
 * zstd frames of one raw or one RLE block (what zstd writes for a chunk's few-byte sizes
 * section) are copied without the library: same bytes, same refusals as the library's.
 */
static void test_zstd_trivial_frames(void **state)
{
	/* magic, single-segment descriptor, 1-byte content size 5, last raw block of 5 bytes */
	const uint8_t raw[] = { 0x28, 0xb5, 0x2f, 0xfd, 0x20, 5, 5 << 3 | 0 << 1 | 1, 0, 0, 'h', 'e', 'l', 'l', 'o' };
	/* the same with a last RLE block: 300 times 'q' (content size 300 takes 2 bytes, minus 256) */
	const uint8_t rle[] = { 0x28, 0xb5, 0x2f, 0xfd, 0x60, 300 - 256, 0, (300 << 3 | 1 << 1 | 1) & 0xff,
				(300 << 3) >> 8, 0, 'q' };
	struct grist_codec_set set = { 0 };
	struct grist_codec_params p = { 3, 0 };
	struct grist_buf out = { 0 };
	uint8_t back[400], frame[32], expect[300];
	size_t i;
	void *ctx;

	(void)state;
	assert_int_equal(grist_codec_set_get(&set, &grist_codec_zstd, &ctx), 0);
	assert_int_equal(grist_codec_zstd.decompress(ctx, raw, sizeof(raw), back, 5), 0);
	assert_memory_equal(back, "hello", 5);
	memset(expect, 'q', sizeof(expect));
	assert_int_equal(grist_codec_zstd.decompress(ctx, rle, sizeof(rle), back, 300), 0);
	assert_memory_equal(back, expect, 300);
	/* a size other than the block's, a cut frame, a byte after it: all refused */
	assert_int_equal(grist_codec_zstd.decompress(ctx, raw, sizeof(raw), back, 4), -EBADMSG);
	assert_int_equal(grist_codec_zstd.decompress(ctx, raw, sizeof(raw), back, 6), -EBADMSG);
	assert_int_equal(grist_codec_zstd.decompress(ctx, rle, sizeof(rle), back, 299), -EBADMSG);
	for (i = 0; i < sizeof(raw); i++)
		assert_int_equal(grist_codec_zstd.decompress(ctx, raw, i, back, 5), -EBADMSG);
	for (i = 0; i < sizeof(rle); i++)
		assert_int_equal(grist_codec_zstd.decompress(ctx, rle, i, back, 300), -EBADMSG);
	memcpy(frame, raw, sizeof(raw));
	frame[sizeof(raw)] = 0;
	assert_int_equal(grist_codec_zstd.decompress(ctx, frame, sizeof(raw) + 1, back, 5), -EBADMSG);
	/* a block that is not the last, or a content size that disagrees with the block */
	frame[6] &= (uint8_t)~1;
	assert_int_equal(grist_codec_zstd.decompress(ctx, frame, sizeof(raw), back, 5), -EBADMSG);
	memcpy(frame, raw, sizeof(raw));
	frame[5] = 4;
	assert_int_equal(grist_codec_zstd.decompress(ctx, frame, sizeof(raw), back, 5), -EBADMSG);
	/* a reserved descriptor bit set */
	memcpy(frame, raw, sizeof(raw));
	frame[4] |= 0x08;
	assert_int_equal(grist_codec_zstd.decompress(ctx, frame, sizeof(raw), back, 5), -EBADMSG);
	/* what the writer's own zstd makes of a 2-byte sizes section is such a frame, and decodes */
	assert_int_equal(grist_codec_zstd.compress(ctx, &p, (const uint8_t *)"\x80\x08", 2, &out), 0);
	assert_int_equal(out.data[out.len - 5] >> 1 & 3, 0);
	assert_int_equal(grist_codec_zstd.decompress(ctx, out.data, out.len, back, 2), 0);
	assert_memory_equal(back, "\x80\x08", 2);
	grist_buf_free(&out);
	grist_codec_set_clear(&set);
}

static void test_large_window_brotli(void **state)
{
	struct grist_codec_params p = { 5, 26 };
	size_t n = 3u << 20;
	uint8_t *src = malloc(n);

	(void)state;
	assert_non_null(src);
	t_fill(src, 1u << 20, 9);
	memcpy(src + (2u << 20), src, 1u << 20); /* a repeat 2 MiB back needs a window > 2^21 */
	memset(src + (1u << 20), 'x', 1u << 20);
	round_trip(&grist_codec_brotli, NULL, &p, src, n);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_corrupt_streams),
		cmocka_unit_test(test_bounds_reject_absurd_sizes),
		cmocka_unit_test(test_large_window_brotli),
		cmocka_unit_test(test_zstd_trivial_frames),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
