/*
 * Async engine, decoding: a unit's chunks, read into memory, become its slot's rows
 * (engine_async_decode.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "exec/engine_async_decode.h"
#include "format/dataset.h"

#define ROW_UNKNOWN UINT64_MAX /* row_place: the record's size is not known yet */

typedef int (*chunk_decode_fn)(struct grist_chunk_decoder *, const uint8_t *, uint64_t, size_t, uint64_t,
			       uint64_t, const char *, struct grist_decoded_chunk *);

/* One step's view: the worker's decoder, the unit's state, and what the step reads. */
struct step {
	struct async_decoder *dc;
	struct async_decode *d;
	const struct async_decode_input *in;
	const struct async_plan *pl;
	const struct async_reads *rd;
};

static const char *chunk_path(const struct step *s, const struct async_chunk *c)
{
	return grist_async_file(s->in->files, c->component, c->file)->path;
}

/* Chunk @chunk as its read brought it, once that read is known good: its region and landing. */
static int chunk_bytes(const struct step *s, uint32_t chunk, const struct async_region **region,
		       const struct async_landing **landing)
{
	const struct async_chunk *c = &s->pl->chunks[chunk];
	const struct async_region *r = &s->pl->regions[c->region];
	const struct async_landing *l = &s->rd->land[c->region];

	if (l->error)
		return l->error;
	if (r->offset + l->got < c->end)
		return grist_fail_at(-EBADMSG, chunk_path(s, c), r->offset + l->got,
				     "file ends inside the chunk at byte %llu (it should end at %llu): truncated?",
				     (unsigned long long)c->begin, (unsigned long long)c->end);
	*region = r;
	*landing = l;
	return 0;
}

/* The reader's check on a decoded chunk: a data chunk with exactly the records the footer implies. */
static int chunk_records_check(const struct step *s, const struct async_chunk *c, const struct grist_decoded_chunk *out)
{
	return grist_file_check_chunk_records(grist_reader_file_geom(s->in->p->sources[c->component].reader, c->file),
					      c->chunk, out->chunk_type, out->num_records);
}

/* Run @fn (a whole decode or one of its halves) on chunk @chunk, with both checks. */
static int decode_chunk(const struct step *s, uint32_t chunk, struct grist_chunk_decoder *dec, chunk_decode_fn fn,
			struct grist_decoded_chunk *out)
{
	const struct async_chunk *c = &s->pl->chunks[chunk];
	const struct async_region *r = NULL;
	const struct async_landing *l = NULL;
	int ret = chunk_bytes(s, chunk, &r, &l);

	if (!ret)
		ret = fn(dec, l->base, r->offset, (size_t)l->got, c->begin, c->end, chunk_path(s, c), out);
	return ret ? ret : chunk_records_check(s, c, out);
}

/*
 * Where chunk @c's values can be decompressed straight into the slot, or NULL. That is
 * so when its rows take every byte of its values back to back and in record order (a
 * chunk of one record read once in the unit: every chunk of a group_size 1 file), in a
 * ragged or fixed layout (padded rows need pad bytes between records). The rows then
 * need no scratch buffer and no second copy. Only the engine's own host slots: a device
 * stage's buffer may be write-combined memory, which the codec's match copies would
 * read back slowly, so those keep the streaming copy.
 */
static uint8_t *direct_destination(const struct step *s, uint32_t c)
{
	const struct async_chunk *cr = &s->pl->chunks[c];
	const struct async_row *row = s->pl->rows + cr->rows_begin, *end = s->pl->rows + cr->rows_end;
	const struct async_span *span = s->d->spans + cr->rows_begin;
	const uint64_t *place = s->d->row_place;
	const struct grist_slot *slot = s->in->slot;
	uint64_t first = place[row->item], next = first, i;

	if (slot->external || s->in->p->layout->kind == GRIST_LAYOUT_PADDED)
		return NULL;
	for (i = 0; row < end; row++, span++, i++) {
		if (row->record_in_chunk != i || place[row->item] != next)
			return NULL;
		next += span->len;
	}
	return next - first == s->d->chunks[c].decoded_size ? slot->data + first : NULL;
}

static struct async_decoder_slot *decoder_for(const struct step *s, uint32_t chunk, int *err)
{
	struct async_decoder *dc = s->dc;
	struct async_decoder_slot *d, *victim = NULL;
	struct async_chunk_state *c = &s->d->chunks[chunk];
	size_t i;
	int ret;

