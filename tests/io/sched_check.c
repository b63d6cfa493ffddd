/*
 * sched-check merge|fork|hold|handover|quiet URL: the GET scheduler (src/io/sched.c) from outside, for
 * tests/interop/test_remote.py.
 *
 * merge: two threads' neighbouring reads of one object leave as one GET. Run
 * (test_two_threads_share_one_get) with the endpoint
 * behind a recording proxy that delays each request: two http io objects (as two engine
 * workers have), one GET slot (inflight:1). The main thread's first read, far from the
 * others, takes the slot (the oldest piece goes first); while its GET waits in the proxy,
 * the main thread reads [A, A+LEN) and a second thread [B, B+LEN) close by. When the slot frees, the scheduler sends both as one GET, and each
 * thread reaps only its own read. Prints "main OFF HEX" and "other OFF HEX" for the test
 * to check against the local file (and the proxy's GETs); exits 1 on any failure.
 *
 * hold: the read-ahead horizon counts from where the consumer is (grist_io_consumed()).
 * One io object reaps NHOLD reads and says it consumed the first few: a read handed over
 * next is more than two horizons (2 x 256 pieces before a rate is measured) past the
 * consumer, which has the rest in hand, so the scheduler judges it and holds it: no GET
 * ("held"; exits 1 if it went out). Once the consumer says it consumed them all, the read
 * goes out and lands without the client waiting in reap ("landed"). Then NHOLD more, the
 * consumer says it consumed a few and goes quiet: a read handed over then is held while
 * that word is 499 ms old ("held 499") and goes out once it is 500 ms old ("quiet"): a
 * consumer that stopped holds nobody. No sleep decides anything: the scheduler's clock
 * for these rules is this program's (grist_sched_set_clock(), moved only by it), and each
 * step waits until the scheduler has judged the read again (grist_sched_probe()), so a
 * busy machine only makes it slower. Waits are bounded (30 s) only to fail, not to pass.
 *
 * handover: a long hand-over goes out in parts (grist_sched_may_launch()). One io object
 * hands over GRIST_SCHED_HANDOVER_PIECES - 1 reads of 64 bytes, back to back from 0, 64 a
 * submit, and does not reap (its hand-over goes on): nothing is judged within 200 ms
 * ("held"; exits 1 if a GET went out). One more read makes the hand-over that long: GETs go
 * out before it ends ("out"). Then it reaps them all; prints "sum HEX", the FNV-1a hash of
 * the bytes read in order (the file's first GRIST_SCHED_HANDOVER_PIECES x 64 bytes), for
 * the test to check against the local file.
 *
 * quiet: the scheduler's thread sleeps through what it cannot act on (sched_direct.c's
 * set_lowat(), sched.c's worth_waking()); run behind a proxy that delays each request
 * (test_scheduler_thread_sleeps_through_bodies), with one GET slot (inflight:1). First a
 * GET of QUIET_BODY bytes (QUIET_BODY / QUIET_READ reads back to back), reaped without
 * ever waiting in reap (a waiting client asks for every byte at once): prints "receives
 * N", the socket reads the scheduler made for it, head and body. Then a read that takes
 * the slot, and while its GET waits in the proxy QUIET_ROUNDS hand-overs of one read
 * each, 2 ms apart (submit, then a reap that does not wait, which ends the hand-over), none of which
 * may go out before that GET ends: prints "wakes N", the times they woke the thread.
 * Then "sum HEX", the FNV-1a hash of every byte read in order (the file's first
 * QUIET_BODY bytes, then the slot's read, then the rounds'), for the test to check.
 *
 * fork: an io object reads, the process forks, and the child reads through the same io
 * object (as a reader kept from before a fork does): the parent's scheduler has no thread
 * in the child, so the child must take its own, not wait forever. Prints the child's bytes
 * as "child OFF HEX"; exits 1 if the child fails or is not done within 30 s.
 *
 * addrs URL LIST[/LIST2] RETRIES [EVERY_MS]: the direct path's addresses (src/io/sched_direct.c) are
 * the comma-separated IP:PORT of LIST at the first lookup and of LIST2 (or LIST) at each
 * later one (grist_direct_set_resolver()), whatever URL's host: a dead address first, as a
 * name with several A records where one is down. Reads at A, B and FIRST, one after
 * another, with RETRIES retries (backoff 10 ms); prints "main OFF HEX" for each and
 * "lookups N" at the end; exits 1 on a failed read (its error on stderr). With EVERY_MS,
 * the name is looked up again after EVERY_MS (not 60 s), and the reads wait EVERY_MS + 50 ms
 * between them: a new connection after each wait looks it up again.
 *
 * lookup URL ENDPOINT2 others|timeout|background: the direct path's lookups run off the
 * scheduler's thread and lock (src/io/sched_addrs.c). URL is opened at AWS_ENDPOINT_URL
 * (E1) and again at ENDPOINT2 (E2: the test gives a fault proxy that closes each
 * connection after its answer), each with its scheduler; this program's resolver answers
 * at once but for E2's port, whose lookups sleep or hang as the step says (see
 * lookup_others(), lookup_timeout(), lookup_background()). Prints what it measured and
 * each read's bytes ("e1|e2 OFF HEX"); exits 1 on a failed step (why on stderr).
 */
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"
#include "io/sched.h"

