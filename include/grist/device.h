/*
 * grist/device.h - the OpenCL device stage: pinned host slots, double-buffered
 * non-blocking host->device transfers.
 *
 * The stage owns a ring of `slots` batch slots. Each slot is host memory the
 * producer (the loader) assembles a batch into, plus per selected device the
 * device memory the consumer's kernels read. The life of a slot:
 *
 *   IDLE --acquire--> FILLING --submit--> READY --next--> HELD --release--> IDLE
 *
 *   - acquire() hands the producer a slot's host pointer. It blocks until some
 *     slot is IDLE and its earlier transfer has finished, so the host bytes
 *     are never overwritten while a copy still reads them.
 *   - submit() enqueues the transfer on a dedicated in-order transfer queue per
 *     device, flushes it and returns at once (no host wait). With one device
 *     a ragged batch's row offsets travel in the same write as its rows (the
 *     slot's buffer holds both), so a batch costs one command and one flush.
 *   - next() returns submitted batches in submission order, each with the
 *     cl_event the consumer's own queue must wait on before reading.
 *   - release() hands the batch back together with the consumer's completion
 *     events. A slot's device memory is written again only after those events
 *     completed, so a batch is never overwritten while the consumer uses it.
 *     Batches may be held several at a time and released in any order.
 *
 * Two strategies sit behind one internal table, chosen at create time from
 * what the devices report (CL_DEVICE_HOST_UNIFIED_MEMORY, device type):
 *   - GRIST_DEVICE_STAGING: a pinned staging buffer (CL_MEM_ALLOC_HOST_PTR,
 *     mapped once) per slot and a non-blocking clEnqueueWriteBuffer into a
 *     device buffer per device. The right choice for discrete GPUs.
 *   - GRIST_DEVICE_MAPPED: the device buffer itself is CL_MEM_ALLOC_HOST_PTR;
 *     acquire() maps it with CL_MAP_WRITE_INVALIDATE_REGION and submit()
 *     unmaps it. On host-unified devices (CPU devices, integrated GPUs) no
 *     byte is copied. Chosen when every selected device is host-unified.
 * The environment variable GRIST_DEVICE_STRATEGY=staging|mapped overrides
 * the automatic choice (for tests and benchmarks); the config field does too.
 *
 * Splitting: with N > 1 devices, device k receives rows
 * [k*rows/N, (k+1)*rows/N) of every batch, so rows must be a multiple of N.
 *
 * Memory: a slot gets its host and device buffers the first time it is
 * acquired, and they only grow (to the largest batch asked for, at most
 * slot_bytes); a released slot whose transfer finished is reused first. So a
 * ring sized for the worst case costs only the slots a run keeps busy, and
 * the steady state allocates nothing. stats.memory_bytes says what is held.
 *
 * Thread-safety: acquire/submit/close (producer) and next/release (consumer)
 * may run on different threads, and each may be called from several threads.
 * create and destroy must not race with any other call on the same stage.
 *
 * Only built when grist is configured with OpenCL (GRIST_HAVE_OPENCL).
 */
#ifndef GRIST_DEVICE_H
#define GRIST_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "grist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum grist_device_strategy {
	GRIST_DEVICE_AUTO = 0,	/* decide from the devices, or GRIST_DEVICE_STRATEGY */
	GRIST_DEVICE_STAGING,	/* pinned staging buffer + async clEnqueueWriteBuffer */
	GRIST_DEVICE_MAPPED,	/* map the device buffer itself: zero copy when host-unified */
};

/* grist_device_config_init(), then set what you need. A sized struct. */
struct grist_device_config {
	size_t size;		/* sizeof(struct grist_device_config), set by _init() */
	/*
	 * Which devices: "P:D" (platform P, device D), "P:D,D,..." (several
	 * devices of platform P), "P:all" or "all" (every device of platform P,
	 * or of platform 0). NULL means the environment variable
	 * GRIST_OPENCL_DEVICE, or "0:0" when that is unset.
	 */
	const char *selector;
	unsigned slots;		/* ring size, 2..4096 (each slot in use has memory on every device) */
	size_t slot_bytes;	/* largest batch in bytes, > 0 */
	size_t max_rows;	/* largest batch in rows (first axis), > 0 */
	enum grist_device_strategy strategy;	/* GRIST_DEVICE_AUTO unless forcing one */
};

/**
 * grist_device_config_init() - zero @cfg (every field's default) and set its size.
 * Inline on purpose: the size is the one this caller was compiled with (grist/version.h).
 */
static inline void grist_device_config_init(struct grist_device_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
}

/* One device's share of a batch. Owned by the stage, valid until release. */
struct grist_device_part {
	cl_device_id device;
	/*
	 * The buffer holding this device's rows, starting at byte @offset.
	 * STAGING: a buffer of this device alone, @offset is always 0.
	 * MAPPED: the slot's one buffer shared by all devices of the context,
	 * @offset is where this device's first row starts (0 with one device).
	 */
	cl_mem data;
	size_t offset;
	size_t bytes;		/* bytes of this device's rows */
	size_t rows;		/* rows on this device */
	/*
	 * Ragged batches only (NULL otherwise): rows + 1 byte offsets of this
	 * device's rows, rebased so the first is 0 and the last is @bytes (add
	 * @offset to index @data). @row_offsets is host memory; @row_offsets_mem
	 * holds the same values as cl_ulong on the device, ready with @ready.
	 */
	const uint64_t *row_offsets;
	cl_mem row_offsets_mem;
	/* Complete once @data (and @row_offsets_mem) hold the batch. Put it in
	 * the wait list of the first command that reads them. Stage-owned. */
	cl_event ready;
};

