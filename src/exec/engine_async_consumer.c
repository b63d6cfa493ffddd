/*
 * Async engine, consumer side: the batch slot pools, and next()/release(): units taken
 * strictly in order, handed over whole, as views, or packed into batch slots.
 */
#include <stdlib.h>

#include "common/error.h"
#include "exec/engine_async_shared.h"

/*
 * Bytes a fresh slot starts with: @rows rows, at most a typical unit's (0: a typical
 * unit's) and never more than the run has, within the batch bound (0: grow as needed).
 * The unit's own rows, so the last unit of a run, or a run shorter than one unit, does not
 * pin a whole unit's slot it cannot fill: 44 records of 1 MiB at batch 256 took a 256 MiB
 * slot (issue 37).
 */
static size_t slot_hint(const struct async_engine *e, bool provider, bool view, size_t rows)
{
	size_t typical = rows && rows < e->unit_items ? rows : e->unit_items, bound = e->p->layout->max_batch_bytes;

	if (e->positions && e->positions < typical)
		typical = (size_t)e->positions;

	if (provider || view || !e->row_bytes_hint || typical > bound / e->row_bytes_hint)
		return 0;
	return typical * e->row_bytes_hint;
}

/*
 * Lock held: the pooled slot that suits, newest first. A view needs no data memory and
 * a unit or a batch needs a typical unit's (@want), so a view takes a slot without data
 * and a unit one with enough: a data-less view slot grown into fresh memory while a
 * grown slot sat idle would map and fault in a whole slot for nothing. Failing that,
 * the one closest to it. NULL when the pool is empty.
 */
static struct grist_slot *pool_pick_locked(struct slot_pool *pool, bool view, size_t want)
{
	size_t best = pool->n, k = pool->n;
	struct grist_slot *s;

	while (k-- > 0) {
		size_t cap = pool->items[k]->cap;

		if (view ? cap == 0 : cap >= want && cap > 0) {
			best = k;
			break;
		}
		if (best == pool->n || (view ? cap < pool->items[best]->cap : cap > pool->items[best]->cap))
			best = k;
	}
	if (best == pool->n)
		return NULL;
	s = pool->items[best];
	pool->items[best] = pool->items[--pool->n];
	return s;
}

/*
 * A slot for a unit or a batch. @deliver: it may be handed to the consumer as is, so
 * when the loader has a slot provider (the device stage) its memory comes from there.
 * Provider-backed wrappers and host slots live in separate pools.
 */
int grist_async_slot_take(struct async_engine *e, bool deliver, bool view, size_t rows, struct grist_slot **out)
{
	const struct grist_slot_provider *p = deliver ? e->p->deliver : NULL;
	struct slot_pool *pool = p ? &e->dev_pool : &e->host_pool;
	size_t hint = slot_hint(e, p != NULL, view, rows);
	struct grist_slot *s;
	int ret;

	pthread_mutex_lock(&e->lock);
	/* provider wrappers hold no memory of their own: any will do */
	s = !p ? pool_pick_locked(pool, view, hint) : pool->n ? pool->items[--pool->n] : NULL;
	pthread_mutex_unlock(&e->lock);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return grist_fail(-ENOMEM, "async engine: cannot allocate a batch slot");
		size_t rows = p ? e->p->batch_size : e->max_unit_items;

		/*
		 * Sized for a typical unit up front: growing a pinned slot costs an mlock of fresh
		 * pages, and a slot grown row by row doubles its way there, faulting in about twice
		 * its final size and copying its rows at each step (fresh memory costs 0.4-0.5 s of
		 * CPU per GiB on the development VM, more than reading the bytes). The bound is the
		 * batch bound, which a caller raises for larger batches (256 records of 1 MiB), not
		 * a fixed 64 MiB: there, 2 epochs took a third less system time (medians of 3).
		 */
		ret = grist_slot_init(s, rows, hint);
		if (ret) {
			free(s);
			return ret;
		}
		s->provider_wrapper = p != NULL;
		grist_slot_account(s, &e->slots);
	}
	grist_slot_reset(s);
	if (p) {
		ret = p->acquire(p->ctx, s);
		if (ret) {
			pthread_mutex_lock(&e->lock);
			grist_async_slot_put_locked(e, s);
			pthread_mutex_unlock(&e->lock);
			return ret;
		}
	}
	*out = s;
	return 0;
}

