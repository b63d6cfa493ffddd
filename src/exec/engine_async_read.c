/*
 * Async engine, reading: admitted works' regions become io requests, pushed oldest work
 * first whenever the ring has room, and completions are credited to their regions as
 * they arrive, so the decoder can start on a chunk as soon as its region has landed.
 *
 * Read buffers come from the worker's arena (read-ahead bytes, registered with io_uring
 * when allowed), allocated as a ring in pipeline order: works retire oldest first, so
 * the live reservations always run from the oldest work's to the newest's, possibly
 * wrapping once around the end. That ring is the read-ahead window's byte bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "exec/engine_async_internal.h"
#include "plan/read_plan.h"

#define SERVICE_INTERVAL_NS 50000

/* Reads in flight, integrated over time: called before every change of the count. */
static void depth_account(struct worker *wk)
{
	uint64_t now = grist_now_ns(), inflight = wk->io->inflight;

	if (wk->depth_t) {
		add_relaxed(&wk->depth_area, inflight * (now - wk->depth_t));
		add_relaxed(&wk->depth_span, now - wk->depth_t);
	}
	wk->depth_t = now;
}

/*
 * Reserve @n bytes of the arena after the newest reservation of the pipeline (whose
 * newest work is the one asking). Returns the offset, or SIZE_MAX when it does not fit now.
 */
static size_t arena_reserve(struct worker *wk, size_t n)
{
	const struct work *first = NULL, *last = NULL;
	size_t head, tail;
	unsigned k;

	if (n > wk->arena_len)
		return SIZE_MAX;
	for (k = 0; k + 1 < wk->count; k++) {
		const struct work *w = pipeline_at(wk, k);

		if (!w->arena_len)
			continue;
		if (!first)
			first = w;
		last = w;
	}
	if (!first)
		return 0;
	head = first->arena_off;
	tail = last->arena_off + last->arena_len;
	if (last->arena_off >= first->arena_off) {
		/* live: [head, tail); free: [tail, end) and [0, head) */
		if (wk->arena_len - tail >= n)
			return tail;
		return head >= n ? 0 : SIZE_MAX;
	}
	/* wrapped, live: [head, end) and [0, tail); free: [tail, head) */
	return head - tail >= n ? tail : SIZE_MAX;
}

int grist_async_admit(struct worker *wk, struct work *w)
{
	const struct async_engine *e = wk->e;
	size_t i, nreq = 0, off;
	uint64_t done, mapped = 0;
	int ret;

	w->buf = NULL;
	w->arena_len = 0;
	if (w->buf_need) {
		off = arena_reserve(wk, w->buf_need);
		if (off != SIZE_MAX) {
			w->buf = wk->arena + off;
			w->arena_off = off;
			w->arena_len = w->buf_need;
		} else if (wk->count == 1) {
			/* alone and larger than the arena: plain heap memory, one unit at a time */
			if (wk->heap_cap < w->buf_need) {
				void *p = NULL;

				free(wk->heap);
				wk->heap = NULL;
				wk->heap_cap = 0;
				if (posix_memalign(&p, MEM_ALIGN, w->buf_need))
					return grist_fail(-ENOMEM, "async engine: cannot allocate a %zu-byte read buffer",
							  w->buf_need);
				wk->heap = p;
				wk->heap_cap = w->buf_need;
			}
			w->buf = wk->heap;
		} else {
			return 0; /* waits for older works to retire */
		}
	}
	for (i = 0; i < w->nregions; i++)
		if (!e->files[w->regions[i].component][w->regions[i].file].map)
			nreq += grist_read_pieces(w->regions[i].len);
	ret = grist_array_reserve((void **)&w->reqs, &w->reqs_cap, nreq, sizeof(*w->reqs));
	if (ret)
		return ret;
	w->nreqs = 0;
	w->nlanded = 0;
	for (i = 0; i < w->nregions; i++) {
		struct region *r = &w->regions[i];
		const struct engine_file *f = &e->files[r->component][r->file];

		r->got = 0;
		r->error = 0;
		r->pieces_left = 0;
		if (f->map) {
			/* the page cache is the buffer: nothing to submit, landed already */
			r->base = f->map + r->offset;
			r->got = r->offset < f->size ? (f->size - r->offset < r->len ? f->size - r->offset : r->len) : 0;
			mapped += r->got;
			w->landed[w->nlanded++] = (uint32_t)i;
			continue;
		}
		r->base = w->buf + r->buf_off;
		for (done = 0; done < r->len; done += GRIST_READ_PIECE_MAX) {
			struct grist_io_req *q = &w->reqs[w->nreqs++];

			memset(q, 0, sizeof(*q));
			q->file = wk->io_slot[r->component][r->file];
			q->offset = r->offset + done;
			q->len = grist_read_piece_len(r->len, done);
			q->buf = w->buf + r->buf_off + done;
			q->user_data = ((uint64_t)(w - wk->works) << 32) | i;
			r->pieces_left++;
		}
	}
	/* read by the decoder, through the mapping: one add for the unit, not one per region */
	if (mapped)
		add_relaxed(&wk->bytes_read, mapped);
	w->submitted = 0;
	w->pending = (unsigned)w->nreqs;
	w->admitted = true;
	return 0;
}

