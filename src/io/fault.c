/* The fault injector: wraps a real backend and fails, shortens, retries or delays chosen requests. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "io/io.h"

#define MAX_DELAY_US (60ull * 1000 * 1000)
#define MAX_EAGAIN 1000000

/* A request the injector changed or holds; at most queue_depth of them exist. */
struct fault_slot {
	struct grist_io_req *req; /* NULL when free */
	uint32_t full_len;        /* SHORT: the length to restore, 0 when not cut */
	uint64_t delay_us;        /* DELAY: hold this long after the read completes */
	uint64_t release_us;      /* when held: the time it may be handed back, else 0 */
};

struct fault_io {
	struct grist_io base;
	struct grist_io *inner;   /* driven through its ops directly: the injector owns its progress fields */
	struct grist_io_fault *faults; /* sorted by seq */
	unsigned nr_faults, cursor;
	uint64_t seq;             /* sequence number of the next submitted request */
	unsigned owed;            /* requests the inner backend holds */
	struct fault_slot *slots;
	struct grist_io_req **fwd; /* scratch, queue_depth entries */
	struct grist_io_queue ready;
};

static struct fault_io *to_fault(struct grist_io *io)
{
	return (struct fault_io *)io;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int by_seq(const void *a, const void *b)
{
	const struct grist_io_fault *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct fault_slot *find_slot(struct fault_io *fi, const struct grist_io_req *r)
{
	unsigned i;

	for (i = 0; i < fi->base.cfg.queue_depth; i++)
		if (fi->slots[i].req == r)
			return &fi->slots[i];
	return NULL;
}

static struct fault_slot *take_slot(struct fault_io *fi, struct grist_io_req *r)
{
	struct fault_slot *s = find_slot(fi, r);

	if (!s)
		s = find_slot(fi, NULL); /* a free one exists: slots == queue depth >= in flight */
	s->req = r;
	return s;
}

/* Apply the faults aimed at this request; true when it should go to the inner backend. */
static bool inject(struct fault_io *fi, struct grist_io_req *r, uint64_t seq)
{
	bool forward = true;

	while (fi->cursor < fi->nr_faults && fi->faults[fi->cursor].seq < seq)
		fi->cursor++;
	for (unsigned i = fi->cursor; i < fi->nr_faults && fi->faults[i].seq == seq; i++) {
		const struct grist_io_fault *f = &fi->faults[i];
		struct fault_slot *s;

		switch (f->type) {
		case GRIST_IO_FAULT_EIO:
			r->result = -EIO;
			forward = false;
			break;
		case GRIST_IO_FAULT_EAGAIN:
			/* The same retry rule the backends use; past the bound the request fails. */
			for (uint64_t k = 0; k < f->arg && forward; k++)
				if (grist_io_req_step(r, -EAGAIN) == GRIST_IO_STEP_DONE)
					forward = false;
			break;
		case GRIST_IO_FAULT_SHORT:
			if (f->arg < r->len) {
				s = take_slot(fi, r);
				s->full_len = r->len;
				r->len = (uint32_t)f->arg;
			}
			break;
		case GRIST_IO_FAULT_DELAY:
			s = take_slot(fi, r);
			s->delay_us = f->arg;
			break;
		}
		if (!forward)
			break;
	}
	return forward;
}

static int fault_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n)
{
	struct fault_io *fi = to_fault(io);
	struct fault_slot *s;
	unsigned i, m = 0;
	int ret;

	for (i = 0; i < n; i++) {
		if (inject(fi, reqs[i], fi->seq++)) {
			fi->fwd[m++] = reqs[i];
			continue;
		}
		/* Failed before reaching the disk: forget any cut or delay and complete it now. */
		s = find_slot(fi, reqs[i]);
		if (s) {
			if (s->full_len)
				reqs[i]->len = s->full_len;
			memset(s, 0, sizeof(*s));
		}
		grist_io_queue_push(&fi->ready, reqs[i]);
	}
	if (!m)
		return 0;
	ret = fi->inner->ops->submit(fi->inner, fi->fwd, m);
	if (ret < 0)
		return ret;
	fi->owed += m;
	return 0;
}

/* One completion from the inner backend: finish a cut read, hold a delayed one, or hand it on. */
static int settle(struct fault_io *fi, struct grist_io_req *r, uint64_t now)
{
	struct fault_slot *s = find_slot(fi, r);
	int ret;

	if (s && s->full_len) {
		bool whole_cut = r->result >= 0 && r->done == r->len;

		r->len = s->full_len;
		s->full_len = 0;
		if (whole_cut) {
			/* Like a kernel short read: the rest is read again from where it stopped. */
			r->flags |= GRIST_IO_REQ_RESUBMITTED;
			ret = fi->inner->ops->submit(fi->inner, &r, 1);
			if (ret < 0)
				return ret;
			fi->owed++;
			return 0;
		}
	}
	if (s && s->delay_us) {
		s->release_us = now + s->delay_us;
		s->delay_us = 0;
		return 0;
	}
	if (s)
		memset(s, 0, sizeof(*s));
	grist_io_queue_push(&fi->ready, r);
	return 0;
}

/* Hand on held requests whose delay is over; returns the earliest release still pending (0: none). */
static uint64_t release_due(struct fault_io *fi, uint64_t now)
{
	uint64_t next = 0;
	unsigned i;

	for (i = 0; i < fi->base.cfg.queue_depth; i++) {
		struct fault_slot *s = &fi->slots[i];

		if (!s->req || !s->release_us)
			continue;
		if (s->release_us <= now) {
			struct grist_io_req *r = s->req;

			memset(s, 0, sizeof(*s));
			grist_io_queue_push(&fi->ready, r);
		} else if (!next || s->release_us < next) {
			next = s->release_us;
		}
	}
	return next;
}

static int fault_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait)
{
	struct fault_io *fi = to_fault(io);
	unsigned n;
	int ret, i;

	for (;;) {
		uint64_t now = now_us(), next = release_due(fi, now);
		unsigned need = min_wait > fi->ready.n ? min_wait - fi->ready.n : 0;

		if (fi->owed) {
			/* Block on the inner backend only when no held request could satisfy us sooner. */
			unsigned w = next ? 0 : (need < fi->owed ? need : fi->owed);

			ret = fi->inner->ops->reap(fi->inner, fi->fwd, fi->base.cfg.queue_depth, w);
			if (ret < 0)
				return ret;
			fi->owed -= (unsigned)ret;
			for (i = 0; i < ret; i++) {
				int err = settle(fi, fi->fwd[i], now);

				if (err)
					return err;
			}
			if (ret)
				continue; /* settling may have released, resubmitted or held requests */
		}
		if (fi->ready.n >= min_wait)
			break;
		if (next) {
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 0 };
			uint64_t wait = next - now;

			/* Sleep in short steps while the inner backend also has reads owed. */
			if (fi->owed && wait > 200)
				wait = 200;
			ts.tv_sec = (time_t)(wait / 1000000u);
			ts.tv_nsec = (long)(wait % 1000000u) * 1000;
			nanosleep(&ts, NULL);
		} else if (!fi->owed) {
			break; /* nothing owed or held: waiting could only hang */
		}
	}
	n = grist_io_queue_drain(&fi->ready, done, max);
	return (int)n;
}

