/*
 * The GET scheduler's own receive path for plain http:// endpoints: ranged GETs whose
 * bodies go from the socket straight into the segments' buffers, one recv per stretch of
 * a segment, with no copy in between.
 *
 * Why: libcurl 7.88 receives every body into its own buffer and hands it to a write
 * callback, which copied it into the arena (remote.c's scatter). At group_size 64 that copy
 * and the receives' syscall paths were two thirds of the CPU that s3:// spends per record
 * beyond a local file's (docs/tuning.md, run J); with one core for grist, CPU per record
 * is the ratio to local. Here the kernel's copy out of the socket is the only one.
 *
 * What takes this path: GETs of the scheduler (sched.c) to an http:// endpoint with no
 * proxy in the environment, at their origin URL (a redirect's hop or a learned target
 * stays on curl, as do https://, listings, opens and writes). Everything but the socket
 * is the curl path's: grist_remote_xfer_setup() builds and signs the request (its header
 * list is sent as is), each line of the answer's head goes through remote.c's header
 * rules, body_start()'s checks judge the head, and grist_remote_xfer_finish() judges the
 * outcome in curl's terms (a reset is CURLE_RECV_ERROR, a short body CURLE_PARTIAL_FILE),
 * so retries, backoff, Retry-After, ETag pinning and redirects are one code.
 *
 * HTTP/1.1 only as far as a ranged GET needs: a head of at most GRIST_HTTP1_HEAD_MAX
 * bytes, a Content-Length body (it must agree with the Content-Range). A 2xx answer
 * without a Content-Length (chunked, or to the close) hands this endpoint back to curl
 * for good, and the GET goes again by curl, no attempt spent. An error answer's body is
 * read for its service code (bounded), or the connection is dropped.
 *
 * Connections: kept alive between GETs, a pool per scheduler (one scheduler per endpoint),
 * at most one idle per GET slot. A kept connection the server closed meanwhile shows as
 * an end or a reset before the first byte of the answer: the request goes again once on a
 * new connection, not counted as a retry (libcurl does the same).
 *
 * Addresses: as libcurl, every address of the endpoint's name (the first GRIST_DIRECT_ADDRS_MAX, in
 * getaddrinfo()'s order), from the one the last connection got through to: a connect
 * refused, unreachable or timed out goes on to the next within the attempt, not counted
 * as a retry (one at a time, each with an equal share of what is left of
 * connect_timeout_ms; curl 7.88 also races IPv6 against IPv4). An attempt whose every
 * address failed names each, and the name is looked up again before the next connection;
 * once the last lookup is 60 s old (curl's DNS cache timeout) it is looked up again in the
 * background while the list known serves: a long run follows an endpoint that moved.
 *
 * Lookups (sched_addrs.c) run on a thread of their own, never this one, which holds the
 * lock every client takes and runs every timer: a DNS server that hangs stalls only the
 * GETs that need its answer. The first lookup, and one after every address failed, hold
 * a new connection back (phase RESOLVING) within connect_timeout_ms, which counts the
 * lookup's wait as curl's does: an attempt that outwaits it (or its deadline) fails as a
 * timeout naming the host and the wait, and is retried as any timeout; the lookup goes on
 * and serves the next attempt. A failed lookup keeps the old list; one that finds nothing
 * for a name that never had an address fails its GETs as curl's "Could not resolve host".
 * A test sets the resolver and its age (grist_direct_set_resolver(), io/sched.h).
 *
 * Timeouts follow the curl path's rules: connect_timeout_ms to connect; a stall is less
 * than STALL_BYTES_PER_S for timeout_ms (whole seconds, rounded up); no attempt lasts more
 * than STALL_CAP x timeout_ms, nor past the transfer's deadline. They are checked each time
 * the thread looks round (grist_direct_tick(), at least every 100 ms).
 */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/error.h"
#include "io/http1.h"
#include "io/sched_internal.h"

#define SCRATCH_BYTES (64u << 10)      /* a gap between segments, or an error body, is read through this */
#define ERRBODY_READ_MAX (1u << 20)    /* an error body longer than this is not read: the connection goes */
#define IOV_PIECES 1024                 /* segments filled by one recvmsg() (UIO_MAXIOV) */
#define RECV_MAX (1u << 20)             /* bytes asked of one recvmsg() */
#define BODY_LOWAT (512u << 10)         /* a body's socket wakes the thread once this much waits (set_lowat()) */

