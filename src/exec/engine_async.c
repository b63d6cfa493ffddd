/*
 * The async engine: worker threads, each owning an io object (an io_uring ring, or a
 * pread pool), turn units of the shard stream into batches.
 *
 * The shard stream is cut into units of U consecutive positions (U = batch size for
 * record granularity; a multiple of it covering about one window of chunks for chunk
 * granularity, so each chunk of a window is read and decoded once per unit). Unit u is
 * a pure function of (configuration, u), so any worker can build it.
 *
 * Read depth does not depend on U. Each worker keeps a pipeline of units:
 *
 *   claim u -> plan its items, chunks and coalesced regions -> admit: reserve its read
 *   buffer in the worker's read-ahead arena -> its requests go out, oldest unit first,
 *   whenever the ring has room -> ... -> the oldest unit takes a slot and is decoded as
 *   its regions land (chunk sizes, then rows placed in stream order, then each chunk
 *   decompressed once and copied to its rows; with a map: items mapped in stream order)
 *   -> publish -> retire once none of its reads is in flight.
 *
 * A worker claims another unit while the ring is below queue_depth and everything
 * planned has been submitted, so the ring stays full however small the units are; the
 * arena (read_ahead_bytes) bounds how many bytes are read ahead of decoding. Decoding
 * pauses every few tens of microseconds for the worker to tend the ring, so landed reads
 * are replaced at once. N workers give N rings (one per thread, SINGLE_ISSUER), which is
 * also what parallelises the kernel's copies on warm page-cache data.
 *
 * The worker loop (worker_main) is the only place the stages meet, and it calls them in
 * one direction: plan (engine_async_plan.c) -> read (engine_async_read.c) -> decode
 * (engine_async_decode.c). Each stage owns its state (the plan, a unit's reads and the
 * worker's ring, a unit's decoding progress and the worker's decoders) behind its own
 * header, and a later stage only reads what an earlier one produced.
 *
 * The consumer takes units strictly in order. When U == batch size and nothing was
 * filtered, a unit's slot *is* the batch and is handed over without a copy; otherwise
 * a packer copies rows into batch slots. Either way a batch holds exactly the rows the
 * reference engine would put there, so the output never depends on thread count,
 * queue depth, read-ahead, backend or completion order.
 *
 * Memory is bounded by the configuration (the windows and budgets: grist_engine_size(),
 * engine_sizing.c): at most nunits units are claimed and not yet consumed, so at most
 * that many slots exist, each taken when its unit's decoding starts; read buffers are
 * each worker's arena, plus one unit's reads in heap memory when a unit alone is larger
 * than the arena. On top come the batches the consumer holds.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpus.h"
#include "common/error.h"
#include "common/thread.h"
#include "exec/engine_async_shared.h"
#include "exec/placement.h"
#include "format/dataset.h"
#include "io/remote.h"

/* ---- claiming and publishing units ---- */

/*
 * Items of the unit starting at @first, record granularity. When the consumer does not
 * see unit sizes (a packer re-cuts the records into rows), a map makes each unit CPU work
 * worth balancing, and the stream is finite, a unit takes at most an equal share of what
 * is left, split two ways per worker: the last units of a run shrink, down to
 * TAIL_ITEMS_MIN records, so the workers finish together instead of some decoding a whole
 * last unit while the others have none. With units of 32 tokenized texts and 16 workers
 * that tail idled about 9% of the workers' time over a 5056-text run (docs/tuning.md,
 * "Text at 16 threads on 2 cores"). Only the sizes change: the records and their order
 * do not.
 */
#define TAIL_ITEMS_MIN 4

static uint64_t tail_items(const struct async_engine *e, uint64_t first, uint64_t len)
{
	uint64_t share, ways = 2 * (uint64_t)e->nworkers;

	if (!e->p->unit_sizes_unseen || !e->p->layout->map || len == UINT64_MAX || first >= len)
		return e->unit_items;
	share = (len - first + ways - 1) / ways;
	if (share < TAIL_ITEMS_MIN)
		share = TAIL_ITEMS_MIN; /* units of one text each cost more units than they save */
	return share < e->unit_items ? share : e->unit_items;
}

/*
 * Where the unit starting at shard position @first ends. Record granularity: one
 * batch. Chunk granularity: at a window boundary of the plan, so every chunk of a
 * window is read and decoded once, taking whole windows until the unit holds at
 * least a batch (and at most max_unit positions). Called with e->lock held: the
 * planning cursor is shared by the claimers.
 */
static uint64_t unit_end_locked(struct async_engine *e, uint64_t first, uint64_t len)
{
	struct grist_stream_item it;
	uint64_t end = first, we;

	if (!e->plan_cursor)
		goto fixed;
	while (end - first < e->unit_items && end < len) {
		if (grist_stream_cursor_seek(e->plan_cursor, end) || grist_stream_next(e->plan_cursor, &it) != 1)
			goto fixed;
		we = grist_stream_cursor_window_end(e->plan_cursor);
		if (!we)
			goto fixed;
		end = we;
	}
	if (end - first > e->max_unit_items)
		end = first + e->max_unit_items;
	return end;
fixed:
	end = first + tail_items(e, first, len);
	return end > len || end < first ? len : end;
}

