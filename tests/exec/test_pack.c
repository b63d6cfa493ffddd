/* Tests for sequence packing: Grain's rows on known streams, checkpoints at every batch, errors, the loader path. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "exec/pack.h"
#include "grist/error.h"
#include "grist/format.h"
#include "grist/loader.h"

/* ---- a fake source: records with positions (gaps stand for filtered items), in slots of a few records ---- */

struct rec {
	uint8_t *data;
	size_t len;
	uint64_t position;
};

struct fake {
	const struct rec *recs;
	size_t n, next, per_slot;
	uint64_t end;        /* position after the last item */
	struct grist_layout layout;
	struct grist_slot slots[4];
	bool busy[4];
	int errors;          /* record_error calls */
	uint32_t err_dataset;
	uint64_t err_record;
};

static int fake_pull(void *ctx, struct grist_slot **out)
{
	struct fake *f = ctx;
	struct grist_map_input in = { 0 };
	struct grist_slot *s = NULL;
	size_t i;

	*out = NULL;
	if (f->next >= f->n)
		return 0;
	for (i = 0; i < 4; i++)
		if (!f->busy[i]) {
			s = &f->slots[i];
			f->busy[i] = true;
			break;
		}
	assert_non_null(s);
	grist_slot_reset(s);
	while (s->count < f->per_slot && f->next < f->n) {
		const struct rec *r = &f->recs[f->next];

		in.data = r->data;
		in.len = r->len;
		in.index = f->next;
		in.dataset = 3;
		assert_int_equal(grist_slot_add(s, &f->layout, &in, r->position), 1);
		f->next++;
	}
	s->stream_end = f->next < f->n ? f->recs[f->next].position : f->end;
	assert_int_equal(grist_slot_publish(s, &f->layout, 0), 0);
	*out = s;
	return 0;
}

static void fake_release(void *ctx, struct grist_slot *s)
{
	struct fake *f = ctx;

	f->busy[s - f->slots] = false;
}

static int fake_record_error(void *ctx, uint32_t dataset, uint64_t record, int code)
{
	struct fake *f = ctx;

	f->errors++;
	f->err_dataset = dataset;
	f->err_record = record;
	return code;
}

static void fake_init(struct fake *f, const struct rec *recs, size_t n, size_t per_slot, uint64_t end)
{
	size_t i;

	memset(f, 0, sizeof(*f));
	f->recs = recs;
	f->n = n;
	f->per_slot = per_slot;
	f->end = end;
	f->layout.kind = GRIST_LAYOUT_RAGGED;
	f->layout.batch_size = per_slot;
	for (i = 0; i < 4; i++)
		assert_int_equal(grist_slot_init(&f->slots[i], per_slot, 0), 0);
}

/* Start the source at shard position @from (the first record at or after it). */
static void fake_seek(struct fake *f, uint64_t from)
{
	f->next = 0;
	while (f->next < f->n && f->recs[f->next].position < from)
		f->next++;
}

static void fake_free(struct fake *f)
{
	size_t i;

	for (i = 0; i < 4; i++)
		grist_slot_free(&f->slots[i]);
}

static struct grist_packer *packer_at(struct fake *f, const struct grist_pack_params *p,
				      const struct grist_pack_resume *at)
{
	const struct grist_pack_source src = {
		.pull = fake_pull, .release = fake_release, .record_error = fake_record_error, .ctx = f,
	};
	struct grist_packer *pk;

	fake_seek(f, at->position);
	assert_int_equal(grist_packer_create(p, &src, at, &pk), 0);
	return pk;
}

static struct grist_packer *packer(struct fake *f, const struct grist_pack_params *p, uint64_t pos, uint64_t skip)
{
	return packer_at(f, p, &(struct grist_pack_resume){ .position = pos, .skip = skip });
}

/* Byte records from a list of token lists (one-byte tokens), -1 ends a record, -2 ends the list. */
static size_t byte_records(const int *spec, struct rec *out, uint8_t *pool)
{
	size_t n = 0, at = 0;

	out[0].data = pool;
	out[0].len = 0;
	for (; *spec != -2; spec++) {
		if (*spec == -1) {
			out[n].position = n;
			n++;
			out[n].data = pool + at;
			out[n].len = 0;
			continue;
		}
		pool[at++] = (uint8_t)*spec;
		out[n].len++;
	}
	return n;
}

/* All rows of one packer run, flattened: per row L tokens (one byte each), L ids, L positions. */
struct rows {
	uint32_t *v;
	size_t n, cap, batches;
	struct grist_pack_resume after[256];
	uint64_t pos[256], skip[256], rows_after[256];
};

