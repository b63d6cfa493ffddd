/*
 * Async engine, reading: admitted units' regions become io requests, pushed oldest unit
 * first whenever the ring has room, and completions are credited to their regions as
 * they arrive, so the decoder can start on a chunk as soon as its region has landed.
 *
 * Read buffers come from the worker's arena (read-ahead bytes, registered with io_uring
 * when allowed), allocated as a ring in pipeline order: units retire oldest first, so
 * the live reservations always run from the oldest unit's to the newest's, possibly
 * wrapping once around the end. That ring is the read-ahead window's byte bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/buf.h"
#include "common/error.h"
#include "exec/engine_async_read.h"
#include "plan/read_plan.h"

/*
 * The read-ahead arena, in transparent huge pages when it is small (ARENA_HUGE_MAX or
 * less per worker, as with 64 KiB records at depth 32: 4.3 MB), in small pages
 * otherwise.
 *
 * Why (issue 22): a read's buffer reaches the device as one segment per physically
 * contiguous run of pages, and small pages fresh from the allocator are scattered (1.0-1.7
 * pages per run here), so a 66 KB read is 17-18 segments. The development VM's virtio
 * disk has no indirect descriptors: each segment takes a descriptor of its ring (256
 * entries, from its 128 tags), so about 13 such reads fit, and the rest wait in the block layer;
 * every time the ring is full when a request is dispatched it is requeued (`perf stat -e
 * block:block_rq_requeue`: 390-1600 per 768 MiB epoch at 64 KiB records, against 1-10 in
 * 2 MiB pages). In 2 MiB pages a read is one or two segments. Measured there, cold.py,
 * 64 KiB records, 6 alternating pairs against small pages (docs/tuning.md, "Huge-page
 * read arenas"): 1.51x and 1.55x the bytes/s on the disk at batch 16 and 1, 1.16x and
 * 1.20x on a loop device, 13-24% less CPU per GB on the disk; 0.02-0.05 s more start-up.
 *
 * Why only small arenas: faulting fresh huge pages costs more on that VM (the host has
 * taken back the free 2 MiB blocks, and each 4 KiB of them faults on the host again), and
 * the arena is pinned at start-up: 128 MiB of them (1 MiB records) took 0.3 s more
 * start-up, with no change in bytes/s at 1 MiB records (small / huge pages 0.97 and 1.00,
 * batch 16 and 1). THP "never" or a refused madvise leaves small pages, which is only
 * slower.
 */
#define ARENA_HUGE_PAGE ((size_t)2 << 20)
#define ARENA_HUGE_MAX ((size_t)16 << 20)

static uint8_t *arena_map(size_t len, size_t *map_len)
{
	uint8_t *m, *a;
	size_t lead;

	*map_len = len;
	if (len > ARENA_HUGE_MAX) {
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return m == MAP_FAILED ? NULL : m;
	}
	*map_len = (len + ARENA_HUGE_PAGE - 1) & ~(ARENA_HUGE_PAGE - 1);
	/* over-map by one huge page, then trim both ends to a 2 MiB-aligned range */
	m = mmap(NULL, *map_len + ARENA_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)m + ARENA_HUGE_PAGE - 1) & ~(uintptr_t)(ARENA_HUGE_PAGE - 1));
	lead = (size_t)(a - m);
	if (lead)
		munmap(m, lead);
	munmap(a + *map_len, ARENA_HUGE_PAGE - lead);
	madvise(a, *map_len, MADV_HUGEPAGE); /* advice only: refused, the arena stays in small pages */
	return a;
}