/*
 * Wait on claim_cv (e->lock held): producer stall, timed from the first wait (*@t0 = 0
 * before). Counted in claim_waiters, so the consumer wakes workers only when one waits.
 */
static void stall_wait(struct async_engine *e, uint64_t *t0)
{
	if (!*t0)
		*t0 = grist_now_ns();
	e->claim_waiters++;
	pthread_cond_wait(&e->claim_cv, &e->lock);
	e->claim_waiters--;
}

static void stall_end(struct worker *wk, uint64_t t0)
{
	if (t0)
		grist_counter_add(&wk->producer_stall_ns, grist_now_ns() - t0);
}

/*
 * Claim the next unit if the claim window allows; wait for room when @wait. NULL with
 * *@ended set: the stream is over, or the loader stops or failed (no unit will come).
 */
static struct unit *claim_unit(struct worker *wk, bool wait, bool *ended)
{
	struct async_engine *e = wk->e;
	uint64_t t0 = 0, u_no, len = grist_stream_length(e->p->stream);
	struct unit *u = NULL;

	*ended = false;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		if (e->stop || e->failed) {
			*ended = true;
			break;
		}
		if (e->next_first_j >= len) {
			/* the end of a finite stream: now the consumer knows how many units there are */
			if (e->total_units == UINT64_MAX) {
				e->total_units = e->next_unit;
				pthread_cond_broadcast(&e->done_cv);
				/* every unit already taken: no consume will tell the ended workers */
				if (e->consumed_units == e->total_units)
					pthread_cond_broadcast(&e->stop_cv);
			}
			*ended = true;
			break;
		}
		if (e->next_unit < e->consumed_units + e->nunits) {
			u_no = e->next_unit;
			__atomic_store_n(&e->next_unit, u_no + 1, __ATOMIC_RELAXED); /* also peeked at without the lock */
			u = &e->units[u_no % e->nunits];
			u->number = u_no; /* `published` keeps the previous user's number + 1 until this one is done */
			u->error = 0;
			u->errmsg[0] = '\0';
			u->next_row = 0;
			u->slot = NULL;
			u->first_j = e->next_first_j;
			u->end_j = unit_end_locked(e, u->first_j, len);
			e->next_first_j = u->end_j;
			break;
		}
		if (!wait)
			break;
		stall_wait(e, &t0);
	}
	pthread_mutex_unlock(&e->lock);
	stall_end(wk, t0);
	return u;
}

/*
 * Publish @u: done, or failed with @error. A read that failed left its message with the
 * unit's reads (@read_msg, may be empty): it names the file and offset, so it is the
 * message the consumer reports in order.
 */
static void publish_unit(struct async_engine *e, struct unit *u, int error, const char *read_msg)
{
	if (u->slot)
		u->slot->stream_end = u->end_j;
	if (error) {
		/* rare: under the lock, which also stops the claimers and wakes everyone */
		pthread_mutex_lock(&e->lock);
		if (read_msg[0])
			snprintf(u->errmsg, sizeof(u->errmsg), "%s", read_msg);
		if (error == -ECANCELED && !u->errmsg[0])
			snprintf(u->errmsg, sizeof(u->errmsg), "loader stopped");
		u->error = error;
		if (!u->errmsg[0])
			snprintf(u->errmsg, sizeof(u->errmsg), "%s", grist_last_error());
		e->failed = true;
		__atomic_store_n(&u->published, u->number + 1, __ATOMIC_SEQ_CST);
		pthread_cond_broadcast(&e->claim_cv);
		pthread_cond_broadcast(&e->done_cv);
		pthread_mutex_unlock(&e->lock);
		return;
	}
	/*
	 * The consumer sleeps only for the one unit it named in consumer_wake_at (seq_cst
	 * against this store: see engine_async_shared.h and current_unit_locked()), so every
	 * other unit is published without the lock and without a wake-up, which would only
	 * take a worker's core from under it for the consumer to go back to sleep.
	 */
	uint64_t id = u->number + 1; /* once published, the unit is the consumer's, then a claimer's */

	__atomic_store_n(&u->published, id, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&e->consumer_wake_at, __ATOMIC_SEQ_CST) == id) {
		/*
		 * The lock only orders this wake-up after the consumer's wait has begun (it holds
		 * the lock from its check of `published` until it waits); the signal comes after
		 * it is released. Signalled under the lock, the woken consumer took the core of
		 * the worker holding it (a wake-up preempts), and every worker that came to claim
		 * a unit slept until that one ran again: at 16 threads on 2 cores the workers
		 * were blocked on this lock 4-11% of their time, and after this change not at all.
		 */
		pthread_mutex_lock(&e->lock);
		pthread_mutex_unlock(&e->lock);
		pthread_cond_signal(&e->done_cv); /* only the consumer waits there */
	}
}

