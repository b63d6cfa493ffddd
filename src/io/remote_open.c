/*
 * The blocking GETs of the calling thread: opening (pinning) objects, many at once, and the
 * reads that go with opening (a dataset's footers). One libcurl multi handle drives every
 * GET of a call, at most `inflight` (the remote option) at once, with a pool of that many
 * easy handles: no thread per request, and a dataset of 1,000 shards opens in 1,000 /
 * inflight round trips, twice that where footers need their own GET (16-32 at the default
 * 64), instead of up to 2,000 one after another.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "io/remote.h"

#define TAIL_BYTES 65536

/* Where one transfer of a batch stands (those not yet started are past `next`). */
enum { XS_WAITING, XS_RUNNING, XS_DONE };

struct batch {
	struct grist_remote_xfer *const *xs;
	CURLM *m;
	CURL **pool;     /* idle easy handles, npool of them */
	size_t npool;
	uint8_t *state;
	uint64_t *due;   /* when a waiting retry may start */
	size_t nwaiting;
	unsigned running;
};

/* Start xs[@i] on an idle easy handle (made when none is idle). 0 or an error. */
static int batch_start(struct batch *b, size_t i)
{
	struct grist_remote_xfer *x = b->xs[i];
	int ret;

	if (!b->npool) {
		b->pool[0] = curl_easy_init();
		if (!b->pool[0])
			return grist_fail(-ENOMEM, "%s: cannot make a libcurl handle", x->display);
		b->npool = 1;
	}
	x->easy = b->pool[--b->npool];
	ret = grist_remote_xfer_setup(x);
	if (!ret && curl_multi_add_handle(b->m, x->easy) != CURLM_OK)
		ret = grist_fail(-ENOMEM, "%s: cannot start a request", x->display);
	if (ret) {
		b->pool[b->npool++] = x->easy;
		x->easy = NULL;
		return ret;
	}
	b->state[i] = XS_RUNNING;
	b->running++;
	return 0;
}

int grist_remote_xfers_run(struct grist_remote_xfer *const *xs, size_t n, unsigned bound,
			   int (*on_end)(struct grist_remote_xfer *x), const char *what)
{
	struct batch b = { .xs = xs };
	size_t i, done = 0, next = 0;
	unsigned cap = bound < n ? bound : (unsigned)n;
	int ret = 0, still;

	if (!n)
		return 0;
	if (!cap)
		cap = 1;
	b.m = curl_multi_init();
	b.pool = calloc(cap, sizeof(*b.pool));
	b.state = calloc(n, sizeof(*b.state));
	b.due = calloc(n, sizeof(*b.due));
	if (!b.m || !b.pool || !b.state || !b.due) {
		ret = grist_fail(-ENOMEM, "%s: out of memory for %zu requests", what, n);
		goto out;
	}
	/*
	 * Bounded: every GET ends within its timeouts and is retried at most `retries` times;
	 * on_end() re-arms a transfer a bounded number of times (the opening GET's second form,
	 * the pieces of the range read after it).
	 */
	while (done < n) {
		uint64_t now = grist_remote_now_ns(), wake = UINT64_MAX;
		CURLMsg *msg;
		int left;

		/* start what may: retries whose wait is over, in order, then new ones */
		for (i = 0; b.nwaiting && i < next && b.running < cap; i++) {
			if (b.state[i] != XS_WAITING)
				continue;
			if (b.due[i] > now) {
				wake = b.due[i] < wake ? b.due[i] : wake;
				continue;
			}
			b.nwaiting--;
			ret = batch_start(&b, i);
			if (ret)
				goto out;
		}
		while (b.running < cap && next < n) {
			ret = batch_start(&b, next++);
			if (ret)
				goto out;
		}
		curl_multi_perform(b.m, &still);
		while ((msg = curl_multi_info_read(b.m, &left))) {
			struct grist_remote_xfer *x = NULL;
			enum grist_remote_outcome o;
			CURL *e = msg->easy_handle;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
			o = grist_remote_xfer_finish(x, msg->data.result);
			if (x->ctr)
				grist_remote_counters_add_get(x->ctr, x, o == GRIST_REMOTE_RETRY, grist_remote_now_ns());
			curl_multi_remove_handle(b.m, e);
			x->easy = NULL;
			b.pool[b.npool++] = e;
			b.running--;
			for (i = 0; xs[i] != x; i++)
				;
			if (o != GRIST_REMOTE_RETRY && on_end) {
				int r = on_end(x);

				if (r < 0) {
					ret = r;
					goto out;
				}
				if (r > 0)
					x->delay_ns = 0;
				o = r > 0 ? GRIST_REMOTE_RETRY : o;
			}
			if (o == GRIST_REMOTE_RETRY) {
				b.state[i] = XS_WAITING;
				b.due[i] = grist_remote_now_ns() + x->delay_ns;
				b.nwaiting++;
				wake = 0;
			} else if (x->error) {
				ret = grist_fail(x->error, "%s: %s", x->display, x->msg);
				goto out;
			} else {
				b.state[i] = XS_DONE;
				done++;
			}
		}
		if (done == n || (b.running < cap && next < n))
			continue;
		/* wait for sockets, or for the first retry due (curl's own timers cut it shorter) */
		{
			int ms = 100;

			now = grist_remote_now_ns();
			if (wake != UINT64_MAX)
				ms = wake <= now ? 0 : (wake - now) / 1000000 < 100 ? (int)((wake - now) / 1000000) + 1 : 100;
			if (b.running)
				curl_multi_poll(b.m, NULL, 0, ms, NULL);
			else if (ms) {
				struct timespec ts = { 0, (long)ms * 1000000L };

				nanosleep(&ts, NULL);
			}
		}
	}
out:
	/* after a failure the rest stop where they are: no handle, header or body left behind */
	for (i = 0; b.m && b.state && i < n; i++)
		if (b.state[i] == XS_RUNNING && xs[i]->easy) {
			curl_multi_remove_handle(b.m, xs[i]->easy);
			curl_easy_cleanup(xs[i]->easy);
			xs[i]->easy = NULL;
		}
	for (i = 0; b.pool && i < b.npool; i++)
		curl_easy_cleanup(b.pool[i]);
	free(b.pool);
	free(b.state);
	free(b.due);
	if (b.m)
		curl_multi_cleanup(b.m);
	return ret;
}