#define LEN 1000
#define A 10000
#define B 11500
#define FIRST 1200000 /* more than coalesce_bytes (1 MiB) past B: a GET of its own */
#define NHOLD 1000    /* hold: reads in a consumer's hand */

static struct grist_remote_object *obj;
static struct grist_remote_options opt;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

struct side {
	const char *name;
	struct grist_io *io;
	uint32_t slot;
	struct grist_io_req req;
	uint8_t buf[LEN];
	int ret;
};

static int make(struct side *s)
{
	struct grist_io_config cfg = { .remote_options = &opt, .queue_depth = 2 * NHOLD };
	int ret = grist_io_create(GRIST_IO_HTTP, &cfg, &s->io);

	return ret ? ret : grist_io_add_remote(s->io, obj, &s->slot);
}

/* Submit a read of LEN bytes at @off and reap it: it must be this side's own request. */
static int submit(struct side *s, uint64_t off)
{
	struct grist_io_req *r = &s->req;

	memset(r, 0, sizeof(*r));
	r->file = s->slot;
	r->offset = off;
	r->len = LEN;
	r->buf = s->buf;
	r->user_data = off;
	return grist_io_submit(s->io, &r, 1) == 1 ? 0 : -1;
}

static int reap(struct side *s)
{
	struct grist_io_req *done[4];
	int n = grist_io_reap(s->io, done, 4, 1);

	if (n != 1 || done[0] != &s->req || done[0]->result != LEN) {
		fprintf(stderr, "%s: reaped %d, result %d: %s\n", s->name, n, n == 1 ? done[0]->result : 0,
			grist_last_error());
		return -1;
	}
	/* one line at a time: the two threads print as they reap */
	pthread_mutex_lock(&out_lock);
	printf("%s %llu ", s->name, (unsigned long long)s->req.offset);
	for (int i = 0; i < LEN; i++)
		printf("%02x", s->buf[i]);
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	return 0;
}

static void *other_main(void *arg)
{
	struct side *s = arg;

	s->ret = submit(s, B);
	if (!s->ret)
		s->ret = reap(s);
	return NULL;
}

static char *addr_lists[2];
static unsigned lookups;

