/*
 * The GET scheduler's decisions (sched.c has its thread and its clients): how many bytes
 * may be in flight, and which waiting pieces become which GETs.
 *
 * The budget is bytes in flight: BUDGET_GAIN x the round trip x the bandwidth, both
 * measured here (Little's law: to move B bytes/s through a pipe L seconds long, B x L
 * bytes must be in it; the gain lets the measured bandwidth grow when the pipe is
 * short of requests, as TCP's slow start does). The round trip is the least time to
 * first byte of the GETs in the last two RTT_WINDOW_NS windows; the bandwidth the best
 * recent rate of body bytes in, decaying. Body bytes, gaps included: counting only the
 * bytes the reads want kept fewer GETs out, but a few 8 MiB GETs spanning the object
 * then carried every read (riding on them) and each took ~200 ms through rclone: chunk
 * windows of 1 KiB records at 20 ms fell from 111k to 32k records/s. Because a server that is the bottleneck
 * queues requests, and a queued request's first byte comes late, the least time to
 * first byte would grow with the budget and the budget with it: at the start of each
 * window the depth drops to min_inflight until one GET started then has come back (a
 * "probe"), so each window holds a sample without the queue. min_inflight GETs are
 * always allowed (a server with a few cores serves that many at once at any latency).
 * Pieces handed over early (the engine's read-ahead) wait while the budget is full,
 * and are merged into denser GETs for having waited.
 *
 * The figures go to every set of counters attached (a loader's, a fetcher's): each sees
 * the endpoint's budget and depth, which its reads share.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "io/sched_internal.h"

#define BUDGET_GAIN 2
#define RTT_WINDOW_NS 4000000000ull         /* the round trip is the least of the last 4-8 s */
#define BW_INTERVAL_MIN_NS 20000000ull      /* a bandwidth sample spans at least this */
#define HORIZON_START 256                   /* pieces, before a rate and a GET's time are measured */

void grist_sched_depth_account(struct grist_sched *h)
{
	uint64_t now = grist_remote_now_ns();
	size_t i;

	for (i = 0; h->depth_t && i < h->nctrs; i++) {
		struct grist_remote_counters *c = h->ctrs[i].ctr;

		__atomic_fetch_add(&c->inflight_area, (uint64_t)h->active * (now - h->depth_t), __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->inflight_bytes_area, h->inflight_bytes * (now - h->depth_t) / 1024,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->ahead_bytes_area, h->ahead_bytes * (now - h->depth_t) / 1024, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->inflight_span, now - h->depth_t, __ATOMIC_RELAXED);
	}
	h->depth_t = now;
}

/* @measured: @b came from measurements (the start value is no peak) */
void grist_sched_set_budget(struct grist_sched *h, uint64_t b, bool measured)
{
	uint64_t cap = (uint64_t)h->opt.max_inflight * h->opt.split_bytes;
	size_t i;

	if (b > cap)
		b = cap;
	if (b == h->budget)
		return;
	for (i = 0; i < h->nctrs; i++) {
		struct grist_remote_counters *c = h->ctrs[i].ctr;

		/* unsigned wrap-around makes a decrease an add too */
		__atomic_fetch_add(&c->budget_sum, b - h->budget, __ATOMIC_RELAXED);
		if (measured && b > __atomic_load_n(&c->budget_max, __ATOMIC_RELAXED))
			__atomic_store_n(&c->budget_max, b, __ATOMIC_RELAXED);
	}
	h->budget = b;
}

/* A rate sample (bandwidth, pieces done) spans two round trips, at least BW_INTERVAL_MIN_NS. */
static uint64_t sample_ns(const struct grist_sched *h)
{
	return 2 * h->rtt_ns > BW_INTERVAL_MIN_NS ? 2 * h->rtt_ns : BW_INTERVAL_MIN_NS;
}

