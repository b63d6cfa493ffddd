/*
 * The async engine: worker threads, each owning an io object (an io_uring ring, or a
 * pread pool), turn units of the shard stream into batches.
 *
 * The shard stream is cut into units of U consecutive positions (U = batch size for
 * record granularity; a multiple of it covering about one window of chunks for chunk
 * granularity, so each chunk of a window is read and decoded once per unit). Unit u is
 * a pure function of (configuration, u), so any worker can build it:
 *
 *   claim u -> plan its items (stream cursor, reader_locate) -> one batched submission
 *   of its coalesced chunk reads -> (meanwhile claim and submit u+1) -> reap -> read
 *   every chunk's record sizes and lay out the rows -> decompress each chunk once and
 *   copy its records to their rows (with a map: map every item in stream order).
 *
 * Each worker keeps two units in flight, so its reads overlap its decoding; N workers
 * give N rings (one per thread, SINGLE_ISSUER), which is also what parallelises the
 * kernel's copies on warm page-cache data.
 *
 * The consumer takes units strictly in order. When U == batch size and nothing was
 * filtered, a unit's slot *is* the batch and is handed over without a copy; otherwise
 * a packer copies rows into batch slots. Either way a batch holds exactly the rows the
 * reference engine would put there, so the output never depends on thread count,
 * queue depth, backend or completion order.
 *
 * Memory is bounded by the configuration: at most `prefetch` units exist at once (a
 * worker may claim unit u only once unit u - prefetch has been consumed), each with
 * one slot and one read buffer, plus the batches the consumer holds.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "grist_config.h"
#if GRIST_HAVE_NUMA
#include <numa.h>
#endif

#include "common/error.h"
#include "exec/loader_internal.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "io/io.h"

#define READ_PIECE_MAX (8u << 20) /* bytes per io request; larger extents are split */
#define MEM_ALIGN 4096u
#define ERRMSG_MAX 512

enum unit_state { UNIT_FREE = 0, UNIT_BUSY, UNIT_DONE };

struct unit {
	uint64_t number;
	enum unit_state state;
	uint64_t first_j, end_j; /* shard positions [first_j, end_j) */
	struct grist_slot *slot;
	size_t next_row;         /* packer progress */
	int take_error;          /* could not get a slot */
	int error;
	char errmsg[ERRMSG_MAX];
};

/* A dataset file as the engine reads it (its own fd, maybe O_DIRECT). */
struct engine_file {
	int fd;
	bool direct;
	uint32_t align;
	const uint8_t *map;  /* read mode mmap: the whole file, read-only */
	uint64_t size;
	const char *path; /* owned by the reader's info */
};

struct item {
	struct grist_stream_item it;
	uint64_t j;
	uint64_t record_in_chunk;
	uint32_t chunk;
};

/*
 * Chunk-major decoding: one item as its chunk sees it. A chunk's rows are contiguous in
 * work.rows (grouped by chunk once the unit is planned), so the copy loop after each
 * decompression streams through them instead of chasing items across the unit.
 */
struct chunk_row {
	uint64_t value_begin;    /* where the record is in the chunk's values */
	uint64_t len;
	size_t dst;              /* where its bytes go in the slot */
	uint64_t record_in_chunk;
	uint32_t item;
};

struct chunk_ref {
	uint32_t component;
	uint32_t file;
	uint64_t chunk;        /* index within its file */
	uint64_t begin, end;
	int32_t decoder;       /* the decoder slot that last held it, or -1 */
	uint32_t region;       /* which read region holds it */
	uint32_t rows_begin, rows_end; /* chunk-major decoding: its rows in work.rows */
	uint64_t decoded_size; /* chunk-major decoding: the decoded size its sizes promised */
};

/* A contiguous range of one file read into one place of the read buffer. */
struct region {
	uint32_t component, file;
	uint64_t offset, len;  /* aligned for O_DIRECT files */
	size_t buf_off;        /* where in the work's read buffer */
	const uint8_t *base;   /* the region's bytes: in the read buffer, or in the file's mapping */
	uint64_t got;          /* bytes actually read (less only at EOF) */
	int error;
};

/* One unit being worked on by a worker: its plan, reads and buffer. */
struct work {
	struct unit *u;
	struct item *items;
	size_t nitems, items_cap;
	struct chunk_ref *chunks;
	size_t nchunks, chunks_cap;
	struct chunk_row *rows; /* nitems, grouped by chunk (chunk-major decoding) */
	size_t rows_cap;
	uint64_t *row_place;    /* nitems: each item's size, then where its row goes (dense, cache-sized) */
	size_t row_place_cap;
	uint32_t *chunk_hash; /* open addressing over chunks; UINT32_MAX = empty */
	size_t hash_cap;
	uint32_t *order;      /* chunk indices sorted by file position */
	struct region *regions;
	size_t nregions, regions_cap;
	struct grist_io_req *reqs;
	size_t nreqs, reqs_cap, submitted;
	unsigned pending;
	uint8_t *buf;         /* read buffer: first the fixed part of the worker arena, else heap */
	size_t buf_cap;
	bool buf_heap;
	uint8_t *fixed;       /* this work's part of the registered arena */
	size_t fixed_cap;
};

struct decoder_slot {
	struct grist_chunk_decoder *dec;
	struct grist_decoded_chunk out;
	uint64_t generation;
	uint32_t chunk;
	uint64_t last_use;
};

struct slot_pool {
	struct grist_slot **items;
	size_t n, cap;
};

struct async_engine;

static void slot_put_locked(struct async_engine *e, struct grist_slot *s);

struct worker {
	struct async_engine *e;
	unsigned id;
	pthread_t thread;
	bool started;
	struct grist_io *io;
	uint32_t **io_slot;   /* [component][file] -> io file slot */
	struct grist_stream_cursor *cursor;
	struct decoder_slot *decoders;
	size_t ndecoders;
	uint64_t generation, use_clock;
	struct work work[2];
	uint8_t *arena;       /* registered with io_uring when memlock allows */
	size_t arena_len;
	bool fixed_buffers;   /* the arena is registered */

	/* counters, read by stats() from another thread */
	uint64_t reads, bytes_read, chunks_decoded, bytes_decoded;
	uint64_t io_wait_ns, decode_ns, producer_stall_ns;
};

struct async_engine {
	struct grist_loader *l;
	enum grist_io_kind io_kind;
	const char *name;
	unsigned nworkers;
	struct worker *workers;
	struct engine_file **files; /* [component][file] */
	bool any_direct, any_buffered, any_mapped;
	size_t unit_items;          /* U */
	size_t ncache;              /* decoders per worker */

	pthread_mutex_t lock;
	pthread_cond_t claim_cv;    /* workers wait for a unit they may claim */
	pthread_cond_t done_cv;     /* the consumer waits for the next unit */
	bool stop, failed, aborted;
	uint64_t next_unit;         /* next unit to claim */
	uint64_t next_first_j;      /* shard position where that unit starts */
	struct grist_stream_cursor *plan_cursor; /* chunk granularity: finds window ends (under lock) */
	size_t max_unit_items;
	size_t row_bytes_hint;      /* expected bytes per row, to size slots once */
	uint64_t total_units;       /* UINT64_MAX when unbounded */
	uint64_t consumed_units;    /* units the consumer has finished with */
	unsigned prefetch;
	struct unit *units;         /* ring of prefetch units, unit u at u % prefetch */

