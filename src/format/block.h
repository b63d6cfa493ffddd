/* Riegeli block geometry: a 24-byte header at every 64 KiB file offset, and chunk-end arithmetic. */
#ifndef GRIST_FORMAT_BLOCK_H
#define GRIST_FORMAT_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define GRIST_BLOCK_SIZE 65536ull
#define GRIST_BLOCK_HEADER_SIZE 24ull
#define GRIST_BLOCK_USABLE (GRIST_BLOCK_SIZE - GRIST_BLOCK_HEADER_SIZE)
#define GRIST_CHUNK_HEADER_SIZE 40ull

/* Bytes from @pos to the next block boundary (0 at a boundary). */
static inline uint64_t grist_block_remaining(uint64_t pos)
{
	return (0 - pos) & (GRIST_BLOCK_SIZE - 1);
}

/*
 * Physical end after writing @len logical bytes of a chunk starting at @begin,
 * counting every block header met on the way. Saturates at UINT64_MAX.
 */
uint64_t grist_block_add_with_overhead(uint64_t begin, uint64_t len);

/* Chunks never start inside or right after a block header: map such @pos past it. */
static inline uint64_t grist_block_round_up_chunk_boundary(uint64_t pos)
{
	uint64_t rem = grist_block_remaining(pos);

	return rem >= GRIST_BLOCK_USABLE ? pos + (rem - (GRIST_BLOCK_USABLE - 1)) : pos;
}

/* True when a chunk may begin at @pos. */
static inline bool grist_block_valid_chunk_begin(uint64_t pos)
{
	uint64_t in_block = pos & (GRIST_BLOCK_SIZE - 1);

	return in_block == 0 || in_block > GRIST_BLOCK_HEADER_SIZE;
}

/*
 * Where the chunk beginning at @begin ends, from its header fields: data plus
 * zero padding so that every record has a distinct position begin + index.
 */
uint64_t grist_chunk_end(uint64_t begin, uint64_t data_size, uint64_t num_records);

/* Build the 24-byte header for the block at @block_begin inside chunk [@chunk_begin, @chunk_end). */
void grist_block_header_build(uint8_t out[24], uint64_t block_begin, uint64_t chunk_begin,
			      uint64_t chunk_end);

/*
 * Check the block header @hdr found at @block_begin: its hash, and that it
 * points back to @chunk_begin and (unless @chunk_end is 0, not known yet)
 * forward to @chunk_end. 0 or -EBADMSG with a message naming @path and the offset.
 */
int grist_block_header_check(const uint8_t hdr[24], uint64_t block_begin, uint64_t chunk_begin,
			     uint64_t chunk_end, const char *path);

#endif
