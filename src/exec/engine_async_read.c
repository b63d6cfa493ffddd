/*
 * Async engine, reading: a unit's regions become io requests, pushed as the ring's caps
 * allow and reaped until the unit's reads are all back.
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "exec/engine_async_internal.h"

int grist_async_submit_unit(struct worker *wk, struct work *w)
{
	size_t i, nreq = 0;
	uint64_t done;
	int ret;

	for (i = 0; i < w->nregions; i++)
		if (!wk->e->files[w->regions[i].component][w->regions[i].file].map)
			nreq += (size_t)((w->regions[i].len + READ_PIECE_MAX - 1) / READ_PIECE_MAX);
	ret = grist_async_grow((void **)&w->reqs, &w->reqs_cap, nreq, sizeof(*w->reqs));
	if (ret)
		return ret;
	w->nreqs = 0;
	for (i = 0; i < w->nregions; i++) {
		struct region *r = &w->regions[i];
		const struct engine_file *f = &wk->e->files[r->component][r->file];

		r->got = 0;
		r->error = 0;
		if (f->map) {
			/* the page cache is the buffer: nothing to submit */
			r->base = f->map + r->offset;
			r->got = r->offset < f->size ? (f->size - r->offset < r->len ? f->size - r->offset : r->len) : 0;
			add_relaxed(&wk->bytes_read, r->got); /* read by the decoder, through the mapping */
			continue;
		}
		r->base = w->buf + r->buf_off;
		for (done = 0; done < r->len; done += READ_PIECE_MAX) {
			struct grist_io_req *q = &w->reqs[w->nreqs++];
			uint64_t len = r->len - done < READ_PIECE_MAX ? r->len - done : READ_PIECE_MAX;

			memset(q, 0, sizeof(*q));
			q->file = wk->io_slot[r->component][r->file];
			q->offset = r->offset + done;
			q->len = (uint32_t)len;
			q->buf = w->buf + r->buf_off + done;
			q->user_data = ((uint64_t)(w - wk->work) << 32) | i;
		}
	}
	w->submitted = 0;
	w->pending = (unsigned)w->nreqs;
	return 0;
}

/* Push as many queued requests of @w as the io caps take right now. */
int grist_async_push_requests(struct worker *wk, struct work *w)
{
	struct grist_io_req *batch[64];
	int taken;

	while (w->submitted < w->nreqs) {
		unsigned n = 0;

		while (n < 64 && w->submitted + n < w->nreqs) {
			batch[n] = &w->reqs[w->submitted + n];
			n++;
		}
		taken = grist_io_submit(wk->io, batch, n);
		if (taken < 0)
			return taken;
		add_relaxed(&wk->reads, (uint64_t)taken);
		w->submitted += (size_t)taken;
		if ((unsigned)taken < n)
			break; /* caps reached: reap first */
	}
	return 0;
}

static void complete_request(struct worker *wk, struct grist_io_req *q)
{
	struct work *w = &wk->work[q->user_data >> 32];
	struct region *r = &w->regions[q->user_data & 0xffffffffu];

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
}

/* Reap until @w has no read pending, pushing its requests as the caps allow. */
int grist_async_wait_unit(struct worker *wk, struct work *w)
{
	struct work *other = &wk->work[w == &wk->work[0]];
	struct grist_io_req *done[64];
	uint64_t t0 = grist_now_ns();
	int n, i, ret = 0;

	while (w->pending) {
		ret = grist_async_push_requests(wk, w);
		if (ret)
			break;
		n = grist_io_reap(wk->io, done, 64, 1);
		if (n < 0) {
			ret = n;
			break;
		}
		/* completions of the worker's other unit may come back here too */
		for (i = 0; i < n; i++)
			complete_request(wk, done[i]);
		/*
		 * Keep the ring full: as this unit's last reads drain, the next unit's reads
		 * take their place, so the queue depth does not sag at every unit boundary.
		 */
		if (other->u && other->submitted < other->nreqs) {
			ret = grist_async_push_requests(wk, other);
			if (ret)
				break;
		}
	}
	add_relaxed(&wk->io_wait_ns, grist_now_ns() - t0);
	return ret;
}

/* Wait out whatever of @w is in flight, ignoring results (an error path). */
void grist_async_drain_unit(struct worker *wk, struct work *w)
{
	struct grist_io_req *done[64];
	int n, i;

	while (w->pending) {
		n = grist_io_reap(wk->io, done, 64, 1);
		if (n <= 0)
			break; /* the backend failed: destroy() waits for what is left */
		for (i = 0; i < n; i++)
			complete_request(wk, done[i]);
	}
}