	struct slot_pool host_pool, dev_pool;
	struct grist_slot *pack;    /* the batch the packer is filling */
	uint64_t slot_memory;       /* bytes all slots own, kept by the slots themselves */
	uint64_t queue_occupancy;
};

static uint64_t add_relaxed(uint64_t *p, uint64_t v)
{
	return __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

static uint64_t load_relaxed(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* ---- slots ---- */

/*
 * A slot for a unit or a batch. @deliver: it may be handed to the consumer as is, so
 * when the loader has a slot provider (the device stage) its memory comes from there.
 * Provider-backed wrappers and host slots live in separate pools.
 */
static int slot_take(struct async_engine *e, bool deliver, bool view, struct grist_slot **out)
{
	const struct grist_slot_provider *p = deliver ? e->l->provider : NULL;
	struct slot_pool *pool = p ? &e->dev_pool : &e->host_pool;
	struct grist_slot *s = NULL;
	int ret;

	pthread_mutex_lock(&e->lock);
	if (pool->n)
		s = pool->items[--pool->n];
	pthread_mutex_unlock(&e->lock);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return grist_fail(-ENOMEM, "async engine: cannot allocate a batch slot");
		size_t rows = p ? e->l->cfg.batch_size : e->max_unit_items;
		size_t typical = e->unit_items;
		size_t hint = !view && e->row_bytes_hint && typical <= (64u << 20) / e->row_bytes_hint
				      ? typical * e->row_bytes_hint
				      : 0;

		/* sized for a typical unit up front: growing a pinned slot costs an mlock of fresh pages */
		ret = grist_slot_init(s, rows, p ? 0 : hint);
		if (ret) {
			free(s);
			return ret;
		}
		s->provider_wrapper = p != NULL;
		grist_slot_account(s, &e->slot_memory);
	}
	grist_slot_reset(s);
	if (p) {
		ret = p->acquire(p->ctx, s);
		if (ret) {
			pthread_mutex_lock(&e->lock);
			slot_put_locked(e, s);
			pthread_mutex_unlock(&e->lock);
			return ret;
		}
	}
	*out = s;
	return 0;
}

/* Called with e->lock held. A provider-backed slot must have been delivered or cancelled. */
static void slot_put_locked(struct async_engine *e, struct grist_slot *s)
{
	struct slot_pool *pool = s->provider_wrapper ? &e->dev_pool : &e->host_pool;
	struct grist_slot **n;

	if (s->provider_wrapper)
		grist_slot_unbind(s);
	if (pool->n == pool->cap) {
		n = realloc(pool->items, (pool->cap * 2 + 8) * sizeof(*n));
		if (!n) { /* keep memory bounded and correct: drop the slot instead */
			grist_slot_free(s);
			free(s);
			return;
		}
		pool->items = n;
		pool->cap = pool->cap * 2 + 8;
	}
	pool->items[pool->n++] = s;
}

/* An assembled slot that will not be delivered: provider memory goes back unsubmitted. */
static void slot_discard_locked(struct async_engine *e, struct grist_slot *s)
{
	if (s->external)
		e->l->provider->cancel(e->l->provider->ctx, s);
	slot_put_locked(e, s);
}

static void pool_free(struct slot_pool *pool)
{
	size_t k;

	for (k = 0; k < pool->n; k++) {
		grist_slot_free(pool->items[k]);
		free(pool->items[k]);
	}
	free(pool->items);
}

/* ---- planning a unit ---- */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * elem);
	if (!np)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	*p = np;
	*cap = ncap;
	return 0;
}

static uint64_t chunk_key_hash(uint32_t component, uint32_t file, uint64_t begin)
{
	uint64_t h = begin * 0x9e3779b97f4a7c15ull ^ ((uint64_t)file << 32 | component) * 0xc2b2ae3d27d4eb4full;

	return h ^ (h >> 29);
}

static int find_or_add_chunk(struct work *w, uint32_t component, const struct grist_record_loc *loc,
			     uint32_t *index)
{
	uint32_t file = (uint32_t)loc->file;
	uint64_t begin = loc->chunk_begin;
	size_t mask = w->hash_cap - 1, i;
	struct chunk_ref *c;
	int ret;

	for (i = chunk_key_hash(component, file, begin) & mask;; i = (i + 1) & mask) {
		uint32_t at = w->chunk_hash[i];

		if (at == UINT32_MAX)
			break;
		c = &w->chunks[at];
		if (c->begin == begin && c->file == file && c->component == component) {
			*index = at;
			return 0;
		}
	}
	ret = grow((void **)&w->chunks, &w->chunks_cap, w->nchunks + 1, sizeof(*w->chunks));
	if (ret)
		return ret;
	c = &w->chunks[w->nchunks];
	*c = (struct chunk_ref){ .component = component, .file = file, .chunk = loc->chunk, .begin = begin,
				 .end = loc->chunk_end, .decoder = -1 };
	w->chunk_hash[i] = (uint32_t)w->nchunks;
	*index = (uint32_t)w->nchunks++;
	return 0;
}