	/* the common case: the decoder that took this chunk still holds it */
	if (c->decoder >= 0) {
		d = &dc->slots[c->decoder];
		if (d->generation == dc->generation && d->chunk == chunk) {
			d->last_use = ++dc->use_clock;
			return d;
		}
	}
	for (i = 0; i < dc->nslots; i++) {
		d = &dc->slots[i];
		if (d->generation == dc->generation && d->chunk == chunk) {
			d->last_use = ++dc->use_clock;
			return d;
		}
		/* a decoder holding another unit's chunk is free; else the least recently used */
		if (!victim || (victim->generation == dc->generation &&
				(d->generation != dc->generation || d->last_use < victim->last_use)))
			victim = d;
	}
	d = victim;
	ret = decode_chunk(s, chunk, d->dec, grist_chunk_decode, &d->out);
	if (ret) {
		d->generation = 0;
		*err = ret;
		return NULL;
	}
	d->generation = dc->generation;
	d->chunk = chunk;
	d->last_use = ++dc->use_clock;
	c->decoder = (int32_t)(d - dc->slots);
	grist_counter_add(&dc->chunks_decoded, 1);
	grist_counter_add(&dc->bytes_decoded, d->out.decoded_data_size);
	return d;
}

/*
 * Add the time since *@t to @sum and restart the clock there. @sum is a local total: the
 * shared counters take one atomic add per step, not one per chunk.
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
static int advance_in_order(const struct step *s, uint64_t *now)
{
	const struct grist_engine_params *p = s->in->p;
	struct async_decode *d = s->d;
	struct grist_map_input in;
	struct async_decoder_slot *ds;
	uint64_t t = grist_now_ns(), spent = 0, clock;
	int ret = 0;

	while (d->shaped < s->pl->nitems) {
		const struct async_item *it = &s->pl->items[d->shaped];
		const uint64_t *off;

		if (s->rd->land[s->pl->chunks[it->chunk].region].pieces_left)
			break; /* its read has not landed */
		ds = decoder_for(s, it->chunk, &ret);
		if (!ds)
			break;
		off = ds->out.offsets + it->record_in_chunk;
		grist_engine_map_input(p, &it->it, ds->out.values + off[0], (size_t)(off[1] - off[0]), &in);
		ret = grist_slot_add(s->in->slot, p->layout, &in, it->j);
		if (ret < 0) {
			ret = grist_engine_record_error(p->sources, p->num_sources, it->it.component, it->it.record, ret);
			break;
		}
		d->shaped++;
		ret = 0; /* a positive return (the map filtered the record) is no error */
		clock = grist_now_ns();
		if (clock >= s->in->tend_at) {
			*now = clock;
			ret = GRIST_ASYNC_YIELD;
			break;
		}
	}
	lap(&t, &spent);
	grist_counter_add(&s->dc->decode_ns, spent);
	if (ret)
		return ret;
	return d->shaped == s->pl->nitems;
}

/* What one step spent, added to the shared counters once at its end. */
struct tally {
	uint64_t t;              /* the clock at the last lap */
	uint64_t decode, assemble, chunks, bytes;
};

/*
 * Check and decompress chunk @c, whose rows all have places: straight into them when
 * they take it whole (direct_destination()), else into the decoder's buffer and then
 * copied to them. Returns 0, GRIST_ASYNC_YIELD (the reads want tending), or an error.
 */
static int fill_chunk(const struct step *s, uint32_t c, struct tally *ty, uint64_t *now)
{
	const struct grist_layout *L = s->in->p->layout;
	const struct async_chunk *cr = &s->pl->chunks[c];
	struct async_chunk_state *cs = &s->d->chunks[c];
	struct grist_chunk_decoder *dec = s->dc->slots[0].dec;
	struct grist_decoded_chunk out;
	const struct async_row *row, *end;
	const struct async_span *span;
	const struct async_region *r = NULL;
	const struct async_landing *l = NULL;
	uint8_t *into = direct_destination(s, c);
	int ret;

	if (into) {
		ret = chunk_bytes(s, c, &r, &l);
		if (!ret)
			ret = grist_chunk_decode_values_into(dec, l->base, r->offset, (size_t)l->got, cr->begin, cr->end,
							     chunk_path(s, cr), into, (size_t)cs->decoded_size, &out);
		if (!ret)
			ret = chunk_records_check(s, cr, &out);
	} else {
		ret = decode_chunk(s, c, dec, grist_chunk_decode_values, &out);
	}
	if (ret)
		return ret;
	if (out.decoded_data_size != cs->decoded_size)
		return grist_fail_at(-EBADMSG, chunk_path(s, cr), cr->begin,
				     "chunk changed while it was read (%llu decoded bytes, then %llu)",
				     (unsigned long long)cs->decoded_size, (unsigned long long)out.decoded_data_size);
	ty->chunks++;
	ty->bytes += out.decoded_data_size;
	lap(&ty->t, &ty->decode);
	if (!into) {
		/* decoded into scratch: the copy into the rows is assembly time */
		end = s->pl->rows + cr->rows_end;
		span = s->d->spans + cr->rows_begin;
		for (row = s->pl->rows + cr->rows_begin; row < end; row++, span++)
			grist_slot_fill_row(s->in->slot, L, (size_t)s->d->row_place[row->item],
					    out.values + span->value_begin, (size_t)span->len);
		lap(&ty->t, &ty->assemble);
	}
	cs->filled = true;
	s->d->nfilled++;
	/* streamed: the region's space goes back to the arena once its last chunk is out */
	if (s->pl->streamed && --s->d->region_left[cr->region] == 0)
		grist_async_reads_release_region(s->in->reader, s->in->reads, cr->region);
	/* between chunks, the worker takes the reads that landed meanwhile and refills the ring */
	if (ty->t >= s->in->tend_at) {
		*now = ty->t;
		return GRIST_ASYNC_YIELD;
	}
	return 0;
}