/*
 * Whether unit @u may take a slot now. It must be within the assembly window, so at
 * most `assembly` units hold slots however far the reads run ahead (device mode sizes
 * its slot ring by that). When slots are counted in bytes (assembly_in_bytes), the
 * batches the caller holds count against the same budget: the window shrinks by them,
 * so a caller holding batch 0 while unit 1 is ready does not make unit 2 map a third
 * 256 MiB slot; unit 2 takes batch 0's once it is back. The window counts every unit
 * before @u, slot or not, so the budget stays theirs (a younger unit taking the last
 * slot would leave the oldest to exceed it). The oldest unconsumed unit is always
 * inside: a caller holding more batches than the budget still gets the next one. Lock
 * held, or consumed_units read atomically when uncapped.
 */
static bool slot_window(const struct async_engine *e, const struct unit *u, uint64_t consumed)
{
	return u->number == consumed || u->number < consumed + grist_async_slot_window(e);
}

/*
 * Before a unit takes a slot: slot_window(). Without @wait it does not block (the
 * worker has reads to tend). Returns 0, -EAGAIN (not yet, and not @wait), or
 * -ECANCELED when the loader stops.
 */
static int wait_assembly(struct worker *wk, const struct unit *u, bool wait)
{
	struct async_engine *e = wk->e;
	uint64_t t0 = 0;
	int ret = 0;

	/* uncapped: consumed_units only grows, so inside the window now means inside it for good */
	if (!e->assembly_in_bytes &&
	    u->number < __atomic_load_n(&e->consumed_units, __ATOMIC_ACQUIRE) + e->assembly)
		return 0;
	pthread_mutex_lock(&e->lock);
	/* a unit consumed and a held slot given back both wake claim_cv under the lock */
	while (!slot_window(e, u, e->consumed_units)) {
		if (e->stop || !wait) {
			ret = e->stop ? -ECANCELED : -EAGAIN;
			break;
		}
		stall_wait(e, &t0);
	}
	pthread_mutex_unlock(&e->lock);
	stall_end(wk, t0);
	return ret;
}

/* A work that failed: its error is published at once, and it retires once its reads are back. */
static void fail_work(struct worker *wk, struct work *w, int error)
{
	grist_async_reads_cancel_unsubmitted(&w->reads);
	if (!w->published) {
		publish_unit(wk->e, w->u, error, w->reads.errmsg);
		w->published = true;
	}
	if (!w->error)
		w->error = error;
}

/* The @k-th oldest work of @wk's pipeline. */
static inline struct work *pipeline_at(struct worker *wk, unsigned k)
{
	return &wk->works[(wk->head + k) % wk->works_cap];
}

static unsigned pipeline_slot(const struct worker *wk, const struct work *w)
{
	return (unsigned)(w - wk->works);
}

/*
 * The io backend failed: no read will come back (destroy() waits for them), so every
 * work of the pipeline fails with @error and owes no more completions.
 */
static void fail_pipeline(struct worker *wk, int error)
{
	for (unsigned k = 0; k < wk->count; k++) {
		struct work *w = pipeline_at(wk, k);

		fail_work(wk, w, error);
		grist_async_reads_abandon(&w->reads);
	}
}

/* Plan @u into a new work at the pipeline's tail and admit its reads if they fit. */
static void start_unit(struct worker *wk, struct unit *u)
{
	struct async_engine *e = wk->e;
	struct work *w = pipeline_at(wk, wk->count++);
	const struct async_plan_env env = { .p = e->p, .files = &e->files, .cursor = wk->cursor,
					    .read_buffer = e->read_ahead };
	int ret;

	w->u = u;
	w->decoding = w->published = false;
	w->error = 0;
	grist_async_reads_reset(&w->reads);
	ret = grist_async_plan_unit(&w->plan, &env, u->first_j, u->end_j);
	if (!ret)
		ret = grist_async_decode_prepare(&w->dec, &w->plan, e->p->layout->map != NULL);
	if (!ret)
		ret = grist_async_admit(&wk->reader, &w->reads, &w->plan, pipeline_slot(wk, w), wk->count == 1);
	if (ret)
		fail_work(wk, w, ret);
}

/* The newest work waits for arena space: take it as soon as older works have freed enough. */
static void admit_tail(struct worker *wk)
{
	struct work *w = pipeline_at(wk, wk->count - 1);
	int ret;

	if (grist_async_reads_admitted(&w->reads) || w->published)
		return;
	ret = grist_async_admit(&wk->reader, &w->reads, &w->plan, pipeline_slot(wk, w), wk->count == 1);
	if (ret)
		fail_work(wk, w, ret);
}

/* Push queued requests, oldest work first (requests go out in pipeline order), as far as the ring takes them. */
static int push_pipeline(struct worker *wk)
{
	bool full = false;
	unsigned k;
	int ret;

	for (k = wk->pushed; k < wk->count && !full; k++) {
		struct work *w = pipeline_at(wk, k);

		if (!grist_async_reads_admitted(&w->reads))
			break;
		ret = grist_async_push(&wk->reader, &w->reads, &full);
		if (ret)
			return ret;
		if (k == wk->pushed && grist_async_reads_all_submitted(&w->reads))
			wk->pushed++;
	}
	return 0;
}

