/* Dataset geometry for the async engine: per-file chunk index and global-index lookup. */
#ifndef GRIST_FORMAT_DATASET_H
#define GRIST_FORMAT_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "grist/format.h"

/* One opened file of a dataset; owned by the reader, immutable after open. */
struct grist_file_geom {
	char *path;
	int fd;                   /* O_RDONLY | O_CLOEXEC, open until grist_reader_close(); -1 for a URL */
	struct grist_remote_object *remote; /* a URL: the object, pinned at open; else NULL */
	uint64_t size;
	uint64_t num_records;
	uint64_t group_size;      /* 0 only when the file holds no records */
	uint64_t num_chunks;
	/* num_chunks + 1 entries: chunk i spans [chunk_offsets[i], chunk_offsets[i+1]); the last is the footer offset. */
	uint64_t *chunk_offsets;
	uint64_t first_record;    /* global index of this file's record 0 */
	uint64_t max_chunk_decoded; /* largest decoded_data_size the footer lists: bounds any record's size */
	char *writer_options;     /* "" when absent */
	uint8_t compression;      /* the footer chunk's codec byte: the file's codec */
};

/* Where one global record lives. */
struct grist_record_loc {
	size_t file;
	uint64_t chunk;
	uint64_t record_in_chunk;
	uint64_t chunk_begin;
	uint64_t chunk_end;       /* extent end: next chunk offset or the footer offset */
};

/*
 * Read exactly [@off, @off + @len) of @f into @dst: pread for a local file, ranged GETs
 * (pinned to the object's ETag) for a URL. The one way every reading path outside the
 * engines' io objects gets file bytes. 0, or -EBADMSG when the file ends early, or the
 * read's error (message names the file and offset).
 */
int grist_file_read(const struct grist_file_geom *f, uint8_t *dst, uint64_t off, size_t len);

/* File @i of @r (0-based), or NULL when out of range. */
const struct grist_file_geom *grist_reader_file_geom(const struct grist_reader *r, size_t i);
/* What the reader was opened to check (grist_reader_options.verify): its fetchers check the same. */
enum grist_verify grist_reader_verify(const struct grist_reader *r);

/* Locate @global_index. 0, or -ERANGE (message recorded) when past the end. Thread-safe. */
int grist_reader_locate(const struct grist_reader *r, uint64_t global_index, struct grist_record_loc *loc);

/*
 * Start loading the chunk offsets grist_reader_locate(@r, @global_index) will read: for
 * shuffled records they are a cache miss each, which a caller locating many records can
 * overlap by asking a few records ahead. Does nothing past the end. Thread-safe.
 */
void grist_reader_locate_prefetch(const struct grist_reader *r, uint64_t global_index);

/* Records in chunk @chunk of @f: group_size for all but the last chunk. */
static inline uint64_t grist_file_chunk_records(const struct grist_file_geom *f, uint64_t chunk)
{
	return chunk + 1 < f->num_chunks ? f->group_size
					 : f->num_records - (f->num_chunks - 1) * f->group_size;
}

/*
 * The reader's check on a decoded data chunk: a record chunk ('r') holding exactly the
 * records the footer implies for chunk @chunk of @f. Every path that decodes chunks (the
 * reader, the engine, the fetcher) makes it, so a footer and its chunks cannot disagree
 * silently. Returns 0, or -EBADMSG naming the file and the chunk's offset.
 */
int grist_file_check_chunk_records(const struct grist_file_geom *f, uint64_t chunk, uint8_t chunk_type,
				   uint64_t num_records);

#endif
