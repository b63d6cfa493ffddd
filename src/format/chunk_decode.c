/* Chunk decoding from raw file bytes: block headers checked and stripped, then the simple decoder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/chunk_decode.h"
#include "format/hash.h"
#include "format/simple_chunk.h"

struct grist_chunk_decoder {
	struct grist_buf data;   /* logical chunk data when it crosses block boundaries */
	struct grist_simple_decoder simple;
	uint64_t zero_offset;    /* offsets[] of a record-less chunk */
};

int grist_chunk_decoder_create(struct grist_chunk_decoder **out)
{
	struct grist_chunk_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return grist_fail(-ENOMEM, "cannot allocate a chunk decoder");
	*out = d;
	return 0;
}

void grist_chunk_decoder_destroy(struct grist_chunk_decoder *d)
{
	if (!d)
		return;
	grist_buf_free(&d->data);
	grist_simple_decoder_clear(&d->simple);
	free(d);
}

/* File position of logical byte @l of the chunk at @begin (after any block header there). */
static uint64_t logical_to_physical(uint64_t begin, uint64_t l)
{
	uint64_t p = grist_block_add_with_overhead(begin, l);

	return (p & (GRIST_BLOCK_SIZE - 1)) ? p : p + GRIST_BLOCK_HEADER_SIZE;
}

/* Copy @n logical bytes from logical position @from of the chunk at @begin, skipping block headers. */
static void copy_logical(uint8_t *dst, const uint8_t *buf, uint64_t buf_off, uint64_t begin,
			 uint64_t from, uint64_t n)
{
	while (n) {
		uint64_t p = logical_to_physical(begin, from);
		uint64_t take = grist_block_remaining(p);

		if (take > n)
			take = n;
		memcpy(dst, buf + (p - buf_off), take);
		dst += take;
		from += take;
		n -= take;
	}
}

/* Check every block header in [@from, @to) of the chunk [@begin, @end); @end 0 = not known yet. */
static int check_blocks(const uint8_t *buf, uint64_t buf_off, uint64_t begin, uint64_t end,
			uint64_t from, uint64_t to, const char *path)
{
	uint64_t b = (from + GRIST_BLOCK_SIZE - 1) & ~(GRIST_BLOCK_SIZE - 1);
	int ret;

	for (; b < to; b += GRIST_BLOCK_SIZE) {
		ret = grist_block_header_check(buf + (b - buf_off), b, begin, end, path);
		if (ret)
			return ret;
	}
	return 0;
}

int grist_chunk_decode(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
		       size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
		       struct grist_decoded_chunk *out)
{
	uint64_t buf_end = buf_file_offset + buf_len, hdr_end, data_begin, data_end, end, hash;
	struct grist_chunk_header h;
	struct grist_simple_records recs;
	uint8_t hdr[GRIST_CHUNK_HEADER_SIZE];
	const uint8_t *data;
	int ret;

	if (chunk_begin < buf_file_offset || chunk_end > buf_end || chunk_begin >= chunk_end ||
	    buf_end < buf_file_offset)
		return grist_fail_at(-EINVAL, path, chunk_begin,
				     "chunk extent [%llu, %llu) is not inside the buffer [%llu, %llu)",
				     (unsigned long long)chunk_begin, (unsigned long long)chunk_end,
				     (unsigned long long)buf_file_offset, (unsigned long long)buf_end);
	if (!grist_block_valid_chunk_begin(chunk_begin))
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "a chunk cannot begin inside a block header");
	hdr_end = grist_block_add_with_overhead(chunk_begin, GRIST_CHUNK_HEADER_SIZE);
	if (hdr_end > chunk_end)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "chunk header runs past the end of its extent at byte %llu",
				     (unsigned long long)chunk_end);
	/* The header may itself be split by a block header: check those before trusting it. */
	ret = check_blocks(buf, buf_file_offset, chunk_begin, 0, chunk_begin, hdr_end, path);
	if (ret)
		return ret;
	copy_logical(hdr, buf, buf_file_offset, chunk_begin, 0, GRIST_CHUNK_HEADER_SIZE);
	ret = grist_chunk_header_parse(hdr, &h, path, chunk_begin);
	if (ret)
		return ret;
	end = grist_chunk_end(chunk_begin, h.data_size, h.num_records);
	if (end > chunk_end)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "chunk (%llu data bytes, %llu records) ends at byte %llu, past its extent end %llu",
				     (unsigned long long)h.data_size, (unsigned long long)h.num_records,
				     (unsigned long long)end, (unsigned long long)chunk_end);
	ret = check_blocks(buf, buf_file_offset, chunk_begin, end, chunk_begin, end, path);
	if (ret)
		return ret;

	data_begin = logical_to_physical(chunk_begin, GRIST_CHUNK_HEADER_SIZE);
	data_end = grist_block_add_with_overhead(chunk_begin, GRIST_CHUNK_HEADER_SIZE + h.data_size);
	if (data_end - data_begin == h.data_size || h.data_size == 0) {
		data = buf + (data_begin - buf_file_offset);
	} else {
		ret = grist_buf_reserve(&d->data, h.data_size);
		if (ret)
			return ret;
		copy_logical(d->data.data, buf, buf_file_offset, chunk_begin, GRIST_CHUNK_HEADER_SIZE,
			     h.data_size);
		data = d->data.data;
	}
	hash = grist_hash(data, h.data_size);
	if (hash != h.data_hash)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "chunk data hash mismatch (stored 0x%016llx, computed 0x%016llx)",
				     (unsigned long long)h.data_hash, (unsigned long long)hash);

	memset(out, 0, sizeof(*out));
	out->chunk_end = end;
	out->data_end = data_end;
	out->chunk_type = h.type;
	d->zero_offset = 0;
	out->offsets = &d->zero_offset;
	switch (h.type) {
	case GRIST_CHUNK_SIMPLE:
		ret = grist_simple_chunk_decode(&d->simple, data, h.data_size, h.num_records,
						h.decoded_data_size, path, chunk_begin, &recs);
		if (ret)
			return ret;
		out->num_records = h.num_records;
		out->decoded_data_size = h.decoded_data_size;
		out->values = recs.values;
		out->offsets = recs.offsets;
		out->compression = recs.compression;
		return 0;
	case GRIST_CHUNK_TRANSPOSED:
		return grist_fail_at(-ENOTSUP, path, chunk_begin,
				     "transposed chunk (written with transpose:true) is not supported");
	case GRIST_CHUNK_SIGNATURE:
		if (chunk_begin != 0 || h.data_size || h.num_records || h.decoded_data_size)
			return grist_fail_at(-EBADMSG, path, chunk_begin,
					     "misplaced or non-empty file signature chunk");
		return 0;
	default:
		/* Padding, metadata and future record-less chunks carry nothing for us. */
		if (h.num_records)
			return grist_fail_at(-ENOTSUP, path, chunk_begin,
					     "unknown chunk type 0x%02x with %llu records", h.type,
					     (unsigned long long)h.num_records);
		return 0;
	}
}