static int cmp_chunks(const void *a, const void *b, void *ctx)
{
	const struct chunk_ref *chunks = ctx;
	const struct chunk_ref *x = &chunks[*(const uint32_t *)a];
	const struct chunk_ref *y = &chunks[*(const uint32_t *)b];

	if (x->component != y->component)
		return x->component < y->component ? -1 : 1;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Adjacent or overlapping chunk extents of one file become one region. */
static int build_regions(struct async_engine *e, struct work *w)
{
	size_t i, buf_need = 0;
	struct region *r = NULL;
	int ret;

	w->nregions = 0;
	for (i = 0; i < w->nchunks; i++)
		w->order[i] = (uint32_t)i;
	qsort_r(w->order, w->nchunks, sizeof(*w->order), cmp_chunks, w->chunks);
	for (i = 0; i < w->nchunks; i++) {
		struct chunk_ref *c = &w->chunks[w->order[i]];
		const struct engine_file *f = &e->files[c->component][c->file];
		uint64_t off = c->begin, end = c->end;

		if (f->direct) {
			off &= ~(uint64_t)(f->align - 1);
			end = (end + f->align - 1) & ~(uint64_t)(f->align - 1);
		}
		if (r && r->component == c->component && r->file == c->file && off <= r->offset + r->len &&
		    end - r->offset <= 4ull * READ_PIECE_MAX) {
			if (end > r->offset + r->len)
				r->len = end - r->offset;
		} else {
			ret = grow((void **)&w->regions, &w->regions_cap, w->nregions + 1, sizeof(*w->regions));
			if (ret)
				return ret;
			r = &w->regions[w->nregions++];
			*r = (struct region){ .component = c->component, .file = c->file, .offset = off, .len = end - off };
		}
		c->region = (uint32_t)(w->nregions - 1);
	}
	for (i = 0; i < w->nregions; i++) {
		w->regions[i].buf_off = buf_need;
		/* a mapped file needs no buffer: its region is the mapping itself */
		if (!e->files[w->regions[i].component][w->regions[i].file].map)
			buf_need = align_up(buf_need + w->regions[i].len, MEM_ALIGN);
	}
	if (buf_need <= w->fixed_cap) {
		if (w->buf_heap)
			free(w->buf);
		w->buf = w->fixed;
		w->buf_cap = w->fixed_cap;
		w->buf_heap = false;
	} else if (!w->buf_heap || buf_need > w->buf_cap) {
		/* a unit larger than the registered arena reads into plain heap memory */
		void *p = NULL;

		if (w->buf_heap)
			free(w->buf);
		w->buf = NULL;
		w->buf_cap = 0;
		w->buf_heap = false;
		if (posix_memalign(&p, MEM_ALIGN, buf_need))
			return grist_fail(-ENOMEM, "async engine: cannot allocate a %zu-byte read buffer", buf_need);
		w->buf = p;
		w->buf_cap = buf_need;
		w->buf_heap = true;
	}
	return 0;
}

/* Counting sort of the unit's items by chunk into w->rows (chunk rows_end holds counts on entry). */
static int group_rows(struct work *w)
{
	uint32_t at = 0, c, count;
	size_t i;
	int ret = grow((void **)&w->rows, &w->rows_cap, w->nitems, sizeof(*w->rows));

	if (!ret)
		ret = grow((void **)&w->row_place, &w->row_place_cap, w->nitems, sizeof(*w->row_place));
	if (ret)
		return ret;
	for (c = 0; c < w->nchunks; c++) {
		count = w->chunks[c].rows_end;
		w->chunks[c].rows_begin = w->chunks[c].rows_end = at;
		at += count;
	}
	for (i = 0; i < w->nitems; i++) {
		struct chunk_ref *c = &w->chunks[w->items[i].chunk];

		w->rows[c->rows_end++] = (struct chunk_row){ .item = (uint32_t)i,
							     .record_in_chunk = w->items[i].record_in_chunk };
	}
	return 0;
}

static int plan_unit(struct worker *wk, struct work *w, struct unit *u)
{
	struct async_engine *e = wk->e;
	struct grist_loader *l = e->l;
	struct grist_record_loc loc;
	size_t n = (size_t)(u->end_j - u->first_j), i;
	struct item *item;
	int ret;

	w->u = u;
	w->nitems = w->nchunks = w->nreqs = w->submitted = 0;
	w->pending = 0;
	ret = grow((void **)&w->items, &w->items_cap, n, sizeof(*w->items));
	if (ret)
		return ret;
	if (w->hash_cap < 2 * n) {
		free(w->chunk_hash);
		free(w->order);
		w->hash_cap = 16;
		while (w->hash_cap < 2 * n)
			w->hash_cap *= 2;
		w->chunk_hash = malloc(w->hash_cap * sizeof(*w->chunk_hash));
		w->order = malloc(w->hash_cap * sizeof(*w->order));
		if (!w->chunk_hash || !w->order) {
			w->hash_cap = 0;
			return grist_fail(-ENOMEM, "async engine: out of memory");
		}
	}
	memset(w->chunk_hash, 0xff, w->hash_cap * sizeof(*w->chunk_hash));
	ret = grist_stream_cursor_seek(wk->cursor, u->first_j);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		item = &w->items[i];
		ret = grist_stream_next(wk->cursor, &item->it);
		if (ret < 0)
			return ret;
		if (ret == 0)
			return grist_fail(-EINVAL, "async engine: stream ended early at position %llu",
					  (unsigned long long)(u->first_j + i));
		item->j = u->first_j + i;
		ret = grist_reader_locate(l->sources[item->it.component].reader, item->it.record, &loc);
		if (ret)
			return ret;
		item->record_in_chunk = loc.record_in_chunk;
		ret = find_or_add_chunk(w, item->it.component, &loc, &item->chunk);
		if (ret)
			return ret;
		w->chunks[item->chunk].rows_end++; /* a count until group_rows() */
	}
	w->nitems = n;
	ret = build_regions(e, w);
	if (!ret && !l->layout.map)
		ret = group_rows(w);
	return ret;
}

/* ---- reading ---- */

static int submit_unit(struct worker *wk, struct work *w)
{
	size_t i, nreq = 0;
	uint64_t done;
	int ret;

	for (i = 0; i < w->nregions; i++)
		if (!wk->e->files[w->regions[i].component][w->regions[i].file].map)
			nreq += (size_t)((w->regions[i].len + READ_PIECE_MAX - 1) / READ_PIECE_MAX);
	ret = grow((void **)&w->reqs, &w->reqs_cap, nreq, sizeof(*w->reqs));
	if (ret)
		return ret;
	w->nreqs = 0;
	for (i = 0; i < w->nregions; i++) {
		struct region *r = &w->regions[i];
		const struct engine_file *f = &wk->e->files[r->component][r->file];

		r->got = 0;
		r->error = 0;
		if (f->map) {
			/* the page cache is the buffer: nothing to submit */
			r->base = f->map + r->offset;
			r->got = r->offset < f->size ? (f->size - r->offset < r->len ? f->size - r->offset : r->len) : 0;
			continue;
		}
		r->base = w->buf + r->buf_off;
		for (done = 0; done < r->len; done += READ_PIECE_MAX) {
			struct grist_io_req *q = &w->reqs[w->nreqs++];
			uint64_t len = r->len - done < READ_PIECE_MAX ? r->len - done : READ_PIECE_MAX;

			memset(q, 0, sizeof(*q));
			q->file = wk->io_slot[r->component][r->file];
			q->offset = r->offset + done;
			q->len = (uint32_t)len;
			q->buf = w->buf + r->buf_off + done;
			q->user_data = ((uint64_t)(w - wk->work) << 32) | i;
		}
	}
	w->submitted = 0;
	w->pending = (unsigned)w->nreqs;
	return 0;
}

/* Push as many queued requests of @w as the io caps take right now. */
static int push_requests(struct worker *wk, struct work *w)
{
	struct grist_io_req *batch[64];
	int taken;

	while (w->submitted < w->nreqs) {
		unsigned n = 0;

		while (n < 64 && w->submitted + n < w->nreqs) {
			batch[n] = &w->reqs[w->submitted + n];
			n++;
		}
		taken = grist_io_submit(wk->io, batch, n);
		if (taken < 0)
			return taken;
		add_relaxed(&wk->reads, (uint64_t)taken);
		w->submitted += (size_t)taken;
		if ((unsigned)taken < n)
			break; /* caps reached: reap first */
	}
	return 0;
}

static void complete_request(struct worker *wk, struct grist_io_req *q)
{
	struct work *w = &wk->work[q->user_data >> 32];
	struct region *r = &w->regions[q->user_data & 0xffffffffu];

	if (q->result < 0) {
		if (!r->error) {
			r->error = grist_io_req_error(wk->io, q);
			/* keep the message with the unit; the consumer reports it in order */
			snprintf(w->u->errmsg, sizeof(w->u->errmsg), "%s", grist_last_error());
		}
	} else {
		r->got += (uint64_t)q->result;
		add_relaxed(&wk->bytes_read, (uint64_t)q->result);
	}
	w->pending--;
}