int grist_async_reader_init(struct async_reader *rd, const struct async_reader_config *c)
{
	const struct grist_engine_params *p = c->p;
	struct grist_io_config ioc;
	struct grist_io_stats ios;
	size_t d, f;
	int ret;

	rd->p = p;
	rd->files = c->files;
	memset(&ioc, 0, sizeof(ioc));
	if (p->io_override)
		ioc = p->io_config;
	ioc.queue_depth = c->queue_depth;
	ioc.threads = 4;
	ioc.remote_counters = c->remote_counters;
	ioc.remote_options = p->remote;
	rd->nslots = c->nslots;
	rd->resv = calloc(c->nslots, sizeof(*rd->resv));
	rd->by_slot = calloc(c->nslots, sizeof(*rd->by_slot));
	if (!rd->resv || !rd->by_slot)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	/*
	 * When every file is mapped nothing is read: a unit's regions are the mappings and
	 * its buffer need is 0 (engine_async_plan.c, build_regions()), so no arena. Mapped and
	 * pinned, it cost each worker a few MiB of memory the kernel zeroes (2 MiB pages
	 * under io_sqe_buffer_register) at start-up and unmaps at close, for nothing.
	 */
	if (grist_async_files_read_any(c->files)) {
		rd->arena_len = c->read_ahead;
		rd->arena = arena_map(rd->arena_len, &rd->arena_map_len);
		if (!rd->arena) {
			rd->arena_len = 0;
			rd->arena_map_len = 0;
			return grist_fail(-ENOMEM, "async engine: cannot map a %zu-byte read-ahead arena", c->read_ahead);
		}
		ioc.fixed_buf = rd->arena;
		ioc.fixed_buf_len = rd->arena_len;
	}
	ret = grist_io_create(c->io_kind, &ioc, &rd->io);
	if (ret)
		return ret;
	grist_io_get_stats(rd->io, &ios);
	rd->fixed_buffers = ios.fixed_buffers;
	rd->io_slot = calloc(p->num_sources, sizeof(*rd->io_slot));
	if (!rd->io_slot)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	for (d = 0; d < p->num_sources; d++) {
		rd->io_slot[d] = calloc(p->sources[d].num_files, sizeof(**rd->io_slot));
		if (!rd->io_slot[d])
			return grist_fail(-ENOMEM, "async engine: out of memory");
		for (f = 0; f < p->sources[d].num_files; f++) {
			const struct async_file *af = grist_async_file(rd->files, (uint32_t)d, (uint32_t)f);

			if (af->remote)
				ret = grist_io_add_remote(rd->io, af->remote, &rd->io_slot[d][f]);
			else
				ret = grist_io_add_file(rd->io, af->fd, af->path, &rd->io_slot[d][f]);
			if (ret)
				return ret;
		}
	}
	return 0;
}

void grist_async_reader_close_io(struct async_reader *rd)
{
	grist_io_destroy(rd->io);
	rd->io = NULL;
}

void grist_async_reader_free(struct async_reader *rd)
{
	size_t d;

	grist_async_reader_close_io(rd);
	free(rd->heap);
	if (rd->io_slot) {
		for (d = 0; d < rd->p->num_sources; d++)
			free(rd->io_slot[d]);
		free(rd->io_slot);
	}
	if (rd->arena)
		munmap(rd->arena, rd->arena_map_len);
	rd->arena = NULL;
	rd->arena_len = 0;
	__atomic_store_n(&rd->arena_map_len, 0, __ATOMIC_RELAXED); /* stats read it from another thread */
	free(rd->resv);
	free(rd->by_slot);
	free(rd->stream);
}

void grist_async_reader_stats(struct async_reader *rd, struct grist_loader_stats *out, uint64_t *depth_area,
			      uint64_t *depth_span)
{
	uint64_t most = grist_counter_read(&rd->depth_max);

	out->reads_issued += grist_counter_read(&rd->reads);
	out->bytes_read += grist_counter_read(&rd->bytes_read);
	*depth_area += grist_counter_read(&rd->depth_area);
	*depth_span += grist_counter_read(&rd->depth_span);
	if (most > out->reads_in_flight_max)
		out->reads_in_flight_max = most;
	out->memory_bytes += __atomic_load_n(&rd->arena_map_len, __ATOMIC_RELAXED); /* 0 once its worker ended */
	out->registered_buffers = out->registered_buffers || rd->fixed_buffers;
}

/* Reads in flight, integrated over time: called before every change of the count. */
static void depth_account(struct async_reader *rd)
{
	uint64_t now = grist_now_ns(), inflight = rd->io->inflight;

	if (rd->depth_t) {
		grist_counter_add(&rd->depth_area, inflight * (now - rd->depth_t));
		grist_counter_add(&rd->depth_span, now - rd->depth_t);
	}
	rd->depth_t = now;
}

/*
 * Where @n bytes fit in a ring of @len bytes whose live part starts at @head (the
 * oldest reservation) and ends at @tail (the end of the newest, which starts at
 * @last_off). Returns the offset, or SIZE_MAX when it does not fit now.
 */
static size_t ring_fit(size_t len, size_t head, size_t last_off, size_t tail, size_t n)
{
	if (last_off >= head) {
		/* live: [head, tail); free: [tail, end) and [0, head) */
		if (len - tail >= n)
			return tail;
		return head >= n ? 0 : SIZE_MAX;
	}
	/* wrapped, live: [head, end) and [0, tail); free: [tail, head) */
	return head - tail >= n ? tail : SIZE_MAX;
}

