/*
 * The GET scheduler: one per endpoint (and set of remote options) per process, shared by
 * every http io object that reads from it (the loader's workers, a fetcher, the reader's
 * blocking reads, Grain sources in threads), driven by a thread of its own.
 *
 * Why one: an io object sees only its own thread's reads, at most its read-ahead window.
 * On an object larger than that, a chunk-window shuffle spread each thread's reads over
 * the whole object and its GETs carried 2.2-2.85 bytes of body per byte wanted
 * (docs/tuning.md, run G), with N budgets against one endpoint. Here the union of the
 * clients' reads waits in one list: reads of two threads that fall in one region become
 * one GET, and a read rides a GET another thread started.
 *
 * Requests wait, kept sorted by object and offset, until the in-flight budget has room
 * (see below; at most max_inflight GETs, each slot keeping its easy handle and, in the
 * multi's cache, its keep-alive connection) and a client will want them soon (launch()).
 * Then neighbours closer than coalesce_bytes are joined into one GET of at most
 * split_bytes (a longer request was already cut into pieces at submit); the GETs go out
 * oldest piece first, so the engine's pipeline order holds. A GET's body is scattered
 * into its pieces' buffers, in their clients' arenas; the gaps between them are dropped.
 * A finished piece's request goes to its own client's completion queue, whatever thread
 * asked for the GET: determinism is the engine's (bytes land where its plan said; only
 * the timing changes).
 *
 * The multi handle runs on libcurl's socket API: curl says which sockets to watch
 * (on_socket) and when to call back (on_timer); the thread waits in epoll_wait on the
 * scheduler's own epoll set, with an eventfd that clients write when they hand it work.
 * One lock guards everything here; the thread lets go of it only in epoll_wait, so a
 * body's bytes reach the buffers only while it is held, and a client that withdraws its
 * segments under it knows no byte lands there after.
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
 * A failed attempt waits its backoff and goes out again; a final failure fails every
 * piece of the GET and leaves its message (URL, HTTP status, service code) with each
 * client, for grist_io_req_error() on its file.
 *
 * The thread does not survive fork(): the child starts with an empty table (the loader
 * already refuses to be used across a fork).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/error.h"
#include "io/sched.h"

enum { GET_FREE, GET_ACTIVE, GET_WAITING };

#define BUDGET_GAIN 2
#define BUDGET_START (4ull << 20)          /* bytes, before anything is measured */
#define RTT_WINDOW_NS 4000000000ull         /* the round trip is the least of the last 4-8 s */
#define BW_INTERVAL_MIN_NS 20000000ull      /* a bandwidth sample spans at least this */
#define HORIZON_START 256                   /* pieces, before a rate and a GET's time are measured */
#define WAIT_MAX_NS 100000000ull            /* the thread looks round at least this often */

/* Whose a segment is: the request and the client it goes back to. */
struct owner {
	struct grist_io_req *req;
	struct grist_sched_client *c;
};

struct get {
	struct grist_remote_xfer x;
	struct grist_remote_seg *segs;
	struct owner *owners; /* owners[i]: whose segs[i] is */
	unsigned nsegs, cap;
	uint64_t due_ns;
	int state;
	bool probe;      /* started while the depth was held at min_inflight: its time to first byte is the round trip */
	struct grist_remote_object *obj; /* the object the GET reads */
	uint64_t seq_min; /* the oldest piece it carries (riders included) */
	unsigned riders;  /* ride(): the new pieces joining it */
};

/* A piece of a request waiting for a GET. */
struct piece {
	struct grist_io_req *req;
	struct grist_sched_client *c;
	struct grist_remote_object *obj;
	uint64_t off;
	uint64_t len;
	uint8_t *buf;
	uint64_t seq;
	int32_t ride; /* ride(): the GET it joins, or -1 */
};

/* A client's counters, and how many attached clients share them. */
struct ctr_use {
	struct grist_remote_counters *ctr;
	unsigned n;
};