/* A GET came back with @bytes of body; @g its slot (its first-byte time a round-trip sample). */
void grist_sched_measure(struct grist_sched *h, const struct get *g, uint64_t bytes, uint64_t now)
{
	const struct grist_remote_xfer *x = &g->x;
	size_t i;

	if (x->first_ns && x->status >= 200 && x->status <= 299) {
		uint64_t s = x->first_ns > x->start_ns ? x->first_ns - x->start_ns : 1;

		if (!h->rtt_cur || s < h->rtt_cur)
			h->rtt_cur = s;
		if (g->probe)
			h->probing = false;
		s = now - x->start_ns;
		h->lat_ns = h->lat_ns ? (3 * h->lat_ns + s) / 4 : s;
	}
	if (!h->rtt_win_t)
		h->rtt_win_t = now;
	if (now - h->rtt_win_t >= RTT_WINDOW_NS) {
		/* a new window: keep the last one's least, and probe for a sample without the queue */
		h->rtt_prev = h->rtt_cur;
		h->rtt_cur = 0;
		h->rtt_win_t = now;
		h->probing = true;
	}
	h->rtt_ns = h->rtt_prev && (!h->rtt_cur || h->rtt_prev < h->rtt_cur) ? h->rtt_prev : h->rtt_cur;
	h->bw_bytes += bytes;
	if (!h->bw_t)
		h->bw_t = x->start_ns;
	if (h->rtt_ns && now - h->bw_t >= sample_ns(h)) {
		uint64_t rate = (uint64_t)((double)h->bw_bytes * 1e9 / (double)(now - h->bw_t));

		/* the best recent rate, decaying by a quarter an interval: an idle spell does not erase it */
		h->bw = rate > h->bw - h->bw / 4 ? rate : h->bw - h->bw / 4;
		h->bw_t = now;
		h->bw_bytes = 0;
		grist_sched_set_budget(h, (uint64_t)((double)BUDGET_GAIN * (double)h->bw * (double)h->rtt_ns / 1e9), true);
		for (i = 0; i < h->nctrs; i++) {
			__atomic_store_n(&h->ctrs[i].ctr->rtt_ns, h->rtt_ns, __ATOMIC_RELAXED);
			__atomic_store_n(&h->ctrs[i].ctr->bandwidth, h->bw, __ATOMIC_RELAXED);
		}
	}
}

/* @n pieces are done: the rate the clients consume reads at (see grist_sched_launch()). */
void grist_sched_count_done(struct grist_sched *h, uint64_t n, uint64_t now)
{
	h->done_pieces += n;
	if (!h->rate_t) {
		h->rate_t = now;
		return;
	}
	if (now - h->rate_t >= sample_ns(h)) {
		uint64_t r = (uint64_t)((double)(h->done_pieces - h->rate_done) * 1e9 / (double)(now - h->rate_t));

		h->rate = h->rate ? (h->rate + r) / 2 : r;
		h->rate_t = now;
		h->rate_done = h->done_pieces;
	}
}

/* May one more GET go out now? */
bool grist_sched_room(const struct grist_sched *h)
{
	if (h->active + h->waiting >= h->ngets)
		return false;
	if (h->active < h->floor)
		return true;
	return !h->probing && h->inflight_bytes < h->budget;
}

/*
 * May waiting pieces go out as GETs now? Room in the budget, and no client in the middle
 * of a hand-over (it submitted and has not reaped since: grist_sched_release()).
 *
 * The engine hands a unit's reads over per unit, and the units of its read-ahead one after
 * another, before it reaps; and each worker thread is a client. A GET made from the
 * reads handed over so far spans regions whose other reads (a later unit's, another
 * thread's) come next, after its body has passed them: they cannot ride, and their bytes
 * were fetched again (strided shards of g1.ar, tests/interop/test_hosts.py: 0.3-1.7 of
 * 3 MB twice in one process; also two threads reading one chunk of g16.ar). The backend
 * of one thread that the scheduler replaced made GETs only when its thread reaped.
 *
 * A starved client does not cut a hand-over short: a client reaps right after it hands
 * over (the engine, the fetcher and the reader do), so the wait is a few microseconds of
 * its planning, and cutting it short brought the refetches back at 2 threads in half the
 * runs. Only a hand-over older than HOLD_MAX_NS (a client that stopped between submit
 * and reap) is overruled by a starved client, so it cannot stall the others.
 *
 * A client attached that has handed nothing over yet holds too (grist_sched_attach()):
 * the engine attaches every worker before it starts them, and a worker whose first
 * hand-over came after the first worker's GETs had gone out (a thread started late on a
 * busy machine) found their bodies past its reads, and fetched them again (test_hosts.py
 * at 2 threads: 4 runs in 40). Its first submit makes it an ordinary holder. A client
 * that hands nothing over for HOLD_MAX_NS after attaching (a fetcher not used yet) holds
 * nobody from then on, starved or not.
 *
 * A long hand-over goes out in parts: once a client has handed over
 * GRIST_SCHED_HANDOVER_PIECES pieces since its hand-over began (or since waiting pieces
 * were last judged), it holds nobody until they are judged. The first hand-over of a
 * chunk-window shuffle of 611-byte records (group_size 1, a 122 MB object) is the whole
 * read-ahead, 110,000 reads and 0.1 s of the worker's planning; held whole, its first GET
 * went out only then, and its round trip (24 ms behind a 20 ms proxy) was time in which
 * no thread of the process had anything to do. In parts the first GETs go out after
 * 16,384 reads (about 15 ms of planning), and the bodies flow while the worker plans on:
 * the time every grist thread slept before the first batch went from 0.14-0.16 s to
 * 0.08-0.09 s, and the first batch came 0.065 s sooner (the median of 6 alternating pairs,
 * docs/tuning.md, session 38). The cost is the one the whole hand-over avoids: a read
 * handed over after a GET passed its region waits for a later GET (3-5% more body bytes
 * over the first epoch there). Below that length nothing changes: an object smaller than
 * the read-ahead (tests/interop/test_hosts.py's 3 MB of 12,000 reads over 4 processes) is
 * still fetched once.
 */
