/*
 * grist/loader.h - the loader: shuffled, sharded, mapped batches behind a pull iterator.
 *
 * A loader turns one dataset (or several weighted ones) into a stream of batches:
 *
 *   plan (global shuffle, epochs, shard, mix) -> read chunks -> decode -> map/filter
 *        -> batch assembly into pinned host memory -> [device stage] -> caller
 *
 * The caller pulls: grist_loader_next() blocks until the next batch *in order* is
 * ready and grist_loader_release() hands its memory back. The batches are defined
 * by the configuration and the data alone: the engine (reference, io_uring or
 * pread), the thread count, the queue depth and the I/O mode never change a byte
 * of the output. The reference engine (GRIST_ENGINE_REF, one thread, plain pread)
 * is the oracle the fast engines are tested against.
 *
 * Stream semantics (see grist/plan.h for the exact order): each epoch is a keyed
 * permutation of the records, reshuffled every epoch; epochs are concatenated
 * (shuffle -> repeat -> batch, as in Grain), so only the last batch of a finite
 * run can be short, and drop_remainder drops it. Shard I of K takes stream
 * positions I, I+K, I+2K, ...
 *
 * Checkpoints are a few integers in a small versioned byte string
 * (grist_loader_save_state()). Restoring one continues with exactly the next
 * batch, also when it was taken while later batches were already prefetched, and
 * also on a different number of strided shards when no filter is in use (every
 * host has then consumed the same number of stream positions).
 */
#ifndef GRIST_LOADER_H
#define GRIST_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grist/error.h"
#include "grist/format.h"
#include "grist/plan.h"
#include "grist/remote.h"