enum { CONNECTING, SENDING, HEAD, BODY, RESOLVING /* waiting for a lookup of the name */ };

struct direct_pool {
	bool checked;  /* off and the addresses are decided */
	bool off;      /* this endpoint is curl's: https, a proxy, no address, or a 2xx body without a length */
	struct grist_direct_addrs a; /* the endpoint's name and addresses (sched_addrs.c) */
	char where[300]; /* host port N, for messages */
	int *idle;
	unsigned nidle, cap;
	uint8_t *scratch;
	struct iovec *iov; /* IOV_PIECES: one recvmsg()'s pieces (the thread's only) */
};

struct direct {
	int fd;
	int phase;
	bool reused;      /* the connection served a GET before this one */
	bool junk;        /* the server sent more than the body: the connection is not kept */
	CURLcode pending; /* an end decided outside the thread's look round (CURLE_OK: none) */
	bool ending;
	struct grist_buf req;
	size_t sent;
	char *head;
	size_t head_len, searched;
	struct grist_http1_head rh;
	uint64_t left;    /* body bytes still to come */
	int lowat;        /* the socket's SO_RCVLOWAT as set here; 0: the kernel's default (1) */
	uint64_t bytes;   /* head and body bytes of this attempt */
	uint64_t connect_due, cap_due, stall_t, stall_bytes, stall_ns;
	uint64_t connect_end;  /* the whole connect's end (connect_timeout_ms), every address together */
	unsigned ai, tried;    /* the address being connected to; how many of this attempt's connect failed */
	char name[INET6_ADDRSTRLEN + 16]; /* address ai's, for messages: a lookup may change the list meanwhile */
};

/* The endpoint's host and port, and whether the direct path may serve it at all. */
static void pool_check(struct grist_sched *h)
{
	struct direct_pool *p = h->pool;
	const char *env[] = { "http_proxy", "all_proxy", "ALL_PROXY" };
	size_t i;

	p->checked = true;
	p->off = true;
	if (h->opt.direct == GRIST_REMOTE_DIRECT_OFF || strncmp(h->endpoint, "http://", 7))
		return;
	/* curl would go through a proxy: so must this endpoint's GETs */
	for (i = 0; i < sizeof(env) / sizeof(env[0]); i++)
		if (getenv(env[i]) && *getenv(env[i]))
			return;
	/* the name is looked up before the first connection (connect_new()) */
	if (!grist_direct_addrs_init(&p->a, h->endpoint + 7))
		return;
	snprintf(p->where, sizeof(p->where), "%s port %s", p->a.host, p->a.port);
	p->cap = h->ngets;
	p->idle = calloc(p->cap, sizeof(*p->idle));
	p->scratch = malloc(SCRATCH_BYTES);
	p->iov = calloc(IOV_PIECES, sizeof(*p->iov));
	if (p->idle && p->scratch && p->iov)
		p->off = false;
}

static void watch(struct grist_sched *h, struct get *g, uint32_t events, bool add)
{
	struct epoll_event ev = { .events = events, .data.u64 = GRIST_DIRECT_TAG + (uint64_t)(g - h->gets) };

	epoll_ctl(h->epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, g->d->fd, &ev);
}

/* Let go of @g's connection: into the pool when @keep and there is room, else closed. */
static void drop_conn(struct grist_sched *h, struct get *g, bool keep)
{
	struct direct *d = g->d;

	if (d->fd < 0)
		return;
	epoll_ctl(h->epfd, EPOLL_CTL_DEL, d->fd, NULL);
	if (keep && d->lowat > 1) {
		int one = 1;

		/* the next GET's head is a few hundred bytes: it must wake the thread */
		if (setsockopt(d->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)))
			keep = false;
	}
	d->lowat = 0;
	if (keep && h->pool->nidle < h->pool->cap)
		h->pool->idle[h->pool->nidle++] = d->fd;
	else
		close(d->fd);
	d->fd = -1;
}