static void rows_add(struct rows *r, uint32_t x)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 1024;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	r->v[r->n++] = x;
}

static int drain(struct grist_packer *pk, size_t L, unsigned tb, struct rows *r)
{
	struct grist_slot *s;
	uint64_t tokens, rows = 0;
	size_t i, k;
	int ret;

	memset(r, 0, sizeof(*r));
	for (;;) {
		ret = grist_packer_next(pk, &s);
		if (ret || !s)
			return ret;
		const struct grist_batch *b = &s->batch;

		for (i = 0; i < b->num_rows; i++) {
			for (k = 0; k < L; k++) {
				uint32_t t = 0;

				memcpy(&t, b->data + (i * L + k) * tb, tb);
				rows_add(r, t);
			}
			for (k = 0; k < L; k++)
				rows_add(r, b->segment_ids[i * L + k]);
			for (k = 0; k < L; k++)
				rows_add(r, b->positions[i * L + k]);
		}
		assert_null(b->indices);
		assert_int_equal(b->bytes, b->num_rows * L * tb);
		rows += b->num_rows;
		if (r->batches < 256) {
			grist_packer_batch_info(s, &r->after[r->batches], &tokens);
			r->pos[r->batches] = r->after[r->batches].position;
			r->skip[r->batches] = r->after[r->batches].skip;
			r->rows_after[r->batches] = rows;
		}
		r->batches++;
		grist_packer_release(pk, s);
	}
}

static void expect_rows(const struct rows *r, const uint32_t *want, size_t nrows, size_t L)
{
	assert_int_equal(r->n, nrows * 3 * L);
	assert_memory_equal(r->v, want, r->n * sizeof(uint32_t));
}

/*
 * Pack the records of @spec (see byte_records()) with @p, fed @per_slot records per engine
 * batch, and check the rows against @want (@nrows rows); @r keeps the checkpoints.
 */
static void run_example(const int *spec, const struct grist_pack_params *p, size_t per_slot, const uint32_t *want,
			size_t nrows, struct rows *r)
{
	struct rec recs[16];
	uint8_t pool[64];
	struct fake f;
	struct grist_packer *pk;
	size_t n = byte_records(spec, recs, pool);

	fake_init(&f, recs, n, per_slot, n);
	pk = packer(&f, p, 0, 0);
	assert_int_equal(drain(pk, p->length, 1, r), 0);
	expect_rows(r, want, nrows, p->length);
	assert_int_equal(grist_packer_end_position(pk), n);
	grist_packer_destroy(pk);
	free(r->v);
	fake_free(&f);
}

/* Checked against grain.experimental.FirstFitPackIterDataset(num_packing_bins=2, shuffle_bins=False). */
static void test_first_fit_grain_example(void **state)
{
	static const int spec[] = { -1, 1, 2, -1, 3, 4, 5, 6, -1, 7, -1, -1, 8, 9, 10, 11, 12, -1, -2 };
	static const uint32_t want[] = {
		1, 2, 7, 0, 0, /**/ 2, 2, 3, 0, 0, /**/ 0, 1, 0, 0, 0,
		3, 4, 5, 6, 0, /**/ 1, 1, 1, 1, 0, /**/ 0, 1, 2, 3, 0,
		8, 9, 10, 11, 12, /**/ 1, 1, 1, 1, 1, /**/ 0, 1, 2, 3, 4,
	};
	struct grist_pack_params p = { GRIST_PACK_FIRST_FIT, 5, 2, 1, 1, false, 0, false, 0 };
	struct rows r;

	(void)state;
	run_example(spec, &p, 2, want, 3, &r);
	/* one row per batch: mid-round (round start 0, 1 row out), then the next round's start, then the end */
	assert_int_equal(r.batches, 3);
	assert_int_equal(r.pos[0], 0);
	assert_int_equal(r.skip[0], 1);
	assert_int_equal(r.pos[1], 5);
	assert_int_equal(r.skip[1], 0);
	assert_int_equal(r.pos[2], 6);
	assert_int_equal(r.skip[2], 0);
}

/*
 * Checked against grain.experimental.BestFitPackIterDataset(num_packing_bins=2, shuffle_bins=False): [7] goes
 * to the fuller row (first-fit would put it in row 0), the empty record too. Then the same records cut
 * into pieces of 3 (MaxText's TokenizeAndChunk: an empty record has none), packed by Grain the same way:
 * the second round begins at piece 1 of record 5, and its checkpoint says so.
 */
