/* Tests for chunk decoding from raw bytes: block crossing, zero copy, absurd sizes, unsupported types. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "grist/error.h"
#include "grist/format.h"
#include "codec/codec.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/chunk_decode.h"
#include "format/hash.h"
#include "format/simple_chunk.h"
#include "format/varint.h"

/* Lay out a chunk of logical bytes @logical at file offset @begin in @file, inserting block headers. */
static uint64_t place_chunk(uint8_t *file, uint64_t begin, const uint8_t *logical, uint64_t n, uint64_t end)
{
	uint64_t pos = begin;

	while (n) {
		uint64_t take;

		if (!(pos % GRIST_BLOCK_SIZE)) {
			grist_block_header_build(file + pos, pos, begin, end);
			pos += GRIST_BLOCK_HEADER_SIZE;
		}
		take = grist_block_remaining(pos);
		if (take > n)
			take = n;
		memcpy(file + pos, logical, take);
		pos += take;
		logical += take;
		n -= take;
	}
	return pos;
}

/* Build chunk @type with @data at @begin; returns the chunk end. */
static uint64_t make_chunk(uint8_t *file, uint64_t begin, uint8_t type, const uint8_t *data, uint64_t size,
			   uint64_t records, uint64_t decoded)
{
	struct grist_chunk_header h = { size, grist_hash(data, size), records, decoded, type };
	uint64_t end = grist_chunk_end(begin, size, records);
	uint8_t *logical = malloc(40 + size);

	assert_non_null(logical);
	grist_chunk_header_build(logical, &h);
	memcpy(logical + 40, data, size);
	place_chunk(file, begin, logical, 40 + size, end);
	free(logical);
	return end;
}

/* Append a record of @len bytes (t_fill() with @seed) to a simple chunk's sizes and values sections. */
static void add_record(uint8_t *sizes, size_t *sizes_len, uint8_t *values, size_t *values_len, size_t len,
		       uint64_t seed)
{
	*sizes_len += grist_varint_write(sizes + *sizes_len, len);
	t_fill(values + *values_len, len, seed);
	*values_len += len;
}

static void test_crossing_and_zero_copy(void **state)
{
	size_t file_len = 4 * GRIST_BLOCK_SIZE;
	uint8_t *file = calloc(1, file_len), *data = malloc(150000);
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk c;
	uint64_t end, begins[] = { 64, GRIST_BLOCK_SIZE - 20, GRIST_BLOCK_SIZE, GRIST_BLOCK_SIZE + 25 };
	size_t i;

	(void)state;
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	/* Two records: 3 bytes, then 149990: the chunk spans blocks, its header too when begin is near one. */
	data[0] = 0;
	data[1] = 4;
	data[2] = 3;
	data[3] = 0xe6;
	data[4] = 0x93;
	data[5] = 0x09;
	t_fill(data + 6, 150000 - 6, 5);
	for (i = 0; i < 4; i++) {
		memset(file, 0, file_len);
		end = make_chunk(file, begins[i], 'r', data, 6 + 3 + 149990, 2, 3 + 149990);
		assert_int_equal(grist_chunk_decode(d, file, 0, file_len, begins[i], end, "x", &c), 0);
		assert_int_equal(c.num_records, 2);
		assert_int_equal(c.offsets[1], 3);
		assert_int_equal(c.offsets[2], 3 + 149990);
		assert_memory_equal(c.values, data + 6, 3 + 149990);
		assert_int_equal(c.chunk_end, end);
		/* The same bytes seen through a buffer that starts at the chunk. */
		assert_int_equal(grist_chunk_decode(d, file + begins[i], begins[i], end - begins[i], begins[i], end,
						    "x", &c), 0);
		/* An extent shorter than the chunk is corruption, not a read past the buffer. */
		assert_int_equal(grist_chunk_decode(d, file, 0, file_len, begins[i], end - 1, "x", &c), -EBADMSG);
	}
	/* A small stored chunk inside one block is not copied. */
	end = make_chunk(file, 64, 'r', data, 6 + 3, 1, 3);
	assert_int_equal(grist_chunk_decode(d, file, 0, file_len, 64, end, "x", &c), -EBADMSG);
	data[1] = 1;
	end = make_chunk(file, 64, 'r', data, 2 + 1 + 3, 1, 3);
	assert_int_equal(grist_chunk_decode(d, file, 0, file_len, 64, end, "x", &c), 0);
	assert_ptr_equal(c.values, file + 64 + 40 + 3);
	grist_chunk_decoder_destroy(d);
	free(file);
	free(data);
}

