/* Chunk decoding from raw file bytes: block headers checked and stripped, then the simple decoder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/buf.h"
#include "common/error.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/chunk_decode.h"
#include "format/hash.h"
#include "format/simple_chunk.h"
#include "format/varint.h"

struct grist_chunk_decoder {
	struct grist_buf data;   /* logical chunk data when it crosses block boundaries */
	struct grist_simple_decoder simple;
	uint64_t zero_offset;    /* offsets[] of a record-less chunk */
	struct grist_hash_piece *pieces; /* a chunk's data where it lies, for grist_hash_pieces() */
	size_t pieces_cap;
	bool skip_data_hash;     /* grist_chunk_decoder_check_data(d, false): GRIST_VERIFY_HEADERS */
};

int grist_chunk_decoder_create(struct grist_chunk_decoder **out)
{
	struct grist_chunk_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return grist_fail(-ENOMEM, "cannot allocate a chunk decoder");
	*out = d;
	return 0;
}

void grist_chunk_decoder_check_data(struct grist_chunk_decoder *d, bool check)
{
	d->skip_data_hash = !check;
}

void grist_chunk_decoder_destroy(struct grist_chunk_decoder *d)
{
	if (!d)
		return;
	grist_buf_free(&d->data);
	grist_simple_decoder_clear(&d->simple);
	free(d->pieces);
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

/*
 * Logical bytes [@from, @from + @n) of the chunk at @begin as they lie in @buf: one piece
 * per stretch between block headers, written to @out. Returns the number of pieces
 * (at most n / (GRIST_BLOCK_SIZE - GRIST_BLOCK_HEADER_SIZE) + 2).
 */
static size_t logical_pieces(struct grist_hash_piece *out, const uint8_t *buf, uint64_t buf_off, uint64_t begin,
			     uint64_t from, uint64_t n)
{
	size_t k = 0;

	while (n) {
		uint64_t p = logical_to_physical(begin, from);
		uint64_t take = grist_block_remaining(p);

		if (take > n)
			take = n;
		out[k++] = (struct grist_hash_piece){ .data = (const char *)buf + (p - buf_off), .len = (size_t)take };
		from += take;
		n -= take;
	}
	return k;
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

/* A chunk whose header and block headers have been checked. */
struct open_chunk {
	struct grist_chunk_header h;
	uint64_t end;        /* from the header */
	uint64_t data_begin; /* physical */
	uint64_t data_end;   /* physical */
};

/* Check the extent, the header and every block header of the chunk; nothing of its data yet. */
static int open_chunk(const uint8_t *buf, uint64_t buf_file_offset, size_t buf_len, uint64_t chunk_begin,
		      uint64_t chunk_end, const char *path, struct open_chunk *c)
{
	uint64_t buf_end = buf_file_offset + buf_len, hdr_end;
	uint8_t hdr[GRIST_CHUNK_HEADER_SIZE];
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
	ret = grist_chunk_header_parse(hdr, &c->h, path, chunk_begin);
	if (ret)
		return ret;
	c->end = grist_chunk_end(chunk_begin, c->h.data_size, c->h.num_records);
	if (c->end > chunk_end)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "chunk (%llu data bytes, %llu records) ends at byte %llu, past its extent end %llu",
				     (unsigned long long)c->h.data_size, (unsigned long long)c->h.num_records,
				     (unsigned long long)c->end, (unsigned long long)chunk_end);
	ret = check_blocks(buf, buf_file_offset, chunk_begin, c->end, chunk_begin, c->end, path);
	if (ret)
		return ret;
	c->data_begin = logical_to_physical(chunk_begin, GRIST_CHUNK_HEADER_SIZE);
	c->data_end = grist_block_add_with_overhead(chunk_begin, GRIST_CHUNK_HEADER_SIZE + c->h.data_size);
	return 0;
}

/*
 * The first @n logical bytes of the chunk's data, contiguous: in place when they cross
 * no block boundary, else gathered into the decoder's scratch.
 */
static int data_prefix(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
		       uint64_t chunk_begin, const struct open_chunk *c, uint64_t n, const char *path,
		       const uint8_t **out)
{
	int ret;

	if (grist_block_add_with_overhead(c->data_begin, n) - c->data_begin == n || n == 0) {
		*out = buf + (c->data_begin - buf_file_offset);
		return 0;
	}
	ret = grist_buf_reserve(&d->data, n);
	if (ret)
		return grist_fail_at(ret, path, chunk_begin, "cannot allocate %llu bytes for the chunk data",
				     (unsigned long long)n);
	copy_logical(d->data.data, buf, buf_file_offset, chunk_begin, GRIST_CHUNK_HEADER_SIZE, n);
	*out = d->data.data;
	return 0;
}

static void fill_out(const struct open_chunk *c, struct grist_decoded_chunk *out, struct grist_chunk_decoder *d)
{
	memset(out, 0, sizeof(*out));
	out->chunk_end = c->end;
	out->data_end = c->data_end;
	out->chunk_type = c->h.type;
	d->zero_offset = 0;
	out->offsets = &d->zero_offset;
}

/* What every chunk type other than a simple chunk decodes to (nothing), or why it is refused. */
static int decode_recordless(const struct open_chunk *c, uint64_t chunk_begin, const char *path)
{
	switch (c->h.type) {
	case GRIST_CHUNK_TRANSPOSED:
		return grist_fail_at(-ENOTSUP, path, chunk_begin,
				     "transposed chunk (written with transpose:true) is not supported");
	case GRIST_CHUNK_SIGNATURE:
		if (chunk_begin != 0 || c->h.data_size || c->h.num_records || c->h.decoded_data_size)
			return grist_fail_at(-EBADMSG, path, chunk_begin,
					     "misplaced or non-empty file signature chunk");
		return 0;
	default:
		/* Padding, metadata and future record-less chunks carry nothing for us. */
		if (c->h.num_records)
			return grist_fail_at(-ENOTSUP, path, chunk_begin,
					     "unknown chunk type 0x%02x with %llu records", c->h.type,
					     (unsigned long long)c->h.num_records);
		return 0;
	}
}

/* A chunk's whole data as pieces in the decoder's d->pieces (grown to fit), their number in *@n. */
static int chunk_pieces(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			uint64_t chunk_begin, const struct open_chunk *c, size_t *n)
{
	size_t cap = (size_t)(c->h.data_size / (GRIST_BLOCK_SIZE - GRIST_BLOCK_HEADER_SIZE)) + 2;
	int ret = grist_array_reserve((void **)&d->pieces, &d->pieces_cap, cap, sizeof(*d->pieces));

	if (ret)
		return ret;
	*n = logical_pieces(d->pieces, buf, buf_file_offset, chunk_begin, GRIST_CHUNK_HEADER_SIZE, c->h.data_size);
	return 0;
}

/* The error for data whose hash is not the header's. */
static int hash_mismatch(const struct open_chunk *c, uint64_t hash, uint64_t chunk_begin, const char *path)
{
	return grist_fail_at(-EBADMSG, path, chunk_begin, "chunk data hash mismatch (stored 0x%016llx, computed 0x%016llx)",
			     (unsigned long long)c->h.data_hash, (unsigned long long)hash);
}

/*
 * The whole data, contiguous, its hash checked: in place when it crosses no block
 * boundary; else gathered into the decoder's scratch in the same pass that hashes it
 * (grist_hash_pieces_gather()), so the codec after it reads the bytes a second time, from
 * cache, and not a third.
 */
static int checked_data(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			uint64_t chunk_begin, const struct open_chunk *c, const char *path, const uint8_t **data)
{
	uint64_t hash, n = c->h.data_size;
	size_t k;
	int ret;

	if (grist_block_add_with_overhead(c->data_begin, n) - c->data_begin == n) {
		*data = buf + (c->data_begin - buf_file_offset);
		if (d->skip_data_hash)
			return 0;
		hash = grist_hash(*data, n);
	} else {
		ret = chunk_pieces(d, buf, buf_file_offset, chunk_begin, c, &k);
		if (!ret)
			ret = grist_buf_reserve(&d->data, n);
		if (ret)
			return grist_fail_at(ret, path, chunk_begin, "cannot allocate %llu bytes for the chunk data",
					     (unsigned long long)n);
		*data = d->data.data;
		if (d->skip_data_hash) {
			grist_pieces_copy(d->pieces, k, 0, d->data.data, (size_t)n, 0);
			return 0;
		}
		hash = grist_hash_pieces_gather(d->pieces, k, d->data.data);
	}
	return hash != c->h.data_hash ? hash_mismatch(c, hash, chunk_begin, path) : 0;
}

/* open_chunk() and checked_data() with the output's common fields filled. */
static int open_checked(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset, size_t buf_len,
			uint64_t chunk_begin, uint64_t chunk_end, const char *path, struct open_chunk *c,
			const uint8_t **data, struct grist_decoded_chunk *out)
{
	int ret = open_chunk(buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, c);

	if (!ret)
		ret = checked_data(d, buf, buf_file_offset, chunk_begin, c, path, data);
	if (!ret)
		fill_out(c, out, d);
	return ret;
}

static void fill_records(struct grist_decoded_chunk *out, const struct open_chunk *c, const uint8_t *values,
			 const uint64_t *offsets, uint8_t compression)
{
	out->num_records = c->h.num_records;
	out->decoded_data_size = c->h.decoded_data_size;
	out->values = values;
	out->offsets = offsets;
	out->compression = compression;
}

int grist_chunk_decode(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
		       size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
		       struct grist_decoded_chunk *out)
{
	struct grist_simple_records recs;
	struct open_chunk c;
	const uint8_t *data;
	int ret;

	ret = open_checked(d, buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, &c, &data, out);
	if (ret)
		return ret;
	if (c.h.type != GRIST_CHUNK_SIMPLE)
		return decode_recordless(&c, chunk_begin, path);
	ret = grist_simple_chunk_decode(&d->simple, data, c.h.data_size, c.h.num_records, c.h.decoded_data_size,
					path, chunk_begin, &recs);
	if (!ret)
		fill_records(out, &c, recs.values, recs.offsets, recs.compression);
	return ret;
}

int grist_chunk_decode_sizes(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			     size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
			     struct grist_decoded_chunk *out)
{
	struct grist_simple_records recs;
	struct open_chunk c;
	const uint8_t *head;
	uint64_t head_len, prefix_len;
	int ret;

	ret = open_chunk(buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, &c);
	if (ret)
		return ret;
	fill_out(&c, out, d);
	if (c.h.type != GRIST_CHUNK_SIMPLE) {
		/* record-less chunks are checked in full here: there is no second half for them */
		ret = checked_data(d, buf, buf_file_offset, chunk_begin, &c, path, &head);
		return ret ? ret : decode_recordless(&c, chunk_begin, path);
	}
	/* the compression byte and a varint: at most 11 bytes locate the sizes section */
	head_len = c.h.data_size < 1 + GRIST_VARINT64_MAX ? c.h.data_size : 1 + GRIST_VARINT64_MAX;
	ret = data_prefix(d, buf, buf_file_offset, chunk_begin, &c, head_len, path, &head);
	if (!ret)
		ret = grist_simple_chunk_sizes_extent(head, (size_t)head_len, c.h.data_size, path, chunk_begin,
						      &prefix_len);
	if (!ret)
		ret = data_prefix(d, buf, buf_file_offset, chunk_begin, &c, prefix_len, path, &head);
	if (!ret)
		ret = grist_simple_chunk_decode_sizes(&d->simple, head, (size_t)prefix_len, c.h.data_size,
						      c.h.num_records, c.h.decoded_data_size, path, chunk_begin,
						      &recs);
	if (!ret)
		fill_records(out, &c, NULL, recs.offsets, recs.compression);
	return ret;
}

/*
 * The values of a stored (uncompressed) simple chunk, straight from the read buffer
 * into @dst. The general path gathers the data of a chunk that crosses a block boundary
 * (every chunk of 64 KiB or more) into scratch, hashes it there and copies the values
 * out once more: three passes over the bytes. Here the data is hashed where the read
 * left it (its pieces between block headers, not joined) and the values are copied to
 * @dst in the same pass, a few KiB at a time while they are in L1, with streaming stores
 * (the row is read later by another core or a device): each byte is read from memory
 * once (grist_hash_pieces_copy()). The row is written before the hash is known; a
 * mismatch fails the chunk, and with it the batch that row belongs to. Checks of the
 * sizes section that fail are reported only after the hash has been found right, so a
 * corrupt chunk is named as such whichever of its bytes went bad.
 * Returns 1 when done, 0 when the chunk is compressed (the codec needs its input in one
 * piece: the general path), or a negative error.
 */
static int values_in_place(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			   uint64_t chunk_begin, const struct open_chunk *c, const char *path, uint8_t *dst,
			   size_t dst_len, uint8_t *compression)
{
	const struct grist_codec_ops *codec;
	const uint8_t *head;
	uint64_t head_len, prefix_len = 0, values_len = 0, hash;
	size_t n;
	int ret;

	head_len = c->h.data_size < 1 + GRIST_VARINT64_MAX ? c->h.data_size : 1 + GRIST_VARINT64_MAX;
	ret = data_prefix(d, buf, buf_file_offset, chunk_begin, c, head_len, path, &head);
	if (ret)
		return ret;
	codec = head_len ? grist_codec_find(head[0]) : NULL;
	if (!codec || codec->type != GRIST_CODEC_NONE)
		return 0; /* compressed, or a fault the general path reports */
	ret = chunk_pieces(d, buf, buf_file_offset, chunk_begin, c, &n);
	if (ret)
		return ret;
	ret = grist_simple_chunk_sizes_extent(head, (size_t)head_len, c->h.data_size, path, chunk_begin, &prefix_len);
	if (!ret) {
		values_len = c->h.data_size - prefix_len;
		if (dst_len != c->h.decoded_data_size)
			ret = grist_fail_at(-EBADMSG, path, chunk_begin,
					    "values decode to %llu bytes (chunk header), the caller's rows hold %zu",
					    (unsigned long long)c->h.decoded_data_size, dst_len);
		else if (values_len != c->h.decoded_data_size)
			ret = grist_fail_at(-EBADMSG, path, chunk_begin,
					    "values section holds %llu bytes, the chunk header says %llu",
					    (unsigned long long)values_len, (unsigned long long)c->h.decoded_data_size);
	}
	if (ret) {
		if (d->skip_data_hash)
			return ret;
		/* nothing copied: the hash alone says whether the data or the caller is wrong */
		hash = grist_hash_pieces(d->pieces, n);
		return hash != c->h.data_hash ? hash_mismatch(c, hash, chunk_begin, path) : ret;
	}
	if (d->skip_data_hash) {
		grist_pieces_copy(d->pieces, n, prefix_len, dst, (size_t)values_len, 1);
	} else {
		hash = grist_hash_pieces_copy(d->pieces, n, prefix_len, dst, (size_t)values_len);
		if (hash != c->h.data_hash)
			return hash_mismatch(c, hash, chunk_begin, path);
	}
	*compression = head[0];
	return 1;
}

/* The values half, into the decoder's scratch (@dst NULL) or into @dst of @dst_len bytes. */
static int values_half(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset, size_t buf_len,
		       uint64_t chunk_begin, uint64_t chunk_end, const char *path, uint8_t *dst, size_t dst_len,
		       struct grist_decoded_chunk *out)
{
	struct open_chunk c;
	const uint8_t *data, *values = dst;
	uint8_t compression = 0;
	int ret;

	ret = open_chunk(buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, &c);
	if (ret)
		return ret;
	if (dst && c.h.type == GRIST_CHUNK_SIMPLE) {
		ret = values_in_place(d, buf, buf_file_offset, chunk_begin, &c, path, dst, dst_len, &compression);
		if (ret < 0)
			return ret;
		if (ret) {
			fill_out(&c, out, d);
			fill_records(out, &c, dst, NULL, compression);
			return 0;
		}
	}
	/* compressed, record-less or into scratch: the chunk opened above, its whole data checked */
	ret = checked_data(d, buf, buf_file_offset, chunk_begin, &c, path, &data);
	if (ret)
		return ret;
	fill_out(&c, out, d);
	if (c.h.type != GRIST_CHUNK_SIMPLE)
		return decode_recordless(&c, chunk_begin, path);
	if (dst)
		ret = grist_simple_chunk_decode_values_into(&d->simple, data, c.h.data_size, c.h.decoded_data_size,
							    path, chunk_begin, dst, dst_len);
	else
		ret = grist_simple_chunk_decode_values(&d->simple, data, c.h.data_size, c.h.decoded_data_size, path,
						       chunk_begin, &values);
	if (!ret)
		fill_records(out, &c, values, NULL, data[0]);
	return ret;
}

int grist_chunk_decode_values(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			      size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
			      struct grist_decoded_chunk *out)
{
	return values_half(d, buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, NULL, 0, out);
}

int grist_chunk_decode_values_into(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
				   size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
				   uint8_t *dst, size_t dst_len, struct grist_decoded_chunk *out)
{
	static uint8_t none;

	/* a chunk of empty records decodes into zero bytes: any non-NULL place will do */
	return values_half(d, buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, dst ? dst : &none,
			   dst_len, out);
}

int grist_chunk_stored_values(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			      size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
			      const uint8_t **stream, size_t *stream_len)
{
	const struct grist_codec_ops *codec;
	struct grist_decoded_chunk out;
	struct open_chunk c;
	const uint8_t *data, *p, *end;
	size_t len;
	uint64_t decoded_len;
	int ret;

	*stream = NULL;
	*stream_len = 0;
	ret = open_checked(d, buf, buf_file_offset, buf_len, chunk_begin, chunk_end, path, &c, &data, &out);
	if (ret || c.h.type != GRIST_CHUNK_SIMPLE)
		return ret ? ret : decode_recordless(&c, chunk_begin, path);
	ret = grist_simple_chunk_values_section(data, c.h.data_size, path, chunk_begin, &codec, &p, &len);
	if (ret)
		return ret;
	end = p + len;
	if (codec->type != GRIST_CODEC_NONE && grist_varint_read(&p, end, &decoded_len) < 0)
		return grist_fail_at(-EBADMSG, path, chunk_begin, "values section: bad decoded-length varint");
	*stream = p;
	*stream_len = (size_t)(end - p);
	return 0;
}