static void end(struct grist_sched *h, struct get *g, CURLcode rc, bool keep)
{
	drop_conn(h, g, keep && !g->d->rh.close && !g->d->junk);
	grist_sched_ended(h, g, rc);
}

/* The transport failed: @rc in curl's terms, with a message as curl's error buffer holds one. */
static void fail(struct grist_sched *h, struct get *g, CURLcode rc, const char *fmt, ...) GRIST_PRINTF(4, 5);
static void fail(struct grist_sched *h, struct get *g, CURLcode rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->x.curl_err, sizeof(g->x.curl_err), fmt, ap);
	va_end(ap);
	end(h, g, rc, false);
}

/* A refusal of the answer (as remote.c's write callback makes one): final, x->bad names it. */
static void refuse(struct grist_sched *h, struct get *g, int code, const char *fmt, ...) GRIST_PRINTF(4, 5);
static void refuse(struct grist_sched *h, struct get *g, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->x.bad, sizeof(g->x.bad), fmt, ap);
	va_end(ap);
	g->x.bad_code = code;
	end(h, g, CURLE_WRITE_ERROR, false);
}

/* Connect @g to address d->ai of the list; false when that failed at once (@err says why). */
static bool connect_addr(struct grist_sched *h, struct get *g, uint64_t now, char *err, size_t cap)
{
	struct direct_pool *p = h->pool;
	struct direct *d = g->d;
	int one = 1, fd;

	grist_direct_addr_name(&p->a, d->ai, d->name, sizeof(d->name));
	fd = socket(p->a.addr[d->ai].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) { /* an address family this host lacks (IPv6 off): the next address may do */
		snprintf(err, cap, "socket: %s", strerror(errno));
		return false;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* each address gets an equal share of what is left of connect_timeout_ms, as curl gives them */
	d->connect_due = now + (d->connect_end > now ? (d->connect_end - now) / (p->a.n - d->tried) : 0);
	if (!connect(fd, (struct sockaddr *)&p->a.addr[d->ai], p->a.len[d->ai])) {
		d->fd = fd;
		d->phase = SENDING;
		p->a.first = d->ai;
		watch(h, g, EPOLLOUT, true);
		return true;
	}
	if (errno != EINPROGRESS) {
		snprintf(err, cap, "%s", strerror(errno));
		close(fd);
		return false;
	}
	d->fd = fd;
	d->phase = CONNECTING;
	watch(h, g, EPOLLOUT, true);
	return true;
}

/*
 * Address d->ai failed to connect (@why; NULL: none tried yet): on to the next of the list,
 * one at a time (curl 7.88 also races an IPv6 address against an IPv4 one; here they go in
 * getaddrinfo()'s order), within one attempt: a dead address is not a retry. False when
 * every address failed: the attempt ends with d->pending (@rc for the last), each failure
 * named in curl_err, and the name is resolved again before the next connection.
 */
static bool next_addr(struct grist_sched *h, struct get *g, const char *why, CURLcode rc)
{
	struct direct_pool *p = h->pool;
	struct direct *d = g->d;
	uint64_t now = grist_remote_now_ns();
	char err[128];

	for (;;) {
		if (why) {
			size_t n = d->tried ? strlen(g->x.curl_err) : 0;

			if (d->fd >= 0) {
				epoll_ctl(h->epfd, EPOLL_CTL_DEL, d->fd, NULL);
				close(d->fd);
				d->fd = -1;
			}
			/* "Failed to connect to HOST port P at A1: why; at A2: why" */
			snprintf(g->x.curl_err + n, sizeof(g->x.curl_err) - n, "%s%.200s at %s: %s",
				 d->tried ? ";" : "Failed to connect to ", d->tried ? "" : p->where, d->name, why);
			if (++d->tried >= p->a.n) {
				p->a.stale = true;
				d->pending = rc;
				return false;
			}
			d->ai = (d->ai + 1) % p->a.n;
		}
		if (connect_addr(h, g, now, err, sizeof(err)))
			return true;
		why = err;
		rc = CURLE_COULDNT_CONNECT;
	}
}

/* Connect @g to the list, from the address that last got through; false when every address failed at once. */
static bool connect_list(struct grist_sched *h, struct get *g)
{
	struct direct_pool *p = h->pool;
	struct direct *d = g->d;

	if (!p->a.n) { /* the lookup answered, with no address */
		snprintf(g->x.curl_err, sizeof(g->x.curl_err), "Could not resolve host: %.200s", p->a.host);
		d->pending = CURLE_COULDNT_RESOLVE_HOST;
		return false;
	}
	d->tried = 0;
	d->ai = p->a.first < p->a.n ? p->a.first : 0;
	return next_addr(h, g, NULL, CURLE_COULDNT_CONNECT);
}

/*
 * A new connection for @g (its connect_timeout_ms counts from here, the lookup's wait
 * included, as curl's does); false when it failed at once (d->pending says how). The
 * name is looked up off this thread (sched_addrs.c): the first lookup, and one after every
 * address failed, hold the connect back (phase RESOLVING, until grist_direct_tick() takes
 * the answer); one because the list is old runs while the list serves.
 */
static bool connect_new(struct grist_sched *h, struct get *g)
{
	struct direct_pool *p = h->pool;
	struct direct *d = g->d;
	uint64_t now = grist_remote_now_ns();
	bool gate = !p->a.n || p->a.stale;

	d->reused = false;
	d->connect_end = now + (uint64_t)h->opt.connect_timeout_ms * 1000000ull;
	if (!p->a.lk && (gate || grist_direct_resolve_due(&p->a, now))) {
		int ret = grist_direct_lookup(&p->a, h->evfd);

		if (ret < 0 && gate) {
			snprintf(g->x.curl_err, sizeof(g->x.curl_err), "cannot look %.200s up: no thread for it: %s",
				 p->a.host, strerror(-ret));
			d->pending = CURLE_COULDNT_CONNECT; /* retried: threads may be had again later */
			return false;
		}
	}
	if (p->a.lk && (!p->a.n || p->a.stale)) {
		d->phase = RESOLVING;
		return true;
	}
	return connect_list(h, g);
}

/* Start (again) on a connection: a kept one when there is one. */
static bool open_conn(struct grist_sched *h, struct get *g)
{
	struct direct *d = g->d;

	d->sent = 0;
	d->head_len = d->searched = 0;
	if (h->pool->nidle) {
		d->fd = h->pool->idle[--h->pool->nidle];
		d->reused = true;
		d->phase = SENDING;
		watch(h, g, EPOLLOUT, true);
		return true;
	}
	return connect_new(h, g);
}

/* The request: the request line, Host, and the header list setup made and signed for curl. */
static int build_request(struct grist_remote_xfer *x, struct grist_buf *b)
{
	const struct curl_slist *l;
	bool host = false;

	b->len = 0;
	for (l = x->headers; l; l = l->next)
		if (!strncasecmp(l->data, "host:", 5))
			host = true;
	if (grist_buf_append(b, "GET ", 4) || grist_buf_append(b, x->target, strlen(x->target)) ||
	    grist_buf_append(b, " HTTP/1.1\r\n", 11))
		return -ENOMEM;
	if (!host && (grist_buf_append(b, "Host: ", 6) || grist_buf_append(b, x->u->host, strlen(x->u->host)) ||
		      grist_buf_append(b, "\r\n", 2)))
		return -ENOMEM;
	for (l = x->headers; l; l = l->next) {
		size_t n = strlen(l->data);

		if (n && l->data[n - 1] == ':') /* "Name:": a header curl must not add; nothing to send */
			continue;
		if (grist_buf_append(b, l->data, n) || grist_buf_append(b, "\r\n", 2))
			return -ENOMEM;
	}
	return grist_buf_append(b, "\r\n", 2) ? -ENOMEM : 0;
}

bool grist_direct_start(struct grist_sched *h, struct get *g)
{
	struct grist_remote_xfer *x = &g->x;
	struct direct *d;
	uint64_t now;

	if (!h->pool) {
		h->pool = calloc(1, sizeof(*h->pool));
		if (!h->pool)
			return false;
	}
	if (!h->pool->checked)
		pool_check(h);
	if (h->pool->off || x->at != x->u || x->method || x->keep || !x->target)
		return false;
	if (!g->d) {
		g->d = calloc(1, sizeof(*g->d));
		if (g->d)
			g->d->head = malloc(GRIST_HTTP1_HEAD_MAX);
		if (!g->d || !g->d->head) {
			if (g->d)
				free(g->d);
			g->d = NULL;
			return false;
		}
		g->d->fd = -1;
	}
	d = g->d;
	if (build_request(x, &d->req))
		return false;
	x->direct = true;
	now = grist_remote_now_ns();
	d->pending = CURLE_OK;
	d->ending = false;
	d->junk = false;
	d->rh = (struct grist_http1_head){ .length = -1 };
	d->bytes = 0;
	d->cap_due = now + (uint64_t)h->opt.request_timeout_ms * STALL_CAP * 1000000ull;
	if (x->deadline_ns && x->deadline_ns < d->cap_due)
		d->cap_due = x->deadline_ns;
	d->stall_ns = (uint64_t)((h->opt.request_timeout_ms + 999) / 1000) * 1000000000ull;
	d->stall_t = now;
	d->stall_bytes = 0;
	if (!open_conn(h, g))
		d->ending = true; /* judged at the next look round (grist_direct_tick()): never inside a launch */
	return true;
}

/* The connection died before any byte of the answer: a kept one the server closed gets one more try. */
static bool try_fresh(struct grist_sched *h, struct get *g)
{
	struct direct *d = g->d;

	if (!d->reused || d->head_len)
		return false;
	drop_conn(h, g, false);
	if (!connect_new(h, g)) {
		d->ending = true;
		return true;
	}
	d->sent = 0;
	return true;
}

/* @g's answer is a 2xx without a length: this endpoint is curl's from now on; the GET goes again by curl. */
static void to_curl(struct grist_sched *h, struct get *g)
{
	drop_conn(h, g, false);
	h->pool->off = true;
	if (grist_remote_xfer_setup(&g->x)) {
		snprintf(g->x.msg, sizeof(g->x.msg), "%s", grist_last_error());
		g->x.error = -ENOMEM;
		h->active--;
		h->inflight_bytes -= g->x.len;
		grist_sched_fail_get(h, g);
		return;
	}
	curl_multi_add_handle(h->multi, g->x.easy);
}

static void on_line(void *ud, const char *line, size_t len)
{
	grist_remote_header(ud, line, len);
}

/*
 * The head is whole (@end bytes of d->head): judge it, then take what came after it as
 * the body's first bytes. Return: true when the body is still to be read.
 */
static bool head_done(struct grist_sched *h, struct get *g, size_t hend)
{
	struct direct *d = g->d;
	struct grist_remote_xfer *x = &g->x;
	char why[200];
	size_t extra, take;
	bool ok2xx;

	if (grist_http1_head_parse(d->head, hend, &d->rh, on_line, x, why, sizeof(why))) {
		refuse(h, g, -EPROTO, "%s (from %s)", why, h->pool->where);
		return false;
	}
	x->status = d->rh.status;
	if (d->rh.status >= 100 && d->rh.status <= 199) {
		/* an interim answer (100 Continue): the real one follows */
		memmove(d->head, d->head + hend, d->head_len - hend);
		d->head_len -= hend;
		d->searched = 0;
		x->status = 0;
		return true;
	}
	ok2xx = d->rh.status >= 200 && d->rh.status <= 299;
	if (ok2xx && (d->rh.chunked || d->rh.length < 0)) {
		to_curl(h, g);
		return false;
	}
	if (!ok2xx && (d->rh.chunked || d->rh.length < 0 || d->rh.length > ERRBODY_READ_MAX)) {
		/* an error answer whose body grist does not need whole: judged on its status and head */
		d->rh.close = true;
		x->body_started = true;
		end(h, g, CURLE_OK, false);
		return false;
	}
	if (ok2xx && !grist_remote_body_begin(x)) {
		end(h, g, CURLE_WRITE_ERROR, false);
		return false;
	}
	if (ok2xx && x->has_range && (uint64_t)d->rh.length != x->cr.last - x->cr.first + 1) {
		refuse(h, g, -EPROTO, "a Content-Length of %lld for a Content-Range of %llu bytes ('%s')",
		       (long long)d->rh.length, (unsigned long long)(x->cr.last - x->cr.first + 1), x->cr_text);
		return false;
	}
	d->left = (uint64_t)d->rh.length;
	extra = d->head_len - hend;
	take = extra < d->left ? extra : (size_t)d->left;
	if (extra > take)
		d->junk = true; /* more than the answer: nothing of it is trusted on the next GET */
	if (take && grist_remote_body(x, d->head + hend, take) != take) {
		end(h, g, CURLE_WRITE_ERROR, false);
		return false;
	}
	if (!take && !x->body_started)
		x->body_started = true; /* an empty error body: nothing for the write path to see */
	d->left -= take;
	d->phase = BODY;
	if (!d->left) {
		end(h, g, CURLE_OK, true);
		return false;
	}
	return true;
}

/*
 * How much of @g's body must wait in its drained socket before epoll wakes the thread:
 * BODY_LOWAT, or the rest of the body when less is to come (else its end never would),
 * or 1 while a client waits in reap for a read (h->starved: the bytes it waits for may be
 * the few in the socket; grist_direct_tick() lowers the mark of a body already waiting).
 *
 * Why: grist's threads share one core with this one, and by default the socket woke it
 * for every 64 KiB the server's side sent: at group_size 64 (8 MiB GETs at ~350 MB/s)
 * 2,800 wake-ups a second, each a task switch pair on the worker's core and a
 * reschedule IPI from the servers' core, for recvmsg() calls of 126 KB on average; the
 * switches and the wake-up paths were about a quarter of the CPU s3:// spent per record
 * beyond a local file's (docs/tuning.md, session 39). Waking per 512 KiB cuts the
 * receives to 1/5 and the thread's wake-ups to about half; a body's bytes land at most
 * 512 KiB later than they would have, which at these rates is 1-2 ms of a GET's 20-50.
 * The mark does not narrow the TCP window: Linux grows the receive buffer to hold it
 * (tcp_set_rcvlowat(), capped at half of tcp_rmem's maximum) and its receive autotuning
 * goes on growing buffer and window past it on a long, fast path; a buffer under memory
 * pressure wakes the thread below the mark. (Read in Linux 6.1's tcp.c and tcp_input.c,
 * not measured: this machine has no long path to measure it on.)
 */
static void set_lowat(const struct grist_sched *h, struct direct *d)
{
	int want = h->starved ? 1 : d->left < BODY_LOWAT ? (int)d->left : (int)BODY_LOWAT;

	if (want < 1)
		want = 1;
	if (want != (d->lowat ? d->lowat : 1) && !setsockopt(d->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)))
		d->lowat = want;
}