static void test_absurd_sizes(void **state)
{
	uint8_t file[GRIST_BLOCK_SIZE] = { 0 }, data[64];
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk c;
	struct grist_codec_set set = { 0 };
	struct grist_codec_params p = { 3, 0 };
	struct grist_buf z = { 0 };
	uint64_t end;
	size_t n;
	void *ctx;

	(void)state;
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	/* Decoded size 2^60 announced by a stored chunk: above grist_max_chunk_bytes(). */
	memcpy(data, "\x00\x01\x05hello", 8);
	end = make_chunk(file, 64, 'r', data, 8, 1, 1ull << 60);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), -EFBIG);
	assert_non_null(strstr(grist_last_error(), "x: byte 64: "));
	/* A zstd values section claiming 2^60 bytes: rejected by the codec bound, before allocating. */
	assert_int_equal(grist_codec_set_get(&set, &grist_codec_zstd, &ctx), 0);
	assert_int_equal(grist_codec_zstd.compress(ctx, &p, (const uint8_t *)"\x05", 1, &z), 0);
	n = 0;
	data[n++] = 'z';
	data[n++] = (uint8_t)(1 + z.len);
	data[n++] = 1;
	memcpy(data + n, z.data, z.len);
	n += z.len;
	memcpy(data + n, "\x80\x80\x80\x80\x80\x80\x80\x80\x10", 9); /* varint 2^60 */
	n += 9;
	z.len = 0;
	assert_int_equal(grist_codec_zstd.compress(ctx, &p, (const uint8_t *)"hello", 5, &z), 0);
	memcpy(data + n, z.data, z.len);
	n += z.len;
	end = make_chunk(file, 64, 'r', data, n, 1, 1ull << 60);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), -EFBIG);
	/* More records than the chunk's extent has bytes for. */
	memcpy(data, "\x00\x01\x05hello", 8);
	end = make_chunk(file, 64, 'r', data, 8, 1, 5);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), 0);
	{
		struct grist_chunk_header h = { 8, grist_hash(data, 8), 1ull << 55, 5, 'r' };

		grist_chunk_header_build(file + 64, &h);
		assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, sizeof(file), "x", &c), -EFBIG);
		h.num_records = 1;
		h.data_size = 1ull << 62;
		grist_chunk_header_build(file + 64, &h);
		assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, sizeof(file), "x", &c), -EFBIG);
		assert_non_null(strstr(grist_last_error(), "x: byte 64: "));
	}
	grist_buf_free(&z);
	grist_codec_set_clear(&set);
	grist_chunk_decoder_destroy(d);
}

/* A zstd frame: magic, a header whose content size says @claim, and one last RLE block of one byte. */
static size_t lying_zstd_frame(uint8_t *out, uint64_t claim)
{
	size_t n = 0;
	int i;

	memcpy(out, "\x28\xb5\x2f\xfd", 4);
	n = 4;
	out[n++] = 0xe0; /* 8-byte content size, single segment */
	for (i = 0; i < 8; i++)
		out[n++] = (uint8_t)(claim >> (8 * i));
	out[n++] = 0x0b; /* last block, RLE, size 1 */
	out[n++] = 0;
	out[n++] = 0;
	out[n++] = 'a';
	return n;
}

/*
 * Size claims that would drive allocations fail before allocating, naming the file and
 * the chunk: a zstd frame header or snappy preamble claiming 2^30 bytes from a few
 * (they used to be believed), a brotli stream said to hold 4 GB (above the chunk limit), and
 * any chunk above a lowered grist_set_max_chunk_bytes().
 */