struct grist_device_batch {
	unsigned slot;		/* the slot it lives in, for release */
	uint64_t seq;		/* submission number, 0 for the first batch */
	size_t bytes;		/* whole batch */
	size_t rows;		/* whole batch */
	unsigned num_parts;	/* one per device */
	const struct grist_device_part *parts;
};

/*
 * Where the stage's time goes. Times are summed over the threads that made the
 * calls; the occupancy figures are sampled at every submit (divide the sums by
 * @batches for means).
 */
struct grist_device_stats {
	uint64_t batches;		/* batches submitted */
	uint64_t bytes;			/* payload bytes submitted */
	uint64_t producer_wait_ns;	/* time acquire() took in all (slot_wait_ns + fill_wait_ns + bookkeeping) */
	uint64_t consumer_wait_ns;	/* time next() waited for a submitted batch */
	uint64_t create_ns;		/* grist_device_stage_create(): platform, context, queues, slot memory */
	uint64_t acquires;		/* slots handed out by acquire() */
	uint64_t acquires_blocked;	/* of those, how many found no IDLE slot and waited for a release */
	uint64_t slot_wait_ns;		/* time acquire() waited for an IDLE slot (the ring was full) */
	uint64_t fill_wait_ns;		/* time acquire() waited before the slot could be written: its last
					   transfer (staging), the consumer's events and the map (mapped) */
	uint64_t commands;		/* OpenCL commands submit() enqueued (writes, unmaps, markers) */
	uint64_t enqueue_ns;		/* time submit() spent in clEnqueue* calls */
	uint64_t enqueue_max_ns;	/* the longest submit()'s clEnqueue* time */
	uint64_t flush_ns;		/* time submit() spent in clFlush */
	uint64_t flush_max_ns;		/* the longest submit()'s clFlush time */
	uint64_t hold_ns;		/* time the consumer held batches, next() to release(), summed */
	uint64_t in_flight_sum;		/* submitted and not released (READY + HELD), at each submit */
	uint64_t in_flight_max;
	uint64_t filling_sum;		/* acquired and not yet submitted (FILLING), at each submit */
	uint64_t filling_max;
	uint64_t slots;			/* the ring's size */
	uint64_t slots_allocated;	/* slots that have their memory (made on first use) */
	uint64_t memory_bytes;		/* host and device bytes the slots hold now */
	uint64_t slots_grown;		/* times a slot's memory was made or remade larger */
};

struct grist_device_stage;

/**
 * grist_device_stage_create() - open the selected devices and allocate the slots.
 * @cfg: see struct grist_device_config.
 * @out: receives the stage.
 *
 * Creates one context over the selected devices and one in-order transfer
 * queue per device. Slot memory is made on first use (see Memory above);
 * create checks that slot_bytes fits every device's largest buffer.
 *
 * Return: 0, or
 *   -ENODEV no OpenCL platform, or the selector names a platform or device
 *           that does not exist (the message lists what exists);
 *   -EINVAL a malformed selector, slots < 2, slot_bytes or max_rows of 0 or
 *           beyond what a device can allocate, an unknown strategy;
 *   -ENOMEM host or device memory ran out;
 *   other negative codes for OpenCL failures (the message names the CL error).
 * Thread-safety: safe; the stage is not shared until this returns.
 */
GRIST_API int grist_device_stage_create(const struct grist_device_config *cfg,
					struct grist_device_stage **out);

/**
 * grist_device_stage_destroy() - wait for every outstanding transfer and
 * consumer event, then free all host and device memory. NULL is a no-op.
 * Batches still held by the consumer become invalid.
 */
GRIST_API void grist_device_stage_destroy(struct grist_device_stage *s);

/** grist_device_stage_num_devices() - how many devices a batch is split across. */
GRIST_API unsigned grist_device_stage_num_devices(const struct grist_device_stage *s);

/** grist_device_stage_device() - the device of part @k (k < num_devices). */
GRIST_API cl_device_id grist_device_stage_device(const struct grist_device_stage *s, unsigned k);

/**
 * grist_device_stage_context() - the context every stage buffer and event lives
 * in. Create the consumer's queues and kernels in it. Owned by the stage.
 */
GRIST_API cl_context grist_device_stage_context(const struct grist_device_stage *s);

/** grist_device_stage_strategy() - the strategy in use (never AUTO). */
GRIST_API enum grist_device_strategy grist_device_stage_strategy(const struct grist_device_stage *s);

/** grist_device_strategy_name() - "staging", "mapped" or "auto". */
GRIST_API const char *grist_device_strategy_name(enum grist_device_strategy strategy);