int grist_remote_xfer_run(struct grist_remote_xfer *x)
{
	struct grist_remote_xfer *one[1] = { x };

	return grist_remote_xfers_run(one, 1, 1, NULL, x->display);
}

/* ---- opening ---- */

struct open_batch {
	struct grist_remote_options opt;
	grist_remote_opened_fn *then;
	void *ud;
};

struct opening {
	struct grist_remote_xfer x; /* first: open_next() gets the xfer */
	const struct open_batch *batch;
	size_t index;
	struct grist_remote_object *o;
	struct grist_buf keep;
	bool whole;                 /* the second form: no Range, the whole (small) object */
	bool opened;                /* o is open; x reads `more` now */
	struct grist_remote_range more;
	uint64_t at;                /* bytes of `more` read */
	struct grist_remote_seg seg;
};

/* The object's size, tail and ETag from its opening GET's answer. */
static int open_finish(struct opening *op)
{
	struct grist_remote_object *o = op->o;
	struct grist_remote_xfer *x = &op->x;

	/* cr.complete is known here: remote.c refuses a "*" length where no size is known yet */
	if (x->has_range && !op->whole) {
		if (x->cr.last + 1 != x->cr.complete || x->cr.last + 1 - x->cr.first != op->keep.len)
			return grist_fail(-EPROTO, "%s: the server sent bytes %llu-%llu/%llu for the last %d bytes "
					  "(%zu in the body)", o->url, (unsigned long long)x->cr.first,
					  (unsigned long long)x->cr.last, (unsigned long long)x->cr.complete, TAIL_BYTES,
					  op->keep.len);
		o->size = x->cr.complete;
		o->tail_off = x->cr.first;
	} else {
		o->size = op->keep.len;
		o->tail_off = 0;
	}
	snprintf(o->etag, sizeof(o->etag), "%s", x->etag);
	o->tail = op->keep.data;
	op->keep = (struct grist_buf){ 0 };
	return 0;
}

/* Set @op's transfer up for the next piece of `more`: at most split bytes, If-Match the ETag. */
static void arm_piece(struct opening *op)
{
	struct grist_remote_xfer *x = &op->x;
	uint64_t left = op->more.len - op->at;

	x->obj = op->o;
	x->suffix = false;
	x->keep = NULL;
	x->keep_max = 0;
	x->off = op->more.off + op->at;
	x->len = left < op->batch->opt.split_bytes ? left : op->batch->opt.split_bytes;
	op->seg = (struct grist_remote_seg){ x->off, x->len, op->more.dst + op->at };
	x->segs = &op->seg;
	x->nsegs = 1;
	x->attempt = 0;
}