static void test_best_fit_grain_example(void **state)
{
	static const int spec[] = { -1, 1, 2, -1, 3, 4, 5, 6, -1, 7, -1, -1, 8, 9, 10, 11, 12, -1, 13, 14, -1, -2 };
	static const uint32_t want[] = {
		1, 2, 0, 0, 0, /**/ 2, 2, 0, 0, 0, /**/ 0, 1, 0, 0, 0,
		3, 4, 5, 6, 7, /**/ 1, 1, 1, 1, 2, /**/ 0, 1, 2, 3, 0,
		8, 9, 10, 11, 12, /**/ 1, 1, 1, 1, 1, /**/ 0, 1, 2, 3, 4,
		13, 14, 0, 0, 0, /**/ 1, 1, 0, 0, 0, /**/ 0, 1, 0, 0, 0,
	};
	static const uint32_t pieces[] = {
		1, 2, 3, 4, 5, /**/ 1, 1, 2, 2, 2, /**/ 0, 1, 0, 1, 2,
		6, 7, 8, 9, 10, /**/ 1, 2, 3, 3, 3, /**/ 0, 0, 0, 1, 2,
		11, 12, 13, 14, 0, /**/ 1, 1, 2, 2, 0, /**/ 0, 1, 0, 1, 0,
	};
	struct grist_pack_params p = { GRIST_PACK_BEST_FIT, 5, 2, 1, 1, false, 0, false, 0 };
	struct rows r;

	(void)state;
	run_example(spec, &p, 3, want, 4, &r);
	p.piece = 3;
	run_example(spec, &p, 3, pieces, 3, &r);
	assert_int_equal(r.batches, 3);
	assert_int_equal(r.after[0].position, 1); /* record 0 has no piece: the round began with record 1 */
	assert_int_equal(r.after[0].piece, 0);
	assert_int_equal(r.after[0].skip, 1);
	assert_int_equal(r.after[1].position, 5);
	assert_int_equal(r.after[1].piece, 1);
	assert_int_equal(r.after[1].skip, 0);
	assert_int_equal(r.after[2].position, 7);
	assert_int_equal(r.after[2].piece, 0);
}

/* Checked against grain.experimental.ConcatThenSplitIterDataset: empties take ids, a split piece restarts. */
static void test_concat_split_grain_example(void **state)
{
	static const int spec[] = { 1, 2, 3, -1, 4, 5, 6, -1, -1, 7, -1, -1, 8, 9, 10, 11, -1, -1, -2 };
	static const uint32_t want[] = {
		1, 2, 3, /**/ 1, 1, 1, /**/ 0, 1, 2,
		4, 5, 6, /**/ 1, 1, 1, /**/ 0, 1, 2,
		7, 8, 9, /**/ 1, 3, 3, /**/ 0, 0, 1,
		10, 11, 0, /**/ 1, 1, 0, /**/ 0, 1, 0,
	};
	struct grist_pack_params p = { GRIST_PACK_CONCAT_SPLIT, 3, 0, 1, 3, false, 0, false, 0 };
	struct rows r;

	(void)state;
	run_example(spec, &p, 3, want, 4, &r);
	/* batch 0 (3 rows) ends inside record 5: its first 2 tokens are out */
	assert_int_equal(r.pos[0], 5);
	assert_int_equal(r.skip[0], 2);
	/* drop_remainder drops the short last batch of one row */
	p.drop_remainder = true;
	run_example(spec, &p, 3, want, 3, &r);
	/* Grain's docstring example (r1..r6 of 3, 6, 2, 5, 6, 4 tokens, L = 6), split_full_length_features=True */
	{
		static const int doc[] = { 1, 1, 1, -1, 2, 2, 2, 2, 2, 2, -1, 3, 3, -1, 4, 4, 4, 4, 4, -1,
					   5, 5, 5, 5, 5, 5, -1, 6, 6, 6, 6, -1, -2 };
		static const uint32_t doc_want[] = {
			1, 1, 1, 2, 2, 2, /**/ 1, 1, 1, 2, 2, 2, /**/ 0, 1, 2, 0, 1, 2,
			2, 2, 2, 3, 3, 4, /**/ 1, 1, 1, 2, 2, 3, /**/ 0, 1, 2, 0, 1, 0,
			4, 4, 4, 4, 5, 5, /**/ 1, 1, 1, 1, 2, 2, /**/ 0, 1, 2, 3, 0, 1,
			5, 5, 5, 5, 6, 6, /**/ 1, 1, 1, 1, 2, 2, /**/ 0, 1, 2, 3, 0, 1,
			6, 6, 0, 0, 0, 0, /**/ 1, 1, 0, 0, 0, 0, /**/ 0, 1, 0, 0, 0, 0,
		};
		struct grist_pack_params q = { GRIST_PACK_CONCAT_SPLIT, 6, 0, 1, 2, false, 0, false, 0 };

		run_example(doc, &q, 4, doc_want, 5, &r);
	}
}