/* Reap until @w has no read pending, pushing its requests as the caps allow. */
static int wait_unit(struct worker *wk, struct work *w)
{
	struct work *other = &wk->work[w == &wk->work[0]];
	struct grist_io_req *done[64];
	uint64_t t0 = grist_now_ns();
	int n, i, ret = 0;

	while (w->pending) {
		ret = push_requests(wk, w);
		if (ret)
			break;
		n = grist_io_reap(wk->io, done, 64, 1);
		if (n < 0) {
			ret = n;
			break;
		}
		/* completions of the worker's other unit may come back here too */
		for (i = 0; i < n; i++)
			complete_request(wk, done[i]);
		/*
		 * Keep the ring full: as this unit's last reads drain, the next unit's reads
		 * take their place, so the queue depth does not sag at every unit boundary.
		 */
		if (other->u && other->submitted < other->nreqs) {
			ret = push_requests(wk, other);
			if (ret)
				break;
		}
	}
	add_relaxed(&wk->io_wait_ns, grist_now_ns() - t0);
	return ret;
}

/* Wait out whatever of @w is in flight, ignoring results (an error path). */
static void drain_unit(struct worker *wk, struct work *w)
{
	struct grist_io_req *done[64];
	int n, i;

	while (w->pending) {
		n = grist_io_reap(wk->io, done, 64, 1);
		if (n <= 0)
			break; /* the backend failed: destroy() waits for what is left */
		for (i = 0; i < n; i++)
			complete_request(wk, done[i]);
	}
}

/* ---- decoding ---- */

typedef int (*chunk_decode_fn)(struct grist_chunk_decoder *, const uint8_t *, uint64_t, size_t, uint64_t,
			       uint64_t, const char *, struct grist_decoded_chunk *);

/*
 * Run @fn (a whole decode or one of its halves) on chunk @chunk of @w, once its read
 * is known good, and make the reader's check: a data chunk with exactly the records
 * the footer implies.
 */
static int decode_chunk(struct worker *wk, struct work *w, uint32_t chunk, struct grist_chunk_decoder *dec,
			chunk_decode_fn fn, struct grist_decoded_chunk *out)
{
	struct async_engine *e = wk->e;
	const struct chunk_ref *c = &w->chunks[chunk];
	const struct region *r = &w->regions[c->region];
	const struct engine_file *f = &e->files[c->component][c->file];
	const struct grist_file_geom *g;
	uint64_t want;
	int ret;

	if (r->error)
		return r->error;
	if (r->offset + r->got < c->end)
		return grist_fail_at(-EBADMSG, f->path, r->offset + r->got,
				     "file ends inside the chunk at byte %llu (it should end at %llu): truncated?",
				     (unsigned long long)c->begin, (unsigned long long)c->end);
	ret = fn(dec, r->base, r->offset, (size_t)r->got, c->begin, c->end, f->path, out);
	if (ret)
		return ret;
	g = grist_reader_file_geom(e->l->sources[c->component].reader, c->file);
	want = grist_file_chunk_records(g, c->chunk);
	if (out->chunk_type != 'r' || out->num_records != want)
		return grist_fail_at(-EBADMSG, f->path, c->begin,
				     "chunk %llu holds %llu records (type 0x%02x), the footer implies %llu",
				     (unsigned long long)c->chunk, (unsigned long long)out->num_records,
				     out->chunk_type, (unsigned long long)want);
	return 0;
}

static struct decoder_slot *decoder_for(struct worker *wk, struct work *w, uint32_t chunk, int *err)
{
	struct decoder_slot *d, *victim = NULL;
	struct chunk_ref *c = &w->chunks[chunk];
	size_t i;
	int ret;

	/* the common case: the decoder that took this chunk still holds it */
	if (c->decoder >= 0) {
		d = &wk->decoders[c->decoder];
		if (d->generation == wk->generation && d->chunk == chunk) {
			d->last_use = ++wk->use_clock;
			return d;
		}
	}
	for (i = 0; i < wk->ndecoders; i++) {
		d = &wk->decoders[i];
		if (d->generation == wk->generation && d->chunk == chunk) {
			d->last_use = ++wk->use_clock;
			return d;
		}
		/* a decoder holding another unit's chunk is free; else the least recently used */
		if (!victim || (victim->generation == wk->generation &&
				(d->generation != wk->generation || d->last_use < victim->last_use)))
			victim = d;
	}
	d = victim;
	ret = decode_chunk(wk, w, chunk, d->dec, grist_chunk_decode, &d->out);
	if (ret) {
		d->generation = 0;
		*err = ret;
		return NULL;
	}
	d->generation = wk->generation;
	d->chunk = chunk;
	d->last_use = ++wk->use_clock;
	c->decoder = (int32_t)(d - wk->decoders);
	add_relaxed(&wk->chunks_decoded, 1);
	add_relaxed(&wk->bytes_decoded, d->out.decoded_data_size);
	return d;
}

/*
 * With a map, rows are made in stream order: a map's output size is only known once it
 * has run, so every chunk of the unit stays decoded (in the decoder cache) until the
 * last of its records has been mapped.
 */
static int decode_unit_in_order(struct worker *wk, struct work *w)
{
	struct grist_loader *l = wk->e->l;
	struct unit *u = w->u;
	struct grist_map_input in;
	struct decoder_slot *d;
	size_t i;
	int ret = 0;

	wk->generation++;
	for (i = 0; i < w->nitems; i++) {
		const struct item *it = &w->items[i];

		d = decoder_for(wk, w, it->chunk, &ret);
		if (!d)
			break;
		grist_loader_map_input(l, &it->it, d->out.values + d->out.offsets[it->record_in_chunk],
				       (size_t)(d->out.offsets[it->record_in_chunk + 1] - d->out.offsets[it->record_in_chunk]),
				       &in);
		ret = grist_slot_add(u->slot, &l->layout, &in, it->j);
		if (ret < 0) {
			ret = grist_loader_record_error(l, it->it.component, it->it.record, ret);
			break;
		}
		ret = 0;
	}
	return ret;
}

/*
 * Without a map, a row is the record itself, so its place in the slot follows from the
 * record sizes alone. First every chunk's sizes section is read (small) and every row
 * laid out; then each chunk is checked and decompressed once, into one buffer that
 * stays in cache, and its records are copied straight to their rows. One decoded chunk
 * per worker, whatever the window.
 */
