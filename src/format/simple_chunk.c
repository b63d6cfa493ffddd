/* Simple chunk encoding and decoding, with every size checked before it is trusted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "format/limits.h"
#include "format/simple_chunk.h"
#include "format/varint.h"

/*
 * The decoded length a compressed section announces (its leading varint), which must
 * equal @expect when that is not UINT64_MAX; *@stream is left at the codec's stream.
 */
static int section_length(const uint8_t *src, size_t src_len, uint64_t expect, const uint8_t **stream,
			  uint64_t *raw_len, const char *what, const char *path, uint64_t chunk_begin)
{
	const uint8_t *p = src;

	if (grist_varint_read(&p, src + src_len, raw_len) < 0)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "%s section: bad decoded-length varint", what);
	if (expect != UINT64_MAX && *raw_len != expect)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "%s section decodes to %llu bytes, the chunk header says %llu",
				     what, (unsigned long long)*raw_len, (unsigned long long)expect);
	if (*raw_len > grist_max_chunk_bytes())
		return grist_fail_at(-EFBIG, path, chunk_begin,
				     "%s section claims %llu decoded bytes, above the limit of %llu (GRIST_MAX_CHUNK_BYTES)",
				     what, (unsigned long long)*raw_len, (unsigned long long)grist_max_chunk_bytes());
	*stream = p;
	return 0;
}

/* Run @codec on @stream into exactly @raw_len bytes at @dst, with this decoder's context. */
static int section_decompress(struct grist_simple_decoder *d, const struct grist_codec_ops *codec,
			      const uint8_t *stream, size_t stream_len, uint8_t *dst, uint64_t raw_len,
			      const char *what, const char *path, uint64_t chunk_begin)
{
	char msg[256];
	void *ctx;
	int ret;

	ret = grist_codec_set_get(&d->codecs, codec, &ctx);
	if (ret)
		return ret;
	ret = codec->decompress(ctx, stream, stream_len, dst, (size_t)raw_len);
	if (ret < 0) {
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
		return grist_fail_at(ret, path, chunk_begin, "%s section: %s", what, msg);
	}
	return 0;
}

/* Sections that announce at most this many decoded bytes skip the codec's bound check. */
#define SECTION_UNCHECKED_MAX 4096

/*
 * Decode one section: @src is the section as stored. Stored sections are used
 * in place; compressed ones carry a varint of their decoded length, which must
 * pass the codec's bound (and equal @expect when it is not UINT64_MAX) before
 * @dst grows to it.
 */
static int decode_section(struct grist_simple_decoder *d, const struct grist_codec_ops *codec,
			  const uint8_t *src, size_t src_len, uint64_t expect, struct grist_buf *dst,
			  const uint8_t **out, size_t *out_len, const char *what, const char *path,
			  uint64_t chunk_begin)
{
	const uint8_t *p, *end = src + src_len;
	uint64_t raw_len, bound;
	int ret;

	if (codec->type == GRIST_CODEC_NONE) {
		*out = src;
		*out_len = src_len;
		return 0;
	}
	ret = section_length(src, src_len, expect, &p, &raw_len, what, path, chunk_begin);
	if (ret)
		return ret;
	/*
	 * A small section cannot make an absurd allocation, and the codec refuses a stream
	 * that decodes to any other length: only larger ones need the bound first.
	 */
	if (raw_len <= SECTION_UNCHECKED_MAX)
		bound = raw_len;
	else
		ret = codec->bound(p, (size_t)(end - p), &bound);
	if (ret < 0 || raw_len > bound || raw_len > SIZE_MAX / 2) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", ret < 0 ? grist_last_error() : "");
		if (ret < 0)
			return grist_fail_at(-EBADMSG, path, chunk_begin, "%s section: %s", what, msg);
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "%s section claims %llu decoded bytes from %zu %s bytes",
				     what, (unsigned long long)raw_len, (size_t)(end - p), codec->name);
	}
	ret = grist_buf_reserve(dst, raw_len ? raw_len : 1);
	if (ret)
		return grist_fail_at(ret, path, chunk_begin, "%s section: cannot allocate %llu bytes to decode it",
				     what, (unsigned long long)raw_len);
	ret = section_decompress(d, codec, p, (size_t)(end - p), dst->data, raw_len, what, path, chunk_begin);
	if (ret)
		return ret;
	dst->len = raw_len;
	*out = dst->data;
	*out_len = raw_len;
	return 0;
}

