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
#include "exec/engine_async_internal.h"

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
	u->take_error = grist_async_slot_take(e, e->unit_items == e->l->cfg.batch_size && !e->plan_cursor, false, &u->slot);
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
		ret = grist_async_plan_unit(wk, w, u);
	if (!ret)
		ret = grist_async_submit_unit(wk, w);
	if (!ret)
		ret = grist_async_push_requests(wk, w);
	if (ret) {
		/* requests already in flight must come back before the buffer is reused */
		w->pending -= (unsigned)(w->nreqs - w->submitted);
		w->nreqs = w->submitted;
		grist_async_drain_unit(wk, w);
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
		ret = grist_async_wait_unit(wk, cur);
		if (!ret)
			ret = grist_async_decode_unit(wk, cur);
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
			/* auto maps a file the page cache already holds: no read copies, no syscalls */
			if ((l->cfg.read_mode == GRIST_READ_MMAP || oi.resident) && oi.size) {
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
			else if (!e->files[d][f].map)
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

static void async_stats(void *engine, struct grist_loader_stats *out)
{
	struct async_engine *e = engine;
	unsigned i;

	out->engine = e->name;
	/* auto chooses per file: more than one kind is "mixed" */
	out->read_mode = e->any_mapped + e->any_direct + e->any_buffered > 1 ? "mixed"
			 : e->any_mapped ? "mmap" : e->any_direct ? "direct" : "buffered";
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
			grist_async_slot_discard_locked(e, e->units[k].slot);
	if (e->pack)
		grist_async_slot_discard_locked(e, e->pack);
	grist_async_pool_free(&e->host_pool);
	grist_async_pool_free(&e->dev_pool);
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
	.next = grist_async_next,
	.release = grist_async_release,
	.stats = async_stats,
	.abort = async_abort,
	.stop = async_stop,
};
