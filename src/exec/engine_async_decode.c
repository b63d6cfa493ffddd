/*
 * Async engine, decoding: a unit's chunks, read into memory, become its slot's rows.
 */
#include <string.h>

#include "common/error.h"
#include "exec/engine_async_internal.h"

typedef int (*chunk_decode_fn)(struct grist_chunk_decoder *, const uint8_t *, uint64_t, size_t, uint64_t,
			       uint64_t, const char *, struct grist_decoded_chunk *);

/* Chunk @chunk of @w as its read brought it, once that read is known good. */
static int chunk_bytes(struct worker *wk, struct work *w, uint32_t chunk, const struct region **out)
{
	const struct chunk_ref *c = &w->chunks[chunk];
	const struct region *r = &w->regions[c->region];

	if (r->error)
		return r->error;
	if (r->offset + r->got < c->end)
		return grist_fail_at(-EBADMSG, wk->e->files[c->component][c->file].path, r->offset + r->got,
				     "file ends inside the chunk at byte %llu (it should end at %llu): truncated?",
				     (unsigned long long)c->begin, (unsigned long long)c->end);
	*out = r;
	return 0;
}

/* The reader's check on a decoded chunk: a data chunk with exactly the records the footer implies. */
static int chunk_records_check(struct worker *wk, const struct chunk_ref *c, const struct grist_decoded_chunk *out)
{
	return grist_file_check_chunk_records(grist_reader_file_geom(wk->e->p->sources[c->component].reader, c->file),
					      c->chunk, out->chunk_type, out->num_records);
}

/* Run @fn (a whole decode or one of its halves) on chunk @chunk of @w, with both checks. */
static int decode_chunk(struct worker *wk, struct work *w, uint32_t chunk, struct grist_chunk_decoder *dec,
			chunk_decode_fn fn, struct grist_decoded_chunk *out)
{
	const struct chunk_ref *c = &w->chunks[chunk];
	const struct region *r = NULL;
	int ret = chunk_bytes(wk, w, chunk, &r);

	if (!ret)
		ret = fn(dec, r->base, r->offset, (size_t)r->got, c->begin, c->end,
			 wk->e->files[c->component][c->file].path, out);
	return ret ? ret : chunk_records_check(wk, c, out);
}

/*
 * Where chunk @cr's values can be decompressed straight into the slot, or NULL. That is
 * so when its rows take every byte of its values back to back and in record order (a
 * chunk of one record read once in the unit: every chunk of a group_size 1 file), in a
 * ragged or fixed layout (padded rows need pad bytes between records). The rows then
 * need no scratch buffer and no second copy. Only the engine's own host slots: a device
 * stage's buffer may be write-combined memory, which the codec's match copies would
 * read back slowly, so those keep the streaming copy.
 */