/* Read the compression byte and the sizes section's length: the fixed start of every simple chunk. */
static int parse_head(const uint8_t *data, size_t avail, uint64_t data_size, const char *path,
		      uint64_t chunk_begin, const struct grist_codec_ops **codec, uint64_t *sizes_at,
		      uint64_t *sizes_len)
{
	const uint8_t *p = data, *end = data + avail;

	if (data_size < 1 || avail < 1)
		return grist_fail_at(-EBADMSG, path, chunk_begin, "simple chunk has no compression byte");
	*codec = grist_codec_find(*p);
	if (!*codec)
		return grist_fail_at(-ENOTSUP, path, chunk_begin, "unknown compression type 0x%02x", *p);
	p++;
	if (grist_varint_read(&p, end, sizes_len) < 0 || *sizes_len > data_size - (uint64_t)(p - data))
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "sizes section length is bad or runs past the chunk data (%llu bytes)",
				     (unsigned long long)data_size);
	*sizes_at = (uint64_t)(p - data);
	return 0;
}

int grist_simple_chunk_sizes_extent(const uint8_t *head, size_t head_len, uint64_t data_size, const char *path,
				    uint64_t chunk_begin, uint64_t *prefix_len)
{
	const struct grist_codec_ops *codec;
	uint64_t at, len;
	int ret = parse_head(head, head_len, data_size, path, chunk_begin, &codec, &at, &len);

	if (!ret)
		*prefix_len = at + len;
	return ret;
}

int grist_simple_chunk_decode_sizes(struct grist_simple_decoder *d, const uint8_t *data, size_t avail,
				    uint64_t data_size, uint64_t num_records, uint64_t decoded_data_size,
				    const char *path, uint64_t chunk_begin, struct grist_simple_records *out)
{
	const struct grist_codec_ops *codec;
	const uint8_t *sizes, *sp, *send;
	size_t sizes_raw_len;
	uint64_t sizes_at, sizes_len, i, sum = 0;
	int ret;

	ret = parse_head(data, avail, data_size, path, chunk_begin, &codec, &sizes_at, &sizes_len);
	if (ret)
		return ret;
	if (sizes_at + sizes_len > avail)
		return grist_fail(-EINVAL, "simple chunk sizes: %zu bytes given, the section ends at %llu",
				  avail, (unsigned long long)(sizes_at + sizes_len));
	ret = decode_section(d, codec, data + sizes_at, (size_t)sizes_len, UINT64_MAX, &d->sizes, &sizes,
			     &sizes_raw_len, "sizes", path, chunk_begin);
	if (ret)
		return ret;
	/* Each size takes at least one byte: this bounds the offsets array by real data. */
	if (num_records > sizes_raw_len)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "%llu records cannot fit a %zu-byte sizes section",
				     (unsigned long long)num_records, sizes_raw_len);
	if (num_records + 1 > d->offsets_cap) {
		size_t cap = d->offsets_cap ? d->offsets_cap : 64;
		uint64_t *o;

		while (cap < num_records + 1)
			cap *= 2;
		o = realloc(d->offsets, cap * sizeof(*o));
		if (!o)
			return grist_fail(-ENOMEM, "cannot allocate offsets for %llu records",
					  (unsigned long long)num_records);
		d->offsets = o;
		d->offsets_cap = cap;
	}
	sp = sizes;
	send = sizes + sizes_raw_len;
	d->offsets[0] = 0;
	for (i = 0; i < num_records; i++) {
		uint64_t sz;

		if (grist_varint_read(&sp, send, &sz) < 0)
			return grist_fail_at(-EBADMSG, path, chunk_begin,
					     "sizes section ends or is corrupt at record %llu",
					     (unsigned long long)i);
		if (sz > decoded_data_size - sum)
			return grist_fail_at(-EBADMSG, path, chunk_begin,
					     "record sizes exceed the decoded data size %llu at record %llu",
					     (unsigned long long)decoded_data_size, (unsigned long long)i);
		sum += sz;
		d->offsets[i + 1] = sum;
	}
	if (sp != send)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "%zu bytes left over in the sizes section", (size_t)(send - sp));
	if (sum != decoded_data_size)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "record sizes add up to %llu, the chunk header says %llu",
				     (unsigned long long)sum, (unsigned long long)decoded_data_size);
	out->values = NULL;
	out->offsets = d->offsets;
	out->compression = codec->type;
	return 0;
}

int grist_simple_chunk_values_section(const uint8_t *data, size_t data_size, const char *path,
				      uint64_t chunk_begin, const struct grist_codec_ops **codec,
				      const uint8_t **section, size_t *section_len)
{
	uint64_t sizes_at, sizes_len;
	int ret = parse_head(data, data_size, data_size, path, chunk_begin, codec, &sizes_at, &sizes_len);

	if (ret)
		return ret;
	*section = data + sizes_at + sizes_len;
	*section_len = (size_t)(data_size - sizes_at - sizes_len);
	return 0;
}