/*
 * Read the body as far as the socket has it; true while more is to come. A 2xx body goes
 * by recvmsg() straight into the segments, IOV_PIECES of them a call: a GET of 611-byte
 * chunks (group_size 1) has thousands, and at 64 a call it made more syscalls than curl's
 * 256 KiB reads and cost more CPU per record than curl's copy saved (docs/tuning.md,
 * session 37).
 */
static bool read_body(struct grist_sched *h, struct get *g)
{
	struct direct *d = g->d;
	struct grist_remote_xfer *x = &g->x;
	bool ok2xx = x->status >= 200 && x->status <= 299;
	struct iovec *iov = h->pool->iov;

	while (d->left) {
		struct msghdr mh = { .msg_iov = iov };
		uint64_t want = 0;
		ssize_t n;
		unsigned i;

		if (ok2xx) {
			/* a byte cap too: a call lays out the pieces it asks for, filled or not */
			mh.msg_iovlen = grist_remote_body_iov(x, iov, IOV_PIECES, d->left < RECV_MAX ? d->left : RECV_MAX,
							      h->pool->scratch, SCRATCH_BYTES);
			if (!mh.msg_iovlen) {
				/* a body reaching past the range asked (a 200 with the whole object): remote.c's rule names it */
				refuse(h, g, -EPROTO, "the body runs past the %llu bytes asked for", (unsigned long long)x->len);
				return false;
			}
		} else {
			iov[0] = (struct iovec){ h->pool->scratch, d->left < SCRATCH_BYTES ? (size_t)d->left : SCRATCH_BYTES };
			mh.msg_iovlen = 1;
		}
		for (i = 0; i < mh.msg_iovlen; i++)
			want += iov[i].iov_len;
		n = recvmsg(d->fd, &mh, 0);
		h->receives++;
		if (n > 0) {
			size_t got = (size_t)n;

			d->bytes += got;
			d->left -= got;
			for (i = 0; got && i < mh.msg_iovlen; i++) {
				size_t k = iov[i].iov_len < got ? iov[i].iov_len : got;

				if (ok2xx)
					grist_remote_body_landed(x, iov[i].iov_base, k);
				else
					grist_remote_body(x, iov[i].iov_base, k);
				got -= k;
			}
			if ((uint64_t)n < want) {
				set_lowat(h, d);
				break; /* the socket is drained: epoll says when more comes */
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			set_lowat(h, d);
			return true;
		}
		if (n == 0)
			fail(h, g, CURLE_PARTIAL_FILE, "transfer closed with %llu bytes remaining to read",
			     (unsigned long long)d->left);
		else
			fail(h, g, CURLE_RECV_ERROR, "Recv failure: %s", strerror(errno));
		return false;
	}
	if (!d->left) {
		end(h, g, CURLE_OK, true);
		return false;
	}
	return true;
}

/* Read the head as far as the socket has it, then the body. */
static void read_head(struct grist_sched *h, struct get *g)
{
	struct direct *d = g->d;

	for (;;) {
		size_t hend;
		ssize_t n;

		if (d->head_len == GRIST_HTTP1_HEAD_MAX) {
			refuse(h, g, -EPROTO, "the answer's head is longer than %u bytes (from %s)", GRIST_HTTP1_HEAD_MAX,
			       h->pool->where);
			return;
		}
		n = recv(d->fd, d->head + d->head_len, GRIST_HTTP1_HEAD_MAX - d->head_len, 0);
		h->receives++;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			int e = n < 0 ? errno : 0;

			if (try_fresh(h, g))
				return;
			if (!d->head_len && !e)
				fail(h, g, CURLE_GOT_NOTHING, "Empty reply from server");
			else if (e)
				fail(h, g, CURLE_RECV_ERROR, "Recv failure: %s", strerror(e));
			else
				fail(h, g, CURLE_RECV_ERROR, "the connection closed inside the answer's head");
			return;
		}
		d->bytes += (uint64_t)n;
		d->head_len += (size_t)n;
		for (;;) {
			hend = grist_http1_head_end(d->head, d->head_len, d->searched);
			d->searched = d->head_len;
			if (!hend)
				break;
			if (!head_done(h, g, hend))
				return;
			if (d->phase == BODY) {
				read_body(h, g);
				return;
			}
			/* an interim answer was dropped: the rest may hold the next head */
		}
	}
}

