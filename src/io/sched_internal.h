/* The GET scheduler's insides: sched.c (its thread, its clients), sched_launch.c (the budget, the GETs). */
#ifndef GRIST_IO_SCHED_INTERNAL_H
#define GRIST_IO_SCHED_INTERNAL_H

#include "io/sched.h"

enum { GET_FREE, GET_ACTIVE, GET_WAITING };

#define BUDGET_START (4ull << 20)          /* bytes, before anything is measured */

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
	struct direct *d; /* sched_direct.c's state for this slot (made at its first direct GET), or NULL */
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

/* sched_sort.c: the waiting pieces' sort, its memory kept between sorts */
struct grist_sched_key;
struct grist_sched_sort {
	struct grist_sched_key *keys;
	size_t keys_cap;
	struct piece *tmp;
	size_t tmp_cap;
};

/* The order of the waiting list: object (by address), offset, order of arrival. */
int grist_sched_cmp_piece(const void *a, const void *b);

/*
 * grist_sched_sort() - sort @a[0..@n) by grist_sched_cmp_piece(), given pieces that are
 * equal but for their seq in their order of arrival (the sort is stable, and that is how
 * it orders them). Never fails: without memory it takes qsort's way.
 */
void grist_sched_sort(struct grist_sched_sort *s, struct piece *a, size_t n);
void grist_sched_sort_free(struct grist_sched_sort *s);

/*
 * A client in the middle of a hand-over (grist_sched_release()), since @since_ns; or,
 * @fresh, one attached that has handed nothing over yet (its first hand-over is coming).
 * @pieces: what it handed over since its hand-over began or waiting pieces were last
 * judged; from GRIST_SCHED_HANDOVER_PIECES on, it holds nobody (grist_sched_may_launch()).
 */
struct holder {
	const struct grist_sched_client *c;
	uint64_t since_ns;
	size_t pieces;
	bool fresh;
};

/* Where a client's consumer is, as it last said (grist_sched_consumed()), and when. */
struct ahead {
	const struct grist_sched_client *c;
	uint64_t next;  /* the order of arrival of the first piece it has not consumed */
	uint64_t at_ns;
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
	unsigned gen;     /* the fork generation it was made in */
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
	/* clients that submitted and have not reaped since: their hand-over may go on (see grist_sched_launch()) */
	struct holder *holders;
	size_t nholders, holders_cap;
	/*
	 * The waiting pieces: [0, nsorted) by object and offset; [nsorted, nridden) arrived since
	 * and tried to ride (sorted when a launch needs every piece in order); [nridden, npending)
	 * newly arrived, in submission order (grist_sched_launch()). ntaken of [0, nsorted) went
	 * out in GETs (req NULL) and stay in place until the next merge or withdrawal, so the
	 * groups made from them stay valid: npending - ntaken wait.
	 */
	struct piece *pending;
	size_t npending, nsorted, nridden, pending_cap, ntaken;
	uint64_t pending_min; /* at most the oldest waiting piece's seq (exact after a launch that made GETs) */
	struct piece *merged; /* launch()'s merge target, swapped with pending */
	size_t merged_cap;
	/*
	 * launch()'s groups of [0, nsorted), oldest first, made with GETs of at most group_span
	 * bytes; [0, group_at) went out. Valid (groups_ok) until pieces are merged in or
	 * withdrawn, or the span changes.
	 */
	struct group *groups;
	size_t groups_cap, ngroups, group_at;
	uint64_t group_span;
	bool groups_ok;
	struct grist_sched_sort sort; /* launch()'s sorts of the waiting pieces */
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
	struct ahead *aheads;    /* the clients that say how far their consumer is behind their landed reads */
	size_t naheads, aheads_cap;
	bool held;               /* launch() left pieces waiting for the consumers (see decode_point()), */
	uint64_t held_t;         /* since then (grist_sched_now()) */
	uint64_t judged;         /* launches that judged the waiting pieces (grist_sched_probe()), */
	uint64_t judged_ns;      /* the last at this grist_sched_now() */
	uint64_t gets_started;   /* GETs launch() made (not their retries) */
	uint64_t wakes;          /* clients' writes of the eventfd (grist_sched_probe()) */
	uint64_t receives;       /* the direct path's recv() and recvmsg() calls, likewise */
	struct direct_pool *pool; /* sched_direct.c: the endpoint's address and idle connections, or NULL */
	int epfd;          /* the sockets curl asked us to watch, and evfd */
	uint64_t timer_due; /* when curl wants curl_multi_socket_action(CURL_SOCKET_TIMEOUT); UINT64_MAX: never */
};

/* A group of sorted pieces [first, first + n) that become one GET. */
struct group {
	size_t first, n;
	uint64_t seq; /* the oldest piece's */
};

/* Bytes of @r that exist: a read past the object's end stops there, as at a file's EOF. */
static inline uint64_t grist_sched_avail(const struct grist_remote_object *o, const struct grist_io_req *r)
{
	if (r->offset >= o->size)
		return 0;
	return o->size - r->offset < r->len ? o->size - r->offset : r->len;
}

