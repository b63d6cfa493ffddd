/* One GET scheduler per endpoint and process (sched.c), and the clients it serves (http.c). */
#ifndef GRIST_IO_SCHED_H
#define GRIST_IO_SCHED_H

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "io/io.h"
#include "io/remote.h"

struct grist_sched;

/*
 * A client's finished requests, oldest first: a ring of @cap pointers, @cap the client's
 * queue depth. No more of its requests are ever out (grist_io_submit() keeps to the
 * depth), so a push cannot fail. Not a list through req->next: a reap then loaded each
 * request's next pointer from the request before it, one cache miss after another, 110,000
 * of them after a first hand-over at group_size 1 (6.6% of the grist core's time before the
 * first batch, all of it on that load); from an array the loads are independent.
 */
struct grist_sched_done {
	struct grist_io_req **r;
	size_t head, n, cap;
};

static inline void grist_sched_done_push(struct grist_sched_done *q, struct grist_io_req *r)
{
	size_t at = q->head + q->n++;

	q->r[at < q->cap ? at : at - q->cap] = r;
}

/* Move up to @max of @q's requests, oldest first, to @out; how many. */
static inline unsigned grist_sched_done_drain(struct grist_sched_done *q, struct grist_io_req **out, unsigned max)
{
	size_t n = q->n < max ? q->n : max, first = q->cap - q->head < n ? q->cap - q->head : n;

	memcpy(out, q->r + q->head, first * sizeof(*out));
	memcpy(out + first, q->r, (n - first) * sizeof(*out));
	q->head = q->head + n < q->cap ? q->head + n : q->head + n - q->cap;
	q->n -= n;
	return (unsigned)n;
}

/*
 * What the scheduler knows of a client (an http io object, driven by one thread): where
 * its completed requests go, and the failures to name on its files. The scheduler writes
 * these under @lock from its own thread; the client reads them under @lock from its own.
 */
struct grist_sched_client {
	pthread_mutex_t lock;
	pthread_cond_t cond;           /* signalled when @done gains a request */
	bool waiting;                  /* the client sleeps on @cond */
	struct grist_sched_done done;
	/* the last failure on file slot i, for the client to move to its file table (or NULL) */
	char **errs;
	unsigned nerrs;
	bool errs_new;
	struct grist_remote_counters *ctr; /* where the GETs its reads start are counted */
};

/*
 * grist_sched_get() - the scheduler for @u's endpoint and the options @opt (resolved),
 * made (with its thread) if none is running, referenced. 0 or -errno.
 */
int grist_sched_get(const struct grist_url *u, const struct grist_remote_options *opt, struct grist_sched **out);

/* Hand @c's requests @reqs[0..@n) (of the objects @objs[i]) to @s. 0, or -ENOMEM with nothing queued. */
int grist_sched_submit(struct grist_sched *s, struct grist_sched_client *c, struct grist_remote_object *const *objs,
		       struct grist_io_req **reqs, unsigned n);

/*
 * grist_sched_release() - @c has handed over what it will for now (it reaps): its
 * requests since its last release may go out. Until then they wait (grist_sched_submit()
 * holds them), but not while a client starves, so one that never reaps stalls nobody, and
 * not past GRIST_SCHED_HANDOVER_PIECES pieces: a longer hand-over goes out in parts.
 */
#define GRIST_SCHED_HANDOVER_PIECES 16384
void grist_sched_release(struct grist_sched *s, struct grist_sched_client *c);

/*
 * grist_sched_consumed() - @c's consumer (the engine's decoding) is done with every piece
 * before @next in the order of arrival (struct grist_io_req's seq + 1). The read-ahead
 * horizon counts from where the consumers are, not only from the oldest read not yet
 * landed: while they have landed reads enough before them, waiting reads wait for more
 * to merge with (grist_sched_launch()). A client that never says (a fetcher, the reader),
 * or has not said for 500 ms, is not counted.
 */
void grist_sched_consumed(struct grist_sched *s, struct grist_sched_client *c, uint64_t next);

/* @c starts (@on) or stops waiting for a completion: what waits goes out if nothing is in flight. */
void grist_sched_starved(struct grist_sched *s, bool on);

/*
 * @c's counters join @s's figures (its budget, depth); once per client, before its first
 * submit. Until that first submit (or its withdrawal, or 500 ms) no GET goes out: its reads
 * are coming, and GETs made without them would pass their regions.
 */
void grist_sched_attach(struct grist_sched *s, struct grist_sched_client *c);

/*
 * grist_sched_withdraw() - @c goes: its waiting pieces are dropped and its segments taken
 * out of the GETs in flight (one left with none is stopped), so no byte lands in its
 * buffers after this returns; its counters leave @s.
 */
void grist_sched_withdraw(struct grist_sched *s, struct grist_sched_client *c);

/*
 * True in a fork() child for a scheduler of the parent's: its thread did not follow, so a
 * client takes a new one (grist_sched_get() makes it) and leaves the old one untouched.
 */
bool grist_sched_stale(const struct grist_sched *s);

/* What a scheduler has decided so far (tests/io/sched_check.c), read under its lock. */
struct grist_sched_probe {
	uint64_t judged; /* launches that judged the waiting pieces (the budget had room, no hand-over held them) */
	uint64_t gets;   /* GETs made from waiting pieces (not riders, not retries) */
	size_t waiting;  /* pieces waiting */
	uint64_t judged_ns; /* the last judgement's time, by the hold rules' clock (grist_sched_set_clock()) */
	bool held;       /* the last judgement left pieces waiting for the consumers */
	uint64_t wakes;  /* times a client woke the thread (a write of its eventfd) */
	uint64_t receives; /* socket reads of the direct path (sched_direct.c), head and body */
};
void grist_sched_probe(struct grist_sched *s, struct grist_sched_probe *out);

/*
 * grist_sched_set_clock() - the clock the rules that wait on clients read (a hand-over's
 * age, a consumer's last word, held pieces, the rate of reads done), for every scheduler
 * of the process; NULL: CLOCK_MONOTONIC (the default). A test that sets its own decides
 * when a consumer counts as quiet, whatever the machine's load.
 */
void grist_sched_set_clock(uint64_t (*now_ns)(void));

/*
 * grist_direct_set_resolver() - what the direct path (sched_direct.c) asks for a plain
 * http:// endpoint's addresses, for every scheduler of the process; NULL: getaddrinfo()
 * (the default). The resolver fills at most @max of @addr/@len for @host and @port and
 * says how many (0: the lookup failed), on a lookup thread of the scheduler's (it may take
 * its time: nothing waits for it but the GETs that need its answer). It is asked again
 * once @every_ms passed since (0: 60 s, curl's DNS cache timeout). Set it before any
 * scheduler exists. A test (tests/io/sched_check.c) gives a name several addresses, a dead
 * one first, which this host's /etc/hosts cannot, or a lookup that sleeps or hangs.
 */
typedef unsigned (*grist_direct_resolver)(const char *host, const char *port, struct sockaddr_storage *addr,
					  socklen_t *len, unsigned max);
void grist_direct_set_resolver(grist_direct_resolver r, unsigned every_ms);

/* Drop a reference from grist_sched_get(); the last one stops the thread and frees @s. */
void grist_sched_put(struct grist_sched *s);

#endif