static void send_request(struct grist_sched *h, struct get *g)
{
	struct direct *d = g->d;

	while (d->sent < d->req.len) {
		ssize_t n = send(d->fd, d->req.data + d->sent, d->req.len - d->sent, MSG_NOSIGNAL);

		if (n > 0) {
			d->sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (!try_fresh(h, g))
			fail(h, g, CURLE_SEND_ERROR, "Send failure: %s", strerror(errno));
		return;
	}
	d->phase = HEAD;
	watch(h, g, EPOLLIN, false);
}

void grist_direct_event(struct grist_sched *h, struct get *g, uint32_t ev)
{
	struct direct *d = g->d;

	if (g->state != GET_ACTIVE || !g->x.direct || !d || d->fd < 0 || d->ending)
		return;
	if (d->phase == CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);

		if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
			if (!next_addr(h, g, strerror(err ? err : errno), CURLE_COULDNT_CONNECT))
				end(h, g, d->pending, false);
			return;
		}
		if (!(ev & EPOLLOUT))
			return;
		d->phase = SENDING;
		h->pool->a.first = d->ai;
	}
	if (d->phase == SENDING) {
		send_request(h, g);
		return;
	}
	if (d->phase == HEAD)
		read_head(h, g);
	else if (d->phase == BODY)
		read_body(h, g);
}