#define HOLD_MAX_NS 500000000ull

bool grist_sched_may_launch(const struct grist_sched *h)
{
	uint64_t now = 0, age;
	size_t i;

	if (!grist_sched_room(h))
		return false;
	for (i = 0; i < h->nholders; i++) {
		if (h->holders[i].pieces >= GRIST_SCHED_HANDOVER_PIECES)
			continue;
		if (!now)
			now = grist_sched_now();
		age = now - h->holders[i].since_ns;
		if (h->holders[i].fresh && age >= HOLD_MAX_NS)
			continue;
		if (!h->starved || age < HOLD_MAX_NS)
			return false;
	}
	return true;
}

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void grist_sched_start_get(struct grist_sched *h, struct get *g)
{
	size_t i;

	if (grist_remote_xfer_setup(&g->x)) {
		snprintf(g->x.msg, sizeof(g->x.msg), "%s", grist_last_error());
		g->x.error = -ENOMEM;
		grist_sched_fail_get(h, g);
		return;
	}
	grist_sched_depth_account(h);
	g->probe = h->probing;
	if (!grist_direct_start(h, g))
		curl_multi_add_handle(h->multi, g->x.easy);
	h->active++;
	h->inflight_bytes += g->x.len;
	for (i = 0; i < h->nctrs; i++)
		if (h->active > __atomic_load_n(&h->ctrs[i].ctr->inflight_max, __ATOMIC_RELAXED))
			__atomic_store_n(&h->ctrs[i].ctr->inflight_max, (uint64_t)h->active, __ATOMIC_RELAXED);
}

static struct get *free_get(struct grist_sched *h)
{
	unsigned i;

	for (i = 0; i < h->ngets; i++)
		if (h->gets[i].state == GET_FREE)
			return &h->gets[i];
	return NULL;
}

/* Make room for @n segments in @g. 0 or -ENOMEM. */
static int get_reserve(struct get *g, unsigned n)
{
	void *s, *w;

	if (n <= g->cap)
		return 0;
	if (n < 2 * g->cap)
		n = 2 * g->cap;
	s = realloc(g->segs, n * sizeof(*g->segs));
	if (!s)
		return -ENOMEM;
	g->segs = s;
	w = realloc(g->owners, n * sizeof(*g->owners));
	if (!w)
		return -ENOMEM;
	g->owners = w;
	g->cap = n;
	g->x.segs = g->segs;
	return 0;
}

/*
 * Let waiting pieces ride on GETs already out whose body has not reached them yet:
 * with reads a few units apart landing in one region (chunk windows, dense batches, two
 * threads' reads of one region), a piece would otherwise fetch bytes another GET is about
 * to bring anyway. Body bytes reach the segments only inside curl_multi_socket_action,
 * under the lock held here, so adding a segment past the body's current position is safe;
 * a retried GET brings it again. Only the newly arrived pieces try: the others tried when
 * they came, and a GET made since took every waiting piece in its span.
 */