#ifdef __cplusplus
extern "C" {
#endif

struct grist_loader;

/** Which engine executes the plan. */
enum grist_engine_kind {
	GRIST_ENGINE_URING = 0, /* io_uring reads + decode pool; falls back to PREAD when io_uring is unavailable */
	GRIST_ENGINE_PREAD,     /* pread thread pool + decode pool */
	GRIST_ENGINE_REF,       /* single thread, plain pread: the reference */
};

/** How reads reach the disk. */
enum grist_read_mode {
	GRIST_READ_AUTO = 0, /* MMAP for every file of a dataset of at most 1/8 of RAM whose
				chunks average at most 16 KiB (with MADV_WILLNEED), cached or not;
				else per file: MMAP when the page cache holds it (mincore() on a
				sample of its pages finds at least 95% cached), else O_DIRECT when it
				is large relative to RAM and its file system allows it, else
				BUFFERED. A mapped file has MMAP's caveat below; a file that
				cannot be mapped (a file system that refuses mmap, such as FUSE
				with direct I/O) is read instead */
	GRIST_READ_BUFFERED,
	GRIST_READ_DIRECT,
	GRIST_READ_MMAP,     /* map the files and decode straight out of the page cache: no read
				copies, for data that is (mostly) cached; a page not in the cache is
				read by a page fault in the decoding thread. A file that shrinks (or
				whose storage fails) while mapped faults with SIGBUS: the library
				guards its decoding from mappings and turns that fault into -EIO
				naming the file and byte, from grist_loader_next(), as a read error
				would be. The guard's SIGBUS handler is installed the first time a
				mapped file is decoded and passes every other SIGBUS to the handler
				it replaced (docs/architecture.md, "Mapped files"). A file that
				cannot be mapped is an error naming it (AUTO would read it) */
};
/* read_mode applies to the uring and pread engines; the reference engine always reads buffered. */

/** How records are laid out in a batch. */
enum grist_batch_layout {
	GRIST_LAYOUT_RAGGED = 0, /* records back to back; offsets[num_records + 1] */
	GRIST_LAYOUT_FIXED,      /* every record exactly record_bytes; rows stacked (a static shape) */
	GRIST_LAYOUT_PADDED,     /* every record padded to record_bytes with pad_value; a short final
				    batch is padded with pad rows up to batch_size (Grain's batch_and_pad) */
};

/**
 * Sequence packing (Grain's FirstFitPackIterDataset, BestFitPackIterDataset and
 * ConcatThenSplitIterDataset).
 *
 * With a pack mode set, every record (after map/filter) is a sequence of little-endian
 * unsigned tokens of pack_token_bytes each; the records, in stream order, are packed
 * into rows of pack_length tokens, and a batch is batch_size such rows:
 *
 *   data         rows x pack_length tokens, pack_token_bytes each, little-endian as stored
 *                (record_bytes = pack_length x pack_token_bytes), 0 in padding;
 *   segment_ids  rows x pack_length uint32: 1, 2, ... for the sequences of a row in the
 *                order they were placed, 0 for padding;
 *   positions    rows x pack_length uint32: 0, 1, ... within each segment, 0 for padding.
 *
 * A record whose length is not a multiple of pack_token_bytes stops the loader with
 * -EMSGSIZE naming its file and record. An empty record takes a segment id and no
 * tokens, as in Grain.
 *
 * GRIST_PACK_FIRST_FIT: a record longer than pack_length tokens is cut to its first
 *   pack_length tokens (Grain refuses longer ones and asks for that cut as a map before
 *   the packer). pack_bins rows are open at once; each sequence goes into the first
 *   open row with room. When one fits no open row, the open rows that hold anything are
 *   emitted in order (a "round") and that sequence starts the next round; the last
 *   round is emitted at the end. Equal to FirstFitPackIterDataset(length_struct=
 *   {'tokens': L}, num_packing_bins=pack_bins, shuffle_bins=False) after that cut.
 * GRIST_PACK_BEST_FIT: as first-fit, but each sequence goes into the fullest open row
 *   with room (the lowest on a tie; an unused row counts as empty). Equal to
 *   BestFitPackIterDataset(length_struct={'tokens': L}, num_packing_bins=pack_bins,
 *   shuffle_bins=False) after that cut.
 * GRIST_PACK_CONCAT_SPLIT: sequences are laid end to end and cut every pack_length
 *   tokens, a long one across as many rows as it needs (nothing is dropped); the piece
 *   of a sequence that begins a row gets segment id 1 and positions from 0 again.
 *   Equal to ConcatThenSplitIterDataset(length_struct={'tokens': L}).
 *   pack_bos (concat-split only) makes the first token of every segment of every row
 *   pack_bos_id, as Grain's bos_handling=REPLACE_FIRST_TOKEN_WITH_BOS with bos_features
 *   naming the tokens does: where a row begins inside a sequence, that sequence's token
 *   there is replaced (dropped), and a sequence that already begins with BOS keeps it.
 *   Segment ids and positions do not change. Grain also writes BOS where an empty
 *   sequence is the last of a row with room after it (in that row's padding, segment id
 *   0), and so does grist.
 *
 * pack_piece P (0: off) cuts every record into pieces of P tokens first (the last one
 * shorter), each packed as a sequence of its own, and a record of no tokens into none:
 * MaxText's TokenizeAndChunk before the packer. A first-fit or best-fit checkpoint then
 * also names the piece its round began with (a state of version 3, 64 bytes).
 *
 * Packing runs on the consumer side of the engine, on the records in stream order, so
 * rows are the same for every engine, thread count and queue depth. drop_remainder
 * drops a short last batch of rows. A checkpoint holds the stream position where the
 * current round began (first-fit) or of the sequence being split (concat-split) and
 * the rows of that round already delivered (or the tokens of that sequence already
 * delivered): restoring replays from there and continues with exactly the next batch.
 * Packed checkpoints are never lockstep (hosts consume different amounts), so they
 * restore on the same shard count only. The engine under the packer reads at least 256
 * records per batch (whatever batch_size is), or exactly 32 with a map (a tokenizer: each
 * record is CPU work, and smaller units spread it over the threads); max_batch_bytes bounds those record batches
 * as well as the packed ones, so very long records may need it raised. Packing needs the ragged layout and no device
 * stage: with --device, grist_loader_create() refuses it (-EINVAL).
 */
enum grist_pack_mode {
	GRIST_PACK_NONE = 0,
	GRIST_PACK_FIRST_FIT,
	GRIST_PACK_CONCAT_SPLIT,
	GRIST_PACK_BEST_FIT,
};

/** What a map callback sees of one record. */
struct grist_map_input {
	const uint8_t *data;     /* the record's bytes */
	size_t len;
	uint64_t index;          /* record index within its dataset */
	uint32_t dataset;        /* which dataset of a mixture (0 for a single dataset) */
	uint64_t epoch;          /* the dataset's epoch this record comes from */
	uint64_t random_seed;    /* deterministic per-record seed (Grain's random_map): a hash of the
				    loader seed, the dataset and the record's position in that dataset's
				    own stream (epochs concatenated), so it is the same on any number of
				    hosts or threads */
};

/**
 * grist_map_fn - per-record user transform (map, random_map and filter in one).
 * @ctx:     the map_ctx given in the configuration.
 * @in:      the record.
 * @out:     where to write the output; @out_cap bytes are available (record_bytes for
 *           fixed/padded layouts, map_out_max for ragged).
 * @out_len: set to the number of bytes written.
 *
 * Return: 1 to keep the record, 0 to drop it (filter), or a negative error code,
 * which stops the loader with that error. Called concurrently from decode threads:
 * it must be thread-safe and depend only on its input, or the output would depend
 * on timing.
 */
typedef int (*grist_map_fn)(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t out_cap,
			    size_t *out_len);

/**
 * grist_read_trace_fn - see grist_loader_config.read_trace. @path is the file's path as
 * given; the read covers bytes [@offset, @offset + @len). Must not call into the loader.
 */
typedef void (*grist_read_trace_fn)(void *ctx, const char *path, uint64_t offset, uint64_t len);

/** One dataset: its files (concatenated in order) and its mixing weight. */
struct grist_dataset_spec {
	const char *const *paths;
	size_t num_paths;
	double weight;           /* > 0; only used when several datasets are mixed */
};

/**
 * struct grist_loader_config - everything that defines the batches, then engine knobs.
 * grist_loader_config_init() it, then set what you need (or set options by name with
 * grist_loader_config_set(), grist/options.h); zero means the documented default.
 * A sized struct: fields are only ever appended (docs/architecture.md, "A stable ABI").
 */
struct grist_loader_config {
	size_t size;                    /* sizeof(struct grist_loader_config), set by _init() */
	/* --- what is delivered (changes the output) --- */
	const struct grist_dataset_spec *datasets;
	size_t num_datasets;            /* >= 1; > 1 mixes them by weight */
	uint64_t seed;
	uint64_t epochs;                /* 0 = unbounded */
	bool no_shuffle;                /* read in index order */
	bool same_order_each_epoch;     /* one permutation for every epoch */
	enum grist_granularity granularity;
	uint64_t window_chunks;         /* chunk granularity: chunks shuffled together (default 16) */
	uint64_t shard_index;           /* I of K */
	uint64_t shard_count;           /* K (0 means 1) */
	enum grist_shard_mode shard_mode;
	uint64_t batch_size;            /* >= 1 */
	bool drop_remainder;
	enum grist_batch_layout layout;
	size_t record_bytes;            /* fixed/padded layouts: bytes per row */
	uint8_t pad_value;
	grist_map_fn map;               /* NULL = identity */
	void *map_ctx;
	size_t map_out_max;             /* ragged + map: max output bytes per record (default 1 MiB) */
	uint64_t map_id;                /* identifies the map in checkpoints: restoring with another map_id is refused */
	enum grist_pack_mode pack;      /* sequence packing (see above); batch_size then counts rows */
	size_t pack_length;             /* L: tokens per row, 1 .. 2^24 */
	size_t pack_bins;               /* first-fit, best-fit: rows open at once (0 = batch_size), at most 2^20 */
	unsigned pack_token_bytes;      /* bytes per token: 1, 2 or 4 */

	/* --- how it is executed (never changes the output) --- */
	enum grist_engine_kind engine;
	enum grist_read_mode read_mode;
	unsigned threads;               /* decode threads (default: the CPUs in the affinity mask) */
	unsigned queue_depth;           /* reads in flight per ring (default 64) */
	unsigned prefetch;              /* batches assembled ahead of the consumer (default 4, at most
					   64); also the most batches a caller may hold at once */
	size_t read_ahead_bytes;        /* read buffers, all decode threads together: the bytes the
					   engine may read ahead of decoding, whatever the batch size.
					   Default per thread: 2 x queue_depth x the largest chunk extent,
					   and at least two units' reads, at most 64 MiB; a set value is
					   split evenly over the threads (at least one chunk extent each).
					   Memory, not output: any value gives the same batches */
	size_t max_batch_bytes;         /* no batch is larger (default 64 MiB): a larger one stops the
					   loader with an error, and slot memory is bounded by it. For
					   fixed/padded layouts batch_size x record_bytes must fit */
	const uint8_t *resume_state;    /* a checkpoint from grist_loader_save_state(), or NULL */
	size_t resume_state_len;

	/* --- the OpenCL device stage (builds with OpenCL only) --- */
	const char *device;             /* NULL: host batches. "opencl" (platform/device from the
					   GRIST_OPENCL_DEVICE environment variable, else 0:0),
					   "opencl:P:D", or "opencl:all" to split every batch along its
					   first axis across all devices of platform 0 */
	size_t device_slot_bytes;       /* capacity of a device batch (default: derived from the layout
					   and the largest record the files' footers announce) */
	bool device_host_digest;        /* record each batch's XXH64 on the host before its transfer,
					   in grist_batch.host_digest (for checking device copies) */

	/* --- URLs (grist/remote.h) --- */
	struct grist_remote_options remote; /* this loader's GETs: timeouts, retries, GET sizes, in
					   flight. size 0 (the default) means the process-wide options
					   (grist_remote_set_options()); the remote_* options set it, or
					   grist_remote_options_init() and fields by hand. Opening the
					   files (footers) uses the process-wide options */
	/* --- observing the reads (never changes the output) --- */
	grist_read_trace_fn read_trace; /* NULL, or called with every read request the async engine
					   submits (file path, byte offset, length), in submission order
					   per worker thread; called from the worker threads, concurrently.
					   For replaying the exact reads elsewhere (fio's read_iolog) */
	void *read_trace_ctx;
	/* --- checking (never changes the output of a sound file) --- */
	enum grist_verify verify;       /* GRIST_VERIFY_ALL (default): every hash the format has;
					   GRIST_VERIFY_HEADERS: not the chunks' data hashes (see
					   grist/format.h for what that gives up). Every engine */
	/* --- what is delivered, added later (kept here for older callers' struct sizes) --- */
	size_t pack_piece;              /* packing: cut records into pieces of this many tokens first
					   (0 = whole records, at most 2^24; see above) */
	bool pack_bos;                  /* concat-split: replace the first token of every segment of a
					   row with pack_bos_id (see above); false: tokens as they are */
	uint32_t pack_bos_id;           /* the BOS token; must fit pack_token_bytes */
	/* --- how it is executed, added later --- */
	size_t assembly_bytes;          /* batch slots ahead of the consumer, the batches the caller
					   holds included, in bytes of the expected batch (0: the
					   default: 512 MiB, 64 MiB for URLs at chunk granularity, but
					   at least one slot per thread, and with a map prefetch + 2 x
					   threads). A set value is kept, at least one slot: fewer
					   slots than the threads can fill leave threads idle (speed,
					   not output: any value gives the same batches) */
};

/**
 * grist_loader_config_init() - zero @cfg (every field's default) and set its size.
 * Inline on purpose: the size is the one this caller was compiled with (grist/version.h).
 */
static inline void grist_loader_config_init(struct grist_loader_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
}

/** A delivered batch. Valid until grist_loader_release(). Owned by the library: fields are only appended. */
struct grist_batch {
	uint64_t sequence;              /* 0 for the first batch of the run, continues across resume */
	size_t num_records;             /* real records in the batch */
	size_t num_rows;                /* rows in data: num_records, or batch_size for a padded final batch */
	const uint8_t *data;            /* pinned host memory */
	size_t bytes;                   /* bytes used in data */
	size_t record_bytes;            /* fixed/padded: row size; ragged: 0 */
	const uint64_t *offsets;        /* ragged: num_records + 1 offsets into data; else NULL */
	const uint64_t *indices;        /* per record: index within its dataset */
	const uint32_t *datasets;       /* per record: dataset number */
	void *device;                   /* device mode: the struct grist_device_batch (grist/device.h)
					   holding the cl_mem per device and the cl_event to wait on;
					   data is then NULL (the bytes live in device memory) */
	uint64_t host_digest;           /* device mode with device_host_digest: XXH64 of the bytes */
	/* packing only (else NULL): num_rows x (record_bytes / pack_token_bytes) each; indices,
	   datasets and offsets are then NULL and num_records == num_rows */
	const uint32_t *segment_ids;
	const uint32_t *positions;
	const uint64_t *epochs;         /* per record: the epoch of its dataset it comes from (NULL when
					   packing) */
};

/** Per-stage counters, see grist_loader_stats(). Times in nanoseconds. Fields are only appended. */
struct grist_loader_stats {
	const char *engine;             /* "ref", "uring", "pread" */
	const char *read_mode;          /* "buffered", "direct", "mmap" or "mixed" (files differ) */
	unsigned threads;
	uint64_t batches;               /* delivered to the caller */
	uint64_t records;               /* delivered (packing: rows delivered) */
	uint64_t records_filtered;      /* dropped by the map */
	uint64_t reads_issued;          /* read requests submitted (after coalescing) */
	uint64_t bytes_read;             /* bytes the reads returned; with mmap, the bytes taken from the mapping */
	uint64_t chunks_decoded;
	uint64_t bytes_decoded;
	uint64_t io_wait_ns;            /* time the I/O stage waited for completions */
	uint64_t decode_ns;             /* summed decode + map time over the decode threads */
	uint64_t assemble_ns;           /* laying rows out in batch slots and copying records into them
					   (rows of decoded chunks, and rows packed into batches), summed
					   over threads; values decoded straight into their rows count
					   as decode */
	uint64_t consumer_stall_ns;     /* time grist_loader_next() blocked (packing: the packer runs in
					   next(), so its own work is counted here too) */
	uint64_t producer_stall_ns;     /* time the engine waited for a free batch slot */
	uint64_t queue_occupancy_sum;   /* ready batches seen at each next(), summed (divide by batches) */
	uint64_t memory_bytes;          /* batch slots (index arrays and owned data) and registered read
					   arenas held by the engine now; decoder scratch is not counted */
	uint64_t pack_tokens;           /* packing: real (non-pad) tokens in the delivered rows */
	uint64_t pack_capacity;         /* packing: rows delivered x pack_length; efficiency is
					   pack_tokens / pack_capacity */
	double reads_in_flight_mean;    /* read requests in flight per ring, averaged over time */
	uint64_t reads_in_flight_max;   /* the most in flight on one ring at once */
	bool registered_buffers;        /* io_uring fixed buffers in use */
	bool pinned;                    /* batch slots are mlock'd */
	struct grist_remote_stats remote; /* the GETs of URL datasets (grist/remote.h); zero otherwise */
	struct grist_remote_budget_stats remote_budget; /* their in-flight budget (grist/remote.h) */
	uint64_t slot_maps;             /* batch slot buffers the engine has mapped (made or grown); each
					   is fresh memory whose first touch faults, so a steady state
					   adds none (device mode: only the engine's own host slots) */
};

/**
 * grist_loader_create() - open the datasets, validate the configuration, start the engine.
 * @cfg: the configuration (copied; the paths are copied too).
 * @out: the new loader.
 *
 * Return: 0, or -EINVAL for a bad configuration (batch size 0, shard index >= count,
 * weight <= 0, more shards than records, a pack length, bin count or token width out of
 * range, packing with a non-ragged layout or a device, ...), -ESTALE or -EBADMSG for a resume state
 * that belongs to another configuration or is corrupt, or an error from opening the files.
 * grist_last_error() says which.
 */
GRIST_API int grist_loader_create(const struct grist_loader_config *cfg, struct grist_loader **out);

/**
 * grist_loader_next() - the next batch, in order; blocks until it is ready.
 * @l:   the loader.
 * @out: set to the batch, or to NULL at the end of a finite stream.
 *
 * Return: 0 (check *out), or a negative error (a read, decode or map failure, with a
 * message naming the file and offset). After an error the loader only accepts destroy,
 * except for -EBUSY: the caller already holds prefetch batches; release one and call
 * again (nothing was consumed).
 * Thread-safety: one consumer thread at a time.
 */
GRIST_API int grist_loader_next(struct grist_loader *l, struct grist_batch **out);

/**
 * grist_loader_release() - hand a batch's memory back. A caller may hold up to
 * prefetch batches at once (in device mode too) and release them in any order;
 * grist_loader_next() refuses one more with -EBUSY instead of blocking.
 */
GRIST_API void grist_loader_release(struct grist_loader *l, struct grist_batch *b);

/**
 * grist_loader_release_after() - device mode: hand a batch back once the consumer's
 * work on it has completed.
 * @events:     @num_events cl_event values (as void *) from the device stage's context
 *              that complete when the consumer's kernels stop reading the batch; their
 *              queues must have been flushed. 0 events means "done already".
 *
 * Return: 0, or -EINVAL for a batch that is not held or a NULL event.
 */
GRIST_API int grist_loader_release_after(struct grist_loader *l, struct grist_batch *b, unsigned num_events,
					 void *const *events);

/**
 * grist_loader_device_stage() - device mode: the struct grist_device_stage * (grist/device.h)
 * whose context and devices the consumer's kernels use; NULL in host mode.
 */
GRIST_API void *grist_loader_device_stage(const struct grist_loader *l);

/**
 * grist_loader_save_state() - serialize the position after the last batch returned by next().
 * @buf: where to write; @cap its size (GRIST_STATE_MAX is always enough).
 * @len: set to the bytes written.
 *
 * Batches prefetched but not yet returned are not counted: restoring continues with
 * exactly the batch after the last one returned.
 * Return: 0, or -EINVAL when @cap is too small.
 */
GRIST_API int grist_loader_save_state(const struct grist_loader *l, uint8_t *buf, size_t cap, size_t *len);

/** Upper bound on the size of a saved state. */
#define GRIST_STATE_MAX 256

/**
 * grist_loader_stats_sized() - copy the counters (safe to call at any time from the consumer
 * thread) into @out, of @size bytes: only the fields that fit are written.
 * grist_loader_stats() passes the caller's own sizeof.
 */
GRIST_API void grist_loader_stats_sized(const struct grist_loader *l, struct grist_loader_stats *out, size_t size);

static inline void grist_loader_stats(const struct grist_loader *l, struct grist_loader_stats *out)
{
	grist_loader_stats_sized(l, out, sizeof(*out));
}

/**
 * grist_loader_get_config() - the configuration @l runs with, written into @out, which the
 * caller initialised with grist_loader_config_init() (only the fields its struct holds are
 * written; out->size stays the caller's). It is what was given, with the defaults the
 * loader resolves when it is created filled in: shard_count, pack_bins, prefetch,
 * map_out_max and max_batch_bytes, so a front end that shows or enforces one of them asks
 * here instead of repeating the library's number. What the engine sizes for itself (threads,
 * queue_depth, read_ahead_bytes) stays as given, 0 for its default: grist_loader_stats()
 * reports what it chose. The pointers in it (datasets and their paths, device,
 * resume_state) are the loader's own copies, valid until grist_loader_destroy().
 *
 * Return: 0, or -EINVAL when @out has no size (not initialised).
 * Thread-safety: any thread; the configuration never changes after grist_loader_create().
 */
GRIST_API int grist_loader_get_config(const struct grist_loader *l, struct grist_loader_config *out);

/**
 * grist_loader_num_batches() - how many batches the loader delivers from its start (a
 * resumed one: from its checkpoint) to the end, after sharding, epochs and drop_remainder.
 * @out: set to the count (0 on error).
 *
 * Return: 0, or -EDOM when the count is not fixed in advance: unbounded epochs, a map
 * (it may filter records) or packing (rows depend on the tokens).
 */
GRIST_API int grist_loader_num_batches(const struct grist_loader *l, uint64_t *out);

/** grist_loader_num_records() - records per epoch of dataset @d (before sharding). */
GRIST_API uint64_t grist_loader_num_records(const struct grist_loader *l, size_t d);

/**
 * grist_loader_destroy() - stop the engine and free everything. Safe mid-epoch with
 * reads in flight and batches held: waits for in-flight work, joins every thread.
 */
GRIST_API void grist_loader_destroy(struct grist_loader *l);

#ifdef __cplusplus
}
#endif
#endif