static int fault_add_file(struct grist_io *io, uint32_t slot)
{
	struct fault_io *fi = to_fault(io);
	uint32_t inner_slot;
	int ret;

	ret = grist_io_add_file(fi->inner, io->files[slot].fd, io->files[slot].path, &inner_slot);
	if (ret)
		return ret;
	if (inner_slot != slot)
		return grist_fail(-EINVAL, "fault injector: file slots diverged (%u vs %u)",
				  inner_slot, slot);
	return 0;
}

static void fault_destroy(struct grist_io *io)
{
	struct fault_io *fi = to_fault(io);
	unsigned i;

	/* The inner backend waits for its reads; give cut requests their length back. */
	grist_io_destroy(fi->inner);
	if (fi->slots)
		for (i = 0; i < fi->base.cfg.queue_depth; i++)
			if (fi->slots[i].req && fi->slots[i].full_len)
				fi->slots[i].req->len = fi->slots[i].full_len;
	free(fi->slots);
	free(fi->fwd);
	free(fi->faults);
	free(fi);
}

static int check_fault(const struct grist_io_fault *f)
{
	switch (f->type) {
	case GRIST_IO_FAULT_EIO:
		return 0;
	case GRIST_IO_FAULT_SHORT:
		if (f->arg >= 1 && f->arg <= INT32_MAX)
			return 0;
		break;
	case GRIST_IO_FAULT_EAGAIN:
		if (f->arg <= MAX_EAGAIN)
			return 0;
		break;
	case GRIST_IO_FAULT_DELAY:
		if (f->arg <= MAX_DELAY_US)
			return 0;
		break;
	default:
		return grist_fail(-EINVAL, "fault at request %llu: unknown type %d",
				  (unsigned long long)f->seq, (int)f->type);
	}
	return grist_fail(-EINVAL, "fault at request %llu: argument %llu out of range",
			  (unsigned long long)f->seq, (unsigned long long)f->arg);
}

