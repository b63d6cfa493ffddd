/*
 * Async engine, planning: what a unit of the shard stream reads. Its items in stream
 * order, the chunks they live in, the rows grouped by chunk, and the coalesced read
 * regions that bring those chunks into memory (the read planner, plan/read_plan.h).
 *
 * A plan is the output of this stage: the read and decode stages only read it.
 */
#ifndef GRIST_EXEC_ENGINE_ASYNC_PLAN_H
#define GRIST_EXEC_ENGINE_ASYNC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "exec/engine_async_files.h"

struct async_item {
	struct grist_stream_item it;
	uint64_t j;               /* its shard position */
	uint64_t record_in_chunk;
	uint32_t chunk;
};

/* One chunk the unit needs. */
struct async_chunk {
	uint32_t component;
	uint32_t file;
	uint64_t chunk;           /* index within its file */
	uint64_t begin, end;
	uint32_t region;          /* which read region holds it */
	uint32_t rows_begin, rows_end; /* its rows in rows[] (no map: chunk-major decoding) */
};

/*
 * Chunk-major decoding: one item as its chunk sees it. A chunk's rows are contiguous in
 * rows[], so the copy loop after each decompression streams through them instead of
 * chasing items across the unit.
 */
struct async_row {
	uint64_t record_in_chunk;
	uint32_t item;
};

/* A contiguous range of one file, read into one place of the unit's read buffer. */
struct async_region {
	uint32_t component, file;
	uint64_t offset, len;     /* aligned for O_DIRECT files */
	size_t buf_off;           /* where in the read buffer (a mapped file needs none; streamed: set when read) */
	uint32_t order_begin, order_end; /* its chunks: order[order_begin, order_end) */
};

struct async_plan {
	struct async_item *items;
	size_t nitems, items_cap;
	struct async_chunk *chunks;
	size_t nchunks, chunks_cap;
	struct async_row *rows;   /* nitems, grouped by chunk (no map) */
	size_t rows_cap;
	uint32_t *order;          /* chunk indices sorted by file position (stream order when all are mapped) */
	uint32_t *fill_order;     /* chunk indices by their last item: the order their rows get places */
	size_t fill_cap;
	struct async_region *regions;
	size_t nregions, regions_cap;
	size_t buf_need;          /* bytes its regions need in a read buffer (mapped files: none) */
	/*
	 * Streamed: the unit's reads are larger than half the read buffer, so instead of
	 * one buffer for all of them, each region takes its space when it is read and gives
	 * it back once its chunks are copied out. Its regions are then in stream order (by
	 * the first item they serve), each at most an eighth of the buffer.
	 */
	bool streamed;
	/* private to planning */
	struct async_stream_region {
		size_t bytes;     /* its read-buffer bytes */
		size_t need;      /* the last region read before it can be given back */
	} *stream_regions;        /* streamed: one per region (stream_fits()) */
	size_t stream_cap;
	uint32_t *chunk_hash;     /* open addressing over chunks; UINT32_MAX = empty */
	size_t hash_cap;
};

/* What planning reads: the engine's parameters, its files, and the worker's stream cursor. */
struct async_plan_env {
	const struct grist_engine_params *p;
	const struct async_files *files;
	struct grist_stream_cursor *cursor;
	size_t read_buffer;       /* the worker's read-ahead arena (0: never streamed) */
};

/*
 * Plan shard positions [@first_j, @end_j) into @pl. Returns 0 or a negative errno code
 * (message set). The arrays are reused from plan to plan.
 */
int grist_async_plan_unit(struct async_plan *pl, const struct async_plan_env *env, uint64_t first_j,
			  uint64_t end_j);

void grist_async_plan_free(struct async_plan *pl);

#endif
