/*
 * The read planner: how chunk extents become io requests, for every reader of chunks
 * (the async engine's units, the fetcher's requests). Pure arithmetic, no I/O.
 *
 * Extents of one file, taken in file order, coalesce into a region while they touch or
 * overlap it and the region stays within GRIST_READ_REGION_MAX; a region is then read in
 * pieces of at most GRIST_READ_PIECE_MAX bytes, one io request each.
 */
#ifndef GRIST_PLAN_READ_PLAN_H
#define GRIST_PLAN_READ_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRIST_READ_PIECE_MAX (8u << 20) /* bytes per io request; larger regions are split */
/* coalescing stops here, so one region never dwarfs the reads around it */
#define GRIST_READ_REGION_MAX (4ull * GRIST_READ_PIECE_MAX)

/* Round [*off, *end) out to multiples of @align (a power of two; 1 leaves it as is): O_DIRECT. */
void grist_read_align(uint64_t align, uint64_t *off, uint64_t *end);

/*
 * Whether extent [@off, @end) of the file that region [@r_off, @r_off + *@r_len) reads,
 * taken in file order, joins the region: true (and the region is extended to cover it)
 * when it starts inside or right at the end of the region and the region stays within
 * GRIST_READ_REGION_MAX; false when it must start a region of its own.
 */
bool grist_read_coalesce(uint64_t r_off, uint64_t *r_len, uint64_t off, uint64_t end);
/* The same with a region bound of the caller's (@max bytes) instead of GRIST_READ_REGION_MAX. */
bool grist_read_coalesce_max(uint64_t r_off, uint64_t *r_len, uint64_t off, uint64_t end, uint64_t max);

/*
 * Where regions land in a read buffer: each starts at a multiple of @align (a power of
 * two), so a region of @len bytes takes grist_read_buf_len(@len, @align) bytes of it.
 * O_DIRECT and page-cache reads need GRIST_READ_BUF_ALIGN_DIRECT; the http backend copies
 * GET bodies with memcpy and needs none, so URL datasets use GRIST_READ_BUF_ALIGN_REMOTE
 * (a cache line: two regions never share one). At 4 KiB a 616-byte chunk of a
 * chunk-window shuffle took 4 KiB of the read-ahead window, at 64 B it takes 640 B: the
 * same window holds six times the reads, and the GETs made from them carry fewer gap bytes.
 */
#define GRIST_READ_BUF_ALIGN_DIRECT 4096u
#define GRIST_READ_BUF_ALIGN_REMOTE 64u

static inline uint64_t grist_read_buf_len(uint64_t len, uint32_t align)
{
	return (len + align - 1) & ~(uint64_t)(align - 1);
}

/* How many requests a region of @len bytes is read in. */
static inline size_t grist_read_pieces(uint64_t len)
{
	return (size_t)((len + GRIST_READ_PIECE_MAX - 1) / GRIST_READ_PIECE_MAX);
}

/* The length of the request at byte @done of a region of @len bytes (@done: a multiple of the piece size). */
static inline uint32_t grist_read_piece_len(uint64_t len, uint64_t done)
{
	return (uint32_t)(len - done < GRIST_READ_PIECE_MAX ? len - done : GRIST_READ_PIECE_MAX);
}

#endif