static int decode_unit_by_chunk(struct worker *wk, struct work *w)
{
	struct async_engine *e = wk->e;
	struct grist_loader *l = e->l;
	struct grist_slot *slot = w->u->slot;
	struct grist_chunk_decoder *dec = wk->decoders[0].dec;
	struct grist_decoded_chunk out;
	struct grist_map_input in;
	struct chunk_row *row, *end;
	size_t k, i;
	uint32_t c;
	int ret;

	for (k = 0; k < w->nchunks; k++) {
		c = w->order[k];
		ret = decode_chunk(wk, w, c, dec, grist_chunk_decode_sizes, &out);
		if (ret)
			return ret;
		w->chunks[c].decoded_size = out.decoded_data_size;
		end = w->rows + w->chunks[c].rows_end;
		for (row = w->rows + w->chunks[c].rows_begin; row < end; row++) {
			row->value_begin = out.offsets[row->record_in_chunk];
			row->len = out.offsets[row->record_in_chunk + 1] - row->value_begin;
			w->row_place[row->item] = row->len;
		}
	}
	for (i = 0; i < w->nitems; i++) {
		const struct item *it = &w->items[i];
		size_t dst;

		in = (struct grist_map_input){ .len = (size_t)w->row_place[i], .index = it->it.record,
					       .dataset = it->it.component, .epoch = it->it.epoch };
		ret = grist_slot_shape_row(slot, &l->layout, &in, it->j, &dst);
		if (ret)
			return grist_loader_record_error(l, it->it.component, it->it.record, ret);
		w->row_place[i] = dst;
	}
	for (i = 0; i < w->nitems; i++)
		w->rows[i].dst = (size_t)w->row_place[w->rows[i].item];
	for (k = 0; k < w->nchunks; k++) {
		const struct chunk_ref *cr;

		c = w->order[k];
		cr = &w->chunks[c];
		ret = decode_chunk(wk, w, c, dec, grist_chunk_decode_values, &out);
		if (ret)
			return ret;
		if (out.decoded_data_size != cr->decoded_size)
			return grist_fail_at(-EBADMSG, e->files[cr->component][cr->file].path, cr->begin,
					     "chunk changed while it was read (%llu decoded bytes, then %llu)",
					     (unsigned long long)cr->decoded_size,
					     (unsigned long long)out.decoded_data_size);
		add_relaxed(&wk->chunks_decoded, 1);
		add_relaxed(&wk->bytes_decoded, out.decoded_data_size);
		end = w->rows + cr->rows_end;
		for (row = w->rows + cr->rows_begin; row < end; row++)
			grist_slot_fill_row(slot, &l->layout, row->dst, out.values + row->value_begin,
					    (size_t)row->len);
	}
	grist_slot_fill_done();
	return 0;
}

static int decode_unit(struct worker *wk, struct work *w)
{
	uint64_t t0 = grist_now_ns();
	int ret = wk->e->l->layout.map ? decode_unit_in_order(wk, w) : decode_unit_by_chunk(wk, w);

	add_relaxed(&wk->decode_ns, grist_now_ns() - t0);
	return ret;
}

/* ---- claiming and publishing units ---- */

/*
 * Where the unit starting at shard position @first ends. Record granularity: one
 * batch. Chunk granularity: at a window boundary of the plan, so every chunk of a
 * window is read and decoded once, taking whole windows until the unit holds at
 * least a batch (and at most max_unit positions). Called with e->lock held: the
 * planning cursor is shared by the claimers.
 */
static uint64_t unit_end_locked(struct async_engine *e, uint64_t first, uint64_t len)
{
	struct grist_stream_item it;
	uint64_t end = first, we;

	if (!e->plan_cursor)
		goto fixed;
	while (end - first < e->unit_items && end < len) {
		if (grist_stream_cursor_seek(e->plan_cursor, end) || grist_stream_next(e->plan_cursor, &it) != 1)
			goto fixed;
		we = grist_stream_cursor_window_end(e->plan_cursor);
		if (!we)
			goto fixed;
		end = we;
	}
	if (end - first > e->max_unit_items)
		end = first + e->max_unit_items;
	return end;
fixed:
	end = first + e->unit_items;
	return end > len || end < first ? len : end;
}

/* Claim the next unit if the prefetch window allows; wait for it when @wait. */
static struct unit *claim_unit(struct worker *wk, bool wait)
{
	struct async_engine *e = wk->e;
	uint64_t t0 = 0, u_no, len = grist_stream_length(e->l->stream);
	struct unit *u = NULL;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		if (e->stop || e->failed)
			break;
		if (e->next_first_j >= len) {
			/* the end of a finite stream: now the consumer knows how many units there are */
			if (e->total_units == UINT64_MAX) {
				e->total_units = e->next_unit;
				pthread_cond_broadcast(&e->done_cv);
			}
			break;
		}
		if (e->next_unit < e->consumed_units + e->prefetch) {
			u_no = e->next_unit++;
			u = &e->units[u_no % e->prefetch];
			u->number = u_no;
			u->state = UNIT_BUSY;
			u->error = 0;
			u->errmsg[0] = '\0';
			u->next_row = 0;
			u->first_j = e->next_first_j;
			u->end_j = unit_end_locked(e, u->first_j, len);
			e->next_first_j = u->end_j;
			break;
		}
		if (!wait)
			break;
		if (!t0)
			t0 = grist_now_ns();
		pthread_cond_wait(&e->claim_cv, &e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	if (t0)
		add_relaxed(&wk->producer_stall_ns, grist_now_ns() - t0);
	if (!u)
		return NULL;
	u->slot = NULL;
	u->take_error = slot_take(e, e->unit_items == e->l->cfg.batch_size && !e->plan_cursor, false, &u->slot);
	return u;
}

static void publish_unit(struct async_engine *e, struct unit *u, int error)
{
	pthread_mutex_lock(&e->lock);
	if (error) {
		if (error == -ECANCELED && !u->errmsg[0])
			snprintf(u->errmsg, sizeof(u->errmsg), "loader stopped");
		u->error = error;
		if (!u->errmsg[0])
			snprintf(u->errmsg, sizeof(u->errmsg), "%s", grist_last_error());
		e->failed = true;
		pthread_cond_broadcast(&e->claim_cv);
	}
	if (u->slot)
		u->slot->stream_end = u->end_j;
	u->state = UNIT_DONE;
	pthread_cond_broadcast(&e->done_cv);
	pthread_mutex_unlock(&e->lock);
}

/* Plan and submit @u into @w; on failure the unit is published with the error. */
static bool start_unit(struct worker *wk, struct work *w, struct unit *u)
{
	int ret;

	w->u = u;
	ret = u->take_error;
	if (!ret)
		ret = plan_unit(wk, w, u);
	if (!ret)
		ret = submit_unit(wk, w);
	if (!ret)
		ret = push_requests(wk, w);
	if (ret) {
		/* requests already in flight must come back before the buffer is reused */
		w->pending -= (unsigned)(w->nreqs - w->submitted);
		w->nreqs = w->submitted;
		drain_unit(wk, w);
		publish_unit(wk->e, u, ret);
		w->u = NULL;
		return false;
	}
	return true;
}

static void pin_worker(struct worker *wk)
{
	cpu_set_t allowed, one;
	int cpu, seen = -1, want;

#if GRIST_HAVE_NUMA
	/* Several NUMA nodes: spread workers over nodes so each decodes into node-local memory. */
	if (numa_available() >= 0 && numa_max_node() > 0) {
		numa_run_on_node((int)(wk->id % (unsigned)(numa_max_node() + 1)));
		return;
	}
#endif
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	want = (int)(wk->id % (unsigned)CPU_COUNT(&allowed));
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &allowed) && ++seen == want) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
			return;
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct work *cur = &wk->work[0], *nxt = &wk->work[1], *tmp;
	struct unit *u;
	int ret;

	pin_worker(wk);
	for (;;) {
		if (!cur->u) {
			u = claim_unit(wk, true);
			if (!u)
				break;
			if (!start_unit(wk, cur, u))
				continue;
		}
		/* Overlap: get the next unit's reads going before decoding this one. */
		if (!nxt->u) {
			u = claim_unit(wk, false);
			if (u)
				start_unit(wk, nxt, u);
		}
		ret = wait_unit(wk, cur);
		if (!ret)
			ret = decode_unit(wk, cur);
		publish_unit(wk->e, cur->u, ret);
		cur->u = NULL;
		tmp = cur;
		cur = nxt;
		nxt = tmp;
	}
	/* The loop only ends with no unit in hand: both works are idle here. */
	/* io_uring rings are single-issuer: the thread that used the ring frees it */
	grist_io_destroy(wk->io);
	wk->io = NULL;
	return NULL;
}