static void test_size_claims_bounded(void **state)
{
	uint8_t file[GRIST_BLOCK_SIZE] = { 0 }, data[128];
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk c;
	uint64_t end;
	size_t n = 0, fl;

	(void)state;
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	/* zstd sizes section: varint 2^30, then a frame that claims the same */
	data[n++] = 'z';
	fl = lying_zstd_frame(data + 8, 1ull << 30);
	data[n++] = (uint8_t)(5 + fl);
	memcpy(data + n, "\x80\x80\x80\x80\x04", 5); /* varint 2^30 */
	n += 5;
	memmove(data + n, data + 8, fl);
	n += fl;
	end = make_chunk(file, 64, 'r', data, n, 1, 1);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "lie.ar", &c), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "lie.ar: byte 64: sizes section claims 1073741824 decoded bytes"));

	/* snappy sizes section: varint 2^30, then a stream whose preamble claims the same */
	n = 0;
	data[n++] = 's';
	data[n++] = 5 + 5 + 2;
	memcpy(data + n, "\x80\x80\x80\x80\x04", 5); /* grist's length, 2^30 */
	n += 5;
	memcpy(data + n, "\x80\x80\x80\x80\x04", 5); /* snappy's preamble, 2^30 */
	n += 5;
	data[n++] = 0x00; /* a literal of 1 byte */
	data[n++] = 'a';
	end = make_chunk(file, 64, 'r', data, n, 1, 1);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "sn.ar", &c), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "sn.ar: byte 64: sizes section claims 1073741824 decoded bytes"));

	/* brotli: 1 record of 4 GB; the header's decoded size is above the default limit */
	n = 0;
	data[n++] = 'b';
	data[n++] = 2;
	data[n++] = 1;
	data[n++] = 0x01;
	memcpy(data + n, "\x80\x80\x80\x80\x10", 5); /* 2^32 */
	n += 5;
	memset(data + n, 0x1b, 40);
	n += 40;
	end = make_chunk(file, 64, 'r', data, n, 1, 1ull << 32);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "b.ar", &c), -EFBIG);
	assert_non_null(strstr(grist_last_error(), "b.ar: byte 64: chunk claims"));

	/* a stored chunk of 5000 bytes under a 4096-byte limit, and at the default again */
	n = 4 + 5000;
	{
		uint8_t *big = calloc(1, n);

		assert_non_null(big);
		memcpy(big, "\x00\x02\x88\x27", 4); /* stored, sizes section of 2 bytes: varint 5000 */
		end = make_chunk(file, 64, 'r', big, n, 1, 5000);
		free(big);
	}
	grist_set_max_chunk_bytes(4096);
	assert_int_equal(grist_max_chunk_bytes(), 4096);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "s.ar", &c), -EFBIG);
	assert_non_null(strstr(grist_last_error(), "s.ar: byte 64: "));
	grist_set_max_chunk_bytes(0);
	assert_int_equal(grist_max_chunk_bytes(), GRIST_DEFAULT_MAX_CHUNK_BYTES);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "s.ar", &c), 0);
	assert_int_equal(c.offsets[1], 5000);
	grist_chunk_decoder_destroy(d);
}

static void test_chunk_types(void **state)
{
	uint8_t file[GRIST_BLOCK_SIZE] = { 0 };
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk c;
	uint64_t end;

	(void)state;
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	end = make_chunk(file, 64, 't', (const uint8_t *)"\x00", 1, 1, 1);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), -ENOTSUP);
	assert_non_null(strstr(grist_last_error(), "transposed"));
	end = make_chunk(file, 64, 'p', (const uint8_t *)"\0\0\0", 3, 0, 0);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), 0);
	assert_int_equal(c.num_records, 0);
	assert_int_equal(c.chunk_type, 'p');
	end = make_chunk(file, 64, 'm', (const uint8_t *)"meta", 4, 0, 0);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), 0);
	end = make_chunk(file, 64, 's', (const uint8_t *)"", 0, 0, 0);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), -EBADMSG);
	/* Data hash mismatch, named as such. */
	end = make_chunk(file, 64, 'r', (const uint8_t *)"\x00\x01\x01\x30", 4, 1, 1);
	file[64 + 40 + 3] ^= 1;
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, end, "x", &c), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "data hash mismatch"));
	/* Chunks cannot begin inside a block header; the buffer must cover the extent. */
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 10, 200, "x", &c), -EBADMSG);
	assert_int_equal(grist_chunk_decode(d, file, 0, sizeof(file), 64, sizeof(file) + 1, "x", &c), -EINVAL);
	grist_chunk_decoder_destroy(d);
}

static void test_simple_chunk_checks(void **state)
{
	struct grist_simple_decoder d = { 0 };
	struct grist_simple_records out;

	(void)state;
	/* Sizes left over, values too long, unknown codec, sizes section past the data. */
	assert_int_equal(grist_simple_chunk_decode(&d, (const uint8_t *)"\x00\x02\x01\x01\x30", 5, 1, 1, "x", 64, &out), -EBADMSG);
	assert_int_equal(grist_simple_chunk_decode(&d, (const uint8_t *)"\x00\x01\x01\x30\x31", 5, 1, 1, "x", 64, &out), -EBADMSG);
	assert_int_equal(grist_simple_chunk_decode(&d, (const uint8_t *)"\x07\x01\x01\x30", 4, 1, 1, "x", 64, &out), -ENOTSUP);
	assert_int_equal(grist_simple_chunk_decode(&d, (const uint8_t *)"\x00\x09\x01\x30", 4, 1, 1, "x", 64, &out), -EBADMSG);
	assert_int_equal(grist_simple_chunk_decode(&d, (const uint8_t *)"\x00\x01\x01\x30", 4, 1, 1, "x", 64, &out), 0);
	assert_int_equal(out.offsets[1], 1);
	grist_simple_decoder_clear(&d);
}

