/*
 * grist/internal/chunks.h - UNSTABLE: one ArrayRecord file chunk by chunk, and the writer's
 * compression of a values section. For grist's own benchmarks (bench/), which time the codec
 * libraries on a file's real frames and read chunk extents as a loader does.
 *
 * Internal API, declared as such: not installed, not exported from libgrist.so (link
 * libgrist.a), no API or ABI promise; it may change in any commit. Define GRIST_INTERNAL
 * before including it to say you know. Errors follow grist/error.h.
 */
#ifndef GRIST_INTERNAL_CHUNKS_H
#define GRIST_INTERNAL_CHUNKS_H

#ifndef GRIST_INTERNAL
#error "grist/internal/chunks.h is grist's unstable internal API: define GRIST_INTERNAL to use it"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"

/* A file opened chunk by chunk; what its footer says. */
struct grist_chunk_walker;

struct grist_chunk_file {
	const char *path;
	uint64_t size, num_records, num_chunks;
	uint64_t max_chunk_decoded;   /* the largest decoded chunk the footer lists */
	const char *writer_options;   /* as the file stores them; "" when it has none */
	const char *codec;            /* the file's codec: "uncompressed", "zstd", "snappy" or "brotli" */
};

/* Chunk @k's place in the file: [begin, end) up to the next chunk or the footer. */
struct grist_chunk_extent {
	uint64_t begin, end;
	uint64_t num_records;         /* the footer's count for it */
};

/* One read and decoded chunk; valid until the next grist_chunk_walker_read(). */
struct grist_chunk_view {
	struct grist_chunk_extent extent;
	bool simple;                  /* a simple record chunk holding records */
	const char *codec;            /* of a simple chunk, as grist_chunk_file.codec; else "" */
	const uint8_t *values;        /* the records back to back, decoded */
	size_t values_len;
	const uint8_t *stored;        /* the codec's own stream of those values, as the file stores it */
	size_t stored_len;
};

/* Open @path (one ArrayRecord file) and read its footer. 0 or a negative errno (message recorded). */
int grist_chunk_walker_open(const char *path, struct grist_chunk_walker **out);
void grist_chunk_walker_close(struct grist_chunk_walker *w);
const struct grist_chunk_file *grist_chunk_walker_file(const struct grist_chunk_walker *w);

/* Where chunk @k lies; no I/O. 0 or -ERANGE. */
int grist_chunk_walker_extent(const struct grist_chunk_walker *w, uint64_t k, struct grist_chunk_extent *out);

/*
 * The file offset of byte @i of the data of the chunk beginning at @chunk_begin: past the
 * 40-byte chunk header and every 24-byte block header (one at each 64 KiB) on the way; a
 * byte never lies where a block header does. No I/O. For benchmarks that reason about where
 * a record's bytes sit on the disk (bench/dio_align.c).
 */
uint64_t grist_chunk_data_byte_offset(uint64_t chunk_begin, uint64_t i);

/*
 * Read chunk @k with one pread and decode it with every check a reader makes.
 * Return: 0; -ERANGE, -EFBIG (beyond grist_max_chunk_bytes()), -EIO, -EBADMSG, -ENOTSUP, -ENOMEM.
 * Thread-safety: one thread per walker.
 */
int grist_chunk_walker_read(struct grist_chunk_walker *w, uint64_t k, struct grist_chunk_view *out);

/* The writer's compression: a values section compressed exactly as the grist writer compresses it. */
struct grist_values_compressor;

/* What a compressor was made with, from the writer option text. */
struct grist_values_codec {
	const char *codec;            /* "uncompressed", "zstd", "snappy" or "brotli" */
	int level;                    /* zstd and brotli */
	int window_log;               /* 0: the codec's default */
};

/* Parse @writer_options (the official grammar; NULL or "" for the defaults). 0, -EINVAL or -ENOMEM. */
int grist_values_compressor_create(const char *writer_options, struct grist_values_compressor **out,
				   struct grist_values_codec *codec);
void grist_values_compressor_destroy(struct grist_values_compressor *c);

/*
 * Compress @len bytes at @src into one stream, as a simple chunk stores its values
 * (without the decoded-length varint in front). *@stream lives until the next call.
 * Return: 0, -ENOMEM or -EINVAL (message recorded).
 */
int grist_values_compress(struct grist_values_compressor *c, const void *src, size_t len,
			  const uint8_t **stream, size_t *stream_len);

#endif