/* The numeric address @h port @port into @addr/@len: 1, or 0 when it is not one. */
static unsigned numeric(const char *h, const char *port, struct sockaddr_storage *addr, socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;

	if (getaddrinfo(h, port, &hints, &ai) || !ai)
		return 0;
	memcpy(addr, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 1;
}

/* grist_direct_set_resolver()'s: the list of the first lookup, then the second's. */
static unsigned fake_lookup(const char *host, const char *port, struct sockaddr_storage *addr, socklen_t *len,
			    unsigned max)
{
	char list[1024], *save = NULL, *tok;
	unsigned n = 0;

	(void)host;
	(void)port;
	snprintf(list, sizeof(list), "%s", addr_lists[__atomic_fetch_add(&lookups, 1, __ATOMIC_RELAXED) ? 1 : 0]);
	for (tok = strtok_r(list, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(tok, ':'), *h = tok;

		if (!colon)
			continue;
		*colon = '\0';
		if (*h == '[') {
			h++;
			h[strlen(h) - 1] = '\0';
		}
		n += numeric(h, colon + 1, &addr[n], &len[n]);
	}
	return n;
}

static unsigned addrs_every_ms;

static int addrs_check(struct side *s)
{
	const uint64_t at[] = { A, B, FIRST };
	int ret = 0;

	for (unsigned i = 0; i < 3 && !ret; i++) {
		if (i && addrs_every_ms)
			usleep((addrs_every_ms + 50) * 1000);
		ret = submit(s, at[i]) || reap(s) ? 1 : 0;
	}
	printf("lookups %u\n", __atomic_load_n(&lookups, __ATOMIC_RELAXED));
	return ret;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

#define FNV1A_START 14695981039346656037ull

/* @h carried over @n bytes at @p by FNV-1a: the "sum" the tests check against the file. */
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

/*
 * lookup: sched-check's resolver answers any port with the URL's host at once, but makes
 * the lookups of E2's port (slow_port) as slow_plan says, call by call: > 0, sleep that
 * many ms; -1, hang until released (at most 5 s, so that a scheduler that waits for it
 * fails the check rather than hanging it).
 */
static char slow_port[16];
static int slow_plan[4];
static unsigned slow_calls, slow_running;
static bool slow_released;
static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cond = PTHREAD_COND_INITIALIZER;

static unsigned plan_lookup(const char *host, const char *port, struct sockaddr_storage *addr, socklen_t *len,
			    unsigned max)
{
	struct timespec until;
	int ms;

	(void)max;
	if (strcmp(port, slow_port))
		return numeric(host, port, addr, len);
	pthread_mutex_lock(&slow_lock);
	ms = slow_plan[slow_calls < 4 ? slow_calls : 3];
	slow_calls++;
	slow_running++;
	pthread_cond_broadcast(&slow_cond);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms < 0 ? 5 : ms / 1000;
	until.tv_nsec += ms < 0 ? 0 : (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	/* a sleep, or a hang that slow_release() ends */
	while ((ms > 0 || !slow_released) && pthread_cond_timedwait(&slow_cond, &slow_lock, &until) == 0)
		;
	slow_running--;
	pthread_cond_broadcast(&slow_cond);
	pthread_mutex_unlock(&slow_lock);
	return numeric(host, port, addr, len);
}

/* A new plan for E2's lookups, counted from 0. */
static void slow_reset(int a, int b)
{
	pthread_mutex_lock(&slow_lock);
	slow_plan[0] = a;
	slow_plan[1] = slow_plan[2] = slow_plan[3] = b;
	slow_calls = 0;
	slow_released = false;
	pthread_mutex_unlock(&slow_lock);
}

/* Wait (at most 10 s) until E2's lookups began @calls times and @running are under way; 0 or -1. */
static int slow_wait(unsigned calls, unsigned running)
{
	struct timespec until;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&slow_lock);
	while ((slow_calls < calls || slow_running != running) && !ret)
		ret = pthread_cond_timedwait(&slow_cond, &slow_lock, &until);
	pthread_mutex_unlock(&slow_lock);
	return ret ? -1 : 0;
}

/* Let the hung lookups go, and wait until none is under way. */
static int slow_release(void)
{
	pthread_mutex_lock(&slow_lock);
	slow_released = true;
	pthread_cond_broadcast(&slow_cond);
	pthread_mutex_unlock(&slow_lock);
	return slow_wait(0, 0);
}

/* One read of LEN bytes at @off of file @slot, handed over (not waited for). */
static int lookup_submit(struct grist_io *io, struct grist_io_req *r, uint8_t *buf, uint32_t slot, uint64_t off)
{
	*r = (struct grist_io_req){ .file = slot, .offset = off, .len = LEN, .buf = buf };
	return grist_io_submit(io, &r, 1) == 1 ? 0 : -1;
}

/* @r landed: 0 when it read LEN bytes (printed as "NAME OFF HEX"), else -1 (the error on stderr). */
static int lookup_print(const struct grist_io_req *r, const char *name, bool landed)
{
	if (!landed || r->result != LEN) {
		fprintf(stderr, "%s: %s\n", name, landed ? grist_last_error() : "never landed");
		return -1;
	}
	printf("%s %llu ", name, (unsigned long long)r->offset);
	for (int i = 0; i < LEN; i++)
		printf("%02x", r->buf[i]);
	printf("\n");
	return 0;
}

/* Reap until @r lands, then lookup_print() it. */
static int lookup_reap(struct grist_io *io, struct grist_io_req *r, const char *name)
{
	struct grist_io_req *done[4];
	bool landed = false;

	while (!landed) {
		int n = grist_io_reap(io, done, 4, 1);

		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			landed |= done[i] == r;
	}
	return lookup_print(r, name, landed);
}

/*
 * others: E2's first lookup sleeps 1500 ms. One io object reads at A through E2 and E1;
 * once E2's lookup is under way, E1's read lands within "others MS" (before, a client
 * that waited took E2's scheduler's lock, held through the lookup), then E2's.
 */
static int lookup_others(struct grist_remote_object *o1, struct grist_remote_object *o2)
{
	static uint8_t b1[LEN], b2[LEN];
	struct grist_io_config cfg = { .remote_options = &opt, .queue_depth = 8 };
	struct grist_io_req r1, r2, *done[4];
	struct grist_io *io = NULL;
	uint32_t s1, s2;
	uint64_t t0;
	int ret = -1, n = -1;

	slow_reset(1500, 0);
	/* a reap that does not wait hands both over (E1's read may even land in it) */
	if (grist_io_create(GRIST_IO_HTTP, &cfg, &io) || grist_io_add_remote(io, o1, &s1) ||
	    grist_io_add_remote(io, o2, &s2) || lookup_submit(io, &r2, b2, s2, A) || lookup_submit(io, &r1, b1, s1, A))
		goto out;
	n = grist_io_reap(io, done, 4, 0);
	if (n < 0 || n > 1 || (n == 1 && done[0] != &r1) || slow_wait(1, 1))
		goto out;
	t0 = now_ms();
	if (n ? lookup_print(&r1, "e1", true) : lookup_reap(io, &r1, "e1"))
		goto out;
	printf("others %llu\n", (unsigned long long)(now_ms() - t0));
	ret = lookup_reap(io, &r2, "e2");
out:
	if (ret)
		fprintf(stderr, "others: %s\n", grist_last_error());
	grist_io_destroy(io);
	return ret;
}

/*
 * timeout: connect_timeout_ms 300 and E2's first lookup sleeps 1500 ms: with @retries 0
 * the read fails ("failed ERR"); with more it lands once the lookup answers, which no
 * attempt started again ("lookups N").
 */
static int lookup_timeout(struct grist_remote_object *o2, unsigned retries)
{
	static uint8_t b[LEN];
	struct grist_io_config cfg = { .remote_options = &opt, .queue_depth = 8 };
	struct grist_io_req r, *done[4];
	struct grist_io *io = NULL;
	uint32_t s;
	int ret = -1;

	opt.connect_timeout_ms = 300;
	opt.retries = retries;
	slow_reset(1500, 0);
	if (grist_io_create(GRIST_IO_HTTP, &cfg, &io) || grist_io_add_remote(io, o2, &s) || lookup_submit(io, &r, b, s, A))
		goto out;
	if (!retries) {
		if (grist_io_reap(io, done, 4, 1) == 1 && r.result < 0) {
			printf("failed %s\n", grist_last_error());
			ret = 0;
		} else {
			fprintf(stderr, "timeout: the read did not fail (result %d)\n", r.result);
		}
		goto out;
	}
	ret = lookup_reap(io, &r, "e2");
	pthread_mutex_lock(&slow_lock);
	printf("lookups %u\n", slow_calls);
	pthread_mutex_unlock(&slow_lock);
out:
	grist_io_destroy(io);
	/* the lookup a failed attempt left goes on: let it end, so the next check starts clean */
	if (slow_wait(1, 0))
		ret = -1;
	return ret;
}

/*
 * background: E2's name is looked up again after 200 ms and its second lookup hangs. A
 * read 250 ms after the first (E2 closes each connection, so it needs a new one) goes to
 * the address known, "background MS" after it was handed over; then the io object closes
 * with the lookup hung, in "close MS".
 */
static int lookup_background(struct grist_remote_object *o2)
{
	static uint8_t b[LEN];
	struct grist_io_config cfg = { .remote_options = &opt, .queue_depth = 8 };
	struct grist_io_req r;
	struct grist_io *io = NULL;
	uint32_t s;
	uint64_t t0;
	int ret = -1;

	slow_reset(0, -1);
	if (grist_io_create(GRIST_IO_HTTP, &cfg, &io) || grist_io_add_remote(io, o2, &s) ||
	    lookup_submit(io, &r, b, s, A) || lookup_reap(io, &r, "e2"))
		goto out;
	usleep(250 * 1000);
	t0 = now_ms();
	if (lookup_submit(io, &r, b, s, B) || lookup_reap(io, &r, "e2"))
		goto out;
	printf("background %llu\n", (unsigned long long)(now_ms() - t0));
	if (slow_wait(2, 1)) {
		fprintf(stderr, "background: the name was not looked up again\n");
		goto out;
	}
	t0 = now_ms();
	grist_io_destroy(io);
	io = NULL;
	printf("close %llu\n", (unsigned long long)(now_ms() - t0));
	ret = 0;
out:
	grist_io_destroy(io);
	if (slow_release())
		ret = -1;
	return ret;
}

/* See the top of the file. 0 or 1. */
static int lookup_check(const char *url, const char *endpoint2, const char *step)
{
	struct grist_remote_object *o1 = NULL, *o2 = NULL;
	const char *colon = strrchr(endpoint2, ':');
	int ret = 1;

	snprintf(slow_port, sizeof(slow_port), "%s", colon ? colon + 1 : "80");
	grist_direct_set_resolver(plan_lookup, 200);
	opt.backoff_ms = 10;
	/* the same object at E2: its own scheduler */
	if (grist_remote_open(url, &o1) || setenv("AWS_ENDPOINT_URL", endpoint2, 1) || grist_remote_open(url, &o2)) {
		fprintf(stderr, "sched-check: %s\n", grist_last_error());
		goto out;
	}
	if (!strcmp(step, "others"))
		ret = lookup_others(o1, o2);
	else if (!strcmp(step, "timeout"))
		ret = lookup_timeout(o2, 0) || lookup_timeout(o2, 20);
	else if (!strcmp(step, "background"))
		ret = lookup_background(o2);
	ret = ret ? 1 : 0;
out:
	if (o1)
		grist_remote_unref(o1);
	if (o2)
		grist_remote_unref(o2);
	grist_direct_set_resolver(NULL, 0);
	return ret;
}

/* NHOLD reads of 100 bytes, 1000 apart from 0, handed over and reaped. 0 or -1. */
static int hold_batch(struct side *s, struct grist_io_req *reqs, uint8_t *bufs)
{
	struct grist_io_req *p[NHOLD], *done[64];
	int i, got = 0, n;

	for (i = 0; i < NHOLD; i++) {
		reqs[i] = (struct grist_io_req){ .file = s->slot, .offset = (uint64_t)i * 1000, .len = 100, .buf = bufs + i * 100 };
		p[i] = &reqs[i];
	}
	if (grist_io_submit(s->io, p, NHOLD) != NHOLD)
		return -1;
	while (got < NHOLD) {
		n = grist_io_reap(s->io, done, 64, 1);
		if (n <= 0)
			return -1;
		for (i = 0; i < n; i++)
			if (done[i]->result != 100)
				return -1;
		got += n;
	}
	return 0;
}

/* The hold rules' clock (grist_sched_set_clock()): moved by hold_check() alone. */
static uint64_t fake_ns = 1000000000000ull;

static uint64_t fake_now(void)
{
	return __atomic_load_n(&fake_ns, __ATOMIC_ACQUIRE);
}

/*
 * Wait until @sc has judged its waiting pieces again (more than @judged judgements) with
 * its clock at @at_ns or later, and say whether @r still waits there: 0 held, -1 it went
 * out (or landed), or nothing was judged within 30 s.
 */
static int still_held(struct side *s, struct grist_sched *sc, const struct grist_io_req *r, uint64_t judged,
		      uint64_t at_ns)
{
	struct grist_sched_probe p;
	struct grist_io_req *done[4];
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < 30000) {
		if (grist_io_reap(s->io, done, 4, 0) != 0) /* never waits: a client waiting in reap turns the rule off */
			return -1;
		grist_sched_probe(sc, &p);
		if (p.judged > judged && p.judged_ns >= at_ns)
			return p.waiting == 1 && p.held && r->result == 0 ? 0 : -1;
		usleep(1000);
	}
	return -1;
}

/* Wait until @r lands, with reaps that never wait. 0, or -1 if not within 30 s. */
static int lands(struct side *s, const struct grist_io_req *r)
{
	struct grist_io_req *done[4];
	uint64_t t0 = now_ms();
	int n;

	while (now_ms() - t0 < 30000) {
		n = grist_io_reap(s->io, done, 4, 0);
		if (n)
			return n == 1 && done[0] == r && r->result == LEN ? 0 : -1;
		usleep(1000);
	}
	return -1;
}

/* Hand a read of LEN bytes at @off over and let it go (a reap that does not wait). */
static int hand_over(struct side *s, uint64_t off)
{
	struct grist_io_req *r = &s->req, *done[4];

	memset(r, 0, sizeof(*r));
	r->file = s->slot;
	r->offset = off;
	r->len = LEN;
	r->buf = s->buf;
	return grist_io_submit(s->io, &r, 1) == 1 && grist_io_reap(s->io, done, 4, 0) == 0 ? 0 : -1;
}

/* Move the hold rules' clock on by @ms; the time it then reads. */
static uint64_t advance(uint64_t ms)
{
	return __atomic_add_fetch(&fake_ns, ms * 1000000ull, __ATOMIC_RELEASE);
}

/* See the top of the file. 0 or 1. */
static int hold_check(struct side *s)
{
	static struct grist_io_req reqs[NHOLD];
	static uint8_t bufs[NHOLD * 100];
	struct grist_remote_options resolved;
	struct grist_sched *sc = NULL;
	struct grist_sched_probe p;
	int ret = 1;

	/* the io object's scheduler: the one per endpoint and options, referenced again here */
	if (grist_remote_options_resolve(&opt, &resolved) || grist_sched_get(&obj->u, &resolved, &sc))
		return 1;
	grist_sched_set_clock(fake_now);
	if (hold_batch(s, reqs, bufs))
		goto out;
	grist_io_consumed(s->io, reqs, 10);
	grist_sched_probe(sc, &p); /* nothing waits: the next judgement is of the read below */
	if (hand_over(s, 1100000) || still_held(s, sc, &s->req, p.judged, fake_now())) {
		fprintf(stderr, "hold: the read past the horizon went out\n");
		goto out;
	}
	printf("held\n");
	grist_io_consumed(s->io, reqs + 10, NHOLD - 10);
	if (lands(s, &s->req)) {
		fprintf(stderr, "hold: the read stayed held after the consumer moved on\n");
		goto out;
	}
	printf("landed\n");
	grist_io_consumed(s->io, &s->req, 1);
	if (hold_batch(s, reqs, bufs))
		goto out;
	grist_io_consumed(s->io, reqs, 10); /* its last word, at fake_ns */
	grist_sched_probe(sc, &p);
	if (hand_over(s, 1150000) || still_held(s, sc, &s->req, p.judged, fake_now())) {
		fprintf(stderr, "hold: a consumer that has just spoken did not hold the read\n");
		goto out;
	}
	/* held pieces are judged again once the clock has moved WAIT_MAX_NS (100 ms) on */
	if (still_held(s, sc, &s->req, 0, advance(499))) {
		fprintf(stderr, "hold: a consumer whose word is 499 ms old did not hold the read\n");
		goto out;
	}
	printf("held 499\n");
	advance(100);
	if (lands(s, &s->req)) {
		fprintf(stderr, "hold: a consumer whose word is 599 ms old still held the read\n");
		goto out;
	}
	printf("quiet\n");
	ret = 0;
out:
	grist_sched_set_clock(NULL);
	grist_sched_put(sc);
	return ret;
}

/* See the top of the file. 0 or 1. */
static int handover_check(void)
{
	enum { N = GRIST_SCHED_HANDOVER_PIECES, RL = 64 };
	static struct grist_io_req reqs[N];
	static uint8_t bufs[(size_t)N * RL];
	struct grist_io_config cfg = { .remote_options = &opt, .queue_depth = N + 64 };
	struct grist_remote_options resolved;
	struct grist_io_req *p[64], *done[64];
	struct grist_sched *sc = NULL;
	struct grist_sched_probe pr;
	struct grist_io *io = NULL;
	uint64_t t0, hash = FNV1A_START;
	uint32_t slot;
	int i, k, n, got = 0, ret = 1;

	if (grist_remote_options_resolve(&opt, &resolved) || grist_sched_get(&obj->u, &resolved, &sc) ||
	    grist_io_create(GRIST_IO_HTTP, &cfg, &io) || grist_io_add_remote(io, obj, &slot))
		goto out;
	for (i = 0; i < N; i++)
		reqs[i] = (struct grist_io_req){ .file = slot, .offset = (uint64_t)i * RL, .len = RL, .buf = bufs + (size_t)i * RL };
	/* all but the last, as an engine worker hands a unit's reads over: 64 a submit, no reap */
	for (i = 0; i < N - 1; i += k) {
		k = N - 1 - i < 64 ? N - 1 - i : 64;
		for (n = 0; n < k; n++)
			p[n] = &reqs[i + n];
		if (grist_io_submit(io, p, (unsigned)k) != k)
			goto out;
	}
	for (t0 = now_ms(); now_ms() - t0 < 200;) {
		grist_sched_probe(sc, &pr);
		if (pr.judged || pr.gets) {
			fprintf(stderr, "handover: %d pieces of a hand-over went out before it ended\n", N - 1);
			goto out;
		}
		usleep(1000);
	}
	printf("held\n");
	p[0] = &reqs[N - 1];
	if (grist_io_submit(io, p, 1) != 1)
		goto out;
	for (t0 = now_ms();; usleep(1000)) {
		grist_sched_probe(sc, &pr);
		if (pr.gets)
			break;
		if (now_ms() - t0 >= 30000) {
			fprintf(stderr, "handover: a hand-over of %d pieces still held after 30 s\n", N);
			goto out;
		}
	}
	printf("out\n");
	while (got < N) {
		n = grist_io_reap(io, done, 64, 1);
		if (n <= 0)
			goto out;
		for (i = 0; i < n; i++)
			if (done[i]->result != RL) {
				fprintf(stderr, "handover: a read at %llu: %d\n", (unsigned long long)done[i]->offset, done[i]->result);
				goto out;
			}
		got += n;
	}
	hash = fnv1a(hash, bufs, (size_t)N * RL);
	printf("sum %016llx\n", (unsigned long long)hash);
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "handover: %s\n", grist_last_error());
	grist_io_destroy(io);
	grist_sched_put(sc);
	return ret;
}

#define QUIET_BODY (2u << 20)
#define QUIET_READ (64u << 10)
#define QUIET_ROUNDS 50
#define QUIET_FAR (QUIET_BODY + (2u << 20)) /* past coalesce_bytes (1 MiB) from the body's GET */

/* Wait, without waiting in reap, until @n reads of @io land, each with @len bytes. 0 or -1. */
static int quiet_land(struct grist_io *io, int n, uint32_t len)
{
	struct grist_io_req *done[64];
	uint64_t t0 = now_ms();
	int got = 0, k, i;

	while (got < n) {
		if (now_ms() - t0 >= 30000)
			return -1;
		k = grist_io_reap(io, done, 64, 0);
		if (k < 0)
			return -1;
		for (i = 0; i < k; i++)
			if (done[i]->result != (int32_t)len)
				return -1;
		got += k;
		if (!k)
			usleep(2000);
	}
	return 0;
}

/* See the top of the file. 0 or 1. */
static int quiet_check(void)
{
	enum { NB = QUIET_BODY / QUIET_READ };
	static struct grist_io_req body[NB], rounds[QUIET_ROUNDS], slot_req;
	static uint8_t bufs[QUIET_BODY], rbufs[QUIET_ROUNDS][LEN], sbuf[LEN];
	struct grist_io_config cfg = { .remote_options = &opt, .queue_depth = 256 };
	struct grist_remote_options resolved;
	struct grist_io_req *p[NB], *done[4];
	struct grist_sched *sc = NULL;
	struct grist_sched_probe a, b;
	struct grist_io *io = NULL;
	uint64_t t0, hash = FNV1A_START;
	uint32_t slot;
	int i, ret = 1;

	opt.max_inflight = 1;
	opt.min_inflight = 1;
	if (grist_remote_options_resolve(&opt, &resolved) || grist_sched_get(&obj->u, &resolved, &sc) ||
	    grist_io_create(GRIST_IO_HTTP, &cfg, &io) || grist_io_add_remote(io, obj, &slot))
		goto out;
	for (i = 0; i < NB; i++) {
		body[i] = (struct grist_io_req){ .file = slot, .offset = (uint64_t)i * QUIET_READ, .len = QUIET_READ,
						 .buf = bufs + (size_t)i * QUIET_READ };
		p[i] = &body[i];
	}
	grist_sched_probe(sc, &a);
	if (grist_io_submit(io, p, NB) != NB || quiet_land(io, NB, QUIET_READ))
		goto out;
	grist_sched_probe(sc, &b);
	printf("receives %llu\n", (unsigned long long)(b.receives - a.receives));
	/* the slot's GET, out and waiting in the proxy */
	slot_req = (struct grist_io_req){ .file = slot, .offset = QUIET_FAR, .len = LEN, .buf = sbuf };
	p[0] = &slot_req;
	if (grist_io_submit(io, p, 1) != 1 || grist_io_reap(io, done, 4, 0) != 0)
		goto out;
	for (t0 = now_ms();; usleep(1000)) {
		grist_sched_probe(sc, &a);
		if (a.gets > b.gets)
			break;
		if (now_ms() - t0 >= 30000)
			goto out;
	}
	for (i = 0; i < QUIET_ROUNDS; i++) {
		/* 64 KiB apart, all past the slot's read: no GET out can take them */
		rounds[i] = (struct grist_io_req){ .file = slot, .offset = QUIET_FAR + (2u << 20) + (uint64_t)i * QUIET_READ,
						   .len = LEN, .buf = rbufs[i] };
		p[0] = &rounds[i];
		if (grist_io_submit(io, p, 1) != 1 || grist_io_reap(io, done, 4, 0) < 0)
			goto out;
		usleep(2000); /* the thread, woken or not, is back asleep before the next (100 ms of the proxy's 1 s) */
	}
	grist_sched_probe(sc, &b);
	if (b.gets != a.gets) {
		fprintf(stderr, "quiet: the slot's GET ended before the rounds did (a proxy delay too short?)\n");
		goto out;
	}
	printf("wakes %llu\n", (unsigned long long)(b.wakes - a.wakes));
	if (quiet_land(io, QUIET_ROUNDS + 1, LEN))
		goto out;
	hash = fnv1a(hash, bufs, QUIET_BODY);
	hash = fnv1a(hash, sbuf, LEN);
	for (i = 0; i < QUIET_ROUNDS; i++)
		hash = fnv1a(hash, rbufs[i], LEN);
	printf("sum %016llx\n", (unsigned long long)hash);
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "quiet: %s\n", grist_last_error());
	grist_io_destroy(io);
	grist_sched_put(sc);
	return ret;
}

