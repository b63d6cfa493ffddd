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
 * (sched_launch.c; at most max_inflight GETs, each slot keeping its easy handle and, in the
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
 * The budget (sched_launch.c) is bytes in flight, rtt x bandwidth as measured against
 * the endpoint; launch() there decides which waiting pieces go out as which GETs.
 *
 * A failed attempt waits its backoff and goes out again; a final failure fails every
 * piece of the GET and leaves its message (URL, HTTP status, service code) with each
 * client, for grist_io_req_error() on its file.
 *
 * The thread does not survive fork(): the child starts with an empty table (the loader
 * already refuses to be used across a fork).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/thread.h"
#include "io/sched_internal.h"

#define WAIT_MAX_NS 100000000ull /* the thread looks round at least this often */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t (*hold_clock)(void); /* grist_sched_set_clock(): a test's, or NULL */
static struct grist_sched *table;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static unsigned fork_gen; /* fork() children this process descends through; written single-threaded */

/* In a forked child the threads are gone: forget their schedulers (leaked, not touched). */
static void fork_child(void)
{
	pthread_mutex_init(&table_lock, NULL);
	table = NULL;
	fork_gen++;
}

void grist_sched_set_clock(uint64_t (*now_ns)(void))
{
	__atomic_store_n(&hold_clock, now_ns, __ATOMIC_RELEASE);
}

uint64_t grist_sched_now(void)
{
	uint64_t (*f)(void) = __atomic_load_n(&hold_clock, __ATOMIC_ACQUIRE);

	return f ? f() : grist_remote_now_ns();
}

void grist_sched_probe(struct grist_sched *h, struct grist_sched_probe *out)
{
	pthread_mutex_lock(&h->lock);
	*out = (struct grist_sched_probe){ .judged = h->judged, .gets = h->gets_started, .judged_ns = h->judged_ns,
					   .waiting = h->npending - h->ntaken, .held = h->held, .wakes = h->wakes,
					   .receives = h->receives };
	pthread_mutex_unlock(&h->lock);
}

bool grist_sched_stale(const struct grist_sched *h)
{
	return h->gen != fork_gen;
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

/* Hand @r back to its client @c (from any thread). */
static void complete(struct grist_sched_client *c, struct grist_io_req *r)
{
	if (r->result >= 0)
		r->result = (int32_t)r->done;
	pthread_mutex_lock(&c->lock);
	grist_sched_done_push(&c->done, r);
	if (c->waiting)
		pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/*
 * @g ended well: each request whose last piece it carried goes back to its client. One lock
 * per run of a client's segments (a GET's are mostly one client's), not one per request:
 * a GET spanning an object of 611-byte chunks carries ~13,000 of them, and each request's
 * first load (its done count) missed the cache behind the lock of the one before.
 */
static void complete_get(struct get *g)
{
	unsigned i = 0, j;

	while (i < g->nsegs) {
		struct grist_sched_client *c = g->owners[i].c;
		bool pushed = false;

		pthread_mutex_lock(&c->lock);
		for (j = i; j < g->nsegs && g->owners[j].c == c; j++) {
			struct grist_io_req *r = g->owners[j].req;

			if (j + 8 < g->nsegs)
				__builtin_prefetch(g->owners[j + 8].req, 1);
			r->done += (uint32_t)g->segs[j].len;
			if (r->done >= grist_sched_avail(g->obj, r)) {
				if (r->result >= 0)
					r->result = (int32_t)r->done;
				grist_sched_done_push(&c->done, r);
				pushed = true;
			}
		}
		if (pushed && c->waiting)
			pthread_cond_signal(&c->cond);
		pthread_mutex_unlock(&c->lock);
		i = j;
	}
}

static struct holder *find_hold(struct grist_sched *h, const struct grist_sched_client *c)
{
	size_t i;

	for (i = 0; i < h->nholders; i++)
		if (h->holders[i].c == c)
			return &h->holders[i];
	return NULL;
}

/* @c has handed over all it will for now: what waits for it may go out. */
static void unhold(struct grist_sched *h, const struct grist_sched_client *c)
{
	size_t i;

	for (i = 0; i < h->nholders; i++)
		if (h->holders[i].c == c) {
			h->holders[i] = h->holders[--h->nholders];
			h->dirty = true;
			return;
		}
}

/*
 * Must a hand-over's new pieces wake the thread, with GETs out? Only when one more may go
 * out now. Otherwise all the thread can do is let them ride the GETs out, and it does that
 * at its next look round anyway: the GETs out wake it as their bytes come (every 512 KiB
 * of a body, sched_direct.c) and as they end. The wake per hand-over and per release was a
 * task switch pair on the worker's core, about 1,000 a second at group_size 64, for a ride
 * that waits 1-2 ms without it (docs/tuning.md, session 39).
 */
static bool worth_waking(const struct grist_sched *h)
{
	return !h->active || h->waiting || grist_sched_room(h);
}

int grist_sched_submit(struct grist_sched *h, struct grist_sched_client *c, struct grist_remote_object *const *objs,
		       struct grist_io_req **reqs, unsigned n)
{
	size_t need, before;
	unsigned i;
	bool wake, long_hand = false;

	pthread_mutex_lock(&h->lock);
	/* room for every piece first: a failed submit must leave nothing queued */
	need = h->npending;
	for (i = 0; i < n; i++)
		need += (grist_sched_avail(objs[i], reqs[i]) + h->opt.split_bytes - 1) / h->opt.split_bytes;
	if (grist_array_reserve((void **)&h->pending, &h->pending_cap, need, sizeof(*h->pending)) ||
	    grist_array_reserve((void **)&h->holders, &h->holders_cap, h->nholders + 1, sizeof(*h->holders))) {
		pthread_mutex_unlock(&h->lock);
		return -ENOMEM;
	}
	before = h->npending;
	for (i = 0; i < n; i++) {
		struct grist_io_req *r = reqs[i];
		struct grist_remote_object *o = objs[i];
		uint64_t a = grist_sched_avail(o, r), k;

		r->seq = 0;
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
		r->seq = h->seq - 1;
	}
	/* more may follow before @c reaps: its hand-over is one whole (grist_sched_launch()) */
	if (n) {
		struct holder *hd = find_hold(h, c);
		size_t added = h->npending - before;

		if (!hd || hd->fresh) { /* a hand-over begins */
			if (!hd)
				hd = &h->holders[h->nholders++];
			*hd = (struct holder){ .c = c, .since_ns = grist_sched_now() };
		}
		long_hand = hd->pieces < GRIST_SCHED_HANDOVER_PIECES && hd->pieces + added >= GRIST_SCHED_HANDOVER_PIECES;
		hd->pieces += added;
	}
	/*
	 * With no GET out there is nothing for these pieces to ride on, and no GET may go out
	 * before @c's hand-over ends (grist_sched_release() wakes the thread then), or grows
	 * long enough to go out in parts (@long_hand, grist_sched_may_launch()): a wake here
	 * otherwise only cost a task switch, one per unit of the first hand-over (about 1,200
	 * at the start of a chunk-window shuffle of 1 KiB records, group_size 1). With GETs
	 * out and no room for another, the ride waits for the thread's next look round
	 * (worth_waking()).
	 */
	wake = h->asleep && h->dirty && (!n || long_hand || h->waiting || (h->active && grist_sched_room(h)));
	if (wake) {
		h->asleep = false;
		h->wakes++;
	}
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
		h->wakes++;
		(void)!write(h->evfd, &one, sizeof(one));
	}
}

void grist_sched_release(struct grist_sched *h, struct grist_sched_client *c)
{
	pthread_mutex_lock(&h->lock);
	unhold(h, c);
	if (h->dirty && worth_waking(h))
		wake_locked(h);
	pthread_mutex_unlock(&h->lock);
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

void grist_sched_consumed(struct grist_sched *h, struct grist_sched_client *c, uint64_t next)
{
	size_t i;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->naheads && h->aheads[i].c != c; i++)
		;
	if (i == h->naheads) {
		if (grist_array_reserve((void **)&h->aheads, &h->aheads_cap, h->naheads + 1, sizeof(*h->aheads))) {
			pthread_mutex_unlock(&h->lock);
			return; /* not counted: the horizon stays the oldest read's, as for a client that never says */
		}
		h->aheads[h->naheads++] = (struct ahead){ c, 0, 0 };
	}
	if (next > h->aheads[i].next)
		h->aheads[i].next = next;
	h->aheads[i].at_ns = grist_sched_now();
	/* the consumer moved on: what launch() held for it may go out now */
	if (h->held && h->npending > h->ntaken) {
		h->dirty = true;
		wake_locked(h);
	}
	pthread_mutex_unlock(&h->lock);
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

void grist_sched_fail_get(struct grist_sched *h, struct get *g)
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
		if (r->done >= grist_sched_avail(g->obj, r))
			complete(g->owners[i].c, r);
	}
	grist_sched_count_done(h, g->nsegs, grist_sched_now());
	g->state = GET_FREE;
}

void grist_sched_ended(struct grist_sched *h, struct get *g, CURLcode rc)
{
	enum grist_remote_outcome o;
	uint64_t now;

	grist_sched_depth_account(h);
	h->dirty = true;
	o = grist_remote_xfer_finish(&g->x, rc);
	if (!g->x.direct)
		curl_multi_remove_handle(h->multi, g->x.easy);
	h->active--;
	h->inflight_bytes -= g->x.len;
	now = grist_remote_now_ns();
	grist_sched_measure(h, g, g->x.got, now);
	grist_remote_counters_add_get(g->owners[0].c->ctr, &g->x, o == GRIST_REMOTE_RETRY, now);
	if (o == GRIST_REMOTE_RETRY) {
		g->due_ns = grist_remote_now_ns() + g->x.delay_ns;
		g->state = GET_WAITING;
		h->waiting++;
	} else if (g->x.error) {
		grist_sched_fail_get(h, g);
	} else {
		complete_get(g);
		grist_sched_count_done(h, g->nsegs, grist_sched_now());
		g->state = GET_FREE;
	}
}

/* Judge the transfers curl finished: retry, fail, or hand their pieces back. */
static void finished(struct grist_sched *h)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(h->multi, &left))) {
		struct grist_remote_xfer *x = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		/* finish reads msg->data before the removal frees it */
		grist_sched_ended(h, (struct get *)x, msg->data.result);
	}
}

