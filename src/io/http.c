/*
 * The remote io backend: ranged GETs on one libcurl multi handle, driven by the thread
 * that submits and reaps (no thread per request, no thread of its own).
 *
 * Requests wait, kept sorted by object and offset, until the in-flight budget has room
 * (see below; at most max_inflight GETs per io object, each slot keeping its easy handle
 * and, in the multi's cache, its keep-alive connection) and the caller will want them
 * soon (launch()). Then neighbours closer than coalesce_bytes are joined into one GET
 * of at most split_bytes (a longer request was already cut into pieces at submit); the
 * GETs go out oldest piece first, so the engine's pipeline order holds. A GET's body is
 * scattered into its pieces' buffers; the gaps between them are dropped.
 *
 * The multi handle runs on libcurl's socket API: curl says which sockets to watch
 * (on_socket) and when to call back (on_timer); reap waits in epoll_wait on this object's
 * own epoll set, so the cost of a wait does not grow with the GETs in flight.
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
 * Pieces the engine handed over early (its read-ahead) wait while the budget is full,
 * and are merged into denser GETs for having waited.
 *
 * A failed attempt waits its backoff in the waiting list and goes out again; a final
 * failure fails every piece of the GET and leaves its message (URL, HTTP status,
 * service code) on the file for grist_io_req_error().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"

enum { GET_FREE, GET_ACTIVE, GET_WAITING };

#define BUDGET_GAIN 2
#define BUDGET_START (4ull << 20)          /* bytes, before anything is measured */
#define RTT_WINDOW_NS 4000000000ull         /* the round trip is the least of the last 4-8 s */
#define BW_INTERVAL_MIN_NS 20000000ull      /* a bandwidth sample spans at least this */
#define HORIZON_START 256                   /* pieces, before a rate and a GET's time are measured */

struct get {
	struct grist_remote_xfer x;
	struct grist_remote_seg *segs;
	struct grist_io_req **owners; /* owners[i]: the request segs[i] belongs to */
	unsigned nsegs, cap;
	uint64_t due_ns;
	int state;
	bool probe;      /* started while the depth was held at min_inflight: its time to first byte is the round trip */
	uint32_t file;   /* the io file slot the GET reads */
	uint64_t seq_min; /* the oldest piece it carries (riders included) */
	unsigned riders;  /* ride(): the new pieces joining it */
	struct get *next;
};

/* A piece of a request waiting for a GET. */
struct piece {
	struct grist_io_req *req;
	uint64_t off;
	uint64_t len;
	uint8_t *buf;
	uint64_t seq;
	uint32_t file;
	int32_t ride; /* ride(): the GET it joins, or -1 */
};

struct http_io {
	struct grist_io io;
	CURLM *multi;
	struct grist_remote_options opt;
	struct grist_remote_counters own;
	struct grist_remote_counters *ctr;
	struct get *gets;
	unsigned ngets;
	unsigned active;  /* GETs in the multi */
	unsigned waiting; /* GETs waiting out a backoff */
	/* the waiting pieces: [0, nsorted) by object and offset, then the newly arrived in submission order */
	struct piece *pending;
	size_t npending, nsorted, pending_cap;
	struct piece *merged; /* launch()'s merge target, swapped with pending */
	size_t merged_cap;
	struct group *groups; /* launch()'s, kept so a launch allocates nothing */
	size_t groups_cap;
	uint64_t seq;
	struct grist_io_queue done;
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
	bool starved;            /* the caller waits in reap for a read */
	int epfd;          /* the sockets curl asked us to watch */
	uint64_t timer_due; /* when curl wants curl_multi_socket_action(CURL_SOCKET_TIMEOUT); UINT64_MAX: never */
};

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct http_io *h = userp;
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
	struct http_io *h = userp;

	(void)multi;
	h->timer_due = timeout_ms < 0 ? UINT64_MAX : grist_remote_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	return 0;
}

static struct http_io *to_http(struct grist_io *io)
{
	return (struct http_io *)io;
}

static void depth_account(struct http_io *h)
{
	uint64_t now = grist_remote_now_ns();

	if (h->depth_t) {
		__atomic_fetch_add(&h->ctr->inflight_area, (uint64_t)h->active * (now - h->depth_t), __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->ctr->inflight_bytes_area, h->inflight_bytes * (now - h->depth_t) / 1024,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->ctr->ahead_bytes_area, h->ahead_bytes * (now - h->depth_t) / 1024,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->ctr->inflight_span, now - h->depth_t, __ATOMIC_RELAXED);
	}
	h->depth_t = now;
}