/* Called with e->lock held. A provider-backed slot must have been delivered or cancelled. */
void grist_async_slot_put_locked(struct async_engine *e, struct grist_slot *s)
{
	struct slot_pool *pool = s->provider_wrapper ? &e->dev_pool : &e->host_pool;
	struct grist_slot **n;

	if (s->with_caller) {
		s->with_caller = false;
		e->slots_with_caller--;
		/* a worker may wait for the budget this slot held (wait_assembly()) */
		if (e->claim_waiters)
			pthread_cond_broadcast(&e->claim_cv);
	}
	if (s->provider_wrapper)
		grist_slot_unbind(s);
	if (pool->n == pool->cap) {
		n = realloc(pool->items, (pool->cap * 2 + 8) * sizeof(*n));
		if (!n) { /* keep memory bounded and correct: drop the slot instead */
			grist_slot_free(s);
			free(s);
			return;
		}
		pool->items = n;
		pool->cap = pool->cap * 2 + 8;
	}
	pool->items[pool->n++] = s;
}

/* An assembled slot that will not be delivered: provider memory goes back unsubmitted. */
void grist_async_slot_discard_locked(struct async_engine *e, struct grist_slot *s)
{
	if (s->external)
		e->p->deliver->cancel(e->p->deliver->ctx, s);
	grist_async_slot_put_locked(e, s);
}

void grist_async_pool_free(struct slot_pool *pool)
{
	size_t k;

	for (k = 0; k < pool->n; k++) {
		grist_slot_free(pool->items[k]);
		free(pool->items[k]);
	}
	free(pool->items);
}
/* ---- the consumer ---- */

static int unit_error(struct unit *u)
{
	return grist_fail(u->error, "%s", u->errmsg[0] ? u->errmsg : grist_strerror(u->error));
}

static bool unit_published(struct async_engine *e, uint64_t n)
{
	return __atomic_load_n(&e->units[n % e->nunits].published, __ATOMIC_ACQUIRE) == n + 1;
}

/*
 * The unit to sleep until, when unit @c is not done yet: the newest unit of a small batch
 * [c, c + wake_batch] that is not published, so one wake-up serves several units (units
 * are published roughly in order, so once the newest is done the others mostly are
 * too; if not, the consumer sleeps again for the newest one still missing). Unit @c
 * itself is not published yet.
 * The batch stays inside what the workers can finish without the consumer: the stream's
 * known end, the slot window (a unit beyond it waits for this consumer to take a slot:
 * sleeping for it hung when the caller's batches narrowed the window below the batch),
 * and none at all once a unit failed (the workers stop claiming), nor for the first
 * unit, whose wait is the loader's time to first batch. Lock held: the window cannot
 * narrow while the consumer sleeps, only the consumer hands the caller slots.
 */
static uint64_t wake_target_locked(struct async_engine *e, uint64_t c)
{
	/* the first batch comes as soon as it is done: batching wake-ups is for the steady state */
	uint64_t last = c + (e->failed || c == 0 ? 0 : e->wake_batch), n;
	unsigned window = grist_async_slot_window(e);

	if (last >= e->total_units)
		last = e->total_units - 1;
	if (last - c >= window)
		last = c + (window ? window - 1 : 0);
	for (n = last; n > c; n--)
		if (!unit_published(e, n))
			return n;
	return c;
}

/*
 * The unit the consumer works on now, waiting until it is done. Lock held.
 *
 * A publisher stores `published` and then reads consumer_wake_at (both seq_cst); the
 * consumer stores consumer_wake_at and then reads `published`, so at least one of them
 * sees the other's store: either the consumer does not sleep, or the publisher sees it
 * asleep and signals it, under the lock that the consumer holds until it waits.
 */
static struct unit *current_unit_locked(struct async_engine *e)
{
	uint64_t c = e->consumed_units, t;

	for (;;) {
		if (e->aborted)
			return NULL;
		if (unit_published(e, c))
			break;
		/* total_units becomes known only when a claimer reaches the end: re-check it on every wake-up */
		if (c >= e->total_units)
			return NULL;
		t = wake_target_locked(e, c);
		__atomic_store_n(&e->consumer_wake_at, t + 1, __ATOMIC_SEQ_CST);
		/* seq_cst, not acquire: this load must not pass the store above */
		if (__atomic_load_n(&e->units[t % e->nunits].published, __ATOMIC_SEQ_CST) != t + 1)
			pthread_cond_wait(&e->done_cv, &e->lock);
		__atomic_store_n(&e->consumer_wake_at, 0, __ATOMIC_SEQ_CST);
	}
	return &e->units[c % e->nunits];
}

/* Lock held: @s stays with the caller after its unit is done (counted, see wait_assembly()). */
static void with_caller_locked(struct async_engine *e, struct grist_slot *s)
{
	s->with_caller = true;
	e->slots_with_caller++;
}