/*
 * Checked against grain.experimental.ConcatThenSplitIterDataset(bos_handling=REPLACE_FIRST_TOKEN_WITH_BOS,
 * bos_token_id=99, bos_features={'t'}): every segment's first cell is BOS (an empty one's too: the next
 * segment's cell, or the last row's padding); ids and positions as without it.
 */
static void test_concat_split_bos_grain_example(void **state)
{
	static const int spec[] = { 1, 2, 3, -1, 4, -1, -1, 5, 6, 7, 8, -1, -1, 9, -1, 10, -1, -1, -2 };
	static const uint32_t want[] = {
		99, 2, 3, /**/ 1, 1, 1, /**/ 0, 1, 2,
		99, 99, 6, /**/ 1, 3, 3, /**/ 0, 0, 1,
		99, 8, 99, /**/ 1, 1, 3, /**/ 0, 1, 0,
		99, 99, 0, /**/ 1, 0, 0, /**/ 0, 0, 0,
	};
	struct grist_pack_params p = { GRIST_PACK_CONCAT_SPLIT, 3, 0, 1, 2, false, 0, true, 99 };
	struct rows r;

	(void)state;
	run_example(spec, &p, 3, want, 4, &r);
	/* an empty sequence in a full row has no cell for its BOS (Grain raises IndexError there) */
	{
		static const int full[] = { 1, 2, 3, -1, -1, 4, -1, -2 };
		static const uint32_t full_want[] = {
			99, 2, 3, /**/ 1, 1, 1, /**/ 0, 1, 2,
			99, 0, 0, /**/ 1, 0, 0, /**/ 0, 0, 0,
		};

		run_example(full, &p, 3, full_want, 2, &r);
	}
}

/* Random streams with gaps: restoring from every batch's checkpoint gives exactly the remaining rows. */
static void check_resume_everywhere(const struct grist_pack_params *p, uint64_t seed)
{
	size_t n = 300, i, k, at = 0, L = p->length;
	struct rec *recs = calloc(n, sizeof(*recs));
	uint8_t *pool = malloc(n * 3 * L * 4), lenbyte;
	struct rows full, rest;
	struct grist_packer *pk;
	uint64_t pos = 0;
	struct fake f;

	assert_non_null(recs);
	assert_non_null(pool);
	for (i = 0; i < n; i++) {
		t_fill(&lenbyte, 1, seed * 1000 + i);
		recs[i].len = (i % 9 == 4) ? 0 : (lenbyte % (3 * L / 2 + 2)) * p->token_bytes; /* some over-long */
		recs[i].data = pool + at;
		t_fill(recs[i].data, recs[i].len, seed * 7919 + i);
		at += recs[i].len;
		pos += 1 + (lenbyte % 5 == 0); /* a gap: a filtered item */
		recs[i].position = pos;
	}
	fake_init(&f, recs, n, 7, pos + 2);
	pk = packer(&f, p, 0, 0);
	assert_int_equal(drain(pk, L, p->token_bytes, &full), 0);
	grist_packer_destroy(pk);
	assert_true(full.batches > 10 && full.batches < 256);
	for (k = 0; k < full.batches; k++) {
		pk = packer_at(&f, p, &full.after[k]);
		assert_int_equal(drain(pk, L, p->token_bytes, &rest), 0);
		assert_int_equal(rest.n, full.n - full.rows_after[k] * 3 * L);
		assert_memory_equal(rest.v, full.v + full.rows_after[k] * 3 * L, rest.n * sizeof(uint32_t));
		grist_packer_destroy(pk);
		free(rest.v);
	}
	free(full.v);
	fake_free(&f);
	free(recs);
	free(pool);
}

