/* The async engine's shared structures, and the calls its files make into one another. */
#ifndef GRIST_EXEC_ENGINE_ASYNC_INTERNAL_H
#define GRIST_EXEC_ENGINE_ASYNC_INTERNAL_H

/*
 * The async engine is five files around this header: its core, and one per stage of a
 * unit's life:
 *
 *   engine_async.c           setup, workers, claiming and publishing units, stats, stop
 *   engine_async_plan.c      a unit's items, its chunks, coalesced read regions
 *   engine_async_read.c      submitting and reaping a unit's reads
 *   engine_async_decode.c    decoding a unit's chunks into its slot
 *   engine_async_consumer.c  batch slots, and the consumer: units in order, packing
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/map_guard.h"
#include "exec/engine.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "io/io.h"

#define MEM_ALIGN GRIST_ENGINE_MEM_ALIGN
#define ERRMSG_MAX 512
#define ROW_UNKNOWN UINT64_MAX    /* row_place: the record's size is not known yet */

enum unit_state { UNIT_FREE = 0, UNIT_BUSY, UNIT_DONE };

struct unit {
	uint64_t number;
	enum unit_state state;
	uint64_t first_j, end_j; /* shard positions [first_j, end_j) */
	struct grist_slot *slot; /* taken when its decoding starts, not when it is claimed */
	size_t next_row;         /* packer progress */
	int error;
	char errmsg[ERRMSG_MAX];
};

/* A dataset file as the engine reads it (its own fd, maybe O_DIRECT). */
struct engine_file {
	int fd;
	bool direct;
	uint32_t align;
	const uint8_t *map;  /* read mode mmap: the whole file, read-only */
	uint64_t size;
	const char *path; /* owned by the reader's info */
	struct grist_remote_object *remote; /* a URL (fd -1): read through the http backend */
};

struct item {
	struct grist_stream_item it;
	uint64_t j;
	uint64_t record_in_chunk;
	uint32_t chunk;
};

/*
 * Chunk-major decoding: one item as its chunk sees it. A chunk's rows are contiguous in
 * work.rows (grouped by chunk once the unit is planned), so the copy loop after each
 * decompression streams through them instead of chasing items across the unit.
 */
struct chunk_row {
	uint64_t value_begin;    /* where the record is in the chunk's values */
	uint64_t len;
	uint64_t record_in_chunk;
	uint32_t item;
};

struct chunk_ref {
	uint32_t component;
	uint32_t file;
	uint64_t chunk;        /* index within its file */
	uint64_t begin, end;
	int32_t decoder;       /* the decoder slot that last held it, or -1 */
	uint32_t region;       /* which read region holds it */
	uint32_t rows_begin, rows_end; /* chunk-major decoding: its rows in work.rows */
	uint64_t decoded_size; /* chunk-major decoding: the decoded size its sizes promised */
	bool filled;           /* chunk-major decoding: its rows are copied */
};

/* A contiguous range of one file read into one place of the read buffer. */
struct region {
	uint32_t component, file;
	uint64_t offset, len;  /* aligned for O_DIRECT files */
	size_t buf_off;        /* where in the work's read buffer */
	const uint8_t *base;   /* the region's bytes: in the read buffer, or in the file's mapping */
	uint64_t got;          /* bytes actually read (less only at EOF) */
	uint32_t order_begin, order_end; /* its chunks: work.order[order_begin, order_end) */
	unsigned pieces_left;  /* requests not yet back; 0 = landed (once the work is admitted) */
	int error;
};

/*
 * One unit in a worker's pipeline: its plan, its reads, and how far its decoding got.
 *
 * Life: planned -> admitted (read buffer reserved, requests built) -> requests pushed
 * as the ring has room -> regions land one by one -> decoded (only at the head of the
 * pipeline, as its regions land) -> published -> retired once no read is in flight.
 */