/* How long a wait may last: until curl's timer or the next retry is due, at most WAIT_MAX_NS; -1 when idle. */
static int wait_ms(struct grist_sched *h)
{
	uint64_t now = grist_remote_now_ns(), best = WAIT_MAX_NS;
	unsigned i;

	if (h->dirty && h->npending > h->ntaken && grist_sched_may_launch(h))
		return 0;
	/* idle (a reader kept for later): sleep until a client writes the eventfd */
	if (!h->active && !h->waiting && h->npending == h->ntaken && h->timer_due == UINT64_MAX)
		return -1;
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

			if (ev[i].data.u64 >= GRIST_DIRECT_TAG) {
				grist_direct_event(h, &h->gets[ev[i].data.u64 - GRIST_DIRECT_TAG], ev[i].events);
				continue;
			}
			if (ev[i].data.fd == h->evfd) {
				(void)!read(h->evfd, &v, sizeof(v));
				continue;
			}
			curl_multi_socket_action(h->multi, ev[i].data.fd, flags, &running);
		}
		if (h->pool)
			grist_direct_tick(h, grist_remote_now_ns());
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
				grist_sched_start_get(h, g);
			}
		}
		/* pieces held for the consumers: a consumer gone quiet stops counting (decode_point()) */
		if (h->held && grist_sched_now() - h->held_t >= WAIT_MAX_NS)
			h->dirty = true;
		/* out of memory: the pieces wait, and the next look round tries again */
		ret = grist_sched_launch(h);
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
	/*
	 * Its first hand-over is coming (an engine attaches every worker before any starts):
	 * GETs made before it would pass the regions its reads fall in (grist_sched_may_launch()).
	 * Without the memory for the mark it is only not waited for.
	 */
	if (!find_hold(h, c) &&
	    !grist_array_reserve((void **)&h->holders, &h->holders_cap, h->nholders + 1, sizeof(*h->holders)))
		h->holders[h->nholders++] = (struct holder){ c, grist_sched_now(), 0, true };
	for (i = 0; i < h->nctrs && h->ctrs[i].ctr != c->ctr; i++)
		;
	if (i < h->nctrs) {
		h->ctrs[i].n++;
	} else if (!grist_array_reserve((void **)&h->ctrs, &h->ctrs_cap, h->nctrs + 1, sizeof(*h->ctrs))) {
		/* the budget's figures count once per set of counters, as one thread's did */
		grist_sched_depth_account(h);
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
	size_t i;
	unsigned k;

	pthread_mutex_lock(&h->lock);
	grist_sched_drop_pieces(h, c);
	unhold(h, c);
	for (i = 0; i < h->naheads; i++)
		if (h->aheads[i].c == c) {
			h->aheads[i] = h->aheads[--h->naheads];
			h->dirty = true;
			break;
		}
	for (k = 0; k < h->ngets; k++) {
		struct get *g = &h->gets[k];

		if ((g->state != GET_ACTIVE && g->state != GET_WAITING) || !withdraw_get(g, c))
			continue;
		/* nobody wants its bytes: stop it (callbacks run only under this lock) */
		grist_sched_depth_account(h);
		if (g->state == GET_ACTIVE) {
			if (g->x.direct)
				grist_direct_stop(h, g);
			else
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
		grist_sched_depth_account(h);
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

		if (g->state == GET_ACTIVE && g->x.direct)
			grist_direct_stop(h, g);
		else if (g->state == GET_ACTIVE)
			curl_multi_remove_handle(h->multi, g->x.easy);
		if (g->x.easy)
			curl_easy_cleanup(g->x.easy);
		grist_remote_xfer_release(&g->x);
		free(g->segs);
		free(g->owners);
	}
	grist_direct_free(h);
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
	grist_sched_sort_free(&h->sort);
	free(h->groups);
	free(h->holders);
	free(h->aheads);
	free(h->ctrs);
	free(h->endpoint);
	free(h);
}

static int sched_create(const struct grist_url *u, const struct grist_remote_options *opt, struct grist_sched **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct grist_sched *h;
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
	ret = grist_thread_start(&h->thread, sched_main, h);
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
			h->gen = fork_gen;
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