/*
 * The two halves give what the whole decode gives, with a zstd sizes section that
 * straddles a block boundary; the sizes half never reads the hash, the values half
 * always does.
 */
static void test_halves(void **state)
{
	enum { N = 300 };
	const struct grist_codec_ops *zstd = grist_codec_find(GRIST_CODEC_ZSTD);
	const struct grist_codec_params params = { .level = 3 };
	size_t file_len = 3 * GRIST_BLOCK_SIZE, values_len = 0, sizes_len = 0, i;
	uint8_t *file = calloc(1, file_len), *values = malloc(N * 200), *decoded = malloc(N * 200), sizes[N * 2];
	const uint8_t *stream;
	size_t stream_len;
	struct grist_buf scratch = { 0 }, data = { 0 };
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk whole, half;
	uint64_t begins[] = { 64, GRIST_BLOCK_SIZE - 44, GRIST_BLOCK_SIZE - 41 }, end, offsets[N + 1], b;
	void *ctx;

	(void)state;
	assert_non_null(file);
	assert_non_null(values);
	assert_int_equal(zstd->ctx_create(&ctx), 0);
	for (i = 0; i < N; i++)
		add_record(sizes, &sizes_len, values, &values_len, (i * 37) % 200, i);
	assert_int_equal(grist_simple_chunk_encode(zstd, ctx, &params, sizes, sizes_len, values, values_len, &scratch,
						   &data), 0);
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	for (b = 0; b < 3; b++) {
		memset(file, 0, file_len);
		end = make_chunk(file, begins[b], 'r', data.data, data.len, N, values_len);
		assert_int_equal(grist_chunk_decode(d, file, 0, file_len, begins[b], end, "x", &whole), 0);
		memcpy(offsets, whole.offsets, sizeof(offsets));
		assert_int_equal(grist_chunk_decode_sizes(d, file, 0, file_len, begins[b], end, "x", &half), 0);
		assert_null(half.values);
		assert_int_equal(half.num_records, N);
		assert_int_equal(half.decoded_data_size, values_len);
		assert_memory_equal(half.offsets, offsets, sizeof(offsets));
		assert_int_equal(grist_chunk_decode_values(d, file, 0, file_len, begins[b], end, "x", &half), 0);
		assert_memory_equal(half.values, values, values_len);
		assert_int_equal(half.chunk_end, end);
		/* The stored stream is the tail of the chunk data, and the codec alone decodes it. */
		assert_int_equal(grist_chunk_stored_values(d, file, 0, file_len, begins[b], end, "x", &stream,
							   &stream_len), 0);
		assert_true(stream_len > 0 && stream_len < data.len - grist_varint_len(values_len));
		assert_memory_equal(stream, data.data + data.len - stream_len, stream_len);
		assert_int_equal(zstd->decompress(ctx, stream, stream_len, decoded, values_len), 0);
		assert_memory_equal(decoded, values, values_len);
		/* A flipped byte near the end of the data: only the values half sees it, by the hash. */
		file[half.data_end - 3] ^= 0x40;
		assert_int_equal(grist_chunk_decode_sizes(d, file, 0, file_len, begins[b], end, "x", &half), 0);
		assert_int_equal(grist_chunk_decode_values(d, file, 0, file_len, begins[b], end, "x", &half), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "hash"));
	}
	/* Record-less chunks are checked in full by the sizes half too. */
	memset(file, 0, file_len);
	end = make_chunk(file, 64, 'p', values, 10, 0, 0);
	file[64 + 40 + 2] ^= 1;
	assert_int_equal(grist_chunk_decode_sizes(d, file, 0, file_len, 64, end, "x", &half), -EBADMSG);
	grist_chunk_decoder_destroy(d);
	zstd->ctx_destroy(ctx);
	grist_buf_free(&scratch);
	grist_buf_free(&data);
	free(values);
	free(decoded);
	free(file);
}

/*
 * Values decoded straight into the caller's rows equal the values half's, for every codec,
 * one record or many, a chunk inside one block or across a boundary; nothing is written
 * outside the row, and a wrong row size or a flipped byte is refused.
 */
