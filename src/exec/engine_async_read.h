/*
 * Async engine, reading: a planned unit's regions become io requests on the worker's
 * ring, and completions are credited to their regions as they arrive, so decoding can
 * start on a chunk as soon as its region has landed.
 *
 * A worker owns one async_reader (its io object, its read-ahead arena, its counters);
 * each unit in its pipeline owns one async_reads. What a unit's reads brought (the
 * landings and the order they landed in) is this stage's output: decoding reads it.
 */
#ifndef GRIST_EXEC_ENGINE_ASYNC_READ_H
#define GRIST_EXEC_ENGINE_ASYNC_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/engine_async_plan.h"
#include "io/io.h"

#define GRIST_ASYNC_ERRMSG_MAX 512

/* What one region's reads brought. */
struct async_landing {
	const uint8_t *base;   /* the region's bytes: in the read buffer, or in the file's mapping */
	uint64_t got;          /* bytes actually read (less only at EOF) */
	unsigned pieces_left;  /* requests not yet back; 0 = landed (once admitted) */
	int error;
	uint64_t resv;         /* streamed: its space in the arena's stream ring (sequence + 1; 0: none) */
};

/* One unit's reads. */
struct async_reads {
	struct async_landing *land; /* per region of the plan */
	size_t land_cap;
	uint32_t *landed;      /* regions in the order their reads landed */
	size_t nlanded, landed_cap;
	/* private to reading */
	const struct async_plan *plan;
	struct grist_io_req *reqs;
	size_t nreqs, reqs_cap, submitted;
	unsigned pending;      /* requests built and not yet back (submitted or not) */
	uint8_t *buf;          /* read buffer: a part of the arena, or the reader's heap */
	size_t arena_off, arena_len; /* its part of the arena (arena_len 0: none) */
	bool admitted;         /* buffer reserved and requests built */
	bool streamed;         /* each region takes its space when pushed (async_plan.streamed) */
	size_t unreserved;     /* streamed: its regions that have not taken space yet */
	char errmsg[GRIST_ASYNC_ERRMSG_MAX]; /* the message of the latest region that failed */
};

struct async_reservation {
	size_t off, len;
};

/* One streamed region's space in the arena. */
struct async_stream_resv {
	size_t off, len;
	bool freed;
};

struct async_reader {
	const struct grist_engine_params *p;
	const struct async_files *files;
	struct grist_io *io;
	uint32_t **io_slot;    /* [component][file] -> io file slot */
	uint8_t *arena;        /* read buffers, allocated in pipeline order; registered with io_uring when allowed */
	size_t arena_len;
	size_t arena_map_len;  /* bytes mapped for it: arena_len, rounded up to whole huge pages when it has them */
	bool fixed_buffers;    /* the arena is registered */
	/*
	 * A unit whose reads are larger than the whole arena reads here, alone in the
	 * pipeline, so one buffer per worker serves every such unit: kept per unit instead,
	 * each slot of the pipeline would fault in its own (1 MiB records at batch 256:
	 * 256 MiB each, fresh memory every unit of a 3-unit epoch).
	 */
	uint8_t *heap;
	size_t heap_cap;
	/* the arena's live reservations, oldest first (units retire oldest first) */
	struct async_reservation *resv;
	unsigned nslots, resv_head, resv_count;
	struct async_reads **by_slot; /* pipeline slot -> the reads admitted there (completions) */
	/*
	 * Streamed units' regions, oldest first, as a FIFO ring over the same arena: a
	 * region is given back as soon as its chunks are copied out, possibly before older
	 * ones, and its space is reused once every older region is given back too. The
	 * arena holds either whole units (resv) or streamed regions (stream), never both.
	 */
	struct async_stream_resv *stream;
	size_t stream_cap;     /* a power of two; entry of sequence s at s & (stream_cap - 1) */
	uint64_t stream_head, stream_tail;
	size_t stream_owed;    /* entries admitted streamed units may still reserve */
	uint64_t depth_t;      /* when the in-flight count last changed (for its time average) */
	/* counters, read by stats from another thread */
	uint64_t reads, bytes_read;
	uint64_t depth_area, depth_span; /* reads in flight integrated over time (ns), and the time */
	uint64_t depth_max;
};