static void test_resume_everywhere(void **state)
{
	static const struct grist_pack_params cases[] = {
		{ GRIST_PACK_FIRST_FIT, 16, 5, 1, 2, false, 0, false, 0 },
		{ GRIST_PACK_FIRST_FIT, 16, 5, 2, 7, false, 0, false, 0 },
		{ GRIST_PACK_FIRST_FIT, 33, 1, 4, 1, false, 0, false, 0 },
		{ GRIST_PACK_FIRST_FIT, 8, 3, 1, 3, true, 0, false, 0 },
		{ GRIST_PACK_CONCAT_SPLIT, 16, 0, 1, 2, false, 0, false, 0 },
		{ GRIST_PACK_CONCAT_SPLIT, 7, 0, 2, 3, false, 0, false, 0 },
		{ GRIST_PACK_CONCAT_SPLIT, 40, 0, 4, 1, true, 0, false, 0 },
		{ GRIST_PACK_CONCAT_SPLIT, 2, 0, 1, 4, false, 0, false, 0 }, /* records up to 4 rows long */
		{ GRIST_PACK_BEST_FIT, 16, 5, 1, 2, false, 0, false, 0 },
		{ GRIST_PACK_BEST_FIT, 33, 1, 4, 1, false, 0, false, 0 },
		{ GRIST_PACK_BEST_FIT, 8, 3, 2, 3, true, 0, false, 0 },
		/* records cut into pieces: rounds begin inside records */
		{ GRIST_PACK_FIRST_FIT, 16, 5, 1, 2, false, 5, false, 0 },
		{ GRIST_PACK_BEST_FIT, 16, 4, 2, 3, false, 7, false, 0 },
		{ GRIST_PACK_FIRST_FIT, 8, 3, 1, 2, false, 11, false, 0 }, /* pieces longer than a row: cut to it */
		{ GRIST_PACK_CONCAT_SPLIT, 16, 0, 1, 2, false, 5, false, 0 },
		{ GRIST_PACK_CONCAT_SPLIT, 7, 0, 4, 3, false, 16, false, 0 },
		/* BOS replacement: a resumed row that begins inside a record gets its BOS again */
		{ GRIST_PACK_CONCAT_SPLIT, 7, 0, 2, 3, false, 0, true, 0xbeef },
		{ GRIST_PACK_CONCAT_SPLIT, 16, 0, 4, 2, false, 5, true, 7 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_resume_everywhere(&cases[i], i + 1);
}

static void test_errors(void **state)
{
	static const int spec[] = { 1, 2, -1, 3, 4, 5, -1, -2 };
	struct grist_pack_params p = { GRIST_PACK_FIRST_FIT, 8, 2, 2, 2, false, 0, false, 0 };
	const struct grist_pack_source src = { fake_pull, fake_release, fake_record_error, NULL };
	struct grist_slot *s;
	struct grist_packer *pk;
	struct rec recs[4];
	uint8_t pool[16];
	struct fake f;
	size_t n = byte_records(spec, recs, pool);

	(void)state;
	/* a 3-byte record of 2-byte tokens names its dataset and record */
	fake_init(&f, recs, n, 4, n);
	pk = packer(&f, &p, 0, 0);
	assert_int_equal(grist_packer_next(pk, &s), -EMSGSIZE);
	assert_int_equal(f.errors, 1);
	assert_int_equal(f.err_dataset, 3);
	assert_int_equal(f.err_record, 1);
	assert_non_null(strstr(grist_last_error(), "record 1: 3 bytes is not a whole number of 2-byte tokens"));
	grist_packer_destroy(pk);

	/* parameters */
	p.token_bytes = 3;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "token width 3"));
	p.token_bytes = 0;
	assert_int_equal(grist_packer_create(&p, &src, &(struct grist_pack_resume){ 0 }, &pk), -EINVAL);
	p.token_bytes = 8;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	p.token_bytes = 4;
	p.length = 0;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	p.length = 8;
	p.bins = 0;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	p.bins = 1000;
	assert_int_equal(grist_packer_check(&p, 1000 * 8 * 12 - 1), -EINVAL);
	assert_int_equal(grist_packer_check(&p, 1000 * 8 * 12), 0);
	p.batch_rows = 0;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	p.batch_rows = 2;
	p.mode = (enum grist_pack_mode)7;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	/* BOS replacement: concat-split's, and an id the token width holds */
	p.mode = GRIST_PACK_FIRST_FIT;
	p.bos = true;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "concat-split only"));
	p.mode = GRIST_PACK_CONCAT_SPLIT;
	p.bos_id = UINT32_MAX;
	assert_int_equal(grist_packer_check(&p, 1 << 20), 0);
	p.token_bytes = 1;
	p.bos_id = 256;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "BOS id 256 does not fit a 1-byte token"));
	p.bos_id = 255;
	assert_int_equal(grist_packer_check(&p, 1 << 20), 0);
	p.token_bytes = 2;
	p.bos_id = 65536;
	assert_int_equal(grist_packer_check(&p, 1 << 20), -EINVAL);
	p.bos = false;
	p.bos_id = 0;
	p.token_bytes = 4;

	/* a resume state that does not fit the records */
	p.mode = GRIST_PACK_FIRST_FIT;
	p.token_bytes = 1;
	assert_int_equal(grist_packer_create(&p, &src, &(struct grist_pack_resume){ .skip = 1000 }, &pk), -EBADMSG);
	/* a piece needs pieces, and rounds */
	assert_int_equal(grist_packer_create(&p, &src, &(struct grist_pack_resume){ .piece = 1 }, &pk), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "does not cut records into pieces"));
	p.piece = 1;
	pk = packer_at(&f, &p, &(struct grist_pack_resume){ .piece = 2 }); /* record 0 has 2 pieces: 0 and 1 */
	assert_int_equal(grist_packer_next(pk, &s), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "began at piece 2 of the record at position 0"));
	grist_packer_destroy(pk);
	pk = packer_at(&f, &p, &(struct grist_pack_resume){ .position = 2, .piece = 1 }); /* past the end */
	assert_int_equal(grist_packer_next(pk, &s), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "the stream ends there"));
	grist_packer_destroy(pk);
	p.piece = 0;
	pk = packer(&f, &p, 0, 999); /* 999 < bins, but the round at 0 has one row */
	assert_int_equal(grist_packer_next(pk, &s), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "resume state"));
	grist_packer_destroy(pk);
	p.mode = GRIST_PACK_CONCAT_SPLIT;
	pk = packer(&f, &p, 0, 2); /* record 0 has 2 tokens: none can be left after 2 */
	assert_int_equal(grist_packer_next(pk, &s), -EBADMSG);
	grist_packer_destroy(pk);
	pk = packer(&f, &p, 5, 1); /* past the end */
	assert_int_equal(grist_packer_next(pk, &s), -EBADMSG);
	grist_packer_destroy(pk);
	fake_free(&f);
}