/* A lookup answered (in @p->a): the GETs that waited for it connect, or fail when the name has no address. */
static void lookup_answered(struct grist_sched *h)
{
	unsigned i;

	for (i = 0; i < h->ngets; i++) {
		struct get *g = &h->gets[i];
		struct direct *d = g->d;

		if (g->state != GET_ACTIVE || !g->x.direct || !d || d->ending || d->phase != RESOLVING)
			continue;
		if (!connect_list(h, g))
			end(h, g, d->pending, false);
	}
}

void grist_direct_tick(struct grist_sched *h, uint64_t now)
{
	unsigned i;

	if (h->pool->a.lk && grist_direct_lookup_take(&h->pool->a))
		lookup_answered(h);
	for (i = 0; i < h->ngets; i++) {
		struct get *g = &h->gets[i];
		struct direct *d = g->d;

		if (g->state != GET_ACTIVE || !g->x.direct || !d)
			continue;
		if (d->ending) {
			d->ending = false;
			end(h, g, d->pending, false);
			continue;
		}
		if (g->x.cancel && __atomic_load_n(g->x.cancel, __ATOMIC_ACQUIRE)) {
			fail(h, g, CURLE_ABORTED_BY_CALLBACK, "Callback aborted");
			continue;
		}
		if (d->phase == RESOLVING) {
			/* the attempt gives up (and is retried as a timeout); the lookup goes on, for the next */
			if (now >= d->connect_end || now >= d->cap_due)
				fail(h, g, CURLE_OPERATION_TIMEDOUT, "Resolving timed out after %llu milliseconds: "
				     "the lookup of %.200s has not answered (it goes on, for the next attempt)",
				     (unsigned long long)((now - (d->connect_end - h->opt.connect_timeout_ms * 1000000ull)) /
							  1000000), h->pool->a.host);
			continue;
		}
		if (d->phase == CONNECTING && now >= d->connect_due) {
			char why[64];

			snprintf(why, sizeof(why), "timed out after %llu milliseconds",
				 (unsigned long long)((now - (d->connect_end - h->opt.connect_timeout_ms * 1000000ull)) / 1000000));
			if (!next_addr(h, g, why, CURLE_OPERATION_TIMEDOUT))
				end(h, g, d->pending, false);
			continue;
		}
		/* a client waits for a read: the bytes below the mark go to it now (set_lowat()) */
		if (h->starved && d->phase == BODY && d->lowat > 1) {
			read_body(h, g);
			if (g->state != GET_ACTIVE || d->fd < 0)
				continue;
		}
		if (now >= d->cap_due) {
			fail(h, g, CURLE_OPERATION_TIMEDOUT, "Operation timed out after %llu milliseconds with %llu bytes received",
			     (unsigned long long)((now - g->x.start_ns) / 1000000), (unsigned long long)d->bytes);
			continue;
		}
		if (now - d->stall_t >= d->stall_ns) {
			/* bytes below the mark are bytes too: a slow body is judged on what came, not on what woke */
			if (d->phase == BODY && d->lowat > 1) {
				read_body(h, g);
				if (g->state != GET_ACTIVE || d->fd < 0)
					continue;
			}
			if (d->bytes - d->stall_bytes < STALL_BYTES_PER_S * (d->stall_ns / 1000000000ull)) {
				fail(h, g, CURLE_OPERATION_TIMEDOUT, "Operation too slow. Less than %u bytes/sec transferred "
				     "the last %llu seconds", STALL_BYTES_PER_S,
				     (unsigned long long)(d->stall_ns / 1000000000ull));
				continue;
			}
			d->stall_t = now;
			d->stall_bytes = d->bytes;
		}
	}
}

void grist_direct_stop(struct grist_sched *h, struct get *g)
{
	if (g->d)
		drop_conn(h, g, false);
}

void grist_direct_free(struct grist_sched *h)
{
	unsigned i;

	for (i = 0; h->gets && i < h->ngets; i++) {
		struct direct *d = h->gets[i].d;

		if (!d)
			continue;
		if (d->fd >= 0)
			close(d->fd);
		grist_buf_free(&d->req);
		free(d->head);
		free(d);
		h->gets[i].d = NULL;
	}
	if (!h->pool)
		return;
	grist_direct_lookup_drop(&h->pool->a);
	for (i = 0; i < h->pool->nidle; i++)
		close(h->pool->idle[i]);
	free(h->pool->idle);
	free(h->pool->scratch);
	free(h->pool->iov);
	free(h->pool);
	h->pool = NULL;
}
