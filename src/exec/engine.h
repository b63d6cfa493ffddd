/*
 * What an engine is given and what it gives back: its parameters, the ops table every
 * engine fills (fio-style: one file per engine), and its sizing.
 *
 * An engine sees only this header: never the loader's own struct. The loader (loader.c)
 * fills a grist_engine_params from its configuration once, before the engine starts; the
 * device stage (device_feed.c) sizes its slot ring from the same sizing function as the
 * engine (grist_engine_size()), so the two never disagree on how many batches can be
 * in flight.
 */
#ifndef GRIST_EXEC_ENGINE_H
#define GRIST_EXEC_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "grist/format.h"
#include "grist/loader.h"
#include "grist/plan.h"
#include "exec/slot.h"
#include "io/io.h"

/* One dataset as an engine reads it: its reader and the geometry its plan was built from. */
struct grist_engine_source {
	struct grist_reader *reader;
	struct grist_plan_file *files; /* per file: records and records per chunk */
	size_t num_files;
	uint64_t num_records;
	double weight;                 /* its mixing weight (used with several datasets) */
};

/*
 * Everything an engine reads from its owner. The pointers stay valid until stop(); the
 * engine changes nothing they point to except through the stream cursors it makes.
 */
struct grist_engine_params {
	/* what to deliver */
	struct grist_stream *stream;
	const struct grist_engine_source *sources;
	size_t num_sources;
	uint64_t start_position;  /* shard position of the first batch (resume) */
	const struct grist_layout *layout;
	uint64_t batch_size;
	uint64_t seed;            /* the loader seed: per-record seeds of random maps */

	/* how: none of these changes the delivered bytes */
	enum grist_engine_kind engine;
	enum grist_read_mode read_mode;
	enum grist_granularity granularity;
	uint64_t window_chunks;   /* chunk granularity: 0 = the plan's default */
	uint64_t shard_count;     /* >= 1 */
	bool shuffled;            /* false: index order (no_shuffle) */
	unsigned threads;         /* 0 = the CPUs the process may run on (grist_cpus_allowed()) */
	unsigned queue_depth;     /* 0 = the default */
	unsigned prefetch;        /* batches the consumer may hold, and units assembled ahead */
	uint64_t read_ahead_bytes; /* all workers' read buffers; 0 = the default */
	const struct grist_remote_options *remote; /* NULL: the defaults */
	grist_read_trace_fn read_trace;
	void *read_trace_ctx;
	enum grist_verify verify;  /* GRIST_VERIFY_HEADERS: decoders skip the data hash */

	/* test hook: reads through another io backend (the fault injector) */
	bool io_override;
	enum grist_io_kind io_kind;
	struct grist_io_config io_config;
	/* bytes of slots the units ahead of the consumer may hold (0: the default; cfg.assembly_bytes) */
	uint64_t assembly_bytes;
	/*
	 * The consumer never sees a unit's size: a packer takes the records in order and cuts
	 * them into rows of its own, so the engine may cut units as it likes (with a map, the
	 * last ones of a finite stream shrink so that the workers finish together:
	 * engine_async.c, tail_items()). False whenever units are the caller's batches, as
	 * with a slot provider, whose zero-copy hand-over needs a unit of exactly one batch.
	 */
	bool unit_sizes_unseen;

	/*
	 * Delivery: where a batch's memory comes from. NULL: the engine's own host slots;
	 * else a stage (device mode) that lends each batch its memory through this ops
	 * table (acquire, then either the consumer's release or cancel).
	 */
	const struct grist_slot_provider *deliver;
};

/*
 * An engine turns the shard stream into full batches, in order.
 * next() returns the slot holding the next batch (count == batch_size, or fewer
 * only for the last batch of a finite stream) or NULL at the end; the owner
 * hands it back with release(). The engine owns every slot; the consumer may hold
 * up to prefetch of them.
 */
struct grist_engine_ops {
	const char *name;
	int (*start)(const struct grist_engine_params *p, void **engine);
	int (*next)(void *engine, struct grist_slot **out);
	void (*release)(void *engine, struct grist_slot *s);
	void (*stats)(void *engine, struct grist_loader_stats *out);
	/* Wake every waiter and make next() return -ECANCELED (before stop, from another thread). */
	void (*abort)(void *engine);
	void (*stop)(void *engine);
};