/* ---- setup ---- */

static int open_files(struct async_engine *e)
{
	struct grist_loader *l = e->l;
	enum grist_io_mode mode = l->cfg.read_mode == GRIST_READ_DIRECT ? GRIST_IO_MODE_DIRECT
				  : l->cfg.read_mode == GRIST_READ_AUTO ? GRIST_IO_MODE_AUTO
									: GRIST_IO_MODE_BUFFERED;
	struct grist_io_open_info oi;
	struct grist_file_info info;
	size_t d, f;
	int ret;

	e->files = calloc(l->num_sources, sizeof(*e->files));
	if (!e->files)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	for (d = 0; d < l->num_sources; d++) {
		e->files[d] = calloc(l->sources[d].num_files, sizeof(**e->files));
		if (!e->files[d])
			return grist_fail(-ENOMEM, "async engine: out of memory");
		for (f = 0; f < l->sources[d].num_files; f++)
			e->files[d][f].fd = -1;
		for (f = 0; f < l->sources[d].num_files; f++) {
			ret = grist_reader_file_info(l->sources[d].reader, f, &info);
			if (ret)
				return ret;
			ret = grist_io_open_file(info.path, mode, &oi);
			if (ret)
				return grist_fail(ret, "%s: cannot open for reading: %s", info.path, grist_strerror(ret));
			e->files[d][f] = (struct engine_file){
				.fd = oi.fd, .direct = oi.direct, .align = oi.direct ? oi.offset_align : 1, .path = info.path,
				.size = oi.size,
			};
			if (l->cfg.read_mode == GRIST_READ_MMAP && oi.size) {
				void *m = mmap(NULL, oi.size, PROT_READ, MAP_SHARED, oi.fd, 0);

				if (m == MAP_FAILED)
					return grist_fail(-errno, "%s: cannot map the file: %s", info.path, strerror(errno));
				e->files[d][f].map = m;
				e->any_mapped = true;
			}
			if (oi.direct && oi.offset_align < oi.mem_align)
				e->files[d][f].align = oi.mem_align;
			if (oi.direct)
				e->any_direct = true;
			else
				e->any_buffered = true;
		}
	}
	return 0;
}

static void close_files(struct async_engine *e)
{
	size_t d, f;

	if (!e->files)
		return;
	for (d = 0; d < e->l->num_sources; d++) {
		if (!e->files[d])
			continue;
		for (f = 0; f < e->l->sources[d].num_files; f++) {
			if (e->files[d][f].map)
				munmap((void *)e->files[d][f].map, e->files[d][f].size);
			if (e->files[d][f].fd >= 0)
				close(e->files[d][f].fd);
		}
		free(e->files[d]);
	}
	free(e->files);
}

/* The largest chunk extent of the datasets, to size each worker's registered read arena. */
static uint64_t largest_extent(struct grist_loader *l)
{
	const struct grist_file_geom *g;
	uint64_t best = 0, c;
	size_t d, f;

	for (d = 0; d < l->num_sources; d++) {
		for (f = 0; f < l->sources[d].num_files; f++) {
			g = grist_reader_file_geom(l->sources[d].reader, f);
			for (c = 0; g && c < g->num_chunks; c++)
				if (g->chunk_offsets[c + 1] - g->chunk_offsets[c] > best)
					best = g->chunk_offsets[c + 1] - g->chunk_offsets[c];
		}
	}
	return best;
}

/* Average decoded bytes per record as the footers announce them (for sizing slots, not a bound). */
static size_t row_bytes_estimate(struct grist_loader *l)
{
	uint64_t best = 0, per;
	size_t d, f;

	if (l->cfg.layout != GRIST_LAYOUT_RAGGED)
		return l->cfg.record_bytes;
	if (l->cfg.map)
		return 0;
	for (d = 0; d < l->num_sources; d++) {
		for (f = 0; f < l->sources[d].num_files; f++) {
			const struct grist_file_geom *g = grist_reader_file_geom(l->sources[d].reader, f);

			if (!g || !g->group_size)
				continue;
			per = (g->max_chunk_decoded + g->group_size - 1) / g->group_size;
			if (per > best)
				best = per;
		}
	}
	return best > (1u << 20) ? 0 : (size_t)best;
}