struct grist_sched {
	/* the table's (under table_lock) */
	struct grist_sched *next;
	int refs;
	char *endpoint;
	enum grist_url_scheme scheme;
	/* everything below is under lock */
	pthread_mutex_t lock;
	pthread_t thread;
	bool stop;
	bool asleep;      /* the thread is in epoll_wait: a client with work writes the eventfd */
	int evfd;
	CURLM *multi;
	struct grist_remote_options opt;
	struct ctr_use *ctrs;
	size_t nctrs, ctrs_cap;
	struct get *gets;
	unsigned ngets;
	unsigned active;  /* GETs in the multi */
	unsigned waiting; /* GETs waiting out a backoff */
	unsigned starved; /* clients waiting in reap for a read */
	/* the waiting pieces: [0, nsorted) by object and offset, then the newly arrived in submission order */
	struct piece *pending;
	size_t npending, nsorted, pending_cap;
	struct piece *merged; /* launch()'s merge target, swapped with pending */
	size_t merged_cap;
	struct group *groups; /* launch()'s, kept so a launch allocates nothing */
	size_t groups_cap;
	uint64_t seq;
	uint64_t depth_t;
	/* the budget (see the top of the file) */
	uint64_t inflight_bytes; /* the ranges of the GETs in the multi, summed */
	uint64_t ahead_bytes;    /* the pieces waiting, summed */
	uint64_t budget;         /* bytes */
	uint64_t rtt_ns, rtt_cur, rtt_prev, rtt_win_t;
	bool probing;
	uint64_t bw, bw_t, bw_bytes;
	unsigned floor;          /* min(min_inflight, max_inflight) */
	/* the read-ahead horizon (see launch()) */
	uint64_t lat_ns;         /* a GET's time, start to end, smoothed */
	uint64_t rate;           /* pieces done per second, smoothed */
	uint64_t rate_t, rate_done, done_pieces;
	bool dirty;              /* something launch() decides on changed since it last ran */
	int epfd;          /* the sockets curl asked us to watch, and evfd */
	uint64_t timer_due; /* when curl wants curl_multi_socket_action(CURL_SOCKET_TIMEOUT); UINT64_MAX: never */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct grist_sched *table;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* In a forked child the threads are gone: forget their schedulers (leaked, not touched). */
static void fork_child(void)
{
	pthread_mutex_init(&table_lock, NULL);
	table = NULL;
}

static void fork_setup(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct grist_sched *h = userp;
	struct epoll_event ev = { 0 };

	(void)easy;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(h->epfd, EPOLL_CTL_DEL, s, NULL);
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	ev.data.fd = s;
	if (epoll_ctl(h->epfd, EPOLL_CTL_MOD, s, &ev) && errno == ENOENT)
		epoll_ctl(h->epfd, EPOLL_CTL_ADD, s, &ev);
	return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct grist_sched *h = userp;

	(void)multi;
	h->timer_due = timeout_ms < 0 ? UINT64_MAX : grist_remote_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	return 0;
}

static void depth_account(struct grist_sched *h)
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
static void set_budget(struct grist_sched *h, uint64_t b, bool measured)
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
static void measure(struct grist_sched *h, const struct get *g, uint64_t bytes, uint64_t now)
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
		set_budget(h, (uint64_t)((double)BUDGET_GAIN * (double)h->bw * (double)h->rtt_ns / 1e9), true);
		for (i = 0; i < h->nctrs; i++) {
			__atomic_store_n(&h->ctrs[i].ctr->rtt_ns, h->rtt_ns, __ATOMIC_RELAXED);
			__atomic_store_n(&h->ctrs[i].ctr->bandwidth, h->bw, __ATOMIC_RELAXED);
		}
	}
}

/* @n pieces are done: the rate the clients consume reads at (see launch()). */
static void count_done(struct grist_sched *h, uint64_t n, uint64_t now)
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
static bool room(const struct grist_sched *h)
{
	if (h->active + h->waiting >= h->ngets)
		return false;
	if (h->active < h->floor)
		return true;
	return !h->probing && h->inflight_bytes < h->budget;
}

/* Bytes of @r that exist: a read past the object's end stops there, as at a file's EOF. */
static uint64_t avail(const struct grist_remote_object *o, const struct grist_io_req *r)
{
	if (r->offset >= o->size)
		return 0;
	return o->size - r->offset < r->len ? o->size - r->offset : r->len;
}