static int ride(struct grist_sched *h)
{
	size_t i, j, kept = h->nridden;
	unsigned k;
	int ret = 0;

	if (!h->active && !h->waiting) {
		h->nridden = h->npending;
		return 0;
	}
	/* which GET each new piece joins, and how many each GET takes */
	for (k = 0; k < h->ngets; k++)
		h->gets[k].riders = 0;
	for (i = h->nridden; i < h->npending; i++) {
		struct piece *p = &h->pending[i];

		p->ride = -1;
		for (k = 0; k < h->ngets; k++) {
			struct get *c = &h->gets[k];
			uint64_t next;

			if ((c->state != GET_ACTIVE && c->state != GET_WAITING) || c->obj != p->obj)
				continue;
			next = c->state == GET_ACTIVE && c->x.body_started ? c->x.base + c->x.got : c->x.off;
			if (c->state == GET_ACTIVE && c->x.body_started && (c->x.status < 200 || c->x.status > 299))
				continue; /* an error answer: this attempt brings no bytes */
			if (p->off >= next && p->off + p->len <= c->x.off + c->x.len) {
				p->ride = (int32_t)k;
				c->riders++;
				break;
			}
		}
	}
	/*
	 * Merge each GET's new pieces (sorted by offset, as the new pieces are) into its
	 * segments, from the back: one pass per GET, not one shift of the segments per piece
	 * (thousands of pieces join a GET spanning an object).
	 */
	for (k = 0; k < h->ngets; k++) {
		struct get *g = &h->gets[k];
		unsigned low, at, from;

		if (!g->riders)
			continue;
		if (get_reserve(g, g->nsegs + g->riders)) {
			ret = -ENOMEM;
			for (i = h->nridden; i < h->npending; i++)
				if (h->pending[i].ride == (int32_t)k)
					h->pending[i].ride = -1;
			continue;
		}
		low = g->state == GET_ACTIVE ? g->x.seg_at : 0; /* a waiting GET starts its body over */
		at = g->nsegs + g->riders;
		from = g->nsegs;
		for (j = h->npending; j-- > h->nridden;) {
			const struct piece *p = &h->pending[j];

			if (p->ride != (int32_t)k)
				continue;
			/* the new one goes after every one that starts before it */
			while (from > low && g->segs[from - 1].off > p->off) {
				at--;
				from--;
				g->segs[at] = g->segs[from];
				g->owners[at] = g->owners[from];
			}
			at--;
			g->segs[at] = (struct grist_remote_seg){ p->off, p->len, p->buf };
			g->owners[at] = (struct owner){ p->req, p->c };
			if (p->seq < g->seq_min)
				g->seq_min = p->seq;
			h->ahead_bytes -= p->len;
		}
		g->nsegs += g->riders;
		g->x.nsegs = g->nsegs;
	}
	for (i = h->nridden; i < h->npending; i++)
		if (h->pending[i].ride < 0)
			h->pending[kept++] = h->pending[i];
	h->npending = h->nridden = kept;
	return ret;
}

/*
 * Drop from the waiting list the pieces that went out in GETs (launch() leaves them in
 * place while its groups hold) and, with @c, every piece of @c (its withdrawal). The
 * groups are made again at the next launch.
 */
void grist_sched_drop_pieces(struct grist_sched *h, const struct grist_sched_client *c)
{
	size_t i, kept = 0, sorted = 0, ridden = 0;

	if (!h->ntaken && !c)
		return;
	for (i = 0; i < h->npending; i++) {
		if (!h->pending[i].req)
			continue;
		if (c && h->pending[i].c == c) {
			h->ahead_bytes -= h->pending[i].len;
			continue;
		}
		sorted += i < h->nsorted;
		ridden += i < h->nridden;
		h->pending[kept++] = h->pending[i];
	}
	h->npending = kept;
	h->nsorted = sorted;
	h->nridden = ridden;
	h->ntaken = 0;
	h->groups_ok = false;
}

/*
 * Put the pieces that arrived since the last GETs were made (sorted here) into the sorted
 * part of the waiting list: O(waiting + new log new), once per launch that makes GETs, not
 * a sort of everything waiting each time (thousands wait while the budget is full).
 */
