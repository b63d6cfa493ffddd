/*
 * Async engine, decoding: a unit's chunks, read into memory, become its slot's rows.
 */
#include <string.h>

#include "common/error.h"
#include "exec/engine_async_internal.h"

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

int grist_async_decode_unit(struct worker *wk, struct work *w)
{
	uint64_t t0 = grist_now_ns();
	int ret = wk->e->l->layout.map ? decode_unit_in_order(wk, w) : decode_unit_by_chunk(wk, w);

	add_relaxed(&wk->decode_ns, grist_now_ns() - t0);
	return ret;
}
