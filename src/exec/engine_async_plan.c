/*
 * Async engine, planning: which items a unit holds, which chunks they live in, and the
 * coalesced read regions that bring those chunks into memory (engine_async_plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "exec/engine_async_plan.h"
#include "format/dataset.h"
#include "plan/read_plan.h"

static uint64_t chunk_key_hash(uint32_t component, uint32_t file, uint64_t begin)
{
	uint64_t h = begin * 0x9e3779b97f4a7c15ull ^ ((uint64_t)file << 32 | component) * 0xc2b2ae3d27d4eb4full;

	return h ^ (h >> 29);
}

static int find_or_add_chunk(struct async_plan *w, uint32_t component, const struct grist_record_loc *loc,
			     uint32_t *index)
{
	uint32_t file = (uint32_t)loc->file;
	uint64_t begin = loc->chunk_begin;
	size_t mask = w->hash_cap - 1, i;
	struct async_chunk *c;
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
	ret = grist_array_reserve((void **)&w->chunks, &w->chunks_cap, w->nchunks + 1, sizeof(*w->chunks));
	if (ret)
		return ret;
	c = &w->chunks[w->nchunks];
	*c = (struct async_chunk){ .component = component, .file = file, .chunk = loc->chunk, .begin = begin,
				   .end = loc->chunk_end };
	w->chunk_hash[i] = (uint32_t)w->nchunks;
	*index = (uint32_t)w->nchunks++;
	return 0;
}

static int cmp_chunks(const void *a, const void *b, void *ctx)
{
	const struct async_chunk *chunks = ctx;
	const struct async_chunk *x = &chunks[*(const uint32_t *)a];
	const struct async_chunk *y = &chunks[*(const uint32_t *)b];

	if (x->component != y->component)
		return x->component < y->component ? -1 : 1;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/*
 * The chunks in order[], taken in that order, become regions: one that touches or
 * overlaps the region before it in the same file joins it while that stays within @cap
 * bytes (the read planner).
 */
static int coalesce_order(const struct async_files *fs, struct async_plan *w, uint64_t cap)
{
	struct async_region *r = NULL;
	size_t i;
	int ret;

	w->nregions = 0;
	for (i = 0; i < w->nchunks; i++) {
		struct async_chunk *c = &w->chunks[w->order[i]];
		const struct async_file *f = grist_async_file(fs, c->component, c->file);
		uint64_t off = c->begin, end = c->end;

		if (f->direct)
			grist_read_align(f->align, &off, &end);
		if (!r || r->component != c->component || r->file != c->file ||
		    !grist_read_coalesce_max(r->offset, &r->len, off, end, cap)) {
			ret = grist_array_reserve((void **)&w->regions, &w->regions_cap, w->nregions + 1, sizeof(*w->regions));
			if (ret)
				return ret;
			r = &w->regions[w->nregions++];
			*r = (struct async_region){ .component = c->component, .file = c->file, .offset = off, .len = end - off,
					      .order_begin = (uint32_t)i };
		}
		c->region = (uint32_t)(w->nregions - 1);
		r->order_end = (uint32_t)i + 1;
	}
	return 0;
}

/* Adjacent or overlapping chunk extents of one file become one region (the read planner). */
static int build_regions(const struct async_files *fs, struct async_plan *w)
{
	size_t i, buf_need = 0;
	int ret;

	for (i = 0; i < w->nchunks; i++)
		w->order[i] = (uint32_t)i;
	/*
	 * Sorting finds the extents to coalesce into one read. When every file is mapped
	 * nothing is read, so the chunks keep their stream order (first use), which is also
	 * the order their rows fill the slot: a few percent of the CPU at group_size 1.
	 */
	if (fs->any_direct || fs->any_buffered)
		qsort_r(w->order, w->nchunks, sizeof(*w->order), cmp_chunks, w->chunks);
	ret = coalesce_order(fs, w, GRIST_READ_REGION_MAX);
	if (ret)
		return ret;
	for (i = 0; i < w->nregions; i++) {
		w->regions[i].buf_off = buf_need;
		/* a mapped file needs no buffer: its region is the mapping itself */
		if (!grist_async_file(fs, w->regions[i].component, w->regions[i].file)->map)
			buf_need += (size_t)grist_read_buf_len(w->regions[i].len, fs->buf_align);
	}
	/* whole pages per unit: the units after it in the arena start aligned whatever it holds */
	buf_need = (size_t)grist_read_buf_len(buf_need, GRIST_ENGINE_MEM_ALIGN);
	/* the buffer itself is reserved when the unit's reads are admitted (grist_async_admit) */
	w->buf_need = buf_need;
	return 0;
}