/*
 * Reserve @n bytes of the arena after the newest live reservation. Returns the offset,
 * or SIZE_MAX when it does not fit now (or streamed regions hold the arena).
 */
static size_t arena_reserve(const struct async_reader *rd, size_t n)
{
	const struct async_reservation *first, *last;

	if (n > rd->arena_len || rd->stream_head != rd->stream_tail)
		return SIZE_MAX;
	if (!rd->resv_count)
		return 0;
	first = &rd->resv[rd->resv_head];
	last = &rd->resv[(rd->resv_head + rd->resv_count - 1) % rd->nslots];
	return ring_fit(rd->arena_len, first->off, last->off, last->off + last->len, n);
}

/* A streamed region's @n bytes after the newest live one: its sequence + 1, or 0 when they do not fit now. */
static uint64_t stream_reserve(struct async_reader *rd, size_t n, size_t *off)
{
	const struct async_stream_resv *first, *last;
	size_t at = 0, mask;

	if (n > rd->arena_len)
		return 0;
	if (rd->stream_head != rd->stream_tail) {
		mask = rd->stream_cap - 1;
		first = &rd->stream[rd->stream_head & mask];
		last = &rd->stream[(rd->stream_tail - 1) & mask];
		at = ring_fit(rd->arena_len, first->off, last->off, last->off + last->len, n);
		if (at == SIZE_MAX)
			return 0;
	}
	/* room for the entry was made when its unit was admitted (stream_ring_room()) */
	rd->stream[rd->stream_tail & (rd->stream_cap - 1)] = (struct async_stream_resv){ .off = at, .len = n };
	*off = at;
	return ++rd->stream_tail;
}

/*
 * Make the stream ring hold @more entries beyond the live ones and those that admitted
 * units may still take, so that reserving never allocates (a failure there could only
 * wait). Entries keep their sequence numbers, at their place under the new mask.
 * Returns 0 or -ENOMEM.
 */
static int stream_ring_room(struct async_reader *rd, size_t more)
{
	size_t cap = rd->stream_cap ? rd->stream_cap : 64;
	struct async_stream_resv *m;
	uint64_t s;

	while (cap < rd->stream_tail - rd->stream_head + rd->stream_owed + more)
		cap *= 2;
	if (cap == rd->stream_cap)
		return 0;
	m = malloc(cap * sizeof(*m));
	if (!m)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	for (s = rd->stream_head; s != rd->stream_tail; s++)
		m[s & (cap - 1)] = rd->stream[s & (rd->stream_cap - 1)];
	free(rd->stream);
	rd->stream = m;
	rd->stream_cap = cap;
	return 0;
}

void grist_async_reads_release_region(struct async_reader *rd, struct async_reads *r, uint32_t region)
{
	struct async_landing *l = &r->land[region];
	size_t mask = rd->stream_cap - 1;

	if (!l->resv)
		return;
	rd->stream[(l->resv - 1) & mask].freed = true;
	l->resv = 0;
	while (rd->stream_head != rd->stream_tail && rd->stream[rd->stream_head & mask].freed)
		rd->stream_head++;
}

/*
 * Streamed: the region of request @q takes its space when its first request goes; its
 * requests, consecutive in reqs[], get their buffers there. False when it does not fit now.
 */
static bool stream_place(struct async_reader *rd, struct async_reads *r, struct grist_io_req *q)
{
	uint32_t ri = (uint32_t)(q->user_data & 0xffffffffu);
	const struct async_region *g = &r->plan->regions[ri];
	struct async_landing *l = &r->land[ri];
	struct grist_io_req *k, *end = r->reqs + r->nreqs;
	size_t off = 0;

	if (q->buf)
		return true;
	l->resv = stream_reserve(rd, (size_t)grist_read_buf_len(g->len, rd->files->buf_align), &off);
	if (!l->resv)
		return false;
	r->unreserved--;
	rd->stream_owed--;
	l->base = rd->arena + off;
	for (k = q; k < end && (uint32_t)(k->user_data & 0xffffffffu) == ri; k++)
		k->buf = rd->arena + off + (k->offset - g->offset);
	return true;
}

void grist_async_reads_reset(struct async_reads *r)
{
	r->plan = NULL;
	r->nreqs = r->submitted = 0;
	r->nlanded = 0;
	r->pending = 0;
	r->buf = NULL;
	r->arena_len = 0;
	r->admitted = false;
	r->streamed = false;
	r->errmsg[0] = '\0';
}