static uint8_t *direct_destination(const struct work *w, const struct chunk_ref *cr, const struct grist_slot *slot,
				   const struct grist_layout *L)
{
	const struct chunk_row *row = w->rows + cr->rows_begin, *end = w->rows + cr->rows_end;
	uint64_t first = w->row_place[row->item], next = first, i;

	if (slot->external || L->kind == GRIST_LAYOUT_PADDED)
		return NULL;
	for (i = 0; row < end; row++, i++) {
		if (row->record_in_chunk != i || w->row_place[row->item] != next)
			return NULL;
		next += row->len;
	}
	return next - first == cr->decoded_size ? slot->data + first : NULL;
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
 * Add the time since *@t to @sum and restart the clock there. @sum is a local total: the
 * shared counters take one atomic add per advance call, not one per chunk.
 */
static void lap(uint64_t *t, uint64_t *sum)
{
	uint64_t now = grist_now_ns();

	*sum += now - *t;
	*t = now;
}

/*
 * With a map, rows are made in stream order: a map's output size is only known once it
 * has run, so every chunk of the unit stays decoded (in the decoder cache) until the
 * last of its records has been mapped. An item is mapped as soon as its chunk's read
 * has landed and every item before it is done.
 */
static int advance_in_order(struct worker *wk, struct work *w)
{
	const struct grist_engine_params *p = wk->e->p;
	struct grist_map_input in;
	struct decoder_slot *d;
	uint64_t t = grist_now_ns(), spent = 0;
	int ret = 0;

	while (w->shaped < w->nitems) {
		const struct item *it = &w->items[w->shaped];
		const uint64_t *off;

		if (w->regions[w->chunks[it->chunk].region].pieces_left)
			break; /* its read has not landed */
		d = decoder_for(wk, w, it->chunk, &ret);
		if (!d)
			break;
		off = d->out.offsets + it->record_in_chunk;
		grist_engine_map_input(p, &it->it, d->out.values + off[0], (size_t)(off[1] - off[0]), &in);
		ret = grist_slot_add(w->u->slot, p->layout, &in, it->j);
		if (ret < 0) {
			ret = grist_engine_record_error(p->sources, p->num_sources, it->it.component, it->it.record, ret);
			break;
		}
		w->shaped++;
		ret = grist_async_service(wk, grist_now_ns());
		if (ret)
			break;
	}
	lap(&t, &spent);
	add_relaxed(&wk->decode_ns, spent);
	if (ret)
		return ret;
	return w->shaped == w->nitems;
}

/* What one advance call spent, added to the shared counters once at its end. */
struct tally {
	uint64_t t;              /* the clock at the last lap */
	uint64_t decode, assemble, chunks, bytes;
};

/*
 * Check and decompress chunk @c of @w, whose rows all have places: straight into them
 * when they take it whole (direct_destination()), else into the decoder's buffer and
 * then copied to them.
 */
static int fill_chunk(struct worker *wk, struct work *w, uint32_t c, struct tally *ty)
{
	struct async_engine *e = wk->e;
	const struct grist_layout *L = e->p->layout;
	struct chunk_ref *cr = &w->chunks[c];
	struct grist_decoded_chunk out;
	const struct chunk_row *row, *end;
	const struct region *r = NULL;
	uint8_t *into = direct_destination(w, cr, w->u->slot, L);
	int ret;

	if (into) {
		ret = chunk_bytes(wk, w, c, &r);
		if (!ret)
			ret = grist_chunk_decode_values_into(wk->decoders[0].dec, r->base, r->offset, (size_t)r->got,
							     cr->begin, cr->end, e->files[cr->component][cr->file].path,
							     into, (size_t)cr->decoded_size, &out);
		if (!ret)
			ret = chunk_records_check(wk, cr, &out);
	} else {
		ret = decode_chunk(wk, w, c, wk->decoders[0].dec, grist_chunk_decode_values, &out);
	}
	if (ret)
		return ret;
	if (out.decoded_data_size != cr->decoded_size)
		return grist_fail_at(-EBADMSG, e->files[cr->component][cr->file].path, cr->begin,
				     "chunk changed while it was read (%llu decoded bytes, then %llu)",
				     (unsigned long long)cr->decoded_size, (unsigned long long)out.decoded_data_size);
	ty->chunks++;
	ty->bytes += out.decoded_data_size;
	lap(&ty->t, &ty->decode);
	if (!into) {
		/* decoded into scratch: the copy into the rows is assembly time */
		end = w->rows + cr->rows_end;
		for (row = w->rows + cr->rows_begin; row < end; row++)
			grist_slot_fill_row(w->u->slot, L, (size_t)w->row_place[row->item],
					    out.values + row->value_begin, (size_t)row->len);
		lap(&ty->t, &ty->assemble);
	}
	cr->filled = true;
	w->nfilled++;
	/* between chunks, reads that landed meanwhile are taken and the ring refilled */
	return grist_async_service(wk, ty->t);
}

/*
 * The sizes pass is the first to touch a chunk's bytes, and shuffled chunks are far
 * apart (with mmap, far apart in the page cache): without help each one costs a cache
 * (and often a TLB) miss before its header can be checked. Regions this far ahead in
 * landing order get their first chunk's header and sizes pulled in meanwhile.
 */
#define SIZES_PREFETCH 4

static void prefetch_region(const struct work *w, const struct region *r)
{
	const uint8_t *p = r->base + (w->chunks[w->order[r->order_begin]].begin - r->offset);

	__builtin_prefetch(p);
	__builtin_prefetch(p + 64);
}

/*
 * The values pass reads a whole chunk (the hash, then the codec) in fill order, which
 * is shuffled: the chunk this far ahead is pulled into cache meanwhile, up to
 * FILL_PREFETCH_MAX bytes of it (larger chunks take long enough to stream by themselves).
 */
#define FILL_PREFETCH 2
#define FILL_PREFETCH_MAX 4096

/*
 * A chunk decompressed straight into its rows (direct_destination()) has them written by
 * the codec with plain stores, a line at a time; slot memory cycles through more than the
 * core's cache, so each line would be fetched for ownership just as the codec stores to
 * it. Such a chunk's rows are pulled in for writing meanwhile, up to FILL_PREFETCH_MAX
 * bytes (at group_size 1: 1-4% less CPU per record, medians of alternating runs). Rows
 * copied out of a scratch buffer need none: those copies use streaming stores.
 */
static void prefetch_rows(const struct work *w, const struct chunk_ref *c, const struct grist_layout *L)
{
	const uint8_t *dst;
	uint64_t n, i;

	if (c->rows_end == c->rows_begin || w->rows[c->rows_end - 1].item >= w->shaped)
		return; /* a row of it has no place yet */
	dst = direct_destination(w, c, w->u->slot, L);
	if (!dst)
		return;
	n = c->decoded_size < FILL_PREFETCH_MAX ? c->decoded_size : FILL_PREFETCH_MAX;
	for (i = 0; i < n; i += 64)
		__builtin_prefetch(dst + i, 1);
}

static void prefetch_chunk(const struct work *w, uint32_t chunk, const struct grist_layout *L)
{
	const struct chunk_ref *c = &w->chunks[chunk];
	const struct region *r = &w->regions[c->region];
	uint64_t n = c->end - c->begin < FILL_PREFETCH_MAX ? c->end - c->begin : FILL_PREFETCH_MAX, i;
	const uint8_t *p;

	if (r->pieces_left || c->filled || !r->base)
		return; /* not landed yet, or done */
	p = r->base + (c->begin - r->offset);
	for (i = 0; i < n; i += 64)
		__builtin_prefetch(p + i);
	prefetch_rows(w, c, L);
}

/*
 * Without a map, a row is the record itself, so its place in the slot follows from the
 * record sizes alone. As each region lands, its chunks' sizes sections are read (small);
 * rows get their places in stream order as far as the sizes before them are known; and
 * a chunk whose rows all have places is checked and decompressed once, into one buffer
 * that stays in cache, and its records copied straight to their rows. One decoded chunk
 * per worker, whatever the window.
 *
 * While reads are still landing, chunks are taken in the order their rows get places
 * (fill_order); once every row has its place, the rest go in file order, front to back
 * through the read buffer.
 */
static int advance_by_chunk(struct worker *wk, struct work *w)
{
	const struct grist_engine_params *p = wk->e->p;
	struct grist_chunk_decoder *dec = wk->decoders[0].dec;
	struct tally ty = { .t = grist_now_ns() };
	struct grist_decoded_chunk out;
	struct grist_map_input in;
	struct chunk_row *row, *end;
	uint32_t c, k;
	bool shaping;
	int ret = 0;

	for (;;) {
		while (w->nsized < w->nlanded) {
			const struct region *r;

			if (w->nsized + SIZES_PREFETCH < w->nlanded)
				prefetch_region(w, &w->regions[w->landed[w->nsized + SIZES_PREFETCH]]);
			r = &w->regions[w->landed[w->nsized++]];

			for (k = r->order_begin; k < r->order_end; k++) {
				c = w->order[k];
				ret = decode_chunk(wk, w, c, dec, grist_chunk_decode_sizes, &out);
				if (ret)
					goto out;
				w->chunks[c].decoded_size = out.decoded_data_size;
				end = w->rows + w->chunks[c].rows_end;
				for (row = w->rows + w->chunks[c].rows_begin; row < end; row++) {
					row->value_begin = out.offsets[row->record_in_chunk];
					row->len = out.offsets[row->record_in_chunk + 1] - row->value_begin;
					w->row_place[row->item] = row->len;
				}
			}
		}
		/* laying rows out is assembly, like copying them in */
		shaping = w->shaped < w->nitems && w->row_place[w->shaped] != ROW_UNKNOWN;
		if (shaping)
			lap(&ty.t, &ty.decode);
		while (w->shaped < w->nitems && w->row_place[w->shaped] != ROW_UNKNOWN) {
			const struct item *it = &w->items[w->shaped];
			size_t dst;

			in = (struct grist_map_input){ .len = (size_t)w->row_place[w->shaped], .index = it->it.record,
						       .dataset = it->it.component, .epoch = it->it.epoch };
			ret = grist_slot_shape_row(w->u->slot, p->layout, &in, it->j, &dst);
			if (ret) {
				ret = grist_engine_record_error(p->sources, p->num_sources, it->it.component, it->it.record, ret);
				goto out;
			}
			w->row_place[w->shaped++] = dst;
		}
		if (shaping)
			lap(&ty.t, &ty.assemble);
		while (w->fill_next < w->nchunks) {
			c = w->fill_order[w->fill_next];
			if (w->rows[w->chunks[c].rows_end - 1].item >= w->shaped)
				break; /* a row of it has no place yet */
			/*
			 * Once every row has its place, chunks in a read buffer go in file order
			 * (below); mapped ones stay in stream order, which writes the slot front to
			 * back (they lie scattered over the page cache either way). Measured at
			 * group_size 1: stream order saves 3% of the CPU per record when mapped,
			 * and costs 3% when read into a buffer.
			 */
			if (w->shaped == w->nitems && !wk->e->files[w->chunks[c].component][w->chunks[c].file].map)
				break;
			w->fill_next++;
			if (w->fill_next + FILL_PREFETCH < w->nchunks)
				prefetch_chunk(w, w->fill_order[w->fill_next + FILL_PREFETCH], p->layout);
			ret = fill_chunk(wk, w, c, &ty);
			if (ret)
				goto out;
		}
		for (; w->shaped == w->nitems && w->file_next < w->nchunks; w->file_next++) {
			c = w->order[w->file_next];
			if (w->chunks[c].filled)
				continue;
			if (w->file_next + FILL_PREFETCH < w->nchunks)
				prefetch_chunk(w, w->order[w->file_next + FILL_PREFETCH], p->layout);
			ret = fill_chunk(wk, w, c, &ty);
			if (ret)
				goto out;
		}
		if (w->nfilled == w->nchunks) {
			grist_slot_fill_done();
			ret = 1;
			break;
		}
		if (w->nsized == w->nlanded)
			break; /* waits for a read */
	}
out:
	lap(&ty.t, &ty.decode);
	add_relaxed(&wk->decode_ns, ty.decode);
	add_relaxed(&wk->assemble_ns, ty.assemble);
	add_relaxed(&wk->chunks_decoded, ty.chunks);
	add_relaxed(&wk->bytes_decoded, ty.bytes);
	return ret;
}

int grist_async_advance(struct worker *wk, struct work *w)
{
	return wk->e->p->layout->map ? advance_in_order(wk, w) : advance_by_chunk(wk, w);
}