/*
 * Whether to read further ahead: room in the pipeline, the newest work admitted (its
 * reads fit the arena) and pushed, or claimed in this pass (@queued reads admitted and not
 * pushed yet), and the ring not full. So the requests queued beyond the ring stay under
 * one unit's worth, and the arena bounds the bytes.
 */
static bool wants_more(struct worker *wk, unsigned queued)
{
	const struct work *last;

	if (!wk->count)
		return true;
	if (wk->count == wk->works_cap)
		return false;
	/* a peek without the lock: polled between reaps, the claim window is mostly full */
	if (__atomic_load_n(&wk->e->next_unit, __ATOMIC_RELAXED) >=
	    __atomic_load_n(&wk->e->consumed_units, __ATOMIC_RELAXED) + wk->e->nunits)
		return false;
	last = pipeline_at(wk, wk->count - 1);
	if (!grist_async_reads_admitted(&last->reads) && !last->error)
		return false;
	/*
	 * With a map, decoding is the work (images resized, texts tokenized) and a worker's
	 * units are its own until it decodes them: once a unit behind the one it decodes has
	 * all its reads in, the reads are ahead of the decoding, and claiming more only ties
	 * units to this worker. On cached data every worker claimed its whole pipeline (4 units
	 * of 64 images, 6 of 32 texts): the units being decoded at once then spanned four per
	 * worker, beyond the slot window, and a finite run ended with some workers decoding
	 * their backlog while the others had none. Reads still slower than the decoding keep
	 * units pending, so the ring stays as deep as before.
	 */
	if (wk->e->p->layout->map && wk->count >= 2 && !last->error && !grist_async_reads_pending(&last->reads))
		return false;
	/* this pass's units are admitted, not pushed yet: count them against the ring */
	return (queued || grist_async_reads_all_submitted(&last->reads)) &&
	       grist_async_reader_inflight(&wk->reader) + queued < wk->e->queue_depth;
}

/*
 * A poll is a system call, and on cached data each one also does the page-cache copies
 * of the reads it pushes: while decoding, the reads are tended every 50 us, which keeps
 * a ring of cold reads (each taking hundreds of microseconds) fed without breaking up the
 * decoding of small records.
 */
#define TEND_INTERVAL_NS 50000

/* While decoding: take what has landed and refill the ring, so reads never wait for a whole unit's decoding. */
static int tend_reads(struct worker *wk, uint64_t now)
{
	int ret;

	wk->tended_ns = now;
	ret = grist_async_reap(&wk->reader, 0);
	if (ret < 0)
		return ret;
	return push_pipeline(wk);
}

/*
 * One decode step of @w. Decoding reads mapped files straight from the page cache: a
 * file that shrinks under the loader faults there, and the guard turns that into the
 * unit's error (naming the file and byte) instead of a SIGBUS that kills the process.
 * The unit is abandoned wherever the fault hit it; nothing in a decode step holds a
 * lock, and the loader stops at this unit's error, so nothing reads its half-made state.
 */
static int decode_step(struct worker *wk, struct work *w, uint64_t *now)
{
	struct async_engine *e = wk->e;
	const struct async_decode_input in = {
		.p = e->p, .files = &e->files, .plan = &w->plan, .reads = &w->reads, .reader = &wk->reader,
		.slot = w->u->slot,
		.tend_at = wk->tended_ns + TEND_INTERVAL_NS,
	};
	struct grist_map_guard guard;
	int ret;

	if (!e->files.num_map_ranges)
		return grist_async_decode_step(&wk->decoder, &w->dec, &in, now);
	grist_map_guard_push(&guard, e->files.map_ranges, e->files.num_map_ranges);
	if (sigsetjmp(guard.env, 0))
		return grist_map_guard_fail(&guard);
	ret = grist_async_decode_step(&wk->decoder, &w->dec, &in, now);
	grist_map_guard_pop(&guard);
	return ret;
}

/* Decode what has landed of @w, tending the reads between steps. Returns 1 when done, 0 when it waits, or an error. */
static int decode_landed(struct worker *wk, struct work *w)
{
	uint64_t now;
	int ret;

	while ((ret = decode_step(wk, w, &now)) == GRIST_ASYNC_YIELD) {
		ret = tend_reads(wk, now);
		if (ret)
			return ret;
	}
	return ret;
}

/*
 * Move the head work along: retire it when it is done, otherwise decode what has
 * landed. Returns 1 when it retired (call again), 0 when it waits for reads.
 */