/* The injector alone; grist_io_fault_wrap() gives it the backend it wraps. */
static int fault_create(const struct grist_io_config *cfg, struct grist_io **out)
{
	struct fault_io *fi;
	unsigned i;
	int ret;

	if (cfg->fault.inner == GRIST_IO_FAULT)
		return grist_fail(-EINVAL, "fault injector cannot wrap itself");
	for (i = 0; i < cfg->fault.nr_faults; i++) {
		ret = check_fault(&cfg->fault.faults[i]);
		if (ret)
			return ret;
	}
	fi = calloc(1, sizeof(*fi));
	if (!fi)
		return grist_fail(-ENOMEM, "fault injector");
	fi->base.cfg.queue_depth = cfg->queue_depth; /* destroy walks the slots before the core sets cfg */
	fi->slots = calloc(cfg->queue_depth, sizeof(*fi->slots));
	fi->fwd = calloc(cfg->queue_depth, sizeof(*fi->fwd));
	fi->faults = calloc(cfg->fault.nr_faults ? cfg->fault.nr_faults : 1, sizeof(*fi->faults));
	if (!fi->slots || !fi->fwd || !fi->faults) {
		ret = grist_fail(-ENOMEM, "fault injector tables");
		goto fail;
	}
	if (cfg->fault.nr_faults)
		memcpy(fi->faults, cfg->fault.faults, cfg->fault.nr_faults * sizeof(*fi->faults));
	fi->nr_faults = cfg->fault.nr_faults;
	qsort(fi->faults, fi->nr_faults, sizeof(*fi->faults), by_seq);
	*out = &fi->base;
	return 0;
fail:
	free(fi->slots);
	free(fi->fwd);
	free(fi->faults);
	free(fi);
	return ret;
}

static void fault_stats(struct grist_io *io, struct grist_io_stats *st)
{
	struct fault_io *fi = to_fault(io);

	if (fi->inner->ops->stats)
		fi->inner->ops->stats(fi->inner, st);
	st->backend = !strcmp(fi->inner->ops->name, "uring") ? "fault(uring)" : "fault(pread)";
}

void grist_io_fault_wrap(struct grist_io *io, struct grist_io *inner)
{
	to_fault(io)->inner = inner;
}

const struct grist_io_ops grist_io_fault_ops = {
	.name = "fault",
	.create = fault_create,
	.add_file = fault_add_file,
	.submit = fault_submit,
	.reap = fault_reap,
	.destroy = fault_destroy,
	.stats = fault_stats,
};