static int merge_pending(struct grist_sched *h)
{
	size_t i, j, k, nnew = h->npending - h->nsorted;
	struct piece *t;

	if (!nnew)
		return 0;
	h->groups_ok = false;
	/* newly arrived pieces, or runs of them each sorted, in their order of arrival */
	grist_sched_sort(&h->sort, h->pending + h->nsorted, nnew);
	if (h->nsorted) {
		if (grist_array_reserve((void **)&h->merged, &h->merged_cap, h->npending, sizeof(*h->merged)))
			return -ENOMEM;
		/* the pieces that went out in GETs (only sorted ones) are dropped on the way */
		for (i = 0, j = h->nsorted, k = 0; i < h->nsorted || j < h->npending;) {
			if (i < h->nsorted && !h->pending[i].req) {
				i++;
				continue;
			}
			h->merged[k++] = j == h->npending || (i < h->nsorted && grist_sched_cmp_piece(&h->pending[i], &h->pending[j]) <= 0)
						 ? h->pending[i++]
						 : h->pending[j++];
		}
		h->npending = k;
		h->ntaken = 0;
		t = h->pending;
		h->pending = h->merged;
		h->merged = t;
		k = h->pending_cap;
		h->pending_cap = h->merged_cap;
		h->merged_cap = k;
	}
	h->nsorted = h->nridden = h->npending;
	return 0;
}

/* Pieces the clients will want within about this many of the oldest not yet done (see grist_sched_launch()). */
static uint64_t horizon(const struct grist_sched *h)
{
	if (!h->rate || !h->lat_ns)
		return HORIZON_START;
	return h->rate * h->lat_ns / 1000000000ull + HORIZON_START;
}

/*
 * Where the consumers are in the order of arrival (grist_sched_consumed()): the first piece
 * the one furthest behind has not consumed; UINT64_MAX when none says. None while a client
 * waits for a read (that one goes out at once: the rule below, unchanged), and a client
 * that has not said for HOLD_MAX_NS (it stopped consuming: the caller stopped asking for
 * batches) holds nobody.
 */
static uint64_t decode_point(const struct grist_sched *h)
{
	uint64_t least = UINT64_MAX, now;
	size_t i;

	if (h->starved || !h->naheads)
		return UINT64_MAX;
	now = grist_sched_now();
	for (i = 0; i < h->naheads; i++)
		if (now - h->aheads[i].at_ns < HOLD_MAX_NS && h->aheads[i].next < least)
			least = h->aheads[i].next;
	return least;
}

/*
 * Group the waiting pieces (all sorted, none taken) into GETs of at most @span bytes, and
 * order the groups oldest piece first. O(waiting): done again only when pieces come or go
 * (a merge, a withdrawal) or the span changes; a launch with nothing new takes the next
 * groups. Making them on every launch walked every piece waiting once per GET: with
 * 200,000 reads of 611 bytes waiting at the start of a chunk-window shuffle, the walks
 * (and the copy that dropped the taken pieces) were a fifth of the scheduler thread's time
 * before the first batch (docs/tuning.md, run J).
 */
static int make_groups(struct grist_sched *h, uint64_t span)
{
	struct group *groups;
	size_t i, ngroups = 0;

	grist_sched_drop_pieces(h, NULL);
	if (grist_array_reserve((void **)&h->groups, &h->groups_cap, h->npending, sizeof(*h->groups)))
		return -ENOMEM;
	groups = h->groups;
	for (i = 0; i < h->npending;) {
		uint64_t start = h->pending[i].off, end = start + h->pending[i].len, seq = h->pending[i].seq;
		size_t j = i + 1;

		/*
		 * Join a neighbour when the gap is below coalesce_bytes: a round trip costs more
		 * than that many bytes at object-store bandwidths, and a server's requests per
		 * second, not its bytes, are what runs out first. Never past get_span(). (Joining
		 * only while the gaps stay below k x the bytes wanted cut the bytes but multiplied
		 * the GETs: 15.5k against 111k records/s for chunk windows of 1 KiB records at
		 * 20 ms, rclone's ~1.3 ms of CPU per GET being the limit; docs/tuning.md.)
		 */
		while (j < h->npending && h->pending[j].obj == h->pending[i].obj &&
		       h->pending[j].off <= end + h->opt.coalesce_bytes &&
		       (h->pending[j].off + h->pending[j].len > end ? h->pending[j].off + h->pending[j].len : end) - start <=
			       span) {
			if (h->pending[j].off + h->pending[j].len > end)
				end = h->pending[j].off + h->pending[j].len;
			if (h->pending[j].seq < seq)
				seq = h->pending[j].seq;
			j++;
		}
		groups[ngroups++] = (struct group){ i, j - i, seq };
		i = j;
	}
	qsort(groups, ngroups, sizeof(*groups), cmp_group);
	h->ngroups = ngroups;
	h->group_at = 0;
	h->group_span = span;
	h->groups_ok = true;
	h->pending_min = groups[0].seq; /* exact: the oldest group's oldest piece */
	return 0;
}