/*
 * The clock of the rules that wait on the clients (hand-overs, consumers' words, held
 * pieces, the rate of reads done): CLOCK_MONOTONIC, or a test's (grist_sched_set_clock()).
 * Round trips, bandwidths, curl's timers and backoffs keep CLOCK_MONOTONIC.
 */
uint64_t grist_sched_now(void);

/* sched_launch.c: the budget (everything under h->lock) */
void grist_sched_depth_account(struct grist_sched *h);
void grist_sched_set_budget(struct grist_sched *h, uint64_t b, bool measured);
void grist_sched_measure(struct grist_sched *h, const struct get *g, uint64_t bytes, uint64_t now);
void grist_sched_count_done(struct grist_sched *h, uint64_t n, uint64_t now);
bool grist_sched_room(const struct grist_sched *h);
bool grist_sched_may_launch(const struct grist_sched *h);
/* sched_launch.c: turn waiting pieces into GETs (and riders); 0 or -ENOMEM (the pieces wait) */
int grist_sched_launch(struct grist_sched *h);
void grist_sched_drop_pieces(struct grist_sched *h, const struct grist_sched_client *c);
void grist_sched_start_get(struct grist_sched *h, struct get *g);
/* sched.c: fail every piece of @g with its error */
void grist_sched_fail_get(struct grist_sched *h, struct get *g);
/* sched.c: @g's attempt ended with @rc (the direct path's in curl's terms): judge it, retry, fail or hand back */
void grist_sched_ended(struct grist_sched *h, struct get *g, CURLcode rc);

/*
 * sched_direct.c: plain http:// GETs read by grist's own HTTP/1.1, their bodies received
 * straight into the segments' buffers (everything under h->lock, on the thread but for
 * start and stop, which clients may call under the lock too).
 * grist_direct_start(): true when @g's attempt (set up) went out this way; false: use curl.
 * grist_direct_event(): @g's socket is ready (epoll events @ev).
 * grist_direct_tick(): stall rules and timeouts of every direct GET at @now.
 * grist_direct_stop(): @g stops mid-way (withdrawn, or the scheduler ends): its connection closes.
 * grist_direct_free(): the pool's connections and every slot's state (the scheduler's end).
 */
/* sched_addrs.c: the endpoint's name and addresses, for the direct path */
#define GRIST_DIRECT_ADDRS_MAX 16 /* addresses of a name kept */
struct grist_direct_lookup;
struct grist_direct_addrs {
	char host[256], port[16];
	struct sockaddr_storage addr[GRIST_DIRECT_ADDRS_MAX];
	socklen_t len[GRIST_DIRECT_ADDRS_MAX];
	unsigned n;           /* 0 until a lookup found the name's addresses */
	unsigned first;       /* the address the last connection got through to: tried first */
	bool stale;           /* every address failed an attempt: look up again before the next connection */
	uint64_t resolved_ns; /* when a lookup last answered (grist_remote_now_ns()) */
	struct grist_direct_lookup *lk; /* the lookup under way (its answer not yet taken), or NULL */
};
/* @a's host and port from an endpoint's "host[:port]" or "[v6][:port]"; false when it is neither. */
bool grist_direct_addrs_init(struct grist_direct_addrs *a, const char *hostport);
/*
 * grist_direct_lookup() - look @a's name up (again) on a thread of its own, unless a
 * lookup is under way: 0, it is (its thread writes @wake, an eventfd, when it answers);
 * 1, it answered at once (a numeric host: nothing to wait for); or -errno (no thread).
 */
int grist_direct_lookup(struct grist_direct_addrs *a, int wake);
/*
 * grist_direct_lookup_take() - true when the lookup under way answered: @a now holds its
 * list (the old one kept when it found nothing), the lookup is over. Never waits.
 */
bool grist_direct_lookup_take(struct grist_direct_addrs *a);
/* The scheduler ends: a lookup under way ends on its own, and frees what it holds. Never waits. */
void grist_direct_lookup_drop(struct grist_direct_addrs *a);
/* Whether @a's name is to be looked up again before a new connection at @now. */
bool grist_direct_resolve_due(const struct grist_direct_addrs *a, uint64_t now);
/* "127.0.0.1:9000" or "[::1]:9000": address @i of @a, for messages. */
const char *grist_direct_addr_name(const struct grist_direct_addrs *a, unsigned i, char *out, size_t cap);

#define GRIST_DIRECT_TAG (1ull << 32) /* epoll data of a direct GET's socket: the tag | its slot */
bool grist_direct_start(struct grist_sched *h, struct get *g);
void grist_direct_event(struct grist_sched *h, struct get *g, uint32_t ev);
void grist_direct_tick(struct grist_sched *h, uint64_t now);
void grist_direct_stop(struct grist_sched *h, struct get *g);
void grist_direct_free(struct grist_sched *h);

#endif