/* Lock held. */
static void finish_unit_locked(struct async_engine *e, struct unit *u)
{
	if (u->slot && u->slot->refs) {
		u->slot->detached = true; /* views of it are still out: the last release frees it */
		with_caller_locked(e, u->slot);
	} else if (u->slot)
		grist_async_slot_discard_locked(e, u->slot);
	u->slot = NULL;
	/* release: the entry is free for a claimer, and the workers peek at it without the lock */
	__atomic_store_n(&e->consumed_units, e->consumed_units + 1, __ATOMIC_RELEASE);
	if (e->consumed_units == e->total_units)
		pthread_cond_broadcast(&e->stop_cv); /* the run's last unit: ended workers free the pooled slots */
	/* workers waiting for the claim or assembly window register under the lock */
	if (e->claim_waiters)
		pthread_cond_broadcast(&e->claim_cv);
}

/* Whether @u ends the run (a finite stream's last positions). */
static bool last_unit(const struct async_engine *e, const struct unit *u)
{
	return e->positions && u->end_j == e->p->start_position + e->positions;
}

int grist_async_next(void *engine, struct grist_slot **out)
{
	struct async_engine *e = engine;
	size_t batch = e->p->batch_size;
	struct grist_slot *pack;
	struct unit *u;
	uint64_t t0;
	int ret;

	*out = NULL;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		pack = e->pack;
		if (pack && pack->count == batch)
			break;
		u = current_unit_locked(e);
		if (e->aborted) {
			pthread_mutex_unlock(&e->lock);
			return grist_fail(-ECANCELED, "loader stopped");
		}
		if (!u)
			break; /* end of stream: a partial pack (or nothing) is the last batch */
		e->queue_occupancy += e->next_unit - e->consumed_units;
		if (u->error) {
			ret = unit_error(u);
			pthread_mutex_unlock(&e->lock);
			return ret;
		}
		if (!pack && u->next_row == 0 && e->unit_items == batch &&
		    (u->slot->count == batch ||
		     (u->slot->count > 0 && u->slot->count < batch && (last_unit(e, u) || e->p->unit_sizes_unseen)))) {
			/*
			 * The unit is exactly the next batch, or the stream's short last one (a unit
			 * at chunk granularity may run past a batch): hand its slot over without a
			 * copy (the last one was copied into a second slot of its own, issue 37).
			 * When the consumer does not see unit sizes (a packer), a short unit goes as
			 * it is too: the last units of a packed map's run are cut short (tail_items()),
			 * and copying them into full batches was the consumer's, serial, work.
			 */
			*out = u->slot;
			with_caller_locked(e, u->slot);
			u->slot = NULL;
			finish_unit_locked(e, u);
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
		if (!pack && !e->p->deliver && u->slot->count - u->next_row >= batch) {
			/* a full batch inside a larger unit: hand out a view of its rows, no copy */
			struct grist_slot *view;

			pthread_mutex_unlock(&e->lock);
			ret = grist_async_slot_take(e, false, true, 0, &view);
			if (ret)
				return ret;
			pthread_mutex_lock(&e->lock);
			grist_slot_make_view(view, u->slot, u->next_row, batch);
			if (u->next_row == 0)
				view->filtered = u->slot->filtered;
			u->next_row += batch;
			if (u->next_row == u->slot->count)
				finish_unit_locked(e, u);
			*out = view;
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
		if (!pack) {
			pthread_mutex_unlock(&e->lock);
			ret = grist_async_slot_take(e, true, false, 0, &pack);
			if (ret)
				return ret;
			pthread_mutex_lock(&e->lock);
			e->pack = pack;
		}
		pthread_mutex_unlock(&e->lock);
		/* the unit is done and only the consumer touches it now: copy without the lock */
		if (u->next_row == 0)
			pack->filtered += u->slot->filtered;
		t0 = grist_now_ns();
		while (u->next_row < u->slot->count && pack->count < batch) {
			ret = grist_slot_copy_row(pack, e->p->layout, u->slot, u->next_row);
			if (ret)
				return ret;
			pack->stream_end = u->slot->positions[u->next_row] + 1;
			u->next_row++;
		}
		t0 = grist_now_ns() - t0;
		pthread_mutex_lock(&e->lock);
		e->pack_ns += t0;
		if (u->next_row == u->slot->count) {
			/* dropped items after the last row belong to this batch only if it is not full */
			if (pack->count < batch)
				pack->stream_end = u->end_j;
			finish_unit_locked(e, u);
		}
	}
	*out = e->pack;
	e->pack = NULL;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

void grist_async_release(void *engine, struct grist_slot *s)
{
	struct async_engine *e = engine;
	struct grist_slot *parent = s->parent;

	pthread_mutex_lock(&e->lock);
	if (parent) {
		s->parent = NULL;
		if (--parent->refs == 0 && parent->detached) {
			parent->detached = false;
			grist_async_slot_put_locked(e, parent);
		}
	}
	grist_async_slot_put_locked(e, s);
	pthread_mutex_unlock(&e->lock);
}