int grist_simple_chunk_decode_values(struct grist_simple_decoder *d, const uint8_t *data, size_t data_size,
				     uint64_t decoded_data_size, const char *path, uint64_t chunk_begin,
				     const uint8_t **values)
{
	const struct grist_codec_ops *codec;
	const uint8_t *section;
	size_t section_len, values_len;
	int ret;

	ret = grist_simple_chunk_values_section(data, data_size, path, chunk_begin, &codec, &section, &section_len);
	if (ret)
		return ret;
	ret = decode_section(d, codec, section, section_len, decoded_data_size, &d->values, values, &values_len,
			     "values", path, chunk_begin);
	if (ret)
		return ret;
	if (values_len != decoded_data_size)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "values section holds %zu bytes, the chunk header says %llu",
				     values_len, (unsigned long long)decoded_data_size);
	return 0;
}

int grist_simple_chunk_decode_values_into(struct grist_simple_decoder *d, const uint8_t *data, size_t data_size,
					  uint64_t decoded_data_size, const char *path, uint64_t chunk_begin,
					  uint8_t *dst, size_t dst_len)
{
	const struct grist_codec_ops *codec;
	const uint8_t *section, *stream;
	size_t section_len;
	uint64_t raw_len;
	int ret;

	if (dst_len != decoded_data_size)
		return grist_fail_at(-EBADMSG, path, chunk_begin,
				     "values decode to %llu bytes (chunk header), the caller's rows hold %zu",
				     (unsigned long long)decoded_data_size, dst_len);
	ret = grist_simple_chunk_values_section(data, data_size, path, chunk_begin, &codec, &section, &section_len);
	if (ret)
		return ret;
	if (codec->type == GRIST_CODEC_NONE) {
		if (section_len != decoded_data_size)
			return grist_fail_at(-EBADMSG, path, chunk_begin,
					     "values section holds %zu bytes, the chunk header says %llu",
					     section_len, (unsigned long long)decoded_data_size);
		if (section_len)
			memcpy(dst, section, section_len);
		return 0;
	}
	/*
	 * No bound check: nothing is allocated from the announced length, which must equal
	 * the header's decoded size, which the caller's buffer already holds; the codec
	 * refuses a stream that decodes to anything else.
	 */
	ret = section_length(section, section_len, decoded_data_size, &stream, &raw_len, "values", path,
			     chunk_begin);
	if (ret)
		return ret;
	return section_decompress(d, codec, stream, (size_t)(section + section_len - stream), dst, raw_len,
				  "values", path, chunk_begin);
}

int grist_simple_chunk_decode(struct grist_simple_decoder *d, const uint8_t *data, size_t data_size,
			      uint64_t num_records, uint64_t decoded_data_size, const char *path,
			      uint64_t chunk_begin, struct grist_simple_records *out)
{
	int ret = grist_simple_chunk_decode_sizes(d, data, data_size, data_size, num_records, decoded_data_size,
						  path, chunk_begin, out);

	if (!ret)
		ret = grist_simple_chunk_decode_values(d, data, data_size, decoded_data_size, path, chunk_begin,
						       &out->values);
	return ret;
}

void grist_simple_decoder_clear(struct grist_simple_decoder *d)
{
	grist_buf_free(&d->sizes);
	grist_buf_free(&d->values);
	free(d->offsets);
	d->offsets = NULL;
	d->offsets_cap = 0;
	grist_codec_set_clear(&d->codecs);
}

static int append_varint(struct grist_buf *b, uint64_t v)
{
	uint8_t tmp[GRIST_VARINT64_MAX];

	return grist_buf_append(b, tmp, grist_varint_write(tmp, v));
}

int grist_simple_chunk_encode(const struct grist_codec_ops *codec, void *ctx,
			      const struct grist_codec_params *params, const uint8_t *sizes,
			      size_t sizes_len, const uint8_t *values, size_t values_len,
			      struct grist_buf *scratch, struct grist_buf *out)
{
	int ret;

	out->len = 0;
	ret = grist_buf_append(out, &codec->type, 1);
	if (ret)
		return ret;
	if (codec->type == GRIST_CODEC_NONE) {
		ret = append_varint(out, sizes_len);
		if (!ret)
			ret = grist_buf_append(out, sizes, sizes_len);
		if (!ret)
			ret = grist_buf_append(out, values, values_len);
		return ret;
	}
	/* The sizes section length includes its own decoded-length prefix. */
	scratch->len = 0;
	ret = append_varint(scratch, sizes_len);
	if (!ret)
		ret = codec->compress(ctx, params, sizes, sizes_len, scratch);
	if (!ret)
		ret = append_varint(out, scratch->len);
	if (!ret)
		ret = grist_buf_append(out, scratch->data, scratch->len);
	if (!ret)
		ret = append_varint(out, values_len);
	if (!ret)
		ret = codec->compress(ctx, params, values, values_len, out);
	return ret;
}
