/* The simple chunk encoding ('r'): compression byte, sizes section, values section. */
#ifndef GRIST_FORMAT_SIMPLE_CHUNK_H
#define GRIST_FORMAT_SIMPLE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "common/buf.h"

/*
 * Reusable decode state: scratch buffers that only grow, and codec contexts.
 * One per thread; nothing here is shared.
 */
struct grist_simple_decoder {
	struct grist_buf sizes;   /* decompressed sizes section */
	struct grist_buf values;  /* decompressed values section */
	uint64_t *offsets;        /* num_records + 1 entries */
	size_t offsets_cap;
	struct grist_codec_set codecs;
};

/* The decoded records of one simple chunk; record i = values[offsets[i]..offsets[i+1]). */
struct grist_simple_records {
	const uint8_t *values;   /* may point into the chunk data (zero copy when stored) */
	const uint64_t *offsets;
	uint8_t compression;
};

/*
 * Decode the logical @data of a simple chunk holding @num_records records of
 * @decoded_data_size bytes in total. Checks: known compression, sizes section
 * within the data and fully consumed, the sum of sizes equal to
 * @decoded_data_size, the values ending exactly at the end of the data, and
 * every announced size against the codec's bound before allocating.
 * @path and @chunk_begin name the chunk in messages. 0, -EBADMSG, -ENOTSUP or -ENOMEM.
 * Output lives until the next call with @d, or until @data goes away.
 */
int grist_simple_chunk_decode(struct grist_simple_decoder *d, const uint8_t *data, size_t data_size,
			      uint64_t num_records, uint64_t decoded_data_size, const char *path,
			      uint64_t chunk_begin, struct grist_simple_records *out);

/*
 * The two halves of grist_simple_chunk_decode(), for callers that lay rows out before
 * decompressing the values (the engine learns every record's size first).
 *
 * grist_simple_chunk_sizes_extent(): from the first @head_len bytes of the data
 * (at most 11 are needed), how many leading bytes hold the compression byte and the
 * sizes section. grist_simple_chunk_decode_sizes(): decode the sizes section from the
 * first @avail bytes of @data_size bytes of data (out->values stays NULL); every size
 * check of grist_simple_chunk_decode() is made. grist_simple_chunk_decode_values():
 * decode the values section of the whole @data. Same errors as grist_simple_chunk_decode().
 */
int grist_simple_chunk_sizes_extent(const uint8_t *head, size_t head_len, uint64_t data_size, const char *path,
				    uint64_t chunk_begin, uint64_t *prefix_len);
int grist_simple_chunk_decode_sizes(struct grist_simple_decoder *d, const uint8_t *data, size_t avail,
				    uint64_t data_size, uint64_t num_records, uint64_t decoded_data_size,
				    const char *path, uint64_t chunk_begin, struct grist_simple_records *out);
int grist_simple_chunk_decode_values(struct grist_simple_decoder *d, const uint8_t *data, size_t data_size,
				     uint64_t decoded_data_size, const char *path, uint64_t chunk_begin,
				     const uint8_t **values);

/*
 * grist_simple_chunk_decode_values() into the caller's @dst of exactly @dst_len ==
 * @decoded_data_size bytes: no scratch buffer, no copy after it. Same checks and errors
 * (a @dst_len other than @decoded_data_size is -EBADMSG). @dst is written even on failure.
 */
int grist_simple_chunk_decode_values_into(struct grist_simple_decoder *d, const uint8_t *data, size_t data_size,
					  uint64_t decoded_data_size, const char *path, uint64_t chunk_begin,
					  uint8_t *dst, size_t dst_len);

/*
 * The values section of simple chunk @data as it is stored: for a compressed chunk, a
 * varint of the decoded length followed by the codec's stream; for a stored one, the
 * values themselves. @codec is the chunk's codec. 0, -EBADMSG or -ENOTSUP.
 */
int grist_simple_chunk_values_section(const uint8_t *data, size_t data_size, const char *path,
				      uint64_t chunk_begin, const struct grist_codec_ops **codec,
				      const uint8_t **section, size_t *section_len);

/* Free every buffer and codec context of @d; it can be used again afterwards. */
void grist_simple_decoder_clear(struct grist_simple_decoder *d);

/*
 * Encode records given as their varint sizes (@sizes) and concatenated bytes
 * (@values) with @codec into chunk data, replacing the contents of @out.
 * @scratch holds the compressed sizes section on the way. 0, -ENOMEM or -EINVAL.
 */
int grist_simple_chunk_encode(const struct grist_codec_ops *codec, void *ctx,
			      const struct grist_codec_params *params, const uint8_t *sizes,
			      size_t sizes_len, const uint8_t *values, size_t values_len,
			      struct grist_buf *scratch, struct grist_buf *out);

#endif