struct async_reader_config {
	const struct grist_engine_params *p;
	const struct async_files *files;
	enum grist_io_kind io_kind;
	unsigned queue_depth;
	size_t read_ahead;     /* arena bytes */
	unsigned nslots;       /* the worker's pipeline slots */
	struct grist_remote_counters *remote_counters; /* NULL, or every worker's GETs */
};

/* Map the arena, create the io object and add every file to it. Returns 0 or a negative errno code. */
int grist_async_reader_init(struct async_reader *rd, const struct async_reader_config *c);
/* Destroy the io object (by the thread that used it: io_uring rings are single-issuer). */
void grist_async_reader_close_io(struct async_reader *rd);
void grist_async_reader_free(struct async_reader *rd);
/*
 * Add the reader's counters to @out (from any thread), and its reads in flight
 * integrated over time to *@depth_area over *@depth_span (for their mean).
 */
void grist_async_reader_stats(struct async_reader *rd, struct grist_loader_stats *out, uint64_t *depth_area,
			      uint64_t *depth_span);

static inline unsigned grist_async_reader_inflight(const struct async_reader *rd)
{
	return rd->io->inflight;
}

/* A unit's reads before admission: none built, none pending. */
void grist_async_reads_reset(struct async_reads *r);

/*
 * Admit the reads of plan @pl (the newest unit of the pipeline, at pipeline slot @slot):
 * reserve its read buffer in the arena and build its requests. Reads that do not fit
 * stay unadmitted until older units retire; @alone in the pipeline they read into heap
 * memory instead. A streamed plan reserves nothing here (each region does when it is
 * pushed) but waits until no whole unit holds arena space. Returns 0 (admitted or not:
 * grist_async_reads_admitted()) or -ENOMEM.
 */
int grist_async_admit(struct async_reader *rd, struct async_reads *r, const struct async_plan *pl, unsigned slot,
		      bool alone);

/*
 * Push @r's queued requests as far as the ring's caps allow (and, streamed, the arena:
 * a region takes its space as its first request goes); *@full when either stopped it.
 * Returns 0 or an io error.
 */
int grist_async_push(struct async_reader *rd, struct async_reads *r, bool *full);

/*
 * Reap completions (waiting for at least @min_wait of them, when any are in flight)
 * and credit them to their regions. Returns how many came back, or an io error.
 */
int grist_async_reap(struct async_reader *rd, unsigned min_wait);

/*
 * Streamed units: region @region of @r has been copied out (its chunks are done), so
 * its space in the arena is free again. Nothing when it holds none.
 */
void grist_async_reads_release_region(struct async_reader *rd, struct async_reads *r, uint32_t region);

/* Drop @r's requests not yet submitted; what is in flight still comes back. */
void grist_async_reads_cancel_unsubmitted(struct async_reads *r);
/* The io object failed: none of @r's requests will come back. */
void grist_async_reads_abandon(struct async_reads *r);
/* @r's unit retires (nothing pending): its part of the arena is free again. */
void grist_async_reads_retire(struct async_reader *rd, struct async_reads *r);
void grist_async_reads_free(struct async_reads *r);

static inline bool grist_async_reads_admitted(const struct async_reads *r)
{
	return r->admitted;
}

/* Requests built and not yet back. */
static inline unsigned grist_async_reads_pending(const struct async_reads *r)
{
	return r->pending;
}

/* Its regions take arena space as they are pushed (a unit above half the arena). */
static inline bool grist_async_reads_streamed(const struct async_reads *r)
{
	return r->streamed;
}

/* Requests built for the unit (its reads once admitted). */
static inline unsigned grist_async_reads_count(const struct async_reads *r)
{
	return (unsigned)r->nreqs;
}

/* Every request built has gone to the ring. */
static inline bool grist_async_reads_all_submitted(const struct async_reads *r)
{
	return r->submitted == r->nreqs;
}

#endif