static void test_values_into(void **state)
{
	const struct grist_codec_params params = { .level = 3 };
	const uint8_t codecs[] = { GRIST_CODEC_NONE, GRIST_CODEC_ZSTD, GRIST_CODEC_SNAPPY, GRIST_CODEC_BROTLI };
	/* one block, two, and a chunk over three block boundaries (stored: copied straight into the row) */
	const size_t counts[] = { 1, 40, 120 };
	/* at a block's start; its header split by a block header; its sizes section split by one */
	const uint64_t begins[] = { 64, GRIST_BLOCK_SIZE - 30, GRIST_BLOCK_SIZE - 44 };
	size_t file_len = 4 * GRIST_BLOCK_SIZE, values_len, sizes_len, i, k, n, b;
	uint8_t *file = calloc(1, file_len), *values = malloc(120 * 1500), *row = malloc(120 * 1500 + 64), sizes[240];
	struct grist_buf scratch = { 0 }, data = { 0 };
	struct grist_codec_set set = { 0 };
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk c;
	uint64_t end;
	void *ctx;

	(void)state;
	assert_non_null(file);
	assert_non_null(values);
	assert_non_null(row);
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	for (k = 0; k < sizeof(codecs); k++) {
		const struct grist_codec_ops *codec = grist_codec_find(codecs[k]);

		assert_int_equal(grist_codec_set_get(&set, codec, &ctx), 0);
		for (n = 0; n < 3; n++) {
			values_len = sizes_len = 0;
			for (i = 0; i < counts[n]; i++)
				add_record(sizes, &sizes_len, values, &values_len, 1000 + (i * 37) % 500, i + k);
			assert_int_equal(grist_simple_chunk_encode(codec, ctx, &params, sizes, sizes_len, values,
								   values_len, &scratch, &data), 0);
			for (b = 0; b < 3; b++) {
				memset(file, 0, file_len);
				end = make_chunk(file, begins[b], 'r', data.data, data.len, counts[n], values_len);
				memset(row, 0xee, values_len + 64);
				assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begins[b], end, "x",
										row + 32, values_len, &c), 0);
				assert_ptr_equal(c.values, row + 32);
				assert_int_equal(c.decoded_data_size, values_len);
				assert_memory_equal(row + 32, values, values_len);
				for (i = 0; i < 32; i++) {
					assert_int_equal(row[i], 0xee);
					assert_int_equal(row[32 + values_len + i], 0xee);
				}
				/* rows that do not hold exactly the chunk's values */
				assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begins[b], end, "x",
										row, values_len - 1, &c), -EBADMSG);
				assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begins[b], end, "x",
										row, values_len + 1, &c), -EBADMSG);
				/* a flipped byte in the stored values: the hash catches it before any codec runs */
				file[c.data_end - 2] ^= 0x10;
				assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begins[b], end, "x",
										row, values_len, &c), -EBADMSG);
				assert_non_null(strstr(grist_last_error(), "hash"));
				file[c.data_end - 2] ^= 0x10;
				/* ... and in the sizes section, which the values half reads no further than its length */
				{
					const uint8_t *p = data.data + 1;
					uint64_t stored;

					stored = 0;
					assert_int_equal(grist_varint_read(&p, data.data + data.len, &stored), 0);
					file[grist_block_add_with_overhead(
						begins[b], GRIST_CHUNK_HEADER_SIZE + (uint64_t)(p - data.data) + stored - 1)] ^= 0x01;
				}
				assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begins[b], end, "x",
										row, values_len, &c), -EBADMSG);
				assert_non_null(strstr(grist_last_error(), "hash"));
			}
		}
	}
	/* record-less chunks are checked and write nothing */
	memset(file, 0, file_len);
	end = make_chunk(file, 64, 'p', values, 10, 0, 0);
	memset(row, 0xee, 16);
	assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, 64, end, "x", row, 0, &c), 0);
	assert_int_equal(c.num_records, 0);
	assert_int_equal(row[0], 0xee);
	grist_chunk_decoder_destroy(d);
	grist_codec_set_clear(&set);
	grist_buf_free(&scratch);
	grist_buf_free(&data);
	free(values);
	free(row);
	free(file);
}

/*
 * grist_hash_pieces_copy() is grist_hash_pieces() plus a copy of a range (and
 * grist_hash_pieces_gather() plus a copy of everything): pieces of every
 * kind of length (empty, odd, across the fused pass's 8 KiB steps, a whole block's
 * worth), copy ranges at the start, inside one piece, across pieces and to the end,
 * and destinations at every alignment.
 */