int grist_async_admit(struct async_reader *rd, struct async_reads *r, const struct async_plan *pl, unsigned slot,
		      bool alone)
{
	size_t i, nreq = 0, off;
	uint64_t done, mapped = 0;
	int ret;

	r->plan = pl;
	r->buf = NULL;
	r->arena_len = 0;
	r->streamed = false; /* until admitted: retire() then gives nothing back */
	if (pl->streamed) {
		if (rd->resv_count)
			return 0; /* waits for the whole units before it to retire */
		ret = stream_ring_room(rd, pl->nregions);
		if (ret)
			return ret;
	} else if (pl->buf_need) {
		off = arena_reserve(rd, pl->buf_need);
		if (off != SIZE_MAX) {
			r->buf = rd->arena + off;
			r->arena_off = off;
			r->arena_len = pl->buf_need;
			rd->resv[(rd->resv_head + rd->resv_count++) % rd->nslots] =
				(struct async_reservation){ .off = off, .len = pl->buf_need };
		} else if (alone) {
			/* alone and larger than the arena: plain heap memory, one unit at a time */
			if (rd->heap_cap < pl->buf_need) {
				void *m = NULL;

				free(rd->heap);
				rd->heap = NULL;
				rd->heap_cap = 0;
				if (posix_memalign(&m, GRIST_ENGINE_MEM_ALIGN, pl->buf_need))
					return grist_fail(-ENOMEM, "async engine: cannot allocate a %zu-byte read buffer",
							  pl->buf_need);
				rd->heap = m;
				rd->heap_cap = pl->buf_need;
			}
			r->buf = rd->heap;
		} else {
			return 0; /* waits for older units to retire */
		}
	}
	for (i = 0; i < pl->nregions; i++)
		if (!grist_async_file(rd->files, pl->regions[i].component, pl->regions[i].file)->map)
			nreq += grist_read_pieces(pl->regions[i].len);
	ret = grist_array_reserve((void **)&r->reqs, &r->reqs_cap, nreq, sizeof(*r->reqs));
	if (!ret)
		ret = grist_array_reserve((void **)&r->land, &r->land_cap, pl->nregions, sizeof(*r->land));
	if (!ret)
		ret = grist_array_reserve((void **)&r->landed, &r->landed_cap, pl->nregions, sizeof(*r->landed));
	if (ret)
		return ret;
	rd->by_slot[slot] = r;
	r->nreqs = 0;
	r->nlanded = 0;
	for (i = 0; i < pl->nregions; i++) {
		const struct async_region *g = &pl->regions[i];
		const struct async_file *f = grist_async_file(rd->files, g->component, g->file);
		struct async_landing *l = &r->land[i];

		l->got = 0;
		l->error = 0;
		l->pieces_left = 0;
		l->resv = 0;
		if (f->map) {
			/* the page cache is the buffer: nothing to submit, landed already */
			l->base = f->map + g->offset;
			l->got = g->offset < f->size ? (f->size - g->offset < g->len ? f->size - g->offset : g->len) : 0;
			mapped += l->got;
			r->landed[r->nlanded++] = (uint32_t)i;
			continue;
		}
		/* streamed: the region's place is chosen when it is pushed (stream_place()) */
		l->base = pl->streamed ? NULL : r->buf + g->buf_off;
		for (done = 0; done < g->len; done += GRIST_READ_PIECE_MAX) {
			struct grist_io_req *q = &r->reqs[r->nreqs++];

			memset(q, 0, sizeof(*q));
			q->file = rd->io_slot[g->component][g->file];
			q->offset = g->offset + done;
			q->len = grist_read_piece_len(g->len, done);
			q->buf = pl->streamed ? NULL : r->buf + g->buf_off + done;
			q->user_data = ((uint64_t)slot << 32) | i;
			l->pieces_left++;
		}
	}
	/* read by the decoder, through the mapping: one add for the unit, not one per region */
	if (mapped)
		grist_counter_add(&rd->bytes_read, mapped);
	r->submitted = 0;
	r->pending = (unsigned)r->nreqs;
	r->streamed = pl->streamed;
	if (r->streamed) {
		r->unreserved = pl->nregions;
		rd->stream_owed += pl->nregions;
	}
	r->admitted = true;
	return 0;
}