static int step_head(struct worker *wk, bool stopping)
{
	struct async_engine *e = wk->e;
	struct work *w = pipeline_at(wk, 0);
	int ret;

	if (stopping && !w->published)
		fail_work(wk, w, -ECANCELED);
	if (!w->published && !grist_async_reads_admitted(&w->reads)) {
		/* alone now, it always gets a buffer */
		ret = grist_async_admit(&wk->reader, &w->reads, &w->plan, pipeline_slot(wk, w), true);
		if (ret)
			fail_work(wk, w, ret);
	}
	if (!w->published) {
		if (!w->decoding) {
			/* while reads are in flight the worker keeps tending them rather than sleep here */
			ret = wait_assembly(wk, w->u, grist_async_reader_inflight(&wk->reader) == 0);
			if (ret == -EAGAIN)
				return 0;
			if (!ret)
				ret = grist_async_slot_take(e, e->unit_items == e->p->batch_size && !e->plan_cursor, false,
							    (size_t)(w->u->end_j - w->u->first_j), &w->u->slot);
			if (ret) {
				fail_work(wk, w, ret);
				return 0;
			}
			w->decoding = true;
			grist_async_decoder_next_unit(&wk->decoder); /* its cache holds this unit's chunks from now on */
		}
		ret = decode_landed(wk, w);
		if (ret < 0) {
			fail_work(wk, w, ret);
		} else if (ret == 1) {
			publish_unit(e, w->u, 0, "");
			w->published = true;
		}
	}
	if (!w->published || grist_async_reads_pending(&w->reads))
		return 0;
	/* retire: its buffer and requests are free again */
	grist_async_reads_retire(&wk->reader, &w->reads);
	w->u = NULL;
	wk->head = (wk->head + 1) % wk->works_cap;
	wk->count--;
	if (wk->pushed)
		wk->pushed--; /* it was the first of them */
	return 1;
}

/*
 * Where each worker runs (exec/placement.c), decided here on the starting thread: a worker
 * only applies its set. Out of memory for the table, the workers run where the scheduler
 * puts them.
 */
static void place_workers(struct async_engine *e)
{
	cpu_set_t *sets = calloc(e->nworkers, sizeof(*sets));
	unsigned i;

	if (sets && grist_place_workers_here(e->nworkers, sets))
		for (i = 0; i < e->nworkers; i++) {
			e->workers[i].cpus = sets[i];
			e->workers[i].placed = true;
		}
	free(sets);
}

/* ---- setup ---- */

static int setup_worker(struct async_engine *e, struct worker *wk)
{
	const struct async_reader_config rc = {
		.p = e->p, .files = &e->files, .io_kind = e->io_kind, .queue_depth = e->queue_depth,
		.read_ahead = e->read_ahead, .nslots = wk->works_cap, .remote_counters = e->remote_ctr,
	};
	int ret;

	wk->works = calloc(wk->works_cap, sizeof(*wk->works));
	if (!wk->works)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	ret = grist_async_reader_init(&wk->reader, &rc);
	if (!ret)
		ret = grist_stream_cursor_create(e->p->stream, &wk->cursor);
	if (!ret)
		ret = grist_async_decoder_init(&wk->decoder, e->ncache, e->p->verify == GRIST_VERIFY_ALL);
	return ret;
}

/* Everything a worker owns but its counters. Once: by the worker as it ends, or by stop(). */
static void teardown_worker(struct worker *wk)
{
	if (wk->torn_down)
		return;
	wk->torn_down = true;
	grist_async_reader_free(&wk->reader);
	grist_stream_cursor_destroy(wk->cursor);
	grist_async_decoder_free(&wk->decoder);
	for (unsigned i = 0; wk->works && i < wk->works_cap; i++) {
		grist_async_plan_free(&wk->works[i].plan);
		grist_async_reads_free(&wk->works[i].reads);
		grist_async_decode_free(&wk->works[i].dec);
	}
	free(wk->works);
}

/*
 * A worker makes its own reader (read arena, ring) and decoders, on its own thread and
 * on its own CPUs: made one after another on the starting thread they took about 0.8
 * ms each (the arena's pages are zeroed as io_uring pins them), 13-31 ms of that one
 * thread's CPU before a 16-thread Loader() returned, all of it serial (docs/tuning.md,
 * "Text at 16 threads on 2 cores"). start() waits for every worker's, so a failure is
 * still its error. False: this worker's or another's failed; it does nothing more.
 */
static bool setup_own(struct worker *wk)
{
	struct async_engine *e = wk->e;
	int ret = setup_worker(e, wk);

	pthread_mutex_lock(&e->lock);
	if (ret && !e->setup_error) {
		e->setup_error = ret;
		snprintf(e->setup_msg, sizeof(e->setup_msg), "%s", grist_last_error());
	}
	if (--e->setups_left == 0) {
		pthread_cond_broadcast(&e->done_cv); /* no consumer waits there yet: start() does */
		pthread_cond_broadcast(&e->claim_cv);
	}
	/*
	 * Then wait for the others: a worker that began decoding at once took the cores the
	 * later ones' setups needed, and start() waited for those (0.78 s for a 16-thread
	 * Loader() on 2 cores).
	 */
	while (e->setups_left && !e->stop)
		pthread_cond_wait(&e->claim_cv, &e->lock);
	ret = ret ? ret : e->setup_error; /* another's failed: start() stops the engine */
	pthread_mutex_unlock(&e->lock);
	return ret == 0;
}

/* Free pooled slots until the pool is empty: run at stop() by it and every ended worker at once. */
static void free_pooled_slots(struct async_engine *e)
{
	struct grist_slot *s;

	for (;;) {
		pthread_mutex_lock(&e->lock);
		s = e->host_pool.n ? e->host_pool.items[--e->host_pool.n] : NULL;
		pthread_mutex_unlock(&e->lock);
		if (!s)
			return;
		grist_slot_free(s);
		free(s);
	}
}