static int setup_worker(struct async_engine *e, struct worker *wk, size_t arena_half)
{
	struct grist_loader *l = e->l;
	struct grist_io_config ioc;
	size_t d, f, i;
	int ret;

	memset(&ioc, 0, sizeof(ioc));
	if (l->hooks.io_override)
		ioc = l->hooks.io_config;
	ioc.queue_depth = l->cfg.queue_depth ? l->cfg.queue_depth : 64;
	ioc.threads = 4;
	wk->arena_len = arena_half * 2;
	if (wk->arena_len) {
		wk->arena = mmap(NULL, wk->arena_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (wk->arena == MAP_FAILED) {
			wk->arena = NULL;
			wk->arena_len = 0;
		} else {
			ioc.fixed_buf = wk->arena;
			ioc.fixed_buf_len = wk->arena_len;
			wk->work[0].fixed = wk->arena;
			wk->work[1].fixed = wk->arena + arena_half;
			wk->work[0].fixed_cap = wk->work[1].fixed_cap = arena_half;
		}
	}
	ret = grist_io_create(e->io_kind, &ioc, &wk->io);
	if (ret)
		return ret;
	{
		struct grist_io_stats ios;

		grist_io_get_stats(wk->io, &ios);
		wk->fixed_buffers = ios.fixed_buffers;
	}
	wk->io_slot = calloc(l->num_sources, sizeof(*wk->io_slot));
	if (!wk->io_slot)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	for (d = 0; d < l->num_sources; d++) {
		wk->io_slot[d] = calloc(l->sources[d].num_files, sizeof(**wk->io_slot));
		if (!wk->io_slot[d])
			return grist_fail(-ENOMEM, "async engine: out of memory");
		for (f = 0; f < l->sources[d].num_files; f++) {
			ret = grist_io_add_file(wk->io, e->files[d][f].fd, e->files[d][f].path, &wk->io_slot[d][f]);
			if (ret)
				return ret;
		}
	}
	ret = grist_stream_cursor_create(l->stream, &wk->cursor);
	if (ret)
		return ret;
	wk->decoders = calloc(e->ncache, sizeof(*wk->decoders));
	if (!wk->decoders)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	wk->ndecoders = e->ncache;
	for (i = 0; i < wk->ndecoders; i++) {
		ret = grist_chunk_decoder_create(&wk->decoders[i].dec);
		if (ret)
			return ret;
	}
	return 0;
}

static void free_work(struct work *w)
{
	free(w->items);
	free(w->chunks);
	free(w->rows);
	free(w->row_place);
	free(w->chunk_hash);
	free(w->order);
	free(w->regions);
	free(w->reqs);
	if (w->buf_heap)
		free(w->buf);
}

static void teardown_worker(struct async_engine *e, struct worker *wk)
{
	size_t d, i;

	grist_io_destroy(wk->io);
	if (wk->io_slot) {
		for (d = 0; d < e->l->num_sources; d++)
			free(wk->io_slot[d]);
		free(wk->io_slot);
	}
	grist_stream_cursor_destroy(wk->cursor);
	for (i = 0; i < wk->ndecoders; i++)
		grist_chunk_decoder_destroy(wk->decoders[i].dec);
	free(wk->decoders);
	free_work(&wk->work[0]);
	free_work(&wk->work[1]);
	if (wk->arena)
		munmap(wk->arena, wk->arena_len);
}

static void async_stop(void *engine);

static int async_start(struct grist_loader *l, void **engine)
{
	struct async_engine *e;
	uint64_t max_extent, group = 1;
	size_t arena_half, d, f;
	char why[160];
	unsigned i;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	e->l = l;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->claim_cv, NULL);
	pthread_cond_init(&e->done_cv, NULL);
	*engine = e;

	if (l->hooks.io_override) {
		e->io_kind = l->hooks.io_kind;
		e->name = "hooked";
	} else if (l->cfg.engine == GRIST_ENGINE_PREAD) {
		e->io_kind = GRIST_IO_PREAD;
		e->name = "pread";
	} else if (grist_io_probe(why, sizeof(why)) == 0) {
		e->io_kind = GRIST_IO_URING;
		e->name = "uring";
	} else {
		e->io_kind = GRIST_IO_PREAD;
		e->name = "pread";
		fprintf(stderr, "grist: io_uring unavailable (%s); using the pread thread pool\n", why);
	}

	/* U: one batch for record granularity; about one window of chunks for chunk granularity. */
	e->unit_items = l->cfg.batch_size;
	e->max_unit_items = e->unit_items;
	e->ncache = l->layout.map ? 2 : 1;
	if (l->cfg.granularity == GRIST_GRANULARITY_CHUNK) {
		uint64_t window = l->cfg.window_chunks ? l->cfg.window_chunks : GRIST_PLAN_DEFAULT_WINDOW;
		uint64_t per_unit;

		double total = 0, most = 0;

		for (d = 0; d < l->num_sources; d++)
			total += l->num_sources > 1 ? l->cfg.datasets[d].weight : 1.0;
		/*
		 * Enough positions for every dataset to bring about one whole window into a
		 * unit: a mixed unit cannot end on every dataset's window boundary at once,
		 * but this way a window is split over at most about two units.
		 */
		for (d = 0; d < l->num_sources; d++) {
			double share = (l->num_sources > 1 ? l->cfg.datasets[d].weight : 1.0) / total, need;

			group = 1;
			for (f = 0; f < l->sources[d].num_files; f++)
				if (l->sources[d].files[f].group_size > group)
					group = l->sources[d].files[f].group_size;
			need = (double)window * (double)group / (double)l->cfg.shard_count / share;
			if (need > most)
				most = need;
		}
		per_unit = most < (double)(1u << 20) ? (uint64_t)most : 1u << 20;
		if (per_unit > (1u << 20))
			per_unit = 1u << 20;
		per_unit = (per_unit + l->cfg.batch_size - 1) / l->cfg.batch_size * l->cfg.batch_size;
		if (per_unit > e->unit_items)
			e->unit_items = (size_t)per_unit;
		/* only a map keeps a window's chunks decoded at once (see decode_unit_in_order) */
		e->ncache = l->layout.map ? (size_t)(window < 62 ? window : 62) + 2 : 1;
		e->max_unit_items = 4 * e->unit_items;
		if (l->num_sources == 1 && !l->cfg.no_shuffle) {
			ret = grist_stream_cursor_create(l->stream, &e->plan_cursor);
			if (ret)
				goto fail;
		}
	}

	/* known once a claimer reaches the end of the stream */
	e->total_units = UINT64_MAX;
	e->next_first_j = l->start_position;
	e->row_bytes_hint = row_bytes_estimate(l);
	e->prefetch = l->cfg.prefetch;
	e->nworkers = l->cfg.threads ? l->cfg.threads : (unsigned)get_nprocs();
	if (e->nworkers < 1)
		e->nworkers = 1;
	/*
	 * The window holds the batches ready ahead of the consumer plus the two units each
	 * worker has in flight; without that slack a worker would wait for its neighbour.
	 */
	e->prefetch += 2 * e->nworkers;
	e->units = calloc(e->prefetch, sizeof(*e->units));
	e->workers = calloc(e->nworkers, sizeof(*e->workers));
	if (!e->units || !e->workers) {
		ret = grist_fail(-ENOMEM, "async engine: out of memory");
		goto fail;
	}
	ret = open_files(e);
	if (ret)
		goto fail;

	/* Each work's part of the arena holds a whole unit's reads when extents are small. */
	max_extent = largest_extent(l) + 2 * MEM_ALIGN;
	arena_half = (size_t)align_up((size_t)(max_extent * (e->unit_items < 4096 ? e->unit_items : 4096)), MEM_ALIGN);
	if (arena_half > (8u << 20))
		arena_half = 8u << 20;
	for (i = 0; i < e->nworkers; i++) {
		e->workers[i].e = e;
		e->workers[i].id = i;
		ret = setup_worker(e, &e->workers[i], arena_half);
		if (ret)
			goto fail;
	}
	for (i = 0; i < e->nworkers; i++) {
		ret = -pthread_create(&e->workers[i].thread, NULL, worker_main, &e->workers[i]);
		if (ret) {
			grist_fail(ret, "async engine: cannot start worker thread %u", i);
			goto fail;
		}
		e->workers[i].started = true;
	}
	return 0;
fail:
	async_stop(e);
	*engine = NULL;
	return ret;
}

/* ---- the consumer side ---- */

static int unit_error(struct unit *u)
{
	return grist_fail(u->error, "%s", u->errmsg[0] ? u->errmsg : grist_strerror(u->error));
}

/* The unit the consumer works on now, waiting until it is done. Lock held. */
static struct unit *current_unit_locked(struct async_engine *e)
{
	struct unit *u;