/* @measured: @b came from measurements (the start value is no peak) */
static void set_budget(struct http_io *h, uint64_t b, bool measured)
{
	uint64_t cap = (uint64_t)h->opt.max_inflight * h->opt.split_bytes;

	if (b > cap)
		b = cap;
	if (b == h->budget)
		return;
	/* unsigned wrap-around makes a decrease an add too */
	__atomic_fetch_add(&h->ctr->budget_sum, b - h->budget, __ATOMIC_RELAXED);
	if (measured && b > __atomic_load_n(&h->ctr->budget_max, __ATOMIC_RELAXED))
		__atomic_store_n(&h->ctr->budget_max, b, __ATOMIC_RELAXED);
	h->budget = b;
}

/* A rate sample (bandwidth, pieces done) spans two round trips, at least BW_INTERVAL_MIN_NS. */
static uint64_t sample_ns(const struct http_io *h)
{
	return 2 * h->rtt_ns > BW_INTERVAL_MIN_NS ? 2 * h->rtt_ns : BW_INTERVAL_MIN_NS;
}

/* A GET came back with @bytes of body; @g its slot (its first-byte time a round-trip sample). */
static void measure(struct http_io *h, const struct get *g, uint64_t bytes, uint64_t now)
{
	const struct grist_remote_xfer *x = &g->x;

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
		__atomic_store_n(&h->ctr->rtt_ns, h->rtt_ns, __ATOMIC_RELAXED);
		__atomic_store_n(&h->ctr->bandwidth, h->bw, __ATOMIC_RELAXED);
	}
}

/* @n pieces are done: the rate the caller consumes reads at (see launch()). */
static void count_done(struct http_io *h, uint64_t n, uint64_t now)
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
static bool room(const struct http_io *h)
{
	if (h->active + h->waiting >= h->ngets)
		return false;
	if (h->active < h->floor)
		return true;
	return !h->probing && h->inflight_bytes < h->budget;
}

static int http_create(const struct grist_io_config *cfg, struct grist_io **out)
{
	struct http_io *h;
	unsigned i;
	int ret;

	ret = grist_remote_global_init();
	if (ret)
		return ret;
	h = calloc(1, sizeof(*h));
	if (!h)
		return grist_fail(-ENOMEM, "http io: out of memory");
	if (cfg->remote_options) {
		ret = grist_remote_options_resolve(cfg->remote_options, &h->opt);
		if (ret) {
			free(h);
			return ret;
		}
	} else {
		grist_remote_options_current(&h->opt);
	}
	h->ctr = cfg->remote_counters ? cfg->remote_counters : &h->own;
	h->timer_due = UINT64_MAX;
	h->floor = h->opt.min_inflight < h->opt.max_inflight ? h->opt.min_inflight : h->opt.max_inflight;
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (h->epfd < 0) {
		ret = grist_fail(-errno, "http io: epoll_create1: %s", strerror(errno));
		h->epfd = -1;
		goto fail;
	}
	h->multi = curl_multi_init();
	h->ngets = h->opt.max_inflight;
	h->gets = calloc(h->ngets, sizeof(*h->gets));
	if (!h->multi || !h->gets) {
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
	set_budget(h, BUDGET_START, false);
	*out = &h->io;
	return 0;
fail:
	if (h->gets)
		for (i = 0; i < h->ngets; i++)
			if (h->gets[i].x.easy)
				curl_easy_cleanup(h->gets[i].x.easy);
	free(h->gets);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	if (h->epfd >= 0)
		close(h->epfd);
	free(h);
	return ret;
}

static void http_destroy(struct grist_io *io)
{
	struct http_io *h = to_http(io);
	unsigned i;

	/* callbacks run only inside curl_multi_socket_action: once removed, no buffer is written */
	for (i = 0; i < h->ngets; i++) {
		struct get *g = &h->gets[i];

		if (g->state == GET_ACTIVE)
			curl_multi_remove_handle(h->multi, g->x.easy);
		curl_easy_cleanup(g->x.easy);
		grist_remote_xfer_release(&g->x);
		free(g->segs);
		free(g->owners);
	}
	if (h->ctr != &h->own)
		depth_account(h);
	curl_multi_cleanup(h->multi);
	close(h->epfd);
	free(h->gets);
	free(h->pending);
	free(h->merged);
	free(h->groups);
	free(h);
}

/* Bytes of @r that exist: a read past the object's end stops there, as at a file's EOF. */
static uint64_t avail(struct http_io *h, const struct grist_io_req *r)
{
	const struct grist_remote_object *o = h->io.files[r->file].remote;

	if (r->offset >= o->size)
		return 0;
	return o->size - r->offset < r->len ? o->size - r->offset : r->len;
}

static void complete(struct http_io *h, struct grist_io_req *r)
{
	if (r->result >= 0)
		r->result = (int32_t)r->done;
	grist_io_queue_push(&h->done, r);
}

/* Local files: read now (a mixed dataset's local part costs no GET slot). */
static void read_local(struct grist_io *io, struct grist_io_req *r)
{
	int fd = io->files[r->file].fd;

	for (;;) {
		ssize_t n = pread(fd, r->buf + r->done, r->len - r->done, (off_t)(r->offset + r->done));

		if (grist_io_req_step(r, n < 0 ? -errno : (int)n) == GRIST_IO_STEP_DONE)
			break;
	}
}

static int http_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n)
{
	struct http_io *h = to_http(io);
	size_t need = h->npending;
	unsigned i;

	/* room for every piece first: a failed submit must leave nothing queued */
	for (i = 0; i < n; i++)
		if (io->files[reqs[i]->file].remote)
			need += (avail(h, reqs[i]) + h->opt.split_bytes - 1) / h->opt.split_bytes;
	if (grist_array_reserve((void **)&h->pending, &h->pending_cap, need, sizeof(*h->pending)))
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct grist_io_req *r = reqs[i];
		uint64_t a, k;

		if (!io->files[r->file].remote) {
			read_local(io, r);
			grist_io_queue_push(&h->done, r);
			continue;
		}
		a = avail(h, r);
		if (!a) {
			complete(h, r);
			continue;
		}
		for (k = 0; k < a; k += h->opt.split_bytes) {
			struct piece *p = &h->pending[h->npending++];

			p->req = r;
			p->off = r->offset + k;
			p->len = a - k < h->opt.split_bytes ? a - k : h->opt.split_bytes;
			p->buf = r->buf + k;
			p->seq = h->seq++;
			p->file = r->file;
			h->ahead_bytes += p->len;
			h->dirty = true;
		}
	}
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
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