static void test_hash_pieces_copy(void **state)
{
	const size_t lens[][6] = {
		{ 0, 1, 31, 32, 33, 0 }, { 8191, 8193, 1, 65512, 100, 7 }, { 300000, 0, 0, 0, 0, 0 },
		{ 5, 8192, 16384, 3, 24576, 40000 },
	};
	size_t total_max = 300000 + 64, i, k, n, from, len, off;
	uint8_t *bytes = malloc(total_max), *flat = malloc(total_max), *dst = malloc(total_max + 128);
	struct grist_hash_piece pieces[6];

	(void)state;
	assert_non_null(bytes);
	assert_non_null(flat);
	assert_non_null(dst);
	t_fill(bytes, total_max, 7);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t total = 0, at = 0;

		/* the pieces lie apart in @bytes (a gap of 3 between them), as data split by block headers does */
		for (k = 0; k < 6; k++) {
			pieces[k] = (struct grist_hash_piece){ (const char *)bytes + at, lens[i][k] };
			memcpy(flat + total, bytes + at, lens[i][k]);
			total += lens[i][k];
			at += lens[i][k] + 3;
			assert_true(at <= total_max);
		}
		for (n = 0; n < 9; n++) {
			const size_t cuts[][2] = { { 0, total }, { 0, 0 }, { 0, total / 2 }, { total / 3, total / 3 },
						   { total, 0 }, { 1, total - 1 }, { total / 2, total - total / 2 },
						   { 33, total > 66 ? total - 66 : 0 }, { 8190, total > 8200 ? 10 : 0 } };

			from = cuts[n][0] <= total ? cuts[n][0] : total;
			len = from + cuts[n][1] <= total ? cuts[n][1] : total - from;
			for (off = 0; off < 64; off += 13) {
				memset(dst, 0xee, total_max + 128);
				assert_true(grist_hash_pieces_copy(pieces, 6, from, dst + off, len) ==
					    grist_hash(flat, total));
				assert_memory_equal(dst + off, flat + from, len);
				for (k = 0; k < off; k++)
					assert_int_equal(dst[k], 0xee);
				for (k = off + len; k < off + len + 64; k++)
					assert_int_equal(dst[k], 0xee);
			}
		}
		/* the gather for a codec: every piece, ordinary stores */
		memset(dst, 0xee, total_max + 128);
		assert_true(grist_hash_pieces_gather(pieces, 6, dst + 5) == grist_hash(flat, total));
		assert_memory_equal(dst + 5, flat, total);
		assert_int_equal(dst[4], 0xee);
		assert_int_equal(dst[5 + total], 0xee);
	}
	free(bytes);
	free(flat);
	free(dst);
}

/*
 * A stored chunk of 300 KB (five blocks, many of the fused pass's steps) with one byte
 * flipped anywhere in its data: the fused hash-and-copy path fails it, naming the file
 * and the chunk's offset, and reports the hash rather than what the bad byte did to the
 * sizes section.
 */
static void test_stored_corruption_named(void **state)
{
	const size_t count = 300;
	const uint64_t begin = GRIST_BLOCK_SIZE - 100;
	size_t file_len = 7 * GRIST_BLOCK_SIZE, values_len = 0, sizes_len = 0, i, j;
	uint8_t *file = calloc(1, file_len), *values = malloc(count * 1000), *row = malloc(count * 1000);
	uint8_t *sizes = malloc(count * 2);
	struct grist_buf scratch = { 0 }, data = { 0 };
	const struct grist_codec_ops *codec = grist_codec_find(GRIST_CODEC_NONE);
	const struct grist_codec_params params = { .level = 0 };
	struct grist_chunk_decoder *d;
	struct grist_decoded_chunk c;
	char name[64];
	uint64_t end;

	(void)state;
	assert_non_null(file);
	assert_non_null(values);
	assert_non_null(row);
	assert_non_null(sizes);
	for (i = 0; i < count; i++)
		add_record(sizes, &sizes_len, values, &values_len, 1000, i);
	assert_int_equal(grist_simple_chunk_encode(codec, NULL, &params, sizes, sizes_len, values, values_len,
						   &scratch, &data), 0);
	end = make_chunk(file, begin, 'r', data.data, data.len, count, values_len);
	assert_int_equal(grist_chunk_decoder_create(&d), 0);
	assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begin, end, "f.array_record", row,
							values_len, &c), 0);
	assert_memory_equal(row, values, values_len);
	snprintf(name, sizeof(name), "f.array_record: byte %llu: ", (unsigned long long)begin);
	/* the compression byte and sizes section, the first step, step edges, a block's first byte, the last byte */
	{
		const uint64_t at[] = { 0, 1, 5, 8191, 8192, 100000, GRIST_BLOCK_SIZE, 3 * GRIST_BLOCK_SIZE,
					data.len - 1 };

		for (j = 0; j < sizeof(at) / sizeof(at[0]); j++) {
			uint64_t p = grist_block_add_with_overhead(begin, GRIST_CHUNK_HEADER_SIZE + at[j]);

			if (!(p % GRIST_BLOCK_SIZE))
				p += GRIST_BLOCK_HEADER_SIZE;
			file[p] ^= 0x40;
			assert_int_equal(grist_chunk_decode_values_into(d, file, 0, file_len, begin, end,
									"f.array_record", row, values_len, &c),
					 -EBADMSG);
			assert_non_null(strstr(grist_last_error(), "data hash mismatch"));
			assert_ptr_equal(strstr(grist_last_error(), name), grist_last_error());
			file[p] ^= 0x40;
		}
	}
	grist_chunk_decoder_destroy(d);
	grist_buf_free(&scratch);
	grist_buf_free(&data);
	free(sizes);
	free(values);
	free(row);
	free(file);
}