	u = &e->units[e->consumed_units % e->prefetch];
	/* total_units becomes known only when a claimer reaches the end: re-check it on every wake-up */
	while (!(u->state == UNIT_DONE && u->number == e->consumed_units)) {
		if (e->aborted || e->consumed_units >= e->total_units)
			return NULL;
		pthread_cond_wait(&e->done_cv, &e->lock);
	}
	return e->aborted ? NULL : u;
}

/* Lock held. */
static void finish_unit_locked(struct async_engine *e, struct unit *u)
{
	if (u->slot && u->slot->refs)
		u->slot->detached = true; /* views of it are still out: the last release frees it */
	else if (u->slot)
		slot_discard_locked(e, u->slot);
	u->slot = NULL;
	u->state = UNIT_FREE;
	e->consumed_units++;
	pthread_cond_broadcast(&e->claim_cv);
}

static int async_next(void *engine, struct grist_slot **out)
{
	struct async_engine *e = engine;
	size_t batch = e->l->cfg.batch_size;
	struct grist_slot *pack;
	struct unit *u;
	int ret;

	*out = NULL;
	pthread_mutex_lock(&e->lock);
	for (;;) {
		pack = e->pack;
		if (pack && pack->count == batch)
			break;
		u = current_unit_locked(e);
		if (e->aborted) {
			pthread_mutex_unlock(&e->lock);
			return grist_fail(-ECANCELED, "loader stopped");
		}
		if (!u)
			break; /* end of stream: a partial pack (or nothing) is the last batch */
		e->queue_occupancy += e->next_unit - e->consumed_units;
		if (u->error) {
			ret = unit_error(u);
			pthread_mutex_unlock(&e->lock);
			return ret;
		}
		if (!pack && u->next_row == 0 && u->slot->count == batch && e->unit_items == batch) {
			/* the unit is exactly the next batch: hand its slot over without a copy */
			*out = u->slot;
			u->slot = NULL;
			finish_unit_locked(e, u);
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
		if (!pack && !e->l->provider && u->slot->count - u->next_row >= batch) {
			/* a full batch inside a larger unit: hand out a view of its rows, no copy */
			struct grist_slot *view;

			pthread_mutex_unlock(&e->lock);
			ret = slot_take(e, false, true, &view);
			if (ret)
				return ret;
			pthread_mutex_lock(&e->lock);
			grist_slot_make_view(view, u->slot, u->next_row, batch);
			if (u->next_row == 0)
				view->filtered = u->slot->filtered;
			u->next_row += batch;
			if (u->next_row == u->slot->count)
				finish_unit_locked(e, u);
			*out = view;
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
		if (!pack) {
			pthread_mutex_unlock(&e->lock);
			ret = slot_take(e, true, false, &pack);
			if (ret)
				return ret;
			pthread_mutex_lock(&e->lock);
			e->pack = pack;
		}
		pthread_mutex_unlock(&e->lock);
		/* the unit is done and only the consumer touches it now: copy without the lock */
		if (u->next_row == 0)
			pack->filtered += u->slot->filtered;
		while (u->next_row < u->slot->count && pack->count < batch) {
			ret = grist_slot_copy_row(pack, &e->l->layout, u->slot, u->next_row);
			if (ret)
				return ret;
			pack->stream_end = u->slot->positions[u->next_row] + 1;
			u->next_row++;
		}
		pthread_mutex_lock(&e->lock);
		if (u->next_row == u->slot->count) {
			/* dropped items after the last row belong to this batch only if it is not full */
			if (pack->count < batch)
				pack->stream_end = u->end_j;
			finish_unit_locked(e, u);
		}
	}
	*out = e->pack;
	e->pack = NULL;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

static void async_release(void *engine, struct grist_slot *s)
{
	struct async_engine *e = engine;
	struct grist_slot *parent = s->parent;

	pthread_mutex_lock(&e->lock);
	if (parent) {
		s->parent = NULL;
		if (--parent->refs == 0 && parent->detached) {
			parent->detached = false;
			slot_put_locked(e, parent);
		}
	}
	slot_put_locked(e, s);
	pthread_mutex_unlock(&e->lock);
}

static void async_stats(void *engine, struct grist_loader_stats *out)
{
	struct async_engine *e = engine;
	unsigned i;

	out->engine = e->name;
	out->read_mode = e->any_mapped ? "mmap" : e->any_direct ? (e->any_buffered ? "mixed" : "direct") : "buffered";
	out->threads = e->nworkers;
	for (i = 0; i < e->nworkers; i++) {
		struct worker *wk = &e->workers[i];

		out->reads_issued += load_relaxed(&wk->reads);
		out->bytes_read += load_relaxed(&wk->bytes_read);
		out->chunks_decoded += load_relaxed(&wk->chunks_decoded);
		out->bytes_decoded += load_relaxed(&wk->bytes_decoded);
		out->io_wait_ns += load_relaxed(&wk->io_wait_ns);
		out->decode_ns += load_relaxed(&wk->decode_ns);
		out->producer_stall_ns += load_relaxed(&wk->producer_stall_ns);
		out->memory_bytes += wk->arena_len;
		out->registered_buffers = out->registered_buffers || wk->fixed_buffers;
	}
	pthread_mutex_lock(&e->lock);
	out->queue_occupancy_sum = e->queue_occupancy;
	out->memory_bytes += load_relaxed(&e->slot_memory);
	for (size_t k = 0; k < e->host_pool.n; k++)
		out->pinned = out->pinned || e->host_pool.items[k]->pinned;
	out->pinned = out->pinned || e->l->provider;
	pthread_mutex_unlock(&e->lock);
}

static void async_abort(void *engine)
{
	struct async_engine *e = engine;

	pthread_mutex_lock(&e->lock);
	e->aborted = true;
	e->stop = true;
	pthread_cond_broadcast(&e->claim_cv);
	pthread_cond_broadcast(&e->done_cv);
	pthread_mutex_unlock(&e->lock);
}

static void async_stop(void *engine)
{
	struct async_engine *e = engine;
	unsigned i;
	size_t k;

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_broadcast(&e->claim_cv);
	pthread_mutex_unlock(&e->lock);
	for (i = 0; e->workers && i < e->nworkers; i++)
		if (e->workers[i].started)
			pthread_join(e->workers[i].thread, NULL);
	for (i = 0; e->workers && i < e->nworkers; i++)
		teardown_worker(e, &e->workers[i]);
	for (k = 0; e->units && k < e->prefetch; k++)
		if (e->units[k].slot)
			slot_discard_locked(e, e->units[k].slot);
	if (e->pack)
		slot_discard_locked(e, e->pack);
	pool_free(&e->host_pool);
	pool_free(&e->dev_pool);
	close_files(e);
	grist_stream_cursor_destroy(e->plan_cursor);
	free(e->units);
	free(e->workers);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->claim_cv);
	pthread_cond_destroy(&e->done_cv);
	free(e);
}

const struct grist_engine_ops grist_engine_async_ops = {
	.name = "async",
	.start = async_start,
	.next = async_next,
	.release = async_release,
	.stats = async_stats,
	.abort = async_abort,
	.stop = async_stop,
};