/**
 * grist_device_stage_acquire() - get a free slot to assemble a batch into.
 * @slot: receives the slot index, to pass to submit.
 * @host_ptr: receives slot_bytes of writable host memory (pinned or mapped).
 *
 * Blocks until a slot is IDLE (released by the consumer) and its last transfer
 * finished. A slot whose transfer is known to have finished is taken first
 * (the one released last), then the one released longest ago, then one that
 * has no memory yet. With the mapped strategy it also waits for the
 * consumer's events of that slot, since the producer is about to write the
 * very memory the consumer read. With the staging strategy those events are
 * instead made prerequisites of the next transfer into the slot, so the
 * producer does not wait for the consumer.
 *
 * Return: 0; -ECANCELED after grist_device_stage_close(); an earlier failure's
 * code if the stage failed; -ENOMEM when a slot's memory cannot be made (the
 * stage fails); other OpenCL failures mapped to negative codes.
 */
GRIST_API int grist_device_stage_acquire(struct grist_device_stage *s, unsigned *slot, void **host_ptr);

/**
 * grist_device_stage_acquire_bytes() - acquire() for a batch of at most @bytes.
 * @bytes: 0..slot_bytes; @host_ptr gets at least this much writable memory.
 *
 * For producers that know a batch's size before they write it: slots then
 * grow to the largest batch seen (plus a quarter) instead of slot_bytes.
 *
 * Return: as acquire(); -EINVAL when @bytes > slot_bytes.
 */
GRIST_API int grist_device_stage_acquire_bytes(struct grist_device_stage *s, size_t bytes, unsigned *slot,
					       void **host_ptr);

/**
 * grist_device_stage_submit() - the batch in @slot is complete; start its transfer.
 * @slot: a slot returned by acquire and not yet submitted.
 * @bytes: batch size, <= slot_bytes.
 * @rows: rows along the first axis, 1..max_rows, a multiple of the device count.
 * @row_offsets: NULL when every row has bytes/rows bytes (bytes % rows must be
 *   0), or rows + 1 non-decreasing byte offsets from 0 to @bytes (ragged rows).
 *
 * Enqueues non-blocking transfers on each device's transfer queue, flushes
 * them and returns without waiting. Device k gets rows
 * [k*rows/N, (k+1)*rows/N) and, for ragged batches, its own rebased offsets.
 *
 * Return: 0; -EINVAL for a bad slot or bad sizes (the slot stays with the
 * producer, which may submit it again); other negative codes for OpenCL
 * failures, after which the stage is failed and every call returns the code.
 */
GRIST_API int grist_device_stage_submit(struct grist_device_stage *s, unsigned slot, size_t bytes,
					size_t rows, const uint64_t *row_offsets);

/**
 * grist_device_stage_cancel() - give an acquired slot back without submitting it
 * (the producer decided not to deliver what it assembled there).
 *
 * Return: 0; -EINVAL when @slot is not acquired-and-unsubmitted; OpenCL failures.
 */
GRIST_API int grist_device_stage_cancel(struct grist_device_stage *s, unsigned slot);

/**
 * grist_device_stage_close() - the producer will submit nothing more. next()
 * returns 0 once the submitted batches are drained; acquire() returns -ECANCELED.
 */
GRIST_API void grist_device_stage_close(struct grist_device_stage *s);

/**
 * grist_device_stage_next() - the next submitted batch, in submission order.
 * @out: receives the batch; its parts stay valid until it is released.
 *
 * Blocks until a batch is submitted (or the stage is closed). Does not wait
 * for the transfer: make the consumer's first command wait on each part's
 * ready event. No clFinish is involved.
 *
 * Return: 1 with a batch, 0 when the stage is closed and drained, or a
 * negative code if the stage failed.
 */
GRIST_API int grist_device_stage_next(struct grist_device_stage *s, struct grist_device_batch *out);

/**
 * grist_device_stage_release() - hand a batch from next() back to the stage.
 * @b: the batch as next() returned it.
 * @num_done: number of events in @done; 0 when the consumer is already done.
 * @done: events that complete when the consumer stopped reading the batch
 *   (its kernels on every device), from the stage's context. They are
 *   retained; the caller keeps its own references. The queues they were
 *   enqueued on must have been flushed (clFlush), because the transfer
 *   queues wait on them.
 *
 * Return: 0; -EINVAL when @b is not a batch currently held (released twice,
 * never returned by next) or an event is NULL.
 */
GRIST_API int grist_device_stage_release(struct grist_device_stage *s, const struct grist_device_batch *b,
					 unsigned num_done, const cl_event *done);

/** grist_device_stage_stats() - copy the counters so far. Thread-safe. */
GRIST_API void grist_device_stage_stats_sized(struct grist_device_stage *s, struct grist_device_stats *out,
					      size_t size);

/* grist_device_stage_stats() passes the caller's sizeof: only the fields that fit are written. */
static inline void grist_device_stage_stats(struct grist_device_stage *s, struct grist_device_stats *out)
{
	grist_device_stage_stats_sized(s, out, sizeof(*out));
}

#ifdef __cplusplus
}
#endif
#endif