static void fail_get(struct http_io *h, struct get *g)
{
	struct grist_io_file *f = &h->io.files[g->owners[0]->file];
	unsigned i;

	free(f->error);
	f->error = strdup(g->x.msg);
	__atomic_fetch_add(&h->ctr->errors, 1, __ATOMIC_RELAXED);
	for (i = 0; i < g->nsegs; i++) {
		struct grist_io_req *r = g->owners[i];

		if (r->result >= 0)
			r->result = g->x.error;
		r->done += (uint32_t)g->segs[i].len;
		if (r->done >= avail(h, r))
			complete(h, r);
	}
	count_done(h, g->nsegs, grist_remote_now_ns());
	g->state = GET_FREE;
}

static void start_get(struct http_io *h, struct get *g)
{
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
	if (h->active > __atomic_load_n(&h->ctr->inflight_max, __ATOMIC_RELAXED))
		__atomic_store_n(&h->ctr->inflight_max, (uint64_t)h->active, __ATOMIC_RELAXED);
}

static struct get *free_get(struct http_io *h)
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
 * with reads a few units apart landing in one region (chunk windows, dense batches), a
 * piece would otherwise fetch bytes another GET is about to bring anyway. Body bytes
 * reach the segments only inside curl_multi_socket_action on this thread, so adding a
 * segment past the body's current position is safe; a retried GET brings it again.
 * Only the newly arrived pieces try: the others tried when they came, and a GET made
 * since took every waiting piece in its span.
 */
static int ride(struct http_io *h)
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

			if ((c->state != GET_ACTIVE && c->state != GET_WAITING) || c->file != p->file)
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
			g->owners[at] = p->req;
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
static int merge_pending(struct http_io *h)
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

/* Pieces the caller will want within about this many of the oldest not yet done (see launch()). */
static uint64_t horizon(const struct http_io *h)
{
	if (!h->rate || !h->lat_ns)
		return HORIZON_START;
	return h->rate * h->lat_ns / 1000000000ull + HORIZON_START;
}

/*
 * Turn waiting pieces into GETs while the budget has room.
 *
 * Only the pieces the caller will want soon go out: those within horizon() of the oldest
 * piece not yet done (the rate reads are done at x a GET's time, plus HORIZON_START),
 * unless the caller waits with nothing in flight. The rest wait, and ride on the GETs
 * that do go out or join them: a chunk-window shuffle hands over most of an object's
 * chunks, in an order spread over the whole object, and a GET made as soon as a unit's
 * few hundred reads arrived spanned the object for 1-2% of its bytes (12 MB objects of
 * 616-byte chunks at 20 ms, 10 epochs: 607-793 MB of bodies for 122 MB of chunks;
 * docs/tuning.md, run D).
 * Holding cannot stall a read: with no GET out, the oldest waiting piece is where the
 * horizon starts, so its GET always goes out; with GETs out, each one's end (bounded by
 * the timeouts) runs this again, from an oldest piece that has moved on.
 */
