/* Decoding one chunk straight from the file bytes that hold it: the engine's per-thread entry point. */
#ifndef GRIST_FORMAT_CHUNK_DECODE_H
#define GRIST_FORMAT_CHUNK_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-thread decoder: codec contexts and scratch buffers, reused across chunks. */
struct grist_chunk_decoder;

/* The records of one decoded chunk. */
struct grist_decoded_chunk {
	uint64_t num_records;     /* 0 for signature, padding and metadata chunks */
	const uint8_t *values;    /* record i = values[offsets[i]..offsets[i+1]) */
	const uint64_t *offsets;  /* num_records + 1 entries, offsets[0] == 0 */
	uint64_t chunk_end;       /* where the chunk really ends (its header's arithmetic) */
	uint64_t data_end;        /* where its data ends; [data_end, chunk_end) is zero padding */
	uint64_t decoded_data_size;
	uint8_t chunk_type;       /* 'r', 's', 'p', 'm' or another record-less type */
	uint8_t compression;      /* of a simple chunk; 0 otherwise */
};

/* Make a decoder. 0 or -ENOMEM. */
int grist_chunk_decoder_create(struct grist_chunk_decoder **out);
/*
 * grist_chunk_decoder_check_data() - whether @d checks each chunk's data hash (the
 * default: true). false is GRIST_VERIFY_HEADERS (grist/format.h): chunk and block
 * headers, their hashes, the chunk's extent and the simple chunk's sizes are still
 * checked, the HighwayHash of the data is not computed.
 */
void grist_chunk_decoder_check_data(struct grist_chunk_decoder *d, bool check);
/* Free a decoder and everything it holds; NULL is fine. */
void grist_chunk_decoder_destroy(struct grist_chunk_decoder *d);

/*
 * grist_chunk_decode() - decode the chunk beginning at @chunk_begin.
 * @buf holds the file bytes [@buf_file_offset, @buf_file_offset + @buf_len),
 * which must cover [@chunk_begin, @chunk_end). @chunk_end is the end of the
 * extent the chunk may use (the next chunk's offset, or the footer's); the
 * chunk's own end, from its header, may come earlier when padding follows.
 *
 * Checks every block header crossed (hash, previous_chunk, next_chunk), the
 * chunk header hash, the data hash, the chunk fitting its extent, and (for
 * simple chunks) every size. Block headers are stripped; stored data that
 * crosses no block boundary is not copied. @path only names the file in errors.
 *
 * Return: 0; -EBADMSG for corrupt data; -ENOTSUP for a transposed chunk or an
 * unknown compression; -EINVAL when @buf does not cover the extent; -ENOMEM.
 * The output stays valid until the next call on @d (and while @buf lives).
 * Thread-safety: one thread per decoder at a time.
 */
int grist_chunk_decode(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
		       size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
		       struct grist_decoded_chunk *out);

/*
 * grist_chunk_decode() in two halves, for a caller that places every record of a group
 * of chunks before it decompresses any values (so that each chunk is decompressed once,
 * straight before its records are copied out while they are still in cache).
 *
 * grist_chunk_decode_sizes(): everything grist_chunk_decode() checks except the data
 * hash, and the record sizes: out->num_records and out->offsets are set, out->values
 * is NULL. Only the chunk header, the block headers and the sizes section are read.
 * Sizes are bounds-checked but their bytes are not yet covered by the hash, so a
 * caller must not deliver anything before grist_chunk_decode_values() has succeeded
 * on the same chunk.
 *
 * grist_chunk_decode_values(): checks the data hash and decompresses the values:
 * out->values is set, out->offsets is NULL (the sizes came from the first half).
 *
 * Record-less chunks are checked in full by either half. Each half checks the chunk
 * header and the block headers it spans again (tens of bytes per 64 KiB block) rather
 * than trusting state from the other, so either is safe on any buffer. Same errors as
 * grist_chunk_decode(); each output lives until the next call on @d.
 */
int grist_chunk_decode_sizes(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			     size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
			     struct grist_decoded_chunk *out);
int grist_chunk_decode_values(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			      size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
			      struct grist_decoded_chunk *out);

/*
 * grist_chunk_decode_values_into() - grist_chunk_decode_values() with the values
 * decompressed straight into @dst, which must hold exactly the chunk's decoded size
 * (@dst_len: the sum of the sizes grist_chunk_decode_sizes() gave). For a caller whose
 * rows take a chunk's records back to back and in order, such as every chunk of a file
 * written with group_size 1: no scratch buffer and no copy afterwards. out->values is
 * @dst. Same checks and errors as grist_chunk_decode_values(); a @dst_len other than the
 * chunk header's decoded size is -EBADMSG. @dst may be written even when it fails (a
 * record-less chunk writes nothing); the caller must not deliver it then.
 * Thread-safety: one thread per decoder at a time.
 */
int grist_chunk_decode_values_into(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
				   size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
				   uint8_t *dst, size_t dst_len, struct grist_decoded_chunk *out);

/*
 * grist_chunk_stored_values() - the codec's own stream of a simple chunk's values, as the
 * file stores it (the decoded-length varint in front of it left out; the values themselves
 * when the chunk is stored). For tools that study the codec on a file's real frames.
 * Checks what grist_chunk_decode_values() checks, decompresses nothing. Record-less
 * chunks give an empty stream. Same errors; the stream lives until the next call on @d.
 */
int grist_chunk_stored_values(struct grist_chunk_decoder *d, const uint8_t *buf, uint64_t buf_file_offset,
			      size_t buf_len, uint64_t chunk_begin, uint64_t chunk_end, const char *path,
			      const uint8_t **stream, size_t *stream_len);

#endif