/*
 * Counting sort of the unit's items by chunk into w->rows (chunk rows_end holds counts on
 * entry), and the fill order: chunks by their last item. Rows get their places in stream
 * order, so a chunk can be copied out once the row of its last item has a place; in this
 * order each chunk becomes ready no later than the ones after it.
 */
static int group_rows(struct async_plan *w)
{
	uint32_t at = 0, c, count;
	size_t i, k = 0;
	int ret = grist_array_reserve((void **)&w->rows, &w->rows_cap, w->nitems, sizeof(*w->rows));

	if (!ret)
		ret = grist_array_reserve((void **)&w->fill_order, &w->fill_cap, w->nchunks, sizeof(*w->fill_order));
	if (ret)
		return ret;
	for (c = 0; c < w->nchunks; c++) {
		count = w->chunks[c].rows_end;
		w->chunks[c].rows_begin = w->chunks[c].rows_end = at;
		at += count;
	}
	for (i = 0; i < w->nitems; i++) {
		struct async_chunk *c = &w->chunks[w->items[i].chunk];

		w->rows[c->rows_end++] = (struct async_row){ .item = (uint32_t)i,
							     .record_in_chunk = w->items[i].record_in_chunk };
	}
	for (i = 0; i < w->nitems; i++) {
		const struct async_chunk *c = &w->chunks[w->items[i].chunk];

		if (w->rows[c->rows_end - 1].item == i)
			w->fill_order[k++] = w->items[i].chunk;
	}
	return 0;
}

/*
 * Whether streamed regions fit a read buffer of @arena bytes at every moment. Region i
 * can be given back once every chunk of it is copied out, which needs the rows up to
 * its chunks' last items placed, so every region serving an item up to there read:
 * region need[i]. Regions are read in order and their space is a FIFO ring in which a
 * freed hole is reused only once the ones before it are free, so while region j is
 * read the ring spans from the oldest region still needed (the least i with
 * need[i] >= j) to j. A ring of that span plus twice the largest region (the room a
 * wrap can waste, and the next region's) always finds space.
 *
 * Its array is the plan's, reused from unit to unit (no allocation per unit once it has
 * grown); running out of memory growing it is an error, not "does not fit".
 */
static int stream_fits(const struct async_files *fs, struct async_plan *w, size_t arena, bool *fits)
{
	size_t i, j, k, lo, hi, oldest = 0, span = 0, most = 0, biggest = 0, need = 0;
	struct async_stream_region *sr;
	int ret;

	ret = grist_array_reserve((void **)&w->stream_regions, &w->stream_cap, w->nregions, sizeof(*w->stream_regions));
	if (ret)
		return grist_fail(ret, "async engine: cannot plan a streamed unit of %zu regions", w->nregions);
	sr = w->stream_regions;
	*fits = true;
	for (i = 0; i < w->nregions; i++) {
		const struct async_region *r = &w->regions[i];

		sr[i].bytes = grist_async_file(fs, r->component, r->file)->map ? 0
										 : (size_t)grist_read_buf_len(r->len, fs->buf_align);
		if (sr[i].bytes > biggest)
			biggest = sr[i].bytes;
		need = need > i ? need : i;
		for (k = r->order_begin; k < r->order_end; k++) {
			const struct async_chunk *c = &w->chunks[w->order[k]];
			uint32_t last = w->rows[c->rows_end - 1].item;

			/* chunks are numbered by their first item: the last chunk starting at or before @last */
			lo = w->order[k];
			hi = w->nchunks;
			while (hi - lo > 1) {
				size_t mid = lo + (hi - lo) / 2;

				if (w->rows[w->chunks[mid].rows_begin].item <= last)
					lo = mid;
				else
					hi = mid;
			}
			if (w->chunks[lo].region > need)
				need = w->chunks[lo].region;
		}
		sr[i].need = need;
	}
	for (j = 0; j < w->nregions && *fits; j++) {
		span += sr[j].bytes;
		while (oldest < j && sr[oldest].need < j)
			span -= sr[oldest++].bytes;
		if (span > most)
			most = span;
		*fits = most + 2 * biggest <= arena;
	}
	return 0;
}