/* ---- the loader path: map/filter before the packer, checkpoints through the loader ---- */

static char *dir;
static const char *file_path;

static int setup(void **state)
{
	struct grist_writer *w;
	uint8_t buf[600];
	uint8_t len;
	size_t i;

	(void)state;
	dir = t_mkdtemp();
	file_path = strdup(t_path(dir, "tokens.array_record"));
	assert_int_equal(grist_writer_open(file_path, "group_size:4,zstd:1", &w), 0);
	for (i = 0; i < 500; i++) {
		t_fill(&len, 1, i);
		t_fill(buf, 600, i + 99);
		assert_int_equal(grist_writer_write(w, buf, (i % 13 == 5) ? 0 : (size_t)len * 2), 0);
	}
	assert_int_equal(grist_writer_close(w), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free((void *)file_path);
	t_rmtree(dir);
	return 0;
}

/* Drop every record whose index is a multiple of 3; reverse the token order of the rest. */
static int map_filter_reverse(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t cap, size_t *len)
{
	size_t i, n = in->len / 2;

	(void)ctx;
	if (in->index % 3 == 0)
		return 0;
	assert_true(in->len <= cap);
	for (i = 0; i < n; i++)
		memcpy(out + 2 * i, in->data + 2 * (n - 1 - i), 2);
	*len = in->len;
	return 1;
}

static void loader_config(struct t_one_file *o, enum grist_pack_mode mode)
{
	struct grist_loader_config *c = &o->c;

	t_one_file_init(o, file_path);
	c->seed = 17;
	c->epochs = 2;
	c->batch_size = 3;
	c->map = map_filter_reverse;
	c->map_id = 5;
	c->pack = mode;
	if (mode == GRIST_PACK_NONE)
		return; /* pack sizes without a pack mode are refused */
	c->pack_length = 64;
	c->pack_bins = mode != GRIST_PACK_CONCAT_SPLIT ? 7 : 0; /* concat-split refuses bins */
	c->pack_token_bytes = 2;
}

/* Every packed batch of a loader run, flattened as in drain(). */
static void loader_rows(const struct grist_loader_config *c, struct rows *r, size_t stop, uint8_t *st, size_t *st_len)
{
	struct grist_loader *l;
	struct grist_batch *b;
	size_t i, k, L = c->pack_length;
	struct grist_state_ex from = { 0 };

	memset(r, 0, sizeof(*r));
	if (c->resume_state) /* a resumed loader numbers its batches on from the state's */
		assert_int_equal(grist_state_decode_ex(c->resume_state, c->resume_state_len, &from), 0);
	assert_int_equal(grist_loader_create(c, &l), 0);
	while (!stop || r->batches < stop) {
		assert_int_equal(grist_loader_next(l, &b), 0);
		if (!b)
			break;
		assert_int_equal(b->sequence, r->batches + from.state.batches);
		for (i = 0; i < b->num_rows; i++) {
			for (k = 0; k < L; k++)
				rows_add(r, (uint32_t)b->data[(i * L + k) * 2] | (uint32_t)b->data[(i * L + k) * 2 + 1] << 8);
			for (k = 0; k < L; k++)
				rows_add(r, b->segment_ids[i * L + k]);
			for (k = 0; k < L; k++)
				rows_add(r, b->positions[i * L + k]);
		}
		r->batches++;
		grist_loader_release(l, b);
	}
	if (st)
		assert_int_equal(grist_loader_save_state(l, st, GRIST_STATE_MAX, st_len), 0);
	grist_loader_destroy(l);
}

/* The packer over the unpacked loader's records (the same map and filter) gives the packed loader's rows. */
static void test_loader_matches_packer(void **state)
{
	enum grist_pack_mode modes[] = { GRIST_PACK_FIRST_FIT, GRIST_PACK_CONCAT_SPLIT, GRIST_PACK_BEST_FIT };
	struct t_one_file o;
	struct grist_loader *l;
	struct grist_batch *b;
	struct rows want, got;
	struct rec *recs = calloc(2000, sizeof(*recs));
	uint8_t *pool = malloc(2000 * 512);
	size_t n = 0, at = 0, i, m;
	struct fake f;

	(void)state;
	assert_non_null(recs);
	assert_non_null(pool);
	loader_config(&o, GRIST_PACK_NONE);
	o.c.batch_size = 10;
	assert_int_equal(grist_loader_create(&o.c, &l), 0);
	while (grist_loader_next(l, &b) == 0 && b) {
		for (i = 0; i < b->num_records; i++) {
			assert_true(n < 2000);
			recs[n].len = b->offsets[i + 1] - b->offsets[i];
			recs[n].data = pool + at;
			recs[n].position = n;
			memcpy(pool + at, b->data + b->offsets[i], recs[n].len);
			at += recs[n].len;
			n++;
		}
		grist_loader_release(l, b);
	}
	grist_loader_destroy(l);
	assert_true(n > 500);
	for (m = 0; m < 3; m++) {
		struct grist_pack_params p = { modes[m], 64, 7, 2, 3, false, 0, false, 0 };
		struct grist_packer *pk;
		unsigned engine;

		fake_init(&f, recs, n, 5, n);
		pk = packer(&f, &p, 0, 0);
		assert_int_equal(drain(pk, 64, 2, &want), 0);
		grist_packer_destroy(pk);
		fake_free(&f);
		for (engine = 0; engine < 3; engine++) {
			loader_config(&o, modes[m]);
			o.c.engine = (enum grist_engine_kind)engine;
			o.c.threads = 2;
			loader_rows(&o.c, &got, 0, NULL, NULL);
			assert_int_equal(got.n, want.n);
			assert_memory_equal(got.v, want.v, got.n * sizeof(uint32_t));
			free(got.v);
		}
		free(want.v);
	}
	free(recs);
	free(pool);
}

/* Stop after 4 batches of 3 rows (inside a round of 7), save, resume: exactly the rest, on either engine. */
static void test_loader_resume(void **state)
{
	enum grist_pack_mode modes[] = { GRIST_PACK_FIRST_FIT, GRIST_PACK_CONCAT_SPLIT, GRIST_PACK_BEST_FIT };
	struct t_one_file o;
	struct rows full, head, tail;
	uint8_t st[GRIST_STATE_MAX];
	struct grist_state gs;
	size_t st_len, m;

	(void)state;
	for (m = 0; m < 3; m++) {
		loader_config(&o, modes[m]);
		loader_rows(&o.c, &full, 0, NULL, NULL);
		loader_rows(&o.c, &head, 4, st, &st_len);
		assert_int_equal(grist_state_decode(st, st_len, &gs), 0);
		assert_true(gs.flags & GRIST_STATE_PACKED);
		assert_false(gs.flags & GRIST_STATE_LOCKSTEP);
		assert_int_equal(gs.batches, 4);
		if (modes[m] != GRIST_PACK_CONCAT_SPLIT)
			assert_true(gs.pack_skip < 7);
		o.c.resume_state = st;
		o.c.resume_state_len = st_len;
		o.c.engine = m == 1 ? GRIST_ENGINE_REF : GRIST_ENGINE_URING;
		loader_rows(&o.c, &tail, 0, NULL, NULL);
		assert_int_equal(head.n + tail.n, full.n);
		assert_memory_equal(head.v, full.v, head.n * sizeof(uint32_t));
		assert_memory_equal(tail.v, full.v + head.n, tail.n * sizeof(uint32_t));
		free(full.v);
		free(head.v);
		free(tail.v);
	}
}

/*
 * Records cut into pieces of 9 tokens (best-fit): stop after 1, 2, ... batches until a round began
 * inside a record; that state is version 3, and resuming from it gives exactly the rest.
 */
static void test_loader_resume_pieces(void **state)
{
	struct t_one_file o;
	struct rows full, head, tail;
	uint8_t st[GRIST_STATE_MAX];
	struct grist_state_ex gs;
	struct grist_state old;
	size_t st_len, stop;
	bool found = false;

	(void)state;
	loader_config(&o, GRIST_PACK_BEST_FIT);
	o.c.pack_piece = 9;
	loader_rows(&o.c, &full, 0, NULL, NULL);
	for (stop = 1; stop < 40 && !found; stop++) {
		loader_rows(&o.c, &head, stop, st, &st_len);
		assert_int_equal(grist_state_decode_ex(st, st_len, &gs), 0);
		found = gs.pack_piece != 0;
		if (found) {
			assert_int_equal(st_len, GRIST_STATE_SIZE_V3);
			/* the struct grist_state of older callers has no room for the piece */
			assert_int_equal(grist_state_decode(st, st_len, &old), -EBADMSG);
			o.c.resume_state = st;
			o.c.resume_state_len = st_len;
			o.c.threads = 2;
			loader_rows(&o.c, &tail, 0, NULL, NULL);
			assert_int_equal(head.n + tail.n, full.n);
			assert_memory_equal(head.v, full.v, head.n * sizeof(uint32_t));
			assert_memory_equal(tail.v, full.v + head.n, tail.n * sizeof(uint32_t));
			free(tail.v);
		} else {
			assert_int_equal(st_len, GRIST_STATE_SIZE);
		}
		free(head.v);
	}
	assert_true(found);
	free(full.v);
	/* whole records: another fingerprint, so the pieces' checkpoint is refused */
	o.c.pack_piece = 0;
	o.c.resume_state = st;
	o.c.resume_state_len = st_len;
	{
		struct grist_loader *l;

		assert_int_equal(grist_loader_create(&o.c, &l), -ESTALE);
	}
}

static void test_loader_refuses(void **state)
{
	struct t_one_file o;
	struct grist_loader *l;

	(void)state;
	loader_config(&o, GRIST_PACK_FIRST_FIT);
	o.c.pack_token_bytes = 3;
	assert_int_equal(grist_loader_create(&o.c, &l), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "token width 3"));
	loader_config(&o, GRIST_PACK_FIRST_FIT);
	o.c.layout = GRIST_LAYOUT_FIXED;
	o.c.record_bytes = 8;
	assert_int_equal(grist_loader_create(&o.c, &l), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "ragged"));
	/* refused before any device is opened: the engine relies on it to cut a packer's units freely */
	loader_config(&o, GRIST_PACK_FIRST_FIT);
	o.c.device = "opencl";
	assert_int_equal(grist_loader_create(&o.c, &l), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "device"));
	loader_config(&o, GRIST_PACK_CONCAT_SPLIT);
	o.c.pack_length = 1 << 20;
	o.c.batch_size = 100;
	assert_int_equal(grist_loader_create(&o.c, &l), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "max_batch_bytes"));
	loader_config(&o, GRIST_PACK_FIRST_FIT);
	o.c.pack_bos = true;
	assert_int_equal(grist_loader_create(&o.c, &l), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "pack_bos applies to pack concat-split only"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_fit_grain_example),
		cmocka_unit_test(test_best_fit_grain_example),
		cmocka_unit_test(test_concat_split_grain_example),
		cmocka_unit_test(test_concat_split_bos_grain_example),
		cmocka_unit_test(test_resume_everywhere),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_loader_matches_packer),
		cmocka_unit_test(test_loader_resume),
		cmocka_unit_test(test_loader_resume_pieces),
		cmocka_unit_test(test_loader_refuses),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