extern const struct grist_engine_ops grist_engine_ref_ops;
extern const struct grist_engine_ops grist_engine_async_ops;

/* ---- records (engine.c) ---- */

/* A 64-bit mix with full avalanche (splitmix64's finaliser, no increment): record seeds, config digests. */
static inline uint64_t grist_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Per-record seed for random maps: a function of the loader seed and the item alone. */
uint64_t grist_engine_record_seed(uint64_t seed, const struct grist_stream_item *it);

/* Fill a map input for an item whose bytes are @data/@len. */
void grist_engine_map_input(const struct grist_engine_params *p, const struct grist_stream_item *it,
			    const uint8_t *data, size_t len, struct grist_map_input *in);

/*
 * Put where record @record of dataset @dataset lives ("<file>: chunk at byte <B>") before
 * the error just recorded about it (a row that does not fit, a failed map). Returns @code.
 */
int grist_engine_record_error(const struct grist_engine_source *sources, size_t num_sources, uint32_t dataset,
			      uint64_t record, int code);

/* ---- sizing (engine_sizing.c) ---- */

/* What sizing needs to know of the files: read once from the readers' geometry. */
struct grist_engine_geometry {
	unsigned online_cpus;
	bool any_remote;          /* some file is a URL */
	bool all_remote;          /* every file is a URL: read buffers need no O_DIRECT alignment */
	uint64_t largest_extent;  /* the largest chunk extent within the chunk size limit */
	uint64_t remote_bytes;    /* the chunk bytes of the URL files, summed */
	uint64_t smallest_group;  /* the fewest records per chunk of any file (>= 1) */
	uint64_t row_bytes;       /* the most decoded bytes per record a footer announces (0: unknown) */
	uint64_t max_chunk_decoded; /* the largest decoded chunk of any file */
	uint64_t positions;       /* shard positions the run delivers from its start (0: unbounded or unknown) */
};

#define GRIST_ENGINE_MEM_ALIGN 4096u
#define GRIST_ENGINE_MAX_HELPERS 2 /* device copy helpers */

/* Every size an engine and the device stage derive from the parameters. */
struct grist_engine_sizes {
	unsigned workers;         /* decode threads (the reference engine: 1) */
	unsigned queue_depth;     /* reads in flight per ring */
	size_t unit_items;        /* U: shard positions per unit */
	size_t max_unit_items;    /* the most a chunk-granularity unit may stretch to */
	size_t decoders;          /* decoded chunks cached per worker */
	size_t read_ahead;        /* read buffer (arena) bytes per worker */
	size_t works;             /* units one worker reads ahead */
	unsigned nunits;          /* claim window: units claimed and not yet consumed */
	unsigned slot_window;     /* units that may hold a lent (provider) slot at once */
	unsigned assembly;        /* units that may hold a slot at once */
	bool assembly_in_bytes;   /* assembly was cut to a budget of bytes: the caller's batches count against it */
	size_t row_bytes_hint;    /* expected bytes per row, to size slots once (0: none) */
	uint64_t positions;       /* the geometry's: a slot is never sized for more rows than the run has */
	/* the device stage */
	bool device_copy;         /* batches are copied into its slots (units are not batches) */
	unsigned device_helpers;  /* its copy threads */
	unsigned device_slots;    /* its slot ring */
};

/* Read @g from @p's readers (their footers, already loaded). */
void grist_engine_geometry_read(const struct grist_engine_params *p, unsigned online_cpus,
				struct grist_engine_geometry *g);

/*
 * The sizes for @p on files of geometry @g: a pure function (no allocation, no error,
 * nothing global read), so the engine and the device stage always agree.
 */
void grist_engine_size(const struct grist_engine_params *p, const struct grist_engine_geometry *g,
		       struct grist_engine_sizes *out);

/* Counters that one thread adds to and stats() reads from another: relaxed atomics. */
static inline uint64_t grist_counter_add(uint64_t *p, uint64_t v)
{
	return __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

static inline uint64_t grist_counter_read(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Monotonic clock in nanoseconds, for the stats. */
static inline uint64_t grist_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
