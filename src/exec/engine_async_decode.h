/*
 * Async engine, decoding: a unit's chunks, as their reads land, become its slot's rows.
 *
 * A worker owns one async_decoder (its chunk decoders, its counters); each unit owns one
 * async_decode (how far its rows got). A step decodes what has landed and returns: it
 * never reaps or submits reads itself, but pauses (GRIST_ASYNC_YIELD) when the clock
 * passes the time the worker asked its reads to be tended, and is called again after.
 */
#ifndef GRIST_EXEC_ENGINE_ASYNC_DECODE_H
#define GRIST_EXEC_ENGINE_ASYNC_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/engine_async_read.h"
#include "format/chunk_decode.h"

#define GRIST_ASYNC_YIELD 2 /* a step paused for the reads: call it again after tending them */

struct async_decoder_slot {
	struct grist_chunk_decoder *dec;
	struct grist_decoded_chunk out;
	uint64_t generation;
	uint32_t chunk;
	uint64_t last_use;
};

struct async_decoder {
	struct async_decoder_slot *slots;
	size_t nslots;
	uint64_t generation, use_clock;
	/* counters, read by stats from another thread */
	uint64_t chunks_decoded, bytes_decoded, decode_ns, assemble_ns;
};

/* One chunk as decoding sees it. */
struct async_chunk_state {
	uint64_t decoded_size; /* chunk-major decoding: the decoded size its sizes promised */
	int32_t decoder;       /* the decoder slot that last held it, or -1 */
	bool filled;           /* chunk-major decoding: its rows are copied */
};

/* One row of the plan's rows[] (chunk-major decoding): where its record is in the chunk's values. */
struct async_span {
	uint64_t value_begin;
	uint64_t len;
};

struct async_decode {
	struct async_chunk_state *chunks; /* per chunk of the plan */
	size_t chunks_cap;
	struct async_span *spans; /* per row of the plan */
	size_t spans_cap;
	uint64_t *row_place;   /* per item: ROW_UNKNOWN, then its size, then where its row goes */
	size_t row_place_cap;
	size_t nsized;         /* landed regions whose chunks' sizes were read */
	size_t shaped;         /* items whose rows have their place (by chunk) or were made (with a map) */
	size_t nfilled;        /* chunks whose rows were filled */
	size_t fill_next;      /* next chunk of fill_order to try while rows are being placed */
	size_t file_next;      /* next chunk of order[] to fill once every row has its place */
	uint32_t *region_left; /* streamed: per region, its chunks not yet filled */
	size_t region_left_cap;
};

/* What a decode step reads, and where it writes (@slot). */
struct async_decode_input {
	const struct grist_engine_params *p;
	const struct async_files *files;
	const struct async_plan *plan;
	struct async_reads *reads;   /* read only, but a streamed unit's regions are given back through it */
	struct async_reader *reader; /* the worker's: where they are given back */
	struct grist_slot *slot;
	uint64_t tend_at;      /* the clock at which the reads want tending: the step yields after it */
};

int grist_async_decoder_init(struct async_decoder *dc, size_t nslots, bool check_data);
void grist_async_decoder_free(struct async_decoder *dc);
/* A new unit starts decoding: the cache holds its chunks from now on. */
void grist_async_decoder_next_unit(struct async_decoder *dc);
/* Add the decoder's counters to @out (from any thread). */
void grist_async_decoder_stats(struct async_decoder *dc, struct grist_loader_stats *out);

/* Ready @d for plan @pl (@map: the layout has a map). Returns 0 or -ENOMEM. */
int grist_async_decode_prepare(struct async_decode *d, const struct async_plan *pl, bool map);
void grist_async_decode_free(struct async_decode *d);

/*
 * Make as many of the unit's rows as its landed reads allow: chunk sizes as soon as a
 * read lands, rows placed in stream order as the sizes before them are known, and each
 * chunk decompressed and copied out once all its rows have a place (with a map: items
 * mapped in stream order as their chunks land). Returns 1 when every row is made, 0
 * when it waits for reads, GRIST_ASYNC_YIELD (*@now: the clock) when the reads want
 * tending first, or a negative errno code.
 */
int grist_async_decode_step(struct async_decoder *dc, struct async_decode *d, const struct async_decode_input *in,
			    uint64_t *now);

#endif