/*
 * A worker's end. It frees its own memory (read arena, decoders, plans) on its own
 * thread, so the workers do it at once, while the consumer takes the last units. Then
 * it waits until no slot will be needed again (the consumer has taken every unit of a
 * finite run, or stop()) and frees pooled slots: one by one on the thread that closed
 * the Loader, a 16-thread text run's 70-100 slots (13 MB) took 2.5-4 ms of its CPU, the
 * largest serial part of the run (docs/tuning.md, "Closing a text Loader"). Unmapping
 * is mostly the page zapping, which the kernel runs under the mmap read lock, so the
 * threads' unmaps overlap. Woken at the run's end rather than by stop(), they free
 * the slots while the consumer packs and hands over the last batches, and closing does
 * not wake sleeping threads and wait for them to get a core (woken by stop(), closing
 * at 2 threads on 2 busy cores took 5.6 ms against 1.2 before).
 */
static void worker_end(struct worker *wk)
{
	struct async_engine *e = wk->e;

	/* io_uring rings are single-issuer: the thread that used the ring frees it */
	grist_async_reader_close_io(&wk->reader);
	teardown_worker(wk);
	pthread_mutex_lock(&e->lock);
	while (!e->stop && e->consumed_units < e->total_units)
		pthread_cond_wait(&e->stop_cv, &e->lock);
	pthread_mutex_unlock(&e->lock);
	free_pooled_slots(e);
}

/*
 * A worker's loop, one direction: plan (claim and plan units while the ring and the
 * read-ahead arena have room), read (admit, push, reap), decode (the oldest unit, as its
 * reads land), and wait for completions only when the oldest unit has nothing left to
 * decode.
 */
static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct async_engine *e = wk->e;
	bool more = true, stopping = false, broken = false, ended;
	struct unit *u;
	uint64_t t0;
	int ret, plug;

	if (wk->placed)
		pthread_setaffinity_np(pthread_self(), sizeof(wk->cpus), &wk->cpus);
	if (!setup_own(wk)) {
		worker_end(wk);
		return NULL;
	}
	for (;;) {
		unsigned queued = 0;

		while (more && wants_more(wk, queued)) {
			u = claim_unit(wk, wk->count == 0, &ended);
			if (!u) {
				more = !ended;
				break;
			}
			start_unit(wk, u);
			/*
			 * Local rings: admit it and claim on while the ring has room, so one push
			 * and one system call take a pass's units together. One unit per pass made
			 * 2.5 io_uring_enter calls per read at batch 1 (a push, a poll, a wait),
			 * against fio's 1.1 (cold.py --perf, issue 37).
			 */
			if (!broken && e->io_kind != GRIST_IO_HTTP) {
				const struct async_reads *r = &pipeline_at(wk, wk->count - 1)->reads;

				admit_tail(wk);
				/*
				 * A streamed unit takes its arena space as it is pushed: no unit may be
				 * admitted behind it before then, or its space would lie beyond theirs
				 * and the arena's ring order break (a read landing in another's buffer).
				 */
				if (!grist_async_reads_admitted(r) || grist_async_reads_streamed(r))
					break;
				queued += grist_async_reads_count(r);
				continue;
			}
			/*
			 * URLs: admit and push it now. wants_more() asks for the newest unit's reads
			 * to be out, so claiming stopped at one unit per pass, and a pass waits for
			 * the oldest unit's reads: units of 16 chunk reads (chunk windows at
			 * group_size 64) kept ~130 reads per thread out of a window of 4096, and the
			 * http backend makes its GETs from the reads waiting. A ring of local reads
			 * (64 deep) is full after a unit or two anyway; it keeps its one push per
			 * pass (an unmeasured change there otherwise). An error here comes back
			 * from the push below.
			 */
			if (broken || e->io_kind != GRIST_IO_HTTP)
				continue;
			admit_tail(wk);
			if (push_pipeline(wk) < 0)
				break;
		}
		if (!wk->count) {
			if (!more)
				break;
			continue;
		}
		stopping = stopping || __atomic_load_n(&e->stop, __ATOMIC_RELAXED);
		/*
		 * Stopping, URL reads are not waited for: each would run out its retries first (a
		 * dead server: minutes for a deep read-ahead, after the loader's error was already
		 * out), and closing the io withdraws them from the GET scheduler, after which no
		 * byte lands in this worker's buffers (grist_sched_withdraw()). Local reads land.
		 */
		if (stopping && e->io_kind == GRIST_IO_HTTP)
			break;
		ret = 0;
		if (!broken) {
			admit_tail(wk);
			/* plugged: the poll right after carries the pushed reads in its one system call */
			ret = grist_io_plug(wk->reader.io, true);
			if (!ret)
				ret = push_pipeline(wk);
			if (!ret)
				ret = grist_async_reap(&wk->reader, 0);
			plug = grist_io_plug(wk->reader.io, false);
			if (ret >= 0 && plug < 0)
				ret = plug;
		}
		if (ret < 0) {
			fail_pipeline(wk, ret);
			broken = true;
			more = false;
			continue;
		}
		if (step_head(wk, stopping) || broken)
			continue;
		/* the oldest unit waits for a read: nothing to do until one comes back */
		t0 = grist_now_ns();
		ret = grist_async_reap(&wk->reader, 1);
		grist_counter_add(&wk->io_wait_ns, grist_now_ns() - t0);
		if (ret < 0) {
			fail_pipeline(wk, ret);
			broken = true;
			more = false;
		}
	}
	worker_end(wk);
	return NULL;
}

