/*
 * The async engine's shared state: what its worker threads and its consumer share, under
 * one lock, except a unit's publication and the consumer's progress, which are atomics
 * (see "Publishing without the lock" below).
 */
#ifndef GRIST_EXEC_ENGINE_ASYNC_SHARED_H
#define GRIST_EXEC_ENGINE_ASYNC_SHARED_H

/*
 * The async engine is a worker loop and one file per stage of a unit's life, each
 * owning its own state behind its own header, called in one direction:
 *
 *   engine_async.c           setup, the worker loop (plan -> read -> decode), claiming
 *                            and publishing units, stats, stop
 *   engine_async_files.c     the dataset files as the engine reads them (bottom)
 *   engine_async_plan.c      a unit's items, its chunks, coalesced read regions
 *   engine_async_read.c      a worker's ring and arena; submitting and reaping a unit's reads
 *   engine_async_decode.c    decoding a unit's landed chunks into its slot
 *   engine_async_consumer.c  batch slots, and the consumer: units in order, packing
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "exec/engine_async_decode.h"
#include "exec/engine_async_files.h"
#include "exec/engine_async_plan.h"
#include "exec/engine_async_read.h"

/*
 * Publishing without the lock. A unit is claimed, planned, read and decoded by one
 * worker, then published by a release store of `published` = number + 1; the consumer
 * owns it from its acquire load of that value until it advances consumed_units (a
 * release store), after which a claimer may reuse the ring entry. So the consumer never
 * takes the lock to learn that a unit is done, and a publisher takes it only to wake a
 * consumer that said it sleeps (consumer_wake_at), once per wake-up batch rather than
 * once per unit: at one 64 KiB record per unit the lock and a wake-up per unit cost a
 * third of the CPU per GB (futex waits and context switches, issue 22).
 */
struct unit {
	uint64_t number;
	uint64_t published;      /* number + 1 once done or failed (atomic: release / acquire) */
	uint64_t first_j, end_j; /* shard positions [first_j, end_j) */
	struct grist_slot *slot; /* taken when its decoding starts, not when it is claimed */
	size_t next_row;         /* packer progress */
	int error;
	char errmsg[GRIST_ASYNC_ERRMSG_MAX];
};

/*
 * One unit in a worker's pipeline: its plan, its reads, and how far its decoding got,
 * each owned by its stage.
 *
 * Life: planned -> admitted (read buffer reserved, requests built) -> requests pushed
 * as the ring has room -> regions land one by one -> decoded (only at the head of the
 * pipeline, as its regions land) -> published -> retired once no read is in flight.
 */
struct work {
	struct unit *u;
	struct async_plan plan;
	struct async_reads reads;
	struct async_decode dec;
	bool decoding;        /* slot taken, rows being made */
	bool published;
	int error;
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
	bool placed;          /* run on cpus (exec/placement.c), set before the thread starts */
	cpu_set_t cpus;
	struct async_reader reader;
	struct async_decoder decoder;
	struct grist_stream_cursor *cursor;
	/* the pipeline: a ring of works, oldest (the only one being decoded) at head */
	struct work *works;
	unsigned works_cap, head, count;
	/*
	 * The works at the head whose requests have all gone to the io object: push_pipeline()
	 * starts after them, so tending the ring costs O(works not yet pushed), not O(count)
	 * (a URL worker keeps hundreds of units of 611-byte reads in flight).
	 */
	unsigned pushed;
	uint64_t tended_ns;   /* when the reads were last tended while decoding */
	bool torn_down;       /* its memory given back (by itself when it ends, else by stop()) */

	/* counters, read by stats() from another thread */
	uint64_t io_wait_ns, producer_stall_ns;
} __attribute__((aligned(128))); /* workers sit side by side: no cache line is shared between two of them */

struct async_engine {
	const struct grist_engine_params *p;
	enum grist_io_kind io_kind;
	const char *name;
	unsigned nworkers;
	struct worker *workers;
	struct async_files files;
	struct grist_remote_counters *remote_ctr; /* every worker's GETs, when any_remote */
	size_t unit_items;          /* U */
	size_t ncache;              /* decoders per worker */
	unsigned queue_depth;       /* reads in flight per ring */
	size_t read_ahead;          /* read buffer bytes per worker */