/*
 * The most bytes one GET spans: split_bytes; before the bandwidth is measured, halved
 * while that is more than a GET's share of the start budget (BUDGET_START / min_inflight)
 * and the half is still coalesce_bytes or more.
 *
 * Why: a GET's body comes in order, so a GET larger than its share of the bytes the pipe
 * holds keeps the pieces past its first few waiting for its bytes, and the other GETs for
 * the pipe. At the start of a chunk-window shuffle the first unit's reads are spread over
 * the whole object, and 8 MiB GETs went out two at a time under the 4 MiB start budget:
 * the first batch of 1 KiB records (group_size 64, 103 MB object, 20 ms proxy, rclone on
 * its own core) came after 0.41-0.54 s, 0.32-0.40 s with the GETs cut to 2 MiB until the
 * first measurement (docs/tuning.md, run J). Only until then: cut to the measured
 * budget's share all along, the GETs were 4 MiB at a 10 MB budget, 2.3x as many, and
 * group_size 1 lost a third of its records/s. Never below coalesce_bytes: a GET joins gaps
 * that short anyway. Halving, not the share itself, keeps the groups made (make_groups()).
 */
static uint64_t get_span(const struct grist_sched *h)
{
	uint64_t share = BUDGET_START / (h->floor ? h->floor : 1), span = h->opt.split_bytes;

	while (!h->bw && span > share && span / 2 >= h->opt.coalesce_bytes && span / 2 >= 4096)
		span /= 2;
	return span;
}

/*
 * Turn waiting pieces into GETs while the budget has room.
 *
 * Only the pieces the clients will want soon go out: those within horizon() of the oldest
 * piece not yet done (the rate reads are done at x a GET's time, plus HORIZON_START),
 * unless a client waits with nothing in flight. The rest wait, and ride on the GETs
 * that do go out or join them: a chunk-window shuffle hands over most of an object's
 * chunks, in an order spread over the whole object, and a GET made as soon as a unit's
 * few hundred reads arrived spanned the object for 1-2% of its bytes (12 MB objects of
 * 616-byte chunks at 20 ms, 10 epochs: 607-793 MB of bodies for 122 MB of chunks;
 * docs/tuning.md, run D). The sequence numbers are the scheduler's, so the pieces of
 * every client count in one order of arrival.
 * Holding cannot stall a read: with no GET out, the oldest waiting piece is where the
 * horizon starts, so its GET always goes out; with GETs out, each one's end (bounded by
 * the timeouts) runs this again, from an oldest piece that has moved on.
 *
 * The horizon counts from the consumers' decoding too (decode_point()). Counted only from
 * the oldest piece not landed, it was always met by the oldest waiting piece once the GETs
 * out had ended: where GETs end faster than the worker decodes (its core taken by others),
 * every piece went out soon after it arrived, a few per region, far ahead of the decoding
 * (one thread: 1.55-2.15 bytes of body per byte wanted in the starved runs, 1.05-1.34 in
 * the others; docs/tuning.md, run I). Now a piece waits until it is within two horizons
 * of what the consumers decode next, and more reads join its region meanwhile. That
 * cannot stall a read either: a client waiting for one turns it off, a consumer that
 * moves on wakes this (@held), and one gone quiet stops counting.
 */