static void async_stop(void *engine);

/*
 * When its next unit is not done, the consumer sleeps until up to this many more are
 * (current_unit_locked()): about WAKE_BATCH_BYTES of units per wake-up, so small units
 * do not cost a sleep and a wake-up each, while a unit of a megabyte or more is handed
 * over as soon as it is done. At most half the assembly window, so the workers keep
 * decoding while the consumer sleeps; none when a slot provider (device mode) lends the
 * slots, whose ring is sized for the batches ready ahead and not for a consumer that waits.
 */
#define WAKE_BATCH_BYTES (1u << 20)

static unsigned wake_batch(const struct async_engine *e)
{
	/*
	 * A map's rows have no typical size: count each at the most it may write. At one byte a
	 * row, 32-record units of tokenized text (8 KiB a row at most) had the consumer sleep
	 * until half the claim window was done, then pack it all at once: at the end of a run,
	 * a serial tail of every batch's packing and hand-over while the workers had stopped.
	 */
	size_t row = e->row_bytes_hint ? e->row_bytes_hint : e->p->layout->map ? e->p->layout->map_out_max : 1;
	size_t unit_bytes = e->unit_items * (row ? row : 1);
	size_t n = WAKE_BATCH_BYTES / unit_bytes, cap = (e->assembly < e->nunits ? e->assembly : e->nunits) / 2;

	if (e->p->deliver || n <= 1)
		return 0;
	return (unsigned)(n - 1 < cap ? n - 1 : cap);
}

static int async_start(const struct grist_engine_params *p, void **engine)
{
	struct grist_engine_geometry geom;
	struct grist_engine_sizes sz;
	struct async_engine *e;
	char why[160];
	unsigned i;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	e->p = p;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->claim_cv, NULL);
	pthread_cond_init(&e->done_cv, NULL);
	pthread_cond_init(&e->stop_cv, NULL);
	*engine = e;

	grist_engine_geometry_read(p, grist_cpus_allowed(), &geom);
	if (p->io_override) {
		e->io_kind = p->io_kind;
		e->name = "hooked";
	} else if (p->engine == GRIST_ENGINE_PREAD) {
		e->io_kind = GRIST_IO_PREAD;
		e->name = "pread";
	} else if (grist_io_probe(why, sizeof(why)) == 0) {
		e->io_kind = GRIST_IO_URING;
		e->name = "uring";
	} else {
		e->io_kind = GRIST_IO_PREAD;
		e->name = "pread";
		grist_log(GRIST_LOG_WARNING, "io_uring unavailable (%s); using the pread thread pool", why);
	}
	if (!p->io_override && geom.any_remote) {
		/* URLs: ranged GETs on each worker's own multi handle (local files of the mix: pread) */
		e->io_kind = GRIST_IO_HTTP;
		e->name = "http";
		e->remote_ctr = calloc(1, sizeof(*e->remote_ctr));
		if (!e->remote_ctr)
			return grist_fail(-ENOMEM, "async engine: out of memory");
		/* the stats count the GETs that opened the files too (2 a shard), not only the reads' */
		for (size_t d = 0; d < p->num_sources; d++)
			for (size_t f = 0; f < p->sources[d].num_files; f++) {
				const struct grist_file_geom *fg = grist_reader_file_geom(p->sources[d].reader, f);

				if (fg)
					grist_remote_count_opening(e->remote_ctr, fg->remote);
			}
	}

	/* every count and budget: engine_sizing.c, shared with the device stage */
	grist_engine_size(p, &geom, &sz);
	e->unit_items = sz.unit_items;
	e->max_unit_items = sz.max_unit_items;
	e->ncache = sz.decoders;
	e->nworkers = sz.workers;
	e->queue_depth = sz.queue_depth;
	e->read_ahead = sz.read_ahead;
	e->nunits = sz.nunits;
	e->assembly = sz.assembly;
	e->assembly_in_bytes = sz.assembly_in_bytes;
	e->row_bytes_hint = sz.row_bytes_hint;
	e->positions = sz.positions;
	e->wake_batch = wake_batch(e);
	/* chunk granularity: a unit ends at a window boundary of the plan (unit_end_locked()) */
	if (p->granularity == GRIST_GRANULARITY_CHUNK && p->num_sources == 1 && p->shuffled) {
		ret = grist_stream_cursor_create(p->stream, &e->plan_cursor);
		if (ret)
			goto fail;
	}
	/* known once a claimer reaches the end of the stream */
	e->total_units = UINT64_MAX;
	e->next_first_j = p->start_position;
	e->units = calloc(e->nunits, sizeof(*e->units));
	e->workers = aligned_alloc(_Alignof(struct worker), e->nworkers * sizeof(*e->workers));
	if (e->workers)
		memset(e->workers, 0, e->nworkers * sizeof(*e->workers));
	if (!e->units || !e->workers) {
		ret = grist_fail(-ENOMEM, "async engine: out of memory");
		goto fail;
	}
	ret = grist_async_files_open(p, &e->files);
	if (ret)
		goto fail;

	for (i = 0; i < e->nworkers; i++) {
		e->workers[i].e = e;
		e->workers[i].id = i;
		e->workers[i].works_cap = (unsigned)sz.works;
	}
	place_workers(e);
	/* each worker makes its reader first (setup_own()); wait for them all */
	e->setups_left = e->nworkers;
	for (i = 0; i < e->nworkers; i++) {
		ret = grist_thread_start(&e->workers[i].thread, worker_main, &e->workers[i]);
		if (ret) {
			grist_fail(ret, "async engine: cannot start worker thread %u", i);
			goto fail;
		}
		e->workers[i].started = true;
	}
	pthread_mutex_lock(&e->lock);
	while (e->setups_left)
		pthread_cond_wait(&e->done_cv, &e->lock);
	ret = e->setup_error;
	pthread_mutex_unlock(&e->lock);
	if (ret) {
		grist_fail(ret, "%s", e->setup_msg);
		goto fail;
	}
	return 0;
