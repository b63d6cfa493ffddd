/*
 * The remote io backend: a client of the process's GET scheduler (sched.c). Each io object
 * (one per engine thread, a fetcher's, the reader's blocking reads) hands its reads of a
 * URL to the scheduler of the URL's endpoint, which merges them with every other client's
 * into GETs under one in-flight budget and sends each finished request back to the
 * client's own completion queue; reap waits on that queue. So the io object owns no
 * connection, no thread and no descriptor: the scheduler does, once per endpoint.
 *
 * Local files registered with it (a mixed dataset's local part) are read with pread at
 * submit, on the caller's thread: they never enter the scheduler.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"
#include "io/sched.h"

struct http_io {
	struct grist_io io;
	struct grist_remote_options opt;
	struct grist_remote_counters own;
	struct grist_sched_client c;
	struct grist_sched **sched;    /* per file slot: its endpoint's scheduler, or NULL (local) */
	struct grist_sched **uniq;     /* the schedulers it uses, each referenced once */
	unsigned nuniq;
	struct grist_io_req **scratch; /* submit's: one scheduler's requests */
	struct grist_remote_object **objs;
	size_t scratch_cap;
	bool handing; /* submitted since the last reap: the schedulers hold its requests (grist_sched_release()) */
	int32_t *uniq_of; /* per file slot: which of uniq[] serves it, or -1 (a local file) */
	uint64_t *next; /* per uniq[k]: the first of its pieces the consumer has not consumed (grist_io_consumed()) */
	uint64_t *told; /* per uniq[k]: the last next[k] the scheduler was told */
};

static struct http_io *to_http(struct grist_io *io)
{
	return (struct http_io *)io;
}

static int http_create(const struct grist_io_config *cfg, struct grist_io **out)
{
	struct http_io *h;
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
	h->c.ctr = cfg->remote_counters ? cfg->remote_counters : &h->own;
	h->c.nerrs = cfg->max_files;
	h->c.errs = calloc(cfg->max_files, sizeof(*h->c.errs));
	h->sched = calloc(cfg->max_files, sizeof(*h->sched));
	h->uniq = calloc(cfg->max_files, sizeof(*h->uniq));
	h->uniq_of = malloc(cfg->max_files * sizeof(*h->uniq_of));
	h->next = calloc(cfg->max_files, sizeof(*h->next));
	h->told = calloc(cfg->max_files, sizeof(*h->told));
	h->c.done.cap = cfg->queue_depth; /* resolved: at least 1 */
	h->c.done.r = malloc(h->c.done.cap * sizeof(*h->c.done.r));
	if (!h->c.errs || !h->sched || !h->uniq || !h->uniq_of || !h->next || !h->told || !h->c.done.r) {
		free(h->c.done.r);
		free(h->c.errs);
		free(h->sched);
		free(h->uniq);
		free(h->uniq_of);
		free(h->next);
		free(h->told);
		free(h);
		return grist_fail(-ENOMEM, "http io: out of memory");
	}
	memset(h->uniq_of, 0xff, cfg->max_files * sizeof(*h->uniq_of)); /* -1: local, until add_file says */
	pthread_mutex_init(&h->c.lock, NULL);
	pthread_cond_init(&h->c.cond, NULL);
	*out = &h->io;
	return 0;
}

/* A URL's file: the scheduler of its endpoint, found or started, serves it. */
static int http_add_file(struct grist_io *io, uint32_t slot)
{
	struct http_io *h = to_http(io);
	struct grist_remote_object *o = io->files[slot].remote;
	struct grist_sched *s;
	unsigned i;
	int ret;

	if (!o)
		return 0;
	ret = grist_sched_get(&o->u, &h->opt, &s);
	if (ret)
		return ret;
	for (i = 0; i < h->nuniq && h->uniq[i] != s; i++)
		;
	if (i < h->nuniq) {
		grist_sched_put(s); /* referenced once per client */
	} else {
		h->uniq[h->nuniq++] = s;
		grist_sched_attach(s, &h->c);
	}
	h->sched[slot] = s;
	h->uniq_of[slot] = (int32_t)i;
	return 0;
}

/*
 * In a fork() child, the parent's schedulers have no thread: take this process's own for
 * their files (an object the reader kept from before the fork reads on in the child).
 * Requests the parent had in flight do not come back here; the loader and the fetcher
 * refuse to be used across a fork anyway.
 */
static int renew(struct http_io *h)
{
	unsigned k, i;
	int ret;

	for (k = 0; k < h->nuniq; k++) {
		struct grist_sched *old = h->uniq[k], *s;

		if (!grist_sched_stale(old))
			continue;
		for (i = 0; i < h->io.nr_files && h->sched[i] != old; i++)
			;
		ret = grist_sched_get(&h->io.files[i].remote->u, &h->opt, &s);
		if (ret)
			return ret;
		grist_sched_attach(s, &h->c);
		for (; i < h->io.nr_files; i++)
			if (h->sched[i] == old)
				h->sched[i] = s;
		h->uniq[k] = s; /* the old one is the parent's: not touched, not freed */
		h->next[k] = h->told[k] = 0;
	}
	return 0;
}

static void http_destroy(struct grist_io *io)
{
	struct http_io *h = to_http(io);
	unsigned i;

	/* after each withdrawal no byte lands in this object's buffers */
	for (i = 0; i < h->nuniq; i++) {
		if (grist_sched_stale(h->uniq[i]))
			continue;
		grist_sched_withdraw(h->uniq[i], &h->c);
		grist_sched_put(h->uniq[i]);
	}
	for (i = 0; i < h->c.nerrs; i++)
		free(h->c.errs[i]);
	free(h->c.errs);
	free(h->c.done.r);
	pthread_mutex_destroy(&h->c.lock);
	pthread_cond_destroy(&h->c.cond);
	free(h->sched);
	free(h->uniq);
	free(h->uniq_of);
	free(h->next);
	free(h->told);
	free(h->scratch);
	free(h->objs);
	free(h);
}

