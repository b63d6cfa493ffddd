/* The process-wide bound on chunk sizes (grist_max_chunk_bytes()) as the format layer applies it. */
#ifndef GRIST_FORMAT_LIMITS_H
#define GRIST_FORMAT_LIMITS_H

#include <stdint.h>

#include "grist/format.h"

/* The largest extent on disk a chunk within grist_max_chunk_bytes() can take (block headers, padding). */
uint64_t grist_max_chunk_extent(void);

/*
 * 0 when the chunk extent [@begin, @end) of @path may be read into memory: not above
 * @reader_max (a reader's own option, 0 = none) nor grist_max_chunk_extent().
 * Otherwise -EFBIG with a message naming the file and @begin. Call it before
 * allocating a buffer for the extent.
 */
int grist_check_chunk_extent(const char *path, uint64_t begin, uint64_t end, uint64_t reader_max);

#endif