struct work {
	struct unit *u;
	struct item *items;
	size_t nitems, items_cap;
	struct chunk_ref *chunks;
	size_t nchunks, chunks_cap;
	struct chunk_row *rows; /* nitems, grouped by chunk (chunk-major decoding) */
	size_t rows_cap;
	uint64_t *row_place;    /* nitems: ROW_UNKNOWN, then each item's size, then where its row goes */
	size_t row_place_cap;
	uint32_t *chunk_hash; /* open addressing over chunks; UINT32_MAX = empty */
	size_t hash_cap;
	uint32_t *order;      /* chunk indices sorted by file position */
	uint32_t *fill_order; /* chunk indices by their last item: the order their rows get places */
	size_t fill_cap;
	struct region *regions;
	size_t nregions, regions_cap;
	uint32_t *landed;     /* regions in the order their reads landed */
	size_t nlanded, landed_cap;
	struct grist_io_req *reqs;
	size_t nreqs, reqs_cap, submitted;
	unsigned pending;     /* requests built and not yet back (submitted or not) */
	size_t buf_need;      /* bytes its regions need in a read buffer (mapped files: none) */
	uint8_t *buf;         /* read buffer: a part of the worker's arena, or the worker's heap */
	size_t arena_off, arena_len; /* its part of the arena (arena_len 0: none) */
	bool admitted;        /* buffer reserved and requests built */
	bool decoding;        /* slot taken, rows being made */
	bool published;
	int error;
	/* decoding progress */
	size_t nsized;        /* landed regions whose chunks' sizes were read */
	size_t shaped;        /* items whose rows have their place (by chunk) or were made (with a map) */
	size_t nfilled;       /* chunks whose rows were filled */
	size_t fill_next;     /* next chunk of fill_order to try while rows are being placed */
	size_t file_next;     /* next chunk of order[] to fill once every row has its place */
};

struct decoder_slot {
	struct grist_chunk_decoder *dec;
	struct grist_decoded_chunk out;
	uint64_t generation;
	uint32_t chunk;
	uint64_t last_use;
};

struct slot_pool {
	struct grist_slot **items;
	size_t n, cap;
};

struct async_engine;

struct worker {
	struct async_engine *e;
	unsigned id;
	pthread_t thread;
	bool started;
	struct grist_io *io;
	uint32_t **io_slot;   /* [component][file] -> io file slot */
	struct grist_stream_cursor *cursor;
	struct decoder_slot *decoders;
	size_t ndecoders;
	uint64_t generation, use_clock;
	/* the pipeline: a ring of works, oldest (the only one being decoded) at head */
	struct work *works;
	unsigned works_cap, head, count;
	uint8_t *arena;       /* read buffers, allocated in pipeline order; registered with io_uring when allowed */
	size_t arena_len;
	bool fixed_buffers;   /* the arena is registered */
	/*
	 * A unit whose reads are larger than the whole arena reads here, alone in the
	 * pipeline, so one buffer per worker serves every such unit: kept in the work
	 * instead, each slot of the pipeline ring would fault in its own (1 MiB records at
	 * batch 256: 256 MiB each, fresh memory every unit of a 3-unit epoch).
	 */
	uint8_t *heap;
	size_t heap_cap;
	uint64_t last_service_ns; /* when the ring was last polled while decoding */
	uint64_t depth_t;     /* when the in-flight count last changed (for its time average) */

	/* counters, read by stats() from another thread */
	uint64_t reads, bytes_read, chunks_decoded, bytes_decoded;
	uint64_t io_wait_ns, decode_ns, assemble_ns, producer_stall_ns;
	uint64_t depth_area, depth_span; /* reads in flight integrated over time (ns), and the time */
	uint64_t depth_max;
} __attribute__((aligned(128))); /* workers sit side by side: no cache line is shared between two of them */

struct async_engine {
	const struct grist_engine_params *p;
	enum grist_io_kind io_kind;
	const char *name;
	unsigned nworkers;
	struct worker *workers;
	struct engine_file **files; /* [component][file] */
	bool any_direct, any_buffered, any_mapped, any_remote;
	struct grist_remote_counters *remote_ctr; /* every worker's GETs, when any_remote */
	struct grist_map_range *map_ranges; /* the mapped files: decoding from them runs under a guard */
	size_t num_map_ranges;
	size_t unit_items;          /* U */
	size_t ncache;              /* decoders per worker */
	unsigned queue_depth;       /* reads in flight per ring */
	size_t read_ahead;          /* read buffer bytes per worker */