/* Local files: read now (a mixed dataset's local part costs no GET slot). */
static void read_local(struct http_io *h, struct grist_io_req *r)
{
	int fd = h->io.files[r->file].fd;

	for (;;) {
		ssize_t n = pread(fd, r->buf + r->done, r->len - r->done, (off_t)(r->offset + r->done));

		if (grist_io_req_step(r, n < 0 ? -errno : (int)n) == GRIST_IO_STEP_DONE)
			break;
	}
	pthread_mutex_lock(&h->c.lock);
	grist_sched_done_push(&h->c.done, r);
	pthread_mutex_unlock(&h->c.lock);
}

/*
 * Each scheduler takes its requests in one call, all or none. A batch spanning two
 * endpoints that fails at the second leaves the first's queued: the caller's error path
 * destroys the object, which withdraws them (the engine and the fetcher do).
 */
static int http_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n)
{
	struct http_io *h = to_http(io);
	unsigned i, k, m;
	int ret;

	ret = renew(h);
	if (ret)
		return ret;
	if (n > h->scratch_cap) {
		void *a = realloc(h->scratch, n * sizeof(*h->scratch)), *b;

		if (!a)
			return -ENOMEM;
		h->scratch = a;
		b = realloc(h->objs, n * sizeof(*h->objs));
		if (!b)
			return -ENOMEM;
		h->objs = b;
		h->scratch_cap = n;
	}
	for (k = 0; k < h->nuniq; k++) {
		for (i = 0, m = 0; i < n; i++)
			if (h->sched[reqs[i]->file] == h->uniq[k]) {
				h->scratch[m] = reqs[i];
				h->objs[m++] = io->files[reqs[i]->file].remote;
			}
		if (!m)
			continue;
		ret = grist_sched_submit(h->uniq[k], &h->c, h->objs, h->scratch, m);
		if (ret)
			return ret;
		h->handing = true;
	}
	for (i = 0; i < n; i++)
		if (!io->files[reqs[i]->file].remote)
			read_local(h, reqs[i]);
	return 0;
}

static void starve(struct http_io *h, bool on)
{
	unsigned i;

	for (i = 0; i < h->nuniq; i++)
		grist_sched_starved(h->uniq[i], on);
}

static int http_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait)
{
	struct http_io *h = to_http(io);
	unsigned n, i;

	if (h->handing) {
		for (i = 0; i < h->nuniq; i++)
			grist_sched_release(h->uniq[i], &h->c);
		h->handing = false;
	}
	pthread_mutex_lock(&h->c.lock);
	n = grist_sched_done_drain(&h->c.done, done, max);
	/* bounded: every GET ends within its timeouts, and its retries are counted */
	if (n < min_wait) {
		pthread_mutex_unlock(&h->c.lock);
		starve(h, true); /* its lock before ours, as the scheduler's thread takes them */
		pthread_mutex_lock(&h->c.lock);
		h->c.waiting = true;
		for (;;) {
			n += grist_sched_done_drain(&h->c.done, done + n, max - n);
			if (n >= min_wait)
				break;
			pthread_cond_wait(&h->c.cond, &h->c.lock);
		}
		h->c.waiting = false;
		pthread_mutex_unlock(&h->c.lock);
		starve(h, false);
		pthread_mutex_lock(&h->c.lock);
	}
	/* the failures noted with the requests just taken go to their files, on this thread */
	if (h->c.errs_new) {
		for (i = 0; i < h->c.nerrs; i++)
			if (h->c.errs[i]) {
				free(io->files[i].error);
				io->files[i].error = h->c.errs[i];
				h->c.errs[i] = NULL;
			}
		h->c.errs_new = false;
	}
	pthread_mutex_unlock(&h->c.lock);
	for (i = 0; i < n; i++)
		done[i]->retries = 0; /* remote retries are counted by cause in the counters */
	return (int)n;
}

/*
 * The consumer is done with @reqs: each scheduler learns the first of its pieces this
 * client's consumer has not consumed, which its horizon counts from. Once per unit the
 * engine retires: O(1) per request (the file slot's scheduler is a lookup), and a
 * scheduler's lock is taken only when its consumer's place moved (a unit of local reads,
 * or of reads already passed, says nothing new).
 */
static void http_consumed(struct grist_io *io, const struct grist_io_req *reqs, size_t n)
{
	struct http_io *h = to_http(io);
	size_t i;
	unsigned k;

	/*
	 * Each request was reaped from this object, so its file slot passed grist_io_submit()'s
	 * check (below nr_files, itself at most max_files, which uniq_of[] is sized by): no
	 * second bound here, in any build.
	 */
	for (i = 0; i < n; i++) {
		int32_t u = h->uniq_of[reqs[i].file];

		if (u >= 0 && reqs[i].seq + 1 > h->next[u])
			h->next[u] = reqs[i].seq + 1;
	}
	for (k = 0; k < h->nuniq; k++)
		if (h->next[k] > h->told[k] && !grist_sched_stale(h->uniq[k])) {
			grist_sched_consumed(h->uniq[k], &h->c, h->next[k]);
			h->told[k] = h->next[k];
		}
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
	.add_file = http_add_file,
	.submit = http_submit,
	.reap = http_reap,
	.destroy = http_destroy,
	.stats = http_stats,
	.consumed = http_consumed,
};