/* Tell the configured read trace about @n requests of @r just taken by the ring. */
static void trace_reads(const struct async_reader *rd, const struct async_reads *r, struct grist_io_req *const *q,
			unsigned n)
{
	const struct grist_engine_params *p = rd->p;
	unsigned i;

	for (i = 0; i < n; i++) {
		const struct async_region *g = &r->plan->regions[q[i]->user_data & 0xffffffffu];

		p->read_trace(p->read_trace_ctx, grist_async_file(rd->files, g->component, g->file)->path, q[i]->offset,
			      q[i]->len);
	}
}

int grist_async_push(struct async_reader *rd, struct async_reads *r, bool *full)
{
	struct grist_io_req *batch[64];
	bool no_room = false;
	int taken;

	while (r->submitted < r->nreqs) {
		unsigned n = 0;

		while (n < 64 && r->submitted + n < r->nreqs) {
			if (r->streamed && !stream_place(rd, r, &r->reqs[r->submitted + n])) {
				no_room = true;
				break;
			}
			batch[n] = &r->reqs[r->submitted + n];
			n++;
		}
		if (!n) {
			*full = true; /* the arena is full: decoding gives regions back */
			break;
		}
		depth_account(rd);
		taken = grist_io_submit(rd->io, batch, n);
		if (taken < 0)
			return taken;
		grist_counter_add(&rd->reads, (uint64_t)taken);
		if (rd->p->read_trace)
			trace_reads(rd, r, batch, (unsigned)taken);
		r->submitted += (size_t)taken;
		if (rd->io->inflight > rd->depth_max)
			__atomic_store_n(&rd->depth_max, (uint64_t)rd->io->inflight, __ATOMIC_RELAXED);
		if ((unsigned)taken < n || no_room) {
			*full = true; /* caps reached: reap first (or decode, for arena room) */
			break;
		}
	}
	return 0;
}

static void complete_request(struct async_reader *rd, struct grist_io_req *q)
{
	struct async_reads *r = rd->by_slot[q->user_data >> 32];
	uint32_t ri = (uint32_t)(q->user_data & 0xffffffffu);
	struct async_landing *l = &r->land[ri];

	if (q->result < 0) {
		if (!l->error) {
			l->error = grist_io_req_error(rd->io, q);
			/* kept with the unit: the consumer reports it in order */
			snprintf(r->errmsg, sizeof(r->errmsg), "%s", grist_last_error());
		}
	} else {
		l->got += (uint64_t)q->result;
		grist_counter_add(&rd->bytes_read, (uint64_t)q->result);
	}
	r->pending--;
	if (--l->pieces_left == 0)
		r->landed[r->nlanded++] = ri;
}

int grist_async_reap(struct async_reader *rd, unsigned min_wait)
{
	struct grist_io_req *done[64];
	int n, i;

	if (!rd->io->inflight)
		return 0;
	depth_account(rd);
	n = grist_io_reap(rd->io, done, 64, min_wait);
	if (n < 0)
		return n;
	depth_account(rd);
	for (i = 0; i < n; i++)
		complete_request(rd, done[i]);
	return n;
}

void grist_async_reads_cancel_unsubmitted(struct async_reads *r)
{
	size_t k;

	for (k = r->submitted; k < r->nreqs; k++)
		r->land[r->reqs[k].user_data & 0xffffffffu].pieces_left--;
	r->pending -= (unsigned)(r->nreqs - r->submitted);
	r->nreqs = r->submitted;
}

void grist_async_reads_abandon(struct async_reads *r)
{
	r->pending = 0;
}

void grist_async_reads_retire(struct async_reader *rd, struct async_reads *r)
{
	uint32_t i;

	/* its reads are used: the GET scheduler's horizon counts from here (grist_io_consumed()) */
	grist_io_consumed(rd->io, r->reqs, r->submitted);
	/* streamed: the regions not given back yet (a failed unit's), and those never read */
	for (i = 0; r->streamed && r->plan && i < r->plan->nregions; i++)
		grist_async_reads_release_region(rd, r, i);
	if (r->streamed) {
		rd->stream_owed -= r->unreserved;
		r->unreserved = 0;
	}
	if (r->arena_len) {
		/* units retire oldest first: the oldest live reservation is this one */
		rd->resv_head = (rd->resv_head + 1) % rd->nslots;
		rd->resv_count--;
	}
	r->arena_len = 0;
	r->plan = NULL;
}

void grist_async_reads_free(struct async_reads *r)
{
	free(r->land);
	free(r->landed);
	free(r->reqs);
}