/*
 * An opening GET ended. A 416 to the suffix form: no last bytes to send: an empty object,
 * or (rclone's S3 server) one shorter than the suffix asked for, where RFC 9110 says to
 * send it all; either way smaller than TAIL_BYTES, and one GET without a Range brings all
 * of it. Done: the object is open, and the caller may want one more range of it, read by
 * the same transfer (on the connection the opening GET just used).
 */
static int open_next(struct grist_remote_xfer *x)
{
	struct opening *op = (struct opening *)x;
	int ret;

	if (x->error) {
		if (op->opened || x->status != 416 || !x->suffix)
			return 0; /* the batch fails with it, naming the URL */
		op->keep.len = 0;
		x->suffix = false;
		x->len = 0;
		x->attempt = 0;
		op->whole = true;
		return 1;
	}
	if (op->opened) {
		op->at += x->len;
		if (op->at == op->more.len)
			return 0;
		arm_piece(op);
		return 1;
	}
	ret = open_finish(op);
	if (ret)
		return ret;
	op->opened = true;
	if (!op->batch->then)
		return 0;
	ret = op->batch->then(op->batch->ud, op->index, op->o, &op->more);
	if (ret)
		return ret;
	if (!op->more.len)
		return 0;
	if (op->more.off > op->o->size || op->more.len > op->o->size - op->more.off)
		return grist_fail_at(-EBADMSG, op->o->url, op->more.off, "read of %llu bytes runs past the object's "
				     "end (%llu bytes; was it truncated?)", (unsigned long long)op->more.len,
				     (unsigned long long)op->o->size);
	arm_piece(op);
	return 1;
}

static int open_prepare(struct opening *op, const char *url)
{
	struct grist_remote_object *o;
	enum grist_url_scheme s = grist_url_scheme(url);
	char region[64];

	o = calloc(1, sizeof(*o));
	if (!o)
		return grist_fail(-ENOMEM, "%s: out of memory", url);
	op->o = o;
	o->refs = 1;
	pthread_mutex_init(&o->sync_lock, NULL);
	o->url = strdup(url);
	o->opening = calloc(1, sizeof(*o->opening));
	if (!o->url || !o->opening)
		return grist_fail(-ENOMEM, "%s: out of memory", url);
	op->x.ctr = o->opening;
	op->x.dest = o; /* where its redirects lead is where the object's reads go */
	grist_remote_region(s, region, sizeof(region));
	return grist_url_parse(url, region, true, &o->u);
}

int grist_remote_open_many(const char *const *urls, size_t n, struct grist_remote_object **out,
			   grist_remote_opened_fn *then, void *ud)
{
	struct open_batch batch = { .then = then, .ud = ud };
	struct opening *ops;
	struct grist_remote_xfer **xs;
	size_t i;
	int ret;

	memset(out, 0, n * sizeof(*out));
	if (!n) /* a dataset of local files: nothing of the remote backend's is needed */
		return 0;
	ret = grist_remote_global_init();
	if (ret)
		return ret;
	grist_remote_options_current(&batch.opt);
	ops = calloc(n, sizeof(*ops));
	xs = calloc(n, sizeof(*xs));
	if (!ops || !xs) {
		ret = grist_fail(-ENOMEM, "cannot open %zu objects: out of memory", n);
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct grist_remote_xfer *x = &ops[i].x;

		ops[i].batch = &batch;
		ops[i].index = i;
		ret = open_prepare(&ops[i], urls[i]);
		if (ret)
			break; /* ops[i].o may be NULL (out of memory) */
		x->u = &ops[i].o->u;
		x->display = ops[i].o->url;
		x->suffix = true;
		x->len = TAIL_BYTES;
		x->keep = &ops[i].keep;
		x->keep_max = TAIL_BYTES;
		x->opt = &batch.opt;
		xs[i] = x;
	}
	if (!ret)
		ret = grist_remote_xfers_run(xs, n, batch.opt.max_inflight, open_next, urls[0]);
	for (i = 0; ops && i < n; i++) {
		grist_remote_xfer_release(&ops[i].x);
		grist_buf_free(&ops[i].keep);
		if (ret)
			grist_remote_unref(ops[i].o);
		else
			out[i] = ops[i].o;
	}
out:
	free(ops);
	free(xs);
	return ret;
}

int grist_remote_open(const char *url, struct grist_remote_object **out)
{
	return grist_remote_open_many(&url, 1, out, NULL, NULL);
}