	pthread_mutex_t lock;
	pthread_cond_t claim_cv;    /* workers wait for a unit they may claim or start decoding */
	pthread_cond_t done_cv;     /* the consumer waits for the next unit */
	bool stop, failed, aborted;
	uint64_t next_unit;         /* next unit to claim */
	uint64_t next_first_j;      /* shard position where that unit starts */
	struct grist_stream_cursor *plan_cursor; /* chunk granularity: finds window ends (under lock) */
	size_t max_unit_items;
	size_t row_bytes_hint;      /* expected bytes per row, to size slots once */
	uint64_t total_units;       /* UINT64_MAX when unbounded */
	uint64_t consumed_units;    /* units the consumer has finished with */
	unsigned nunits;            /* claim window: unit u may be claimed once u - nunits is consumed */
	unsigned assembly;          /* slot window: unit u may take a slot once u - assembly is consumed */
	struct unit *units;         /* ring of nunits units, unit u at u % nunits */

	struct slot_pool host_pool, dev_pool;
	struct grist_slot *pack;    /* the batch the packer is filling */
	uint64_t slot_memory;       /* bytes all slots own, kept by the slots themselves */
	uint64_t queue_occupancy;
	uint64_t pack_ns;           /* the packer's row copies (under the lock when added) */
};

static inline uint64_t add_relaxed(uint64_t *p, uint64_t v)
{
	return __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

static inline uint64_t load_relaxed(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* ---- planning (engine_async_plan.c) ---- */

/*
 * Plan unit @u into @w: its items in stream order, the chunks they need, the read
 * regions (coalesced, aligned for O_DIRECT) and where each region lands in the read
 * buffer. Returns 0 or a negative errno code (message set).
 */
int grist_async_plan_unit(struct worker *wk, struct work *w, struct unit *u);

/* ---- reading (engine_async_read.c) ---- */

/* The @k-th oldest work of @wk's pipeline. */
static inline struct work *pipeline_at(struct worker *wk, unsigned k)
{
	return &wk->works[(wk->head + k) % wk->works_cap];
}

/*
 * Admit @w (the newest work of the pipeline): reserve its read buffer in the arena and
 * build its requests. A work whose reads do not fit stays unadmitted until older works
 * retire; alone in the pipeline it reads into heap memory instead. Sets w->admitted.
 * Returns 0 or -ENOMEM.
 */
int grist_async_admit(struct worker *wk, struct work *w);

/* Push queued requests, oldest work first, as far as the ring's caps allow. Returns 0 or an io error. */
int grist_async_push(struct worker *wk);

/*
 * Reap completions (waiting for at least @min_wait of them, when any are in flight)
 * and account them to their regions. Returns how many came back, or an io error.
 */
int grist_async_reap(struct worker *wk, unsigned min_wait);

/*
 * While decoding (@now: the clock, just read): every 50 microseconds, take what has
 * landed and refill the ring, so reads never wait for a whole unit's decoding.
 * Returns 0 or an io error.
 */
int grist_async_service(struct worker *wk, uint64_t now);

/* Drop @w's requests not yet submitted; what is in flight still comes back. */
void grist_async_cancel_unsubmitted(struct work *w);

/* ---- decoding (engine_async_decode.c) ---- */

/*
 * Make as many of @w's rows as its landed reads allow: chunk sizes as soon as a read
 * lands, rows placed in stream order as the sizes before them are known, and each chunk
 * decompressed and copied out once all its rows have a place (with a map: items mapped in
 * stream order as their chunks land). Returns 1 when every row is made, 0 when it waits
 * for reads, or a negative errno code.
 */
int grist_async_advance(struct worker *wk, struct work *w);

/* ---- slots and the consumer (engine_async_consumer.c) ---- */

/*
 * A slot for a unit (@deliver: it may be handed over as is, so it comes from the slot
 * provider when there is one) or a view (@view). Returns 0 or a negative errno code.
 */
int grist_async_slot_take(struct async_engine *e, bool deliver, bool view, struct grist_slot **out);

/* Back to its pool. Called with e->lock held. */
void grist_async_slot_put_locked(struct async_engine *e, struct grist_slot *s);

/* A slot that will not be delivered: provider memory goes back unsubmitted. e->lock held. */
void grist_async_slot_discard_locked(struct async_engine *e, struct grist_slot *s);

void grist_async_pool_free(struct slot_pool *pool);

/* The engine ops' next() and release(). */
int grist_async_next(void *engine, struct grist_slot **out);
void grist_async_release(void *engine, struct grist_slot *s);

#endif