/*
 * grist_chunk_decoder_check_data(d, false), GRIST_VERIFY_HEADERS: the same records from a
 * sound chunk, stored or compressed, through every entry point; a flipped value byte goes
 * through (what the setting gives up), while a flipped byte in the chunk header, in a
 * block header or in the sizes section is still an error naming the file and the chunk.
 */
static void test_headers_only(void **state)
{
	const struct grist_codec_params params = { .level = 3 };
	const uint8_t codecs[] = { GRIST_CODEC_NONE, GRIST_CODEC_ZSTD };
	const size_t count = 300;
	const uint64_t begin = GRIST_BLOCK_SIZE - 100;
	size_t file_len = 7 * GRIST_BLOCK_SIZE, values_len = 0, sizes_len = 0, i, k;
	uint8_t *file = calloc(1, file_len), *values = malloc(count * 1000), *row = malloc(count * 1000);
	uint8_t *row2 = malloc(count * 1000), *sizes = malloc(count * 2);
	struct grist_buf scratch = { 0 }, data = { 0 };
	struct grist_codec_set set = { 0 };
	struct grist_chunk_decoder *all, *hdr;
	struct grist_decoded_chunk c, c2;
	char name[64];
	uint64_t end, p, data_begin;
	void *ctx;

	(void)state;
	assert_non_null(file);
	assert_non_null(values);
	assert_non_null(row);
	assert_non_null(row2);
	assert_non_null(sizes);
	for (i = 0; i < count; i++)
		add_record(sizes, &sizes_len, values, &values_len, 1000, i);
	assert_int_equal(grist_chunk_decoder_create(&all), 0);
	assert_int_equal(grist_chunk_decoder_create(&hdr), 0);
	grist_chunk_decoder_check_data(hdr, false);
	snprintf(name, sizeof(name), "f.array_record: byte %llu: ", (unsigned long long)begin);
	data_begin = grist_block_add_with_overhead(begin, GRIST_CHUNK_HEADER_SIZE);
	for (k = 0; k < sizeof(codecs); k++) {
		const struct grist_codec_ops *codec = grist_codec_find(codecs[k]);

		assert_int_equal(grist_codec_set_get(&set, codec, &ctx), 0);
		assert_int_equal(grist_simple_chunk_encode(codec, ctx, &params, sizes, sizes_len, values, values_len,
							   &scratch, &data), 0);
		memset(file, 0, file_len);
		end = make_chunk(file, begin, 'r', data.data, data.len, count, values_len);
		/* a sound chunk: the same records either way, by every entry point */
		assert_int_equal(grist_chunk_decode_values_into(hdr, file, 0, file_len, begin, end, "f.array_record",
								row, values_len, &c), 0);
		assert_memory_equal(row, values, values_len);
		assert_int_equal(grist_chunk_decode(hdr, file, 0, file_len, begin, end, "f.array_record", &c), 0);
		assert_int_equal(c.num_records, count);
		assert_memory_equal(c.values, values, values_len);
		assert_int_equal(grist_chunk_decode_sizes(hdr, file, 0, file_len, begin, end, "f.array_record", &c), 0);
		assert_int_equal(c.offsets[count], values_len);
		assert_int_equal(grist_chunk_decode_values(hdr, file, 0, file_len, begin, end, "f.array_record", &c), 0);
		assert_memory_equal(c.values, values, values_len);

		/* a flipped byte of the values, past the sizes section and away from block headers */
		p = grist_block_add_with_overhead(data_begin, data.len - 5000);
		file[p] ^= 0x40;
		assert_int_equal(grist_chunk_decode_values_into(all, file, 0, file_len, begin, end, "f.array_record",
								row2, values_len, &c2), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "data hash mismatch"));
		assert_ptr_equal(strstr(grist_last_error(), name), grist_last_error());
		if (codecs[k] == GRIST_CODEC_NONE) {
			/* what "headers" gives up: the byte is delivered as it is, and only that byte differs */
			assert_int_equal(grist_chunk_decode_values_into(hdr, file, 0, file_len, begin, end,
									"f.array_record", row2, values_len, &c2), 0);
			for (i = 0; i < values_len; i++)
				if (row2[i] != values[i])
					break;
			assert_true(i < values_len);
			assert_int_equal(row2[i] ^ values[i], 0x40);
			assert_memory_equal(row2 + i + 1, values + i + 1, values_len - i - 1);
		}
		file[p] ^= 0x40;

		/* the chunk header (its data_hash field, covered by the header hash) */
		p = grist_block_add_with_overhead(begin, 16);
		file[p] ^= 0x01;
		assert_int_equal(grist_chunk_decode_values_into(hdr, file, 0, file_len, begin, end, "f.array_record",
								row2, values_len, &c2), -EBADMSG);
		assert_ptr_equal(strstr(grist_last_error(), name), grist_last_error());
		assert_int_equal(grist_chunk_decode(hdr, file, 0, file_len, begin, end, "f.array_record", &c2), -EBADMSG);
		file[p] ^= 0x01;

		/* a block header inside the chunk */
		file[2 * GRIST_BLOCK_SIZE + 3] ^= 0x01;
		assert_int_equal(grist_chunk_decode_values_into(hdr, file, 0, file_len, begin, end, "f.array_record",
								row2, values_len, &c2), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "f.array_record"));
		assert_int_equal(grist_chunk_decode_sizes(hdr, file, 0, file_len, begin, end, "f.array_record", &c2),
				 -EBADMSG);
		file[2 * GRIST_BLOCK_SIZE + 3] ^= 0x01;

		/* the record structure: the first size one less, so the sizes no longer add up */
		if (codecs[k] == GRIST_CODEC_NONE) {
			uint64_t first;
			const uint8_t *q = data.data + 1;
			uint64_t stored_len = 0;

			assert_int_equal(grist_varint_read(&q, data.data + data.len, &stored_len), 0);
			first = grist_block_add_with_overhead(data_begin, (uint64_t)(q - data.data));
			if (!(first % GRIST_BLOCK_SIZE))
				first += GRIST_BLOCK_HEADER_SIZE;
			assert_int_equal(file[first], 0xe8); /* 1000 = e8 07 */
			file[first] ^= 0x01;
			assert_int_equal(grist_chunk_decode_sizes(hdr, file, 0, file_len, begin, end, "f.array_record",
								  &c2), -EBADMSG);
			assert_ptr_equal(strstr(grist_last_error(), name), grist_last_error());
			assert_int_equal(grist_chunk_decode(hdr, file, 0, file_len, begin, end, "f.array_record", &c2),
					 -EBADMSG);
			file[first] ^= 0x01;
		}
		/* and back to sound: the default decoder agrees */
		assert_int_equal(grist_chunk_decode_values_into(all, file, 0, file_len, begin, end, "f.array_record",
								row2, values_len, &c2), 0);
		assert_memory_equal(row2, values, values_len);
	}
	grist_chunk_decoder_destroy(all);
	grist_chunk_decoder_destroy(hdr);
	grist_codec_set_clear(&set);
	grist_buf_free(&scratch);
	grist_buf_free(&data);
	free(sizes);
	free(values);
	free(row);
	free(row2);
	free(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crossing_and_zero_copy),
		cmocka_unit_test(test_absurd_sizes),
		cmocka_unit_test(test_size_claims_bounded),
		cmocka_unit_test(test_chunk_types),
		cmocka_unit_test(test_simple_chunk_checks),
		cmocka_unit_test(test_halves),
		cmocka_unit_test(test_values_into),
		cmocka_unit_test(test_hash_pieces_copy),
		cmocka_unit_test(test_stored_corruption_named),
		cmocka_unit_test(test_headers_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