/* Tell the configured read trace about @n requests of @w just taken by the ring. */
static void trace_reads(struct worker *wk, const struct work *w, struct grist_io_req *const *q, unsigned n)
{
	const struct grist_engine_params *p = wk->e->p;
	unsigned i;

	for (i = 0; i < n; i++) {
		const struct region *r = &w->regions[q[i]->user_data & 0xffffffffu];

		p->read_trace(p->read_trace_ctx, wk->e->files[r->component][r->file].path, q[i]->offset, q[i]->len);
	}
}

/* Push as many queued requests of @w as the io caps take right now; false when the ring is full. */
static int push_work(struct worker *wk, struct work *w, bool *full)
{
	struct grist_io_req *batch[64];
	int taken;

	while (w->submitted < w->nreqs) {
		unsigned n = 0;

		while (n < 64 && w->submitted + n < w->nreqs) {
			batch[n] = &w->reqs[w->submitted + n];
			n++;
		}
		depth_account(wk);
		taken = grist_io_submit(wk->io, batch, n);
		if (taken < 0)
			return taken;
		add_relaxed(&wk->reads, (uint64_t)taken);
		if (wk->e->p->read_trace)
			trace_reads(wk, w, batch, (unsigned)taken);
		w->submitted += (size_t)taken;
		if (wk->io->inflight > wk->depth_max)
			__atomic_store_n(&wk->depth_max, (uint64_t)wk->io->inflight, __ATOMIC_RELAXED);
		if ((unsigned)taken < n) {
			*full = true; /* caps reached: reap first */
			break;
		}
	}
	return 0;
}

int grist_async_push(struct worker *wk)
{
	bool full = false;
	unsigned k;
	int ret;

	for (k = 0; k < wk->count && !full; k++) {
		struct work *w = pipeline_at(wk, k);

		if (!w->admitted)
			break; /* requests go out in pipeline order */
		ret = push_work(wk, w, &full);
		if (ret)
			return ret;
	}
	return 0;
}

static void complete_request(struct worker *wk, struct grist_io_req *q)
{
	struct work *w = &wk->works[q->user_data >> 32];
	uint32_t ri = (uint32_t)(q->user_data & 0xffffffffu);
	struct region *r = &w->regions[ri];

	if (q->result < 0) {
		if (!r->error) {
			r->error = grist_io_req_error(wk->io, q);
			/* keep the message with the unit; the consumer reports it in order */
			snprintf(w->u->errmsg, sizeof(w->u->errmsg), "%s", grist_last_error());
		}
	} else {
		r->got += (uint64_t)q->result;
		add_relaxed(&wk->bytes_read, (uint64_t)q->result);
	}
	w->pending--;
	if (--r->pieces_left == 0)
		w->landed[w->nlanded++] = ri;
}

int grist_async_reap(struct worker *wk, unsigned min_wait)
{
	struct grist_io_req *done[64];
	int n, i;

	if (!wk->io->inflight)
		return 0;
	depth_account(wk);
	n = grist_io_reap(wk->io, done, 64, min_wait);
	if (n < 0)
		return n;
	depth_account(wk);
	for (i = 0; i < n; i++)
		complete_request(wk, done[i]);
	return n;
}

int grist_async_service(struct worker *wk, uint64_t now)
{
	int ret;

	/*
	 * A poll is a system call, and on cached data each one also does the page-cache
	 * copies of the reads it pushes: every 50 us keeps a ring of cold reads (each taking
	 * hundreds of microseconds) fed without breaking up the decoding of small records.
	 */
	if (now - wk->last_service_ns < SERVICE_INTERVAL_NS)
		return 0;
	wk->last_service_ns = now;
	ret = grist_async_reap(wk, 0);
	if (ret < 0)
		return ret;
	return grist_async_push(wk);
}

void grist_async_cancel_unsubmitted(struct work *w)
{
	size_t k;

	for (k = w->submitted; k < w->nreqs; k++)
		w->regions[w->reqs[k].user_data & 0xffffffffu].pieces_left--;
	w->pending -= (unsigned)(w->nreqs - w->submitted);
	w->nreqs = w->submitted;
}