/*
 * A unit larger than half the read buffer is streamed (async_plan.streamed): its
 * chunks in stream order (their numbering: first use), coalesced while adjacent in
 * the file, each region at most an eighth of the buffer. Returns whether it fits
 * (stream_fits()); when not, the caller plans it whole again.
 */
static int build_stream_regions(const struct async_files *fs, struct async_plan *w, size_t arena, bool *fits)
{
	size_t i;
	int ret;

	for (i = 0; i < w->nchunks; i++)
		w->order[i] = (uint32_t)i;
	ret = coalesce_order(fs, w, (arena / 8) & ~(uint64_t)(GRIST_ENGINE_MEM_ALIGN - 1));
	if (!ret)
		ret = stream_fits(fs, w, arena, fits);
	return ret;
}

#define LOCATE_AHEAD 8

int grist_async_plan_unit(struct async_plan *w, const struct async_plan_env *env, uint64_t first_j,
			  uint64_t end_j)
{
	const struct grist_engine_params *p = env->p;
	struct grist_record_loc loc;
	size_t n = (size_t)(end_j - first_j), i;
	struct async_item *item;
	int ret;

	w->nitems = w->nchunks = w->nregions = 0;
	w->buf_need = 0;
	w->streamed = false;
	ret = grist_array_reserve((void **)&w->items, &w->items_cap, n, sizeof(*w->items));
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
	ret = grist_stream_cursor_seek(env->cursor, first_j);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		item = &w->items[i];
		ret = grist_stream_next(env->cursor, &item->it);
		if (ret < 0)
			return ret;
		if (ret == 0)
			return grist_fail(-ERANGE, "async engine: stream ended early at position %llu",
					  (unsigned long long)(first_j + i));
		item->j = first_j + i;
	}
	/* shuffled records: each one's chunk offsets are a cache miss, started a few items ahead */
	for (i = 0; i < n && i < LOCATE_AHEAD; i++)
		grist_reader_locate_prefetch(p->sources[w->items[i].it.component].reader, w->items[i].it.record);
	for (i = 0; i < n; i++) {
		item = &w->items[i];
		if (i + LOCATE_AHEAD < n)
			grist_reader_locate_prefetch(p->sources[item[LOCATE_AHEAD].it.component].reader,
						     item[LOCATE_AHEAD].it.record);
		ret = grist_reader_locate(p->sources[item->it.component].reader, item->it.record, &loc);
		if (ret)
			return ret;
		item->record_in_chunk = loc.record_in_chunk;
		ret = find_or_add_chunk(w, item->it.component, &loc, &item->chunk);
		if (ret)
			return ret;
		w->chunks[item->chunk].rows_end++; /* a count until group_rows() */
	}
	w->nitems = n;
	ret = build_regions(env->files, w);
	if (!ret && !p->layout->map)
		ret = group_rows(w);
	/*
	 * Streaming needs the rows grouped by chunk (no map: with one, decoded chunks stay
	 * cached and may be decoded again from the buffer). When the peak does not fit, the
	 * unit is read whole as before (a heap buffer once it is alone).
	 */
	if (!ret && !p->layout->map && env->read_buffer && w->buf_need > env->read_buffer / 2) {
		bool fits = false;

		ret = build_stream_regions(env->files, w, env->read_buffer, &fits);
		if (!ret && fits)
			w->streamed = true;
		else if (!ret)
			ret = build_regions(env->files, w);
	}
	return ret;
}

void grist_async_plan_free(struct async_plan *pl)
{
	free(pl->items);
	free(pl->chunks);
	free(pl->rows);
	free(pl->chunk_hash);
	free(pl->order);
	free(pl->regions);
	free(pl->fill_order);
	free(pl->stream_regions);
}