int grist_sched_launch(struct grist_sched *h)
{
	struct group *groups;
	size_t i, ngroups, k;
	uint64_t oldest = UINT64_MAX, limit, hz, dp, least, span;
	bool force;
	int ret;

	if (!h->dirty)
		return 0;
	/*
	 * The newly arrived try the GETs out, sorted by offset (each GET's riders join in
	 * order). With none out there is nothing to ride, and merge_pending() sorts them
	 * when GETs are made: a sort here sorted a first hand-over of 110,000 pieces twice.
	 */
	if (h->npending > h->nridden && (h->active || h->waiting))
		grist_sched_sort(&h->sort, h->pending + h->nridden, h->npending - h->nridden);
	ret = ride(h);
	if (ret)
		return ret;
	/* nothing new: pending may still be NULL (a client withdrew before its first submit) */
	if (h->npending == h->ntaken || !grist_sched_may_launch(h))
		return 0;
	h->judged++;
	h->judged_ns = grist_sched_now();
	/* what the clients handed over so far is judged: a long hand-over holds again for its next part */
	for (i = 0; i < h->nholders; i++)
		h->holders[i].pieces = 0;
	for (k = 0; k < h->ngets; k++)
		if ((h->gets[k].state == GET_ACTIVE || h->gets[k].state == GET_WAITING) && h->gets[k].seq_min < oldest)
			oldest = h->gets[k].seq_min;
	hz = horizon(h);
	dp = decode_point(h);
	force = h->starved && !h->active && !h->waiting;
	/*
	 * Nothing due: no waiting piece is within the limit below. pending_min is at most the
	 * oldest waiting piece's seq, so this can only send a launch on to walk the list when
	 * nothing is due, never hold what is: where pending_min is above the limit it was not
	 * the least term of that limit, which is then the exact one. The waiting list is neither
	 * merged nor walked, so such a launch costs O(newly arrived), not O(waiting): with
	 * 100,000 reads of 611 bytes waiting, the walk on every hand-over and every consumer's
	 * word took 22% of the one core's time.
	 */
	if (!force) {
		least = h->pending_min < oldest ? h->pending_min : oldest;
		if (dp != UINT64_MAX && dp + hz < least)
			least = dp + hz;
		if (h->pending_min > (hz > UINT64_MAX - least ? UINT64_MAX : least + hz)) {
			h->dirty = false;
			h->held = true; /* looked at again when a consumer moves on, or in WAIT_MAX_NS */
			h->held_t = grist_sched_now();
			return 0;
		}
	}
	ret = merge_pending(h);
	if (ret)
		return ret;
	h->dirty = false;
	span = get_span(h);
	if (!h->groups_ok || span != h->group_span) {
		ret = make_groups(h, span);
		if (ret)
			return ret;
	}
	groups = h->groups;
	ngroups = h->ngroups;
	if (groups[h->group_at].seq < oldest)
		oldest = groups[h->group_at].seq;
	/*
	 * From the consumers' place, one horizon on is the margin (a GET's time varies, and the
	 * rate is of landings): a piece goes out once it is within two horizons of the decoding.
	 */
	if (dp != UINT64_MAX && dp + hz < oldest)
		oldest = dp + hz;
	limit = hz > UINT64_MAX - oldest ? UINT64_MAX : oldest + hz;
	h->held = false;
	for (k = h->group_at; k < ngroups && grist_sched_room(h); k++) {
		struct group *gr = &groups[k];
		struct get *g;
		struct grist_remote_object *o = h->pending[gr->first].obj;
		uint64_t start = h->pending[gr->first].off, end = start;

		if (gr->seq > limit && !force) {
			h->held = true; /* looked at again when a consumer moves on, or in WAIT_MAX_NS */
			h->held_t = grist_sched_now();
			break;
		}
		g = free_get(h);
		if (!g)
			break;
		if (get_reserve(g, (unsigned)gr->n)) {
			ret = -ENOMEM;
			break;
		}
		for (i = 0; i < gr->n; i++) {
			const struct piece *p = &h->pending[gr->first + i];

			g->segs[i] = (struct grist_remote_seg){ p->off, p->len, p->buf };
			g->owners[i] = (struct owner){ p->req, p->c };
			if (p->off + p->len > end)
				end = p->off + p->len;
		}
		for (i = 0; i < gr->n; i++) {
			h->ahead_bytes -= h->pending[gr->first + i].len;
			h->pending[gr->first + i].req = NULL; /* taken */
		}
		h->ntaken += gr->n;
		g->nsegs = (unsigned)gr->n;
		g->seq_min = gr->seq;
		g->obj = o;
		g->x.attempt = 0;
		g->x.obj = o;
		g->x.u = &o->u;
		g->x.display = o->url;
		g->x.query = NULL;
		g->x.nquery = 0;
		g->x.suffix = false;
		g->x.off = start;
		g->x.len = end - start;
		g->x.segs = g->segs;
		g->x.nsegs = g->nsegs;
		g->x.keep = NULL;
		g->x.opt = &h->opt;
		g->state = GET_ACTIVE;
		h->gets_started++;
		grist_sched_start_get(h, g);
	}
	/* the untaken stay where they are, with their groups: the oldest of them is where the next launch looks */
	h->group_at = k;
	h->pending_min = k < ngroups ? groups[k].seq : h->seq; /* exact; every piece to come is newer */
	return ret;
}