static int launch(struct http_io *h)
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
		while (j < h->npending && h->pending[j].file == h->pending[i].file &&
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
		struct grist_remote_object *o = h->io.files[h->pending[gr->first].file].remote;
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
			g->owners[i] = p->req;
			if (p->off + p->len > end)
				end = p->off + p->len;
		}
		for (i = 0; i < gr->n; i++) {
			h->ahead_bytes -= h->pending[gr->first + i].len;
			h->pending[gr->first + i].req = NULL; /* taken */
		}
		g->nsegs = (unsigned)gr->n;
		g->seq_min = gr->seq;
		g->file = h->pending[gr->first].file;
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

/* Hand curl the sockets epoll found ready (waiting up to @wait_ms), and its timer when due. */
static void drive(struct http_io *h, int wait_ms)
{
	struct epoll_event ev[64];
	int n, i, running;

	n = epoll_wait(h->epfd, ev, 64, wait_ms);
	for (i = 0; i < n; i++) {
		int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
			    (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
			    (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);

		curl_multi_socket_action(h->multi, ev[i].data.fd, flags, &running);
	}
	if (h->timer_due <= grist_remote_now_ns()) {
		h->timer_due = UINT64_MAX;
		curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}
}

/* Judge finished transfers, start retries that are due, launch waiting pieces. */
static int progress(struct http_io *h, int wait_ms)
{
	uint64_t now;
	CURLMsg *msg;
	int left, ret, pass;
	unsigned i;

	for (pass = 0; pass < 2; pass++) {
		/* the second pass starts what the first one added (curl's timer fires at 0) */
		drive(h, pass ? 0 : wait_ms);
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
			grist_remote_counters_add_get(h->ctr, &g->x, o == GRIST_REMOTE_RETRY, now);
			if (o == GRIST_REMOTE_RETRY) {
				g->due_ns = grist_remote_now_ns() + g->x.delay_ns;
				g->state = GET_WAITING;
				h->waiting++;
			} else if (g->x.error) {
				fail_get(h, g);
			} else {
				for (i = 0; i < g->nsegs; i++) {
					struct grist_io_req *r = g->owners[i];

					r->done += (uint32_t)g->segs[i].len;
					if (r->done >= avail(h, r))
						complete(h, r);
				}
				count_done(h, g->nsegs, now);
				g->state = GET_FREE;
			}
		}
		now = grist_remote_now_ns();
		for (i = 0; i < h->ngets; i++) {
			struct get *g = &h->gets[i];

			if (g->state == GET_WAITING && g->due_ns <= now) {
				h->waiting--;
				g->state = GET_ACTIVE;
				start_get(h, g);
			}
		}
		ret = launch(h);
		if (ret)
			return grist_fail(ret, "http io: out of memory");
	}
	return 0;
}

/* How long a wait may last: until curl's timer or the next retry is due, at most 100 ms. */
static int wait_ms(struct http_io *h)
{
	uint64_t now = grist_remote_now_ns(), best = 100000000ull;
	unsigned i;

	if (h->timer_due != UINT64_MAX)
		best = h->timer_due <= now ? 0 : h->timer_due - now < best ? h->timer_due - now : best;
	for (i = 0; i < h->ngets; i++)
		if (h->gets[i].state == GET_WAITING)
			best = h->gets[i].due_ns <= now ? 0 : h->gets[i].due_ns - now < best ? h->gets[i].due_ns - now : best;
	return (int)((best + 999999) / 1000000);
}

static int http_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait)
{
	struct http_io *h = to_http(io);
	unsigned n;
	int ret;

	ret = progress(h, 0);
	if (ret)
		return ret;
	n = grist_io_queue_drain(&h->done, done, max);
	/* bounded: every GET ends within its timeouts, and its retries are counted */
	if (n < min_wait) {
		h->starved = h->dirty = true; /* what waits goes out if nothing else is in flight */
		while (n < min_wait) {
			ret = progress(h, wait_ms(h));
			if (ret)
				break;
			n += grist_io_queue_drain(&h->done, done + n, max - n);
		}
		h->starved = false;
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < n; i++)
		done[i]->retries = 0; /* remote retries are counted by cause in the counters */
	return (int)n;
}

static void http_stats(struct grist_io *io, struct grist_io_stats *st)
{
	(void)io;
	(void)st;
}

const struct grist_io_ops grist_io_http_ops = {
	.name = "http",
	.remote = true,
	.create = http_create,
	.submit = http_submit,
	.reap = http_reap,
	.destroy = http_destroy,
	.stats = http_stats,
};