/* Read at @off through @s, in this process; then fork and read at @off2 in the child. */
static int fork_check(struct side *s)
{
	int status;
	pid_t pid;

	if (submit(s, A) || reap(s))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		s->name = "child";
		alarm(30); /* a child waiting on the parent's scheduler dies here, and the test fails */
		_exit(submit(s, B) || reap(s) ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static struct side m = { .name = "main" }, o = { .name = "other" };
	uint8_t first[LEN];
	struct grist_io_req r0 = { 0 }, *p = &r0, *done[4];
	pthread_t t;
	int ret;

	grist_remote_options_init(&opt);
	if (argc == 5 && !strcmp(argv[1], "lookup"))
		return lookup_check(argv[2], argv[3], argv[4]);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "addrs")) {
		char *slash = strchr(argv[3], '/');

		addr_lists[0] = addr_lists[1] = argv[3];
		if (slash) {
			*slash = '\0';
			addr_lists[1] = slash + 1;
		}
		addrs_every_ms = argc == 6 ? (unsigned)atoi(argv[5]) : 0;
		grist_direct_set_resolver(fake_lookup, addrs_every_ms);
		opt.retries = (unsigned)atoi(argv[4]);
		opt.backoff_ms = 10;
	} else if (argc != 3 || (strcmp(argv[1], "merge") && strcmp(argv[1], "fork") && strcmp(argv[1], "hold") &&
				 strcmp(argv[1], "handover") && strcmp(argv[1], "quiet"))) {
		fprintf(stderr, "usage: sched-check merge|fork|hold|handover|quiet URL, addrs URL LIST[/LIST2] RETRIES [EVERY_MS], "
			"or lookup URL ENDPOINT2 others|timeout|background\n");
		return 2;
	}
	if (strcmp(argv[1], "merge")) {
		/* fork, hold, addrs: one io object */
		/* handover makes an io object of its own, deeper: one more would hold it (a fresh client) */
		if (grist_remote_open(argv[2], &obj) ||
		    (strcmp(argv[1], "handover") && strcmp(argv[1], "quiet") && make(&m))) {
			fprintf(stderr, "sched-check: %s\n", grist_last_error());
			return 1;
		}
		ret = !strcmp(argv[1], "fork")	   ? fork_check(&m)
		      : !strcmp(argv[1], "hold")     ? hold_check(&m)
		      : !strcmp(argv[1], "handover") ? handover_check()
		      : !strcmp(argv[1], "quiet")    ? quiet_check()
						     : addrs_check(&m);
		grist_io_destroy(m.io);
		grist_remote_unref(obj);
		return ret;
	}
	opt.max_inflight = 1;
	opt.min_inflight = 1;
	if (grist_remote_open(argv[2], &obj) || make(&m) || make(&o)) {
		fprintf(stderr, "sched-check: %s\n", grist_last_error());
		return 1;
	}
	/* the slot's GET: the two reads below wait behind it */
	r0.file = m.slot;
	r0.offset = FIRST;
	r0.len = LEN;
	r0.buf = first;
	if (grist_io_submit(m.io, &p, 1) != 1 || submit(&m, A) || pthread_create(&t, NULL, other_main, &o)) {
		fprintf(stderr, "sched-check: %s\n", grist_last_error());
		return 1;
	}
	ret = grist_io_reap(m.io, done, 1, 1) == 1 && done[0] == &r0 && r0.result == LEN ? 0 : -1;
	if (!ret)
		ret = reap(&m);
	pthread_join(t, NULL);
	grist_io_destroy(m.io);
	grist_io_destroy(o.io);
	grist_remote_unref(obj);
	return ret || o.ret ? 1 : 0;
}