/*
 * The sizes pass is the first to touch a chunk's bytes, and shuffled chunks are far
 * apart (with mmap, far apart in the page cache): without help each one costs a cache
 * (and often a TLB) miss before its header can be checked. Regions this far ahead in
 * landing order get their first chunk's header and sizes pulled in meanwhile.
 */
#define SIZES_PREFETCH 4

/*
 * Inlined by force: a function that only loads and prefetches is "pure" to GCC, and a
 * call to a pure function whose result is unused is dropped, prefetches and all (the
 * sizes pass then took 12-14% more CPU on mapped group_size 1 data, medians of
 * alternating runs).
 */
static inline __attribute__((always_inline)) void prefetch_region(const struct step *s, uint32_t ri)
{
	const struct async_region *r = &s->pl->regions[ri];
	const uint8_t *p = s->rd->land[ri].base + (s->pl->chunks[s->pl->order[r->order_begin]].begin - r->offset);

	__builtin_prefetch(p);
	__builtin_prefetch(p + 64);
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
static int advance_by_chunk(const struct step *s, uint64_t *now)
{
	const struct grist_engine_params *p = s->in->p;
	const struct async_plan *pl = s->pl;
	struct async_decode *d = s->d;
	struct grist_chunk_decoder *dec = s->dc->slots[0].dec;
	struct tally ty = { .t = grist_now_ns() };
	struct grist_decoded_chunk out;
	struct grist_map_input in;
	const struct async_row *row, *end;
	struct async_span *span;
	uint32_t c, k;
	bool shaping;
	int ret = 0;

	for (;;) {
		while (d->nsized < s->rd->nlanded) {
			const struct async_region *r;

			if (d->nsized + SIZES_PREFETCH < s->rd->nlanded)
				prefetch_region(s, s->rd->landed[d->nsized + SIZES_PREFETCH]);
			r = &pl->regions[s->rd->landed[d->nsized++]];

			for (k = r->order_begin; k < r->order_end; k++) {
				c = pl->order[k];
				ret = decode_chunk(s, c, dec, grist_chunk_decode_sizes, &out);
				if (ret)
					goto out;
				d->chunks[c].decoded_size = out.decoded_data_size;
				end = pl->rows + pl->chunks[c].rows_end;
				span = d->spans + pl->chunks[c].rows_begin;
				for (row = pl->rows + pl->chunks[c].rows_begin; row < end; row++, span++) {
					span->value_begin = out.offsets[row->record_in_chunk];
					span->len = out.offsets[row->record_in_chunk + 1] - span->value_begin;
					d->row_place[row->item] = span->len;
				}
			}
		}
		/* laying rows out is assembly, like copying them in */
		shaping = d->shaped < pl->nitems && d->row_place[d->shaped] != ROW_UNKNOWN;
		if (shaping)
			lap(&ty.t, &ty.decode);
		while (d->shaped < pl->nitems && d->row_place[d->shaped] != ROW_UNKNOWN) {
			const struct async_item *it = &pl->items[d->shaped];
			size_t dst;

			in = (struct grist_map_input){ .len = (size_t)d->row_place[d->shaped], .index = it->it.record,
						       .dataset = it->it.component, .epoch = it->it.epoch };
			ret = grist_slot_shape_row(s->in->slot, p->layout, &in, it->j, &dst);
			if (ret) {
				ret = grist_engine_record_error(p->sources, p->num_sources, it->it.component, it->it.record,
								ret);
				goto out;
			}
			d->row_place[d->shaped++] = dst;
		}
		if (shaping)
			lap(&ty.t, &ty.assemble);
		while (d->fill_next < pl->nchunks) {
			c = pl->fill_order[d->fill_next];
			if (pl->rows[pl->chunks[c].rows_end - 1].item >= d->shaped)
				break; /* a row of it has no place yet */
			/*
			 * Once every row has its place, chunks in a read buffer go in file order
			 * (below); mapped ones stay in stream order, which writes the slot front to
			 * back (they lie scattered over the page cache either way). Measured at
			 * group_size 1: stream order saves 3% of the CPU per record when mapped,
			 * and costs 3% when read into a buffer. A streamed unit keeps this order to
			 * the end: its regions are given back in it.
			 */
			if (d->shaped == pl->nitems && !pl->streamed &&
			    !grist_async_file(s->in->files, pl->chunks[c].component, pl->chunks[c].file)->map)
				break;
			d->fill_next++;
			ret = fill_chunk(s, c, &ty, now);
			if (ret)
				goto out;
		}
		for (; d->shaped == pl->nitems && d->file_next < pl->nchunks; d->file_next++) {
			c = pl->order[d->file_next];
			if (d->chunks[c].filled)
				continue;
			ret = fill_chunk(s, c, &ty, now);
			if (ret)
				goto out;
		}
		if (d->nfilled == pl->nchunks) {
			grist_slot_fill_done();
			ret = 1;
			break;
		}
		if (d->nsized == s->rd->nlanded)
			break; /* waits for a read */
	}
out:
	lap(&ty.t, &ty.decode);
	grist_counter_add(&s->dc->decode_ns, ty.decode);
	grist_counter_add(&s->dc->assemble_ns, ty.assemble);
	grist_counter_add(&s->dc->chunks_decoded, ty.chunks);
	grist_counter_add(&s->dc->bytes_decoded, ty.bytes);
	return ret;
}

int grist_async_decode_step(struct async_decoder *dc, struct async_decode *d, const struct async_decode_input *in,
			    uint64_t *now)
{
	const struct step s = { .dc = dc, .d = d, .in = in, .pl = in->plan, .rd = in->reads };

	return in->p->layout->map ? advance_in_order(&s, now) : advance_by_chunk(&s, now);
}

int grist_async_decode_prepare(struct async_decode *d, const struct async_plan *pl, bool map)
{
	size_t i;
	int ret;

	d->nsized = d->shaped = d->nfilled = d->fill_next = d->file_next = 0;
	ret = grist_array_reserve((void **)&d->chunks, &d->chunks_cap, pl->nchunks, sizeof(*d->chunks));
	if (ret)
		return ret;
	for (i = 0; i < pl->nchunks; i++)
		d->chunks[i] = (struct async_chunk_state){ .decoder = -1 };
	if (map)
		return 0;
	ret = grist_array_reserve((void **)&d->spans, &d->spans_cap, pl->nitems, sizeof(*d->spans));
	if (!ret)
		ret = grist_array_reserve((void **)&d->row_place, &d->row_place_cap, pl->nitems, sizeof(*d->row_place));
	if (ret)
		return ret;
	for (i = 0; i < pl->nitems; i++)
		d->row_place[i] = ROW_UNKNOWN;
	if (!pl->streamed)
		return 0;
	ret = grist_array_reserve((void **)&d->region_left, &d->region_left_cap, pl->nregions, sizeof(*d->region_left));
	if (ret)
		return ret;
	for (i = 0; i < pl->nregions; i++)
		d->region_left[i] = pl->regions[i].order_end - pl->regions[i].order_begin;
	return 0;
}

void grist_async_decode_free(struct async_decode *d)
{
	free(d->chunks);
	free(d->spans);
	free(d->row_place);
	free(d->region_left);
}

int grist_async_decoder_init(struct async_decoder *dc, size_t nslots, bool check_data)
{
	size_t i;
	int ret;

	dc->slots = calloc(nslots, sizeof(*dc->slots));
	if (!dc->slots)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	dc->nslots = nslots;
	for (i = 0; i < nslots; i++) {
		ret = grist_chunk_decoder_create(&dc->slots[i].dec);
		if (ret)
			return ret;
		grist_chunk_decoder_check_data(dc->slots[i].dec, check_data);
	}
	return 0;
}

void grist_async_decoder_free(struct async_decoder *dc)
{
	for (size_t i = 0; dc->slots && i < dc->nslots; i++)
		grist_chunk_decoder_destroy(dc->slots[i].dec);
	free(dc->slots);
}

void grist_async_decoder_next_unit(struct async_decoder *dc)
{
	dc->generation++;
}

void grist_async_decoder_stats(struct async_decoder *dc, struct grist_loader_stats *out)
{
	out->chunks_decoded += grist_counter_read(&dc->chunks_decoded);
	out->bytes_decoded += grist_counter_read(&dc->bytes_decoded);
	out->decode_ns += grist_counter_read(&dc->decode_ns);
	out->assemble_ns += grist_counter_read(&dc->assemble_ns);
}