fail:
	async_stop(e);
	*engine = NULL;
	return ret;
}

static void async_stats(void *engine, struct grist_loader_stats *out)
{
	struct async_engine *e = engine;
	uint64_t area = 0, span = 0;
	unsigned i;

	out->engine = e->name;
	/* auto chooses per file: more than one kind is "mixed" */
	out->read_mode = e->files.any_mapped + e->files.any_direct + e->files.any_buffered > 1 ? "mixed"
			 : e->files.any_mapped ? "mmap" : e->files.any_direct ? "direct" : "buffered";
	out->threads = e->nworkers;
	for (i = 0; i < e->nworkers; i++) {
		struct worker *wk = &e->workers[i];

		grist_async_reader_stats(&wk->reader, out, &area, &span);
		grist_async_decoder_stats(&wk->decoder, out);
		out->io_wait_ns += grist_counter_read(&wk->io_wait_ns);
		out->producer_stall_ns += grist_counter_read(&wk->producer_stall_ns);
	}
	out->reads_in_flight_mean = span ? (double)area / (double)span : 0.0;
	if (e->remote_ctr) {
		grist_remote_counters_read(e->remote_ctr, &out->remote, &out->remote_budget);
		out->read_mode = "remote";
	}
	pthread_mutex_lock(&e->lock);
	out->queue_occupancy_sum = e->queue_occupancy;
	out->assemble_ns += e->pack_ns;
	out->memory_bytes += grist_counter_read(&e->slots.memory);
	out->slot_maps = grist_counter_read(&e->slots.maps);
	for (size_t k = 0; k < e->host_pool.n; k++)
		out->pinned = out->pinned || e->host_pool.items[k]->pinned;
	out->pinned = out->pinned || e->p->deliver;
	pthread_mutex_unlock(&e->lock);
}

static void async_abort(void *engine)
{
	struct async_engine *e = engine;

	pthread_mutex_lock(&e->lock);
	e->aborted = true;
	__atomic_store_n(&e->stop, true, __ATOMIC_RELAXED); /* also read without the lock by workers */
	pthread_cond_broadcast(&e->claim_cv);
	pthread_cond_broadcast(&e->done_cv);
	pthread_mutex_unlock(&e->lock);
}

static void async_stop(void *engine)
{
	struct async_engine *e = engine;
	unsigned i;
	size_t k;

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	__atomic_store_n(&e->stop, true, __ATOMIC_RELAXED); /* also read without the lock by workers */
	pthread_cond_broadcast(&e->claim_cv);
	pthread_cond_broadcast(&e->stop_cv);
	pthread_mutex_unlock(&e->lock);
	free_pooled_slots(e); /* beside the workers that have ended (worker_end()) */
	for (i = 0; e->workers && i < e->nworkers; i++)
		if (e->workers[i].started)
			pthread_join(e->workers[i].thread, NULL);
	for (i = 0; e->workers && i < e->nworkers; i++)
		teardown_worker(&e->workers[i]);
	for (k = 0; e->units && k < e->nunits; k++)
		if (e->units[k].slot)
			grist_async_slot_discard_locked(e, e->units[k].slot);
	if (e->pack)
		grist_async_slot_discard_locked(e, e->pack);
	grist_async_pool_free(&e->host_pool);
	grist_async_pool_free(&e->dev_pool);
	grist_async_files_close(&e->files);
	free(e->remote_ctr);
	grist_stream_cursor_destroy(e->plan_cursor);
	free(e->units);
	free(e->workers);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->claim_cv);
	pthread_cond_destroy(&e->done_cv);
	pthread_cond_destroy(&e->stop_cv);
	free(e);
}

const struct grist_engine_ops grist_engine_async_ops = {
	.name = "async",
	.start = async_start,
	.next = grist_async_next,
	.release = grist_async_release,
	.stats = async_stats,
	.abort = async_abort,
	.stop = async_stop,
};