	pthread_mutex_t lock;
	pthread_cond_t claim_cv;    /* workers wait for a unit they may claim or start decoding */
	pthread_cond_t done_cv;     /* the consumer waits for the next unit */
	pthread_cond_t stop_cv;     /* workers that have ended wait for stop() to help free the slots */
	unsigned claim_waiters;     /* workers waiting on claim_cv (under lock): the consumer wakes them only then */
	/*
	 * 0 while the consumer runs; unit + 1 while it sleeps until that unit is published
	 * (atomic, seq_cst against `published`). Set and cleared under the lock.
	 */
	uint64_t consumer_wake_at;
	unsigned wake_batch;        /* the consumer sleeps until up to this many more units are done */
	unsigned setups_left;       /* workers still making their readers (start() waits on done_cv) */
	int setup_error;            /* the first one's failure, and its message */
	char setup_msg[GRIST_ASYNC_ERRMSG_MAX];
	bool stop, failed, aborted;
	uint64_t next_unit;         /* next unit to claim */
	uint64_t next_first_j;      /* shard position where that unit starts */
	struct grist_stream_cursor *plan_cursor; /* chunk granularity: finds window ends (under lock) */
	size_t max_unit_items;
	size_t row_bytes_hint;      /* expected bytes per row, to size slots once */
	uint64_t positions;         /* the run's positions (0: unbounded): no slot is sized for more rows */
	uint64_t total_units;       /* UINT64_MAX when unbounded */
	uint64_t consumed_units;    /* units the consumer has finished with (written under lock; atomic for readers without it) */
	unsigned nunits;            /* claim window: unit u may be claimed once u - nunits is consumed */
	unsigned assembly;          /* slot window: unit u may take a slot once u - assembly is consumed */
	/*
	 * Unit slots the caller holds (handed over, or a consumed unit's slot that views of
	 * it keep alive), under the lock; when slots are counted in bytes (assembly_in_bytes)
	 * they shrink the assembly window (wait_assembly()).
	 */
	unsigned slots_with_caller;
	bool assembly_in_bytes;
	struct unit *units;         /* ring of nunits units, unit u at u % nunits */

	struct slot_pool host_pool, dev_pool;
	struct grist_slot *pack;    /* the batch the packer is filling */
	struct grist_slot_tally slots; /* what all slots own and have mapped, kept by the slots themselves */
	uint64_t queue_occupancy;
	uint64_t pack_ns;           /* the packer's row copies (under the lock when added) */
};

/*
 * How many units from the oldest unconsumed one may hold slots now (the oldest always
 * may, whatever this says): the assembly window, less the slots the caller holds when
 * slots are counted in bytes (slot_window(), engine_async.c). Lock held, or
 * !assembly_in_bytes.
 */
static inline unsigned grist_async_slot_window(const struct async_engine *e)
{
	if (!e->assembly_in_bytes)
		return e->assembly;
	return e->assembly > e->slots_with_caller ? e->assembly - e->slots_with_caller : 0;
}

/* ---- slots and the consumer (engine_async_consumer.c) ---- */

/*
 * A slot for a unit (@deliver: it may be handed over as is, so it comes from the slot
 * provider when there is one) or a view (@view). A fresh one is sized for @rows rows (0:
 * a typical unit's). Returns 0 or a negative errno code.
 */
int grist_async_slot_take(struct async_engine *e, bool deliver, bool view, size_t rows, struct grist_slot **out);

/* Back to its pool (one the caller held: no longer counted, see wait_assembly()). Called with e->lock held. */
void grist_async_slot_put_locked(struct async_engine *e, struct grist_slot *s);

/* A slot that will not be delivered: provider memory goes back unsubmitted. e->lock held. */
void grist_async_slot_discard_locked(struct async_engine *e, struct grist_slot *s);

void grist_async_pool_free(struct slot_pool *pool);

/* The engine ops' next() and release(). */
int grist_async_next(void *engine, struct grist_slot **out);
void grist_async_release(void *engine, struct grist_slot *s);

#endif