/* Hand @r back to its client @c (from any thread). */
static void complete(struct grist_sched_client *c, struct grist_io_req *r)
{
	if (r->result >= 0)
		r->result = (int32_t)r->done;
	pthread_mutex_lock(&c->lock);
	grist_io_queue_push(&c->done, r);
	if (c->waiting)
		pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int grist_sched_submit(struct grist_sched *h, struct grist_sched_client *c, struct grist_remote_object *const *objs,
		       struct grist_io_req **reqs, unsigned n)
{
	size_t need;
	unsigned i;
	bool wake;

	pthread_mutex_lock(&h->lock);
	/* room for every piece first: a failed submit must leave nothing queued */
	need = h->npending;
	for (i = 0; i < n; i++)
		need += (avail(objs[i], reqs[i]) + h->opt.split_bytes - 1) / h->opt.split_bytes;
	if (grist_array_reserve((void **)&h->pending, &h->pending_cap, need, sizeof(*h->pending))) {
		pthread_mutex_unlock(&h->lock);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct grist_io_req *r = reqs[i];
		struct grist_remote_object *o = objs[i];
		uint64_t a = avail(o, r), k;

		if (!a) {
			complete(c, r);
			continue;
		}
		for (k = 0; k < a; k += h->opt.split_bytes) {
			struct piece *p = &h->pending[h->npending++];

			p->req = r;
			p->c = c;
			p->obj = o;
			p->off = r->offset + k;
			p->len = a - k < h->opt.split_bytes ? a - k : h->opt.split_bytes;
			p->buf = r->buf + k;
			p->seq = h->seq++;
			h->ahead_bytes += p->len;
			h->dirty = true;
		}
	}
	wake = h->asleep && h->dirty;
	if (wake)
		h->asleep = false;
	pthread_mutex_unlock(&h->lock);
	if (wake) {
		uint64_t one = 1;

		(void)!write(h->evfd, &one, sizeof(one));
	}
	return 0;
}

static void wake_locked(struct grist_sched *h)
{
	uint64_t one = 1;

	if (h->asleep) {
		h->asleep = false;
		(void)!write(h->evfd, &one, sizeof(one));
	}
}

void grist_sched_starved(struct grist_sched *h, bool on)
{
	pthread_mutex_lock(&h->lock);
	if (on) {
		h->starved++;
		h->dirty = true; /* what waits goes out if nothing else is in flight */
		wake_locked(h);
	} else {
		h->starved--;
	}
	pthread_mutex_unlock(&h->lock);
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->obj != y->obj)
		return (uintptr_t)x->obj < (uintptr_t)y->obj ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A group of sorted pieces [first, first + n) that become one GET. */
struct group {
	size_t first, n;
	uint64_t seq; /* the oldest piece's */
};

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Leave @msg with @c for its file @slot (grist_io_req_error() there names it). */
static void note_error(struct grist_sched_client *c, uint32_t slot, const char *msg)
{
	pthread_mutex_lock(&c->lock);
	if (slot < c->nerrs) {
		free(c->errs[slot]);
		c->errs[slot] = strdup(msg);
		c->errs_new = true;
	}
	pthread_mutex_unlock(&c->lock);
}

static void fail_get(struct grist_sched *h, struct get *g)
{
	unsigned i;

	__atomic_fetch_add(&g->owners[0].c->ctr->errors, 1, __ATOMIC_RELAXED);
	for (i = 0; i < g->nsegs; i++) {
		struct grist_io_req *r = g->owners[i].req;

		if (!i || g->owners[i].c != g->owners[i - 1].c || r->file != g->owners[i - 1].req->file)
			note_error(g->owners[i].c, r->file, g->x.msg);
		if (r->result >= 0)
			r->result = g->x.error;
		r->done += (uint32_t)g->segs[i].len;
		if (r->done >= avail(g->obj, r))
			complete(g->owners[i].c, r);
	}
	count_done(h, g->nsegs, grist_remote_now_ns());
	g->state = GET_FREE;
}

static void start_get(struct grist_sched *h, struct get *g)
{
	size_t i;

	if (grist_remote_xfer_setup(&g->x)) {
		snprintf(g->x.msg, sizeof(g->x.msg), "%s", grist_last_error());
		g->x.error = -ENOMEM;
		fail_get(h, g);
		return;
	}
	depth_account(h);
	g->probe = h->probing;
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
	size_t i, j, kept = h->nsorted;
	unsigned k;
	int ret = 0;

	if (!h->active && !h->waiting)
		return 0;
	/* which GET each new piece joins, and how many each GET takes */
	for (k = 0; k < h->ngets; k++)
		h->gets[k].riders = 0;
	for (i = h->nsorted; i < h->npending; i++) {
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
			for (i = h->nsorted; i < h->npending; i++)
				if (h->pending[i].ride == (int32_t)k)
					h->pending[i].ride = -1;
			continue;
		}
		low = g->state == GET_ACTIVE ? g->x.seg_at : 0; /* a waiting GET starts its body over */
		at = g->nsegs + g->riders;
		from = g->nsegs;
		for (j = h->npending; j-- > h->nsorted;) {
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
	for (i = h->nsorted; i < h->npending; i++)
		if (h->pending[i].ride < 0)
			h->pending[kept++] = h->pending[i];
	h->npending = kept;
	return ret;
}

/*
 * Put the newly arrived pieces (sorted by launch()) into the sorted part of the waiting
 * list, so a launch costs O(waiting + new log new), not a sort of everything waiting
 * each time (thousands wait while the budget is full).
 */
static int merge_pending(struct grist_sched *h)
{
	size_t i, j, k, nnew = h->npending - h->nsorted;
	struct piece *t;

	if (!nnew)
		return 0;
	if (h->nsorted) {
		if (grist_array_reserve((void **)&h->merged, &h->merged_cap, h->npending, sizeof(*h->merged)))
			return -ENOMEM;
		for (i = 0, j = h->nsorted, k = 0; i < h->nsorted || j < h->npending;)
			h->merged[k++] = j == h->npending || (i < h->nsorted && cmp_piece(&h->pending[i], &h->pending[j]) <= 0)
						 ? h->pending[i++]
						 : h->pending[j++];
		t = h->pending;
		h->pending = h->merged;
		h->merged = t;
		k = h->pending_cap;
		h->pending_cap = h->merged_cap;
		h->merged_cap = k;
	}
	h->nsorted = h->npending;
	return 0;
}

/* Pieces the clients will want within about this many of the oldest not yet done (see launch()). */
static uint64_t horizon(const struct grist_sched *h)
{
	if (!h->rate || !h->lat_ns)
		return HORIZON_START;
	return h->rate * h->lat_ns / 1000000000ull + HORIZON_START;
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
 */
static int launch(struct grist_sched *h)
{
	struct group *groups;
	size_t i, ngroups = 0, k, kept;
	uint64_t oldest = UINT64_MAX, limit, hz;
	bool force;
	int ret;

	if (!h->dirty)
		return 0;
	qsort(h->pending + h->nsorted, h->npending - h->nsorted, sizeof(*h->pending), cmp_piece);
	ret = ride(h);
	if (!ret)
		ret = merge_pending(h);
	if (ret)
		return ret;
	if (!h->npending || !room(h))
		return 0;
	h->dirty = false;
	if (grist_array_reserve((void **)&h->groups, &h->groups_cap, h->npending, sizeof(*h->groups)))
		return -ENOMEM;
	groups = h->groups;
	for (i = 0; i < h->npending;) {
		uint64_t start = h->pending[i].off, end = start + h->pending[i].len, seq = h->pending[i].seq;
		size_t j = i + 1;

		/*
		 * Join a neighbour when the gap is below coalesce_bytes: a round trip costs more
		 * than that many bytes at object-store bandwidths, and a server's requests per
		 * second, not its bytes, are what runs out first. Never past split_bytes. (Joining
		 * only while the gaps stay below k x the bytes wanted cut the bytes but multiplied
		 * the GETs: 15.5k against 111k records/s for chunk windows of 1 KiB records at
		 * 20 ms, rclone's ~1.3 ms of CPU per GET being the limit; docs/tuning.md.)
		 */
		while (j < h->npending && h->pending[j].obj == h->pending[i].obj &&
		       h->pending[j].off <= end + h->opt.coalesce_bytes &&
		       (h->pending[j].off + h->pending[j].len > end ? h->pending[j].off + h->pending[j].len : end) - start <=
			       h->opt.split_bytes) {
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
	for (k = 0; k < h->ngets; k++)
		if ((h->gets[k].state == GET_ACTIVE || h->gets[k].state == GET_WAITING) && h->gets[k].seq_min < oldest)
			oldest = h->gets[k].seq_min;
	if (groups[0].seq < oldest)
		oldest = groups[0].seq;
	hz = horizon(h);
	limit = hz > UINT64_MAX - oldest ? UINT64_MAX : oldest + hz;
	force = h->starved && !h->active && !h->waiting;
	for (k = 0; k < ngroups && room(h); k++) {
		struct group *gr = &groups[k];
		struct get *g;
		struct grist_remote_object *o = h->pending[gr->first].obj;
		uint64_t start = h->pending[gr->first].off, end = start;

		if (gr->seq > limit && !force)
			break;
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
		start_get(h, g);
	}
	/* keep the untaken pieces, still sorted */
	if (k) {
		for (i = 0, kept = 0; i < h->npending; i++)
			if (h->pending[i].req)
				h->pending[kept++] = h->pending[i];
		h->npending = h->nsorted = kept;
	}
	return ret;
}

/* Judge the transfers curl finished: retry, fail, or hand their pieces back. */
static void finished(struct grist_sched *h)
{
	CURLMsg *msg;
	uint64_t now;
	unsigned i;
	int left;

	while ((msg = curl_multi_info_read(h->multi, &left))) {
		struct grist_remote_xfer *x = NULL;
		struct get *g;
		enum grist_remote_outcome o;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		g = (struct get *)x;
		depth_account(h);
		h->dirty = true;
		/* finish reads msg->data before the removal frees it */
		o = grist_remote_xfer_finish(&g->x, msg->data.result);
		curl_multi_remove_handle(h->multi, g->x.easy);
		h->active--;
		h->inflight_bytes -= g->x.len;
		now = grist_remote_now_ns();
		measure(h, g, g->x.got, now);
		grist_remote_counters_add_get(g->owners[0].c->ctr, &g->x, o == GRIST_REMOTE_RETRY, now);
		if (o == GRIST_REMOTE_RETRY) {
			g->due_ns = grist_remote_now_ns() + g->x.delay_ns;
			g->state = GET_WAITING;
			h->waiting++;
		} else if (g->x.error) {
			fail_get(h, g);
		} else {
			for (i = 0; i < g->nsegs; i++) {
				struct grist_io_req *r = g->owners[i].req;

				r->done += (uint32_t)g->segs[i].len;
				if (r->done >= avail(g->obj, r))
					complete(g->owners[i].c, r);
			}
			count_done(h, g->nsegs, now);
			g->state = GET_FREE;
		}
	}
}

/* How long a wait may last: until curl's timer or the next retry is due, at most WAIT_MAX_NS. */
static int wait_ms(struct grist_sched *h)
{
	uint64_t now = grist_remote_now_ns(), best = WAIT_MAX_NS;
	unsigned i;

	if (h->dirty && h->npending && room(h))
		return 0;
	if (h->timer_due != UINT64_MAX)
		best = h->timer_due <= now ? 0 : h->timer_due - now < best ? h->timer_due - now : best;
	for (i = 0; i < h->ngets; i++)
		if (h->gets[i].state == GET_WAITING)
			best = h->gets[i].due_ns <= now ? 0 : h->gets[i].due_ns - now < best ? h->gets[i].due_ns - now : best;
	return (int)((best + 999999) / 1000000);
}

/*
 * The thread: wait for sockets, curl's timer, a retry's time or a client's work; then
 * judge what ended, start the retries due and launch what waits. It holds the lock but
 * in epoll_wait.
 */
static void *sched_main(void *arg)
{
	struct grist_sched *h = arg;
	struct epoll_event ev[64];
	int n, i, running, ret;
	uint64_t now;
	unsigned k;

	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		int ms = wait_ms(h);

		h->asleep = true;
		pthread_mutex_unlock(&h->lock);
		n = epoll_wait(h->epfd, ev, 64, ms);
		pthread_mutex_lock(&h->lock);
		h->asleep = false;
		for (i = 0; i < n; i++) {
			int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
				    (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
				    (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
			uint64_t v;

			if (ev[i].data.fd == h->evfd) {
				(void)!read(h->evfd, &v, sizeof(v));
				continue;
			}
			curl_multi_socket_action(h->multi, ev[i].data.fd, flags, &running);
		}
		if (h->timer_due <= grist_remote_now_ns()) {
			h->timer_due = UINT64_MAX;
			curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		}
		finished(h);
		now = grist_remote_now_ns();
		for (k = 0; k < h->ngets; k++) {
			struct get *g = &h->gets[k];

			if (g->state == GET_WAITING && g->due_ns <= now) {
				h->waiting--;
				g->state = GET_ACTIVE;
				start_get(h, g);
			}
		}
		/* out of memory: the pieces wait, and the next look round tries again */
		ret = launch(h);
		if (ret)
			h->dirty = true;
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

void grist_sched_attach(struct grist_sched *h, struct grist_sched_client *c)
{
	size_t i;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->nctrs && h->ctrs[i].ctr != c->ctr; i++)
		;
	if (i < h->nctrs) {
		h->ctrs[i].n++;
	} else if (!grist_array_reserve((void **)&h->ctrs, &h->ctrs_cap, h->nctrs + 1, sizeof(*h->ctrs))) {
		/* the budget's figures count once per set of counters, as one thread's did */
		depth_account(h);
		h->ctrs[h->nctrs++] = (struct ctr_use){ c->ctr, 1 };
		__atomic_fetch_add(&c->ctr->budget_sum, h->budget, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&h->lock);
}

/* Take @c's segments out of @g; true when none is left. */
static bool withdraw_get(struct get *g, const struct grist_sched_client *c)
{
	unsigned i, kept = 0, at = g->x.seg_at;

	for (i = 0; i < g->nsegs; i++) {
		if (g->owners[i].c == c) {
			if (i < g->x.seg_at)
				at--;
			continue;
		}
		g->segs[kept] = g->segs[i];
		g->owners[kept++] = g->owners[i];
	}
	g->nsegs = kept;
	g->x.nsegs = kept;
	g->x.seg_at = at;
	return !kept;
}

void grist_sched_withdraw(struct grist_sched *h, struct grist_sched_client *c)
{
	size_t i, kept = 0, sorted = 0;
	unsigned k;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->npending; i++) {
		if (h->pending[i].c == c) {
			h->ahead_bytes -= h->pending[i].len;
			continue;
		}
		if (i < h->nsorted)
			sorted++;
		h->pending[kept++] = h->pending[i];
	}
	h->npending = kept;
	h->nsorted = sorted;
	for (k = 0; k < h->ngets; k++) {
		struct get *g = &h->gets[k];

		if ((g->state != GET_ACTIVE && g->state != GET_WAITING) || !withdraw_get(g, c))
			continue;
		/* nobody wants its bytes: stop it (callbacks run only under this lock) */
		depth_account(h);
		if (g->state == GET_ACTIVE) {
			curl_multi_remove_handle(h->multi, g->x.easy);
			h->active--;
			h->inflight_bytes -= g->x.len;
		} else {
			h->waiting--;
		}
		g->state = GET_FREE;
		h->dirty = true;
	}
	for (i = 0; i < h->nctrs && h->ctrs[i].ctr != c->ctr; i++)
		;
	if (i < h->nctrs && !--h->ctrs[i].n) {
		depth_account(h);
		__atomic_fetch_sub(&c->ctr->budget_sum, h->budget, __ATOMIC_RELAXED);
		h->ctrs[i] = h->ctrs[--h->nctrs];
	}
	wake_locked(h);
	pthread_mutex_unlock(&h->lock);
}

static void sched_free(struct grist_sched *h)
{
	unsigned i;

	for (i = 0; h->gets && i < h->ngets; i++) {
		struct get *g = &h->gets[i];

		if (g->state == GET_ACTIVE)
			curl_multi_remove_handle(h->multi, g->x.easy);
		if (g->x.easy)
			curl_easy_cleanup(g->x.easy);
		grist_remote_xfer_release(&g->x);
		free(g->segs);
		free(g->owners);
	}
	if (h->multi)
		curl_multi_cleanup(h->multi);
	if (h->epfd >= 0)
		close(h->epfd);
	if (h->evfd >= 0)
		close(h->evfd);
	pthread_mutex_destroy(&h->lock);
	free(h->gets);
	free(h->pending);
	free(h->merged);
	free(h->groups);
	free(h->ctrs);
	free(h->endpoint);
	free(h);
}

static int sched_create(const struct grist_url *u, const struct grist_remote_options *opt, struct grist_sched **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct grist_sched *h;
	sigset_t all, old;
	unsigned i;
	int ret;

	h = calloc(1, sizeof(*h));
	if (!h)
		return grist_fail(-ENOMEM, "http io: out of memory");
	h->epfd = h->evfd = -1;
	pthread_mutex_init(&h->lock, NULL);
	h->opt = *opt;
	h->scheme = u->scheme;
	h->endpoint = strdup(u->endpoint ? u->endpoint : "");
	h->timer_due = UINT64_MAX;
	h->floor = h->opt.min_inflight < h->opt.max_inflight ? h->opt.min_inflight : h->opt.max_inflight;
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	h->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->epfd < 0 || h->evfd < 0) {
		ret = grist_fail(-errno, "http io: epoll_create1/eventfd: %s", strerror(errno));
		goto fail;
	}
	ev.data.fd = h->evfd;
	if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->evfd, &ev)) {
		ret = grist_fail(-errno, "http io: epoll_ctl: %s", strerror(errno));
		goto fail;
	}
	h->multi = curl_multi_init();
	h->ngets = h->opt.max_inflight;
	h->gets = calloc(h->ngets, sizeof(*h->gets));
	if (!h->multi || !h->gets || !h->endpoint) {
		ret = grist_fail(-ENOMEM, "http io: out of memory");
		goto fail;
	}
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	/* HTTP/1.1 keep-alive, one request per connection at a time, a pool as large as the budget */
	curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
	curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)h->ngets);
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->ngets);
	for (i = 0; i < h->ngets; i++) {
		h->gets[i].x.easy = curl_easy_init();
		if (!h->gets[i].x.easy) {
			ret = grist_fail(-ENOMEM, "http io: cannot make a libcurl handle");
			goto fail;
		}
	}
	h->budget = BUDGET_START;
	/* signals go to the caller's threads, not to this one */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&h->thread, NULL, sched_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		ret = grist_fail(ret, "http io: cannot start the GET scheduler's thread: %s", strerror(-ret));
		goto fail;
	}
	*out = h;
	return 0;
fail:
	sched_free(h);
	return ret;
}

int grist_sched_get(const struct grist_url *u, const struct grist_remote_options *opt, struct grist_sched **out)
{
	struct grist_sched *h;
	int ret = 0;

	pthread_once(&fork_once, fork_setup);
	pthread_mutex_lock(&table_lock);
	for (h = table; h; h = h->next)
		if (h->scheme == u->scheme && !strcmp(h->endpoint, u->endpoint ? u->endpoint : "") &&
		    !memcmp(&h->opt, opt, sizeof(*opt)))
			break;
	if (!h) {
		ret = sched_create(u, opt, &h);
		if (!ret) {
			h->next = table;
			table = h;
		}
	}
	if (!ret) {
		h->refs++;
		*out = h;
	}
	pthread_mutex_unlock(&table_lock);
	return ret;
}

void grist_sched_put(struct grist_sched *h)
{
	struct grist_sched **p;
	bool last;

	if (!h)
		return;
	pthread_mutex_lock(&table_lock);
	last = !--h->refs;
	if (last)
		for (p = &table; *p; p = &(*p)->next)
			if (*p == h) {
				*p = h->next;
				break;
			}
	pthread_mutex_unlock(&table_lock);
	if (!last)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	wake_locked(h);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->thread, NULL);
	sched_free(h);
}
