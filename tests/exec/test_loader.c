/* Tests for the loader: the async engine against the reference engine, stream semantics, layouts, maps, checkpoints, errors. */
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "common/error.h"
#include "exec/loader_internal.h"
#include "grist/format.h"
#include "grist/loader.h"
#include "grist/options.h"
#include "io/io.h"

/* ------------------------------------------------------------ datasets */

enum len_kind {
	LEN_BIG,   /* 0..5000 bytes, every 11th record empty */
	LEN_SMALL, /* 0..40 bytes */
	LEN_FIXED, /* exactly FIXED_BYTES */
	LEN_LARGE, /* 20000..219999 bytes: records spanning several 64 KiB blocks */
};

#define FIXED_BYTES 16
#define MAX_FILES 4

/* One dataset on disk; record i of it is a pure function of (seed, kind, i). */
struct ds {
	const char *paths[MAX_FILES];
	size_t npaths;
	uint64_t n;
	uint64_t seed;
	enum len_kind kind;
};

static size_t rec_len(const struct ds *d, uint64_t i)
{
	switch (d->kind) {
	case LEN_BIG:
		return i % 11 == 0 ? 0 : (size_t)((i * 7919 + d->seed) % 5001);
	case LEN_SMALL:
		return (size_t)((i * 37 + d->seed) % 41);
	case LEN_FIXED:
		break;
	case LEN_LARGE:
		return (size_t)(20000 + (i * 7919 + d->seed * 104729) % 200000);
	}
	return FIXED_BYTES;
}

static void rec_fill(const struct ds *d, uint64_t i, uint8_t *buf)
{
	t_fill(buf, rec_len(d, i), d->seed * 1000003u + i + 1);
}

static void make_ds(struct ds *d, const char *dir, const char *name, const char *options,
		    const uint64_t *counts, size_t nfiles, uint64_t seed, enum len_kind kind)
{
	static uint8_t buf[220000];
	uint64_t i = 0;
	size_t f, k;

	d->npaths = nfiles;
	d->seed = seed;
	d->kind = kind;
	d->n = 0;
	for (f = 0; f < nfiles; f++) {
		struct grist_writer *w;
		char file[128];

		snprintf(file, sizeof(file), "%s-%zu.array_record", name, f);
		d->paths[f] = strdup(t_path(dir, file));
		assert_non_null(d->paths[f]);
		assert_int_equal(grist_writer_open(d->paths[f], options, &w), 0);
		for (k = 0; k < counts[f]; k++, i++) {
			rec_fill(d, i, buf);
			assert_int_equal(grist_writer_write(w, buf, rec_len(d, i)), 0);
		}
		assert_int_equal(grist_writer_close(w), 0);
		d->n += counts[f];
	}
}

static void free_ds(struct ds *d)
{
	for (size_t f = 0; f < d->npaths; f++)
		free((void *)d->paths[f]);
}

enum {
	DS_PLAIN,  /* uncompressed, group 1, one file, big records */
	DS_ZSTD,   /* zstd, group 7, three files */
	DS_SNAPPY, /* snappy, group 64, two files, small records */
	DS_BROTLI, /* brotli, group 7, one file */
	DS_FIXED,  /* zstd, group 7, every record FIXED_BYTES */
	DS_SMALL2, /* another small-record dataset, for mixing and staleness */
	DS_LARGE,  /* uncompressed, group 1, large records (read depth) */
	DS_LARGEZ, /* zstd, group 3, two files, large records (read depth) */
	DS_ZSTD1,  /* zstd, group 1, two files: values decoded straight into the rows */
	DS_LARGE8, /* zstd, group 8, large records: units that cannot be streamed */
	NUM_DS,
};

static struct fixture {
	char *dir;
	struct ds ds[NUM_DS];
	bool direct_ok;
	char uring_why[160];
	bool uring_ok;
} fx;

static int group_setup(void **state)
{
	static const uint64_t plain[] = { 150 }, zstd[] = { 100, 57, 43 }, snappy[] = { 400, 150 },
			      brotli[] = { 120 }, fixed[] = { 130, 70 }, small2[] = { 90 }, large[] = { 41 },
			      largez[] = { 20, 13 }, zstd1[] = { 120, 80 }, large8[] = { 48 };
	int fd;

	(void)state;
	fx.dir = t_mkdtemp();
	assert_non_null(fx.dir);
	make_ds(&fx.ds[DS_PLAIN], fx.dir, "plain", "group_size:1,uncompressed", plain, 1, 1, LEN_BIG);
	make_ds(&fx.ds[DS_ZSTD], fx.dir, "zstd", "group_size:7,zstd:3", zstd, 3, 2, LEN_BIG);
	make_ds(&fx.ds[DS_SNAPPY], fx.dir, "snappy", "group_size:64,snappy", snappy, 2, 3, LEN_SMALL);
	make_ds(&fx.ds[DS_BROTLI], fx.dir, "brotli", "group_size:7,brotli:4", brotli, 1, 4, LEN_BIG);
	make_ds(&fx.ds[DS_FIXED], fx.dir, "fixed", "group_size:7,zstd:1", fixed, 2, 5, LEN_FIXED);
	make_ds(&fx.ds[DS_SMALL2], fx.dir, "small2", "group_size:5,uncompressed", small2, 1, 6, LEN_SMALL);
	make_ds(&fx.ds[DS_LARGE], fx.dir, "large", "group_size:1,uncompressed", large, 1, 7, LEN_LARGE);
	make_ds(&fx.ds[DS_LARGEZ], fx.dir, "largez", "group_size:3,zstd:1", largez, 2, 8, LEN_LARGE);
	make_ds(&fx.ds[DS_ZSTD1], fx.dir, "zstd1", "group_size:1,zstd:3", zstd1, 2, 9, LEN_BIG);
	make_ds(&fx.ds[DS_LARGE8], fx.dir, "large8", "group_size:8,zstd:1", large8, 1, 10, LEN_LARGE);
	fd = open(fx.ds[DS_PLAIN].paths[0], O_RDONLY | O_DIRECT);
	fx.direct_ok = fd >= 0;
	if (fd >= 0)
		close(fd);
	fx.uring_ok = grist_io_probe(fx.uring_why, sizeof(fx.uring_why)) == 0;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < NUM_DS; i++)
		free_ds(&fx.ds[i]);
	t_rmtree(fx.dir);
	return 0;
}

/* ------------------------------------------------------------ running a loader */

/* Everything a run delivered: each batch serialized, and the real records flattened. */
struct run {
	uint8_t *blob;
	size_t len, cap;
	size_t *boff;        /* batch b is blob[boff[b], boff[b + 1]) */
	size_t nbatches, bcap;
	uint64_t *idx;
	uint32_t *dsn;
	size_t nrec, rcap;
	size_t short_batches; /* batches with num_records < batch_size */
	int err;
	char msg[512];
};

static void put(struct run *r, const void *p, size_t n)
{
	if (r->len + n > r->cap) {
		r->cap = (r->len + n) * 2 + 4096;
		r->blob = realloc(r->blob, r->cap);
		assert_non_null(r->blob);
	}
	if (n)
		memcpy(r->blob + r->len, p, n);
	r->len += n;
}

static void run_free(struct run *r)
{
	free(r->blob);
	free(r->boff);
	free(r->idx);
	free(r->dsn);
	memset(r, 0, sizeof(*r));
}

/* Check what every batch must satisfy and, when @check is set, each record's bytes. */
static void check_batch(const struct grist_loader_config *c, const struct grist_batch *b, const struct ds *const *check)
{
	static uint8_t want[220000]; /* the largest record (LEN_LARGE) */
	size_t i, rb;

	assert_true(b->num_records >= 1 && b->num_records <= c->batch_size);
	if (c->layout == GRIST_LAYOUT_RAGGED) {
		assert_non_null(b->offsets);
		assert_int_equal(b->num_rows, b->num_records);
		assert_int_equal(b->offsets[0], 0);
		for (i = 0; i < b->num_records; i++)
			assert_true(b->offsets[i] <= b->offsets[i + 1]);
		assert_int_equal(b->offsets[b->num_records], b->bytes);
	} else {
		assert_null(b->offsets);
		assert_int_equal(b->record_bytes, c->record_bytes);
		assert_int_equal(b->bytes, b->num_rows * c->record_bytes);
		assert_int_equal(b->num_rows, c->layout == GRIST_LAYOUT_PADDED ? c->batch_size : b->num_records);
	}
	if (!check)
		return;
	rb = c->record_bytes;
	for (i = 0; i < b->num_records; i++) {
		const struct ds *d = check[b->datasets[i]];
		size_t len = rec_len(d, b->indices[i]);

		assert_true(b->indices[i] < d->n);
		rec_fill(d, b->indices[i], want);
		if (c->layout == GRIST_LAYOUT_RAGGED) {
			assert_int_equal(b->offsets[i + 1] - b->offsets[i], len);
			assert_memory_equal(b->data + b->offsets[i], want, len);
		} else {
			assert_true(len <= rb);
			if (len)
				assert_memory_equal(b->data + i * rb, want, len);
			for (size_t k = len; k < rb; k++)
				assert_int_equal(b->data[i * rb + k], c->pad_value);
		}
	}
	for (i = b->num_records * (rb ? rb : 0); rb && i < b->num_rows * rb; i++)
		assert_int_equal(b->data[i], c->pad_value);
}

static void record_batch(struct run *r, const struct grist_batch *b)
{
	uint64_t hdr[5] = { b->sequence, b->num_records, b->num_rows, b->bytes, b->record_bytes };

	if (r->nbatches + 2 > r->bcap) {
		r->bcap = r->bcap * 2 + 16;
		r->boff = realloc(r->boff, r->bcap * sizeof(*r->boff));
		assert_non_null(r->boff);
	}
	r->boff[r->nbatches] = r->len;
	put(r, hdr, sizeof(hdr));
	if (b->offsets)
		put(r, b->offsets, (b->num_records + 1) * sizeof(*b->offsets));
	put(r, b->indices, b->num_records * sizeof(*b->indices));
	put(r, b->datasets, b->num_records * sizeof(*b->datasets));
	put(r, b->data, b->bytes);
	r->nbatches++;
	r->boff[r->nbatches] = r->len;
	if (r->nrec + b->num_records > r->rcap) {
		r->rcap = (r->nrec + b->num_records) * 2;
		r->idx = realloc(r->idx, r->rcap * sizeof(*r->idx));
		r->dsn = realloc(r->dsn, r->rcap * sizeof(*r->dsn));
		assert_true(r->idx && r->dsn);
	}
	memcpy(r->idx + r->nrec, b->indices, b->num_records * sizeof(*b->indices));
	memcpy(r->dsn + r->nrec, b->datasets, b->num_records * sizeof(*b->datasets));
	r->nrec += b->num_records;
}

/* Pull up to @max batches (0 = all) from @l into @r; an error ends the run and is kept in @r. */
static void drain(struct grist_loader *l, const struct grist_loader_config *c, size_t max, struct run *r,
		  const struct ds *const *check)
{
	struct grist_batch *b;

	for (size_t n = 0; !max || n < max; n++) {
		r->err = grist_loader_next(l, &b);
		if (r->err) {
			snprintf(r->msg, sizeof(r->msg), "%s", grist_last_error());
			return;
		}
		if (!b)
			return;
		check_batch(c, b, check);
		if (b->num_records < c->batch_size)
			r->short_batches++;
		record_batch(r, b);
		grist_loader_release(l, b);
	}
}

static struct grist_loader *open_loader(const struct grist_loader_config *c, const struct grist_loader_hooks *h)
{
	struct grist_loader *l = NULL;
	int ret = grist_loader_create_hooked(c, h, &l);

	if (ret)
		fail_msg("loader create failed: %d %s", ret, grist_last_error());
	return l;
}

static void run_cfg(const struct grist_loader_config *c, const struct grist_loader_hooks *h, size_t max,
		    struct run *r, const struct ds *const *check)
{
	struct grist_loader *l = open_loader(c, h);

	memset(r, 0, sizeof(*r));
	drain(l, c, max, r, check);
	grist_loader_destroy(l);
}

static void assert_same_runs(const struct run *a, const struct run *b)
{
	assert_int_equal(a->err, b->err);
	assert_int_equal(a->nbatches, b->nbatches);
	for (size_t i = 0; i < a->nbatches; i++) {
		size_t la = a->boff[i + 1] - a->boff[i], lb = b->boff[i + 1] - b->boff[i];

		if (la != lb || memcmp(a->blob + a->boff[i], b->blob + b->boff[i], la))
			fail_msg("batch %zu differs (%zu vs %zu bytes)", i, la, lb);
	}
}

/* ------------------------------------------------------------ dataset specs */

struct specs {
	struct grist_dataset_spec s[2];
	const struct ds *check[2];
};

static void spec1(struct specs *sp, struct grist_loader_config *c, int d)
{
	memset(sp, 0, sizeof(*sp));
	sp->s[0] = (struct grist_dataset_spec){ fx.ds[d].paths, fx.ds[d].npaths, 1.0 };
	sp->check[0] = &fx.ds[d];
	c->datasets = sp->s;
	c->num_datasets = 1;
}

static void spec2(struct specs *sp, struct grist_loader_config *c, int d0, double w0, int d1, double w1)
{
	memset(sp, 0, sizeof(*sp));
	sp->s[0] = (struct grist_dataset_spec){ fx.ds[d0].paths, fx.ds[d0].npaths, w0 };
	sp->s[1] = (struct grist_dataset_spec){ fx.ds[d1].paths, fx.ds[d1].npaths, w1 };
	sp->check[0] = &fx.ds[d0];
	sp->check[1] = &fx.ds[d1];
	c->datasets = sp->s;
	c->num_datasets = 2;
}

/* ------------------------------------------------------------ async == ref */

struct variant {
	enum grist_engine_kind engine;
	unsigned threads, qd, prefetch;
	enum grist_read_mode mode;
};

/* Covers every value of each knob: engines, threads 1/2/3, queue depth 1/4/64, prefetch 1/2/8, modes. */
static const struct variant variants[] = {
	{ GRIST_ENGINE_URING, 1, 1, 1, GRIST_READ_BUFFERED },
	{ GRIST_ENGINE_URING, 2, 4, 2, GRIST_READ_DIRECT },
	{ GRIST_ENGINE_URING, 3, 64, 8, GRIST_READ_BUFFERED },
	{ GRIST_ENGINE_URING, 3, 1, 2, GRIST_READ_DIRECT },
	{ GRIST_ENGINE_PREAD, 1, 64, 2, GRIST_READ_DIRECT },
	{ GRIST_ENGINE_PREAD, 2, 1, 8, GRIST_READ_BUFFERED },
	{ GRIST_ENGINE_PREAD, 3, 4, 1, GRIST_READ_DIRECT },
	{ GRIST_ENGINE_PREAD, 2, 64, 8, GRIST_READ_AUTO },
	{ GRIST_ENGINE_URING, 2, 4, 1, GRIST_READ_MMAP },
};
#define NUM_VARIANTS (sizeof(variants) / sizeof(variants[0]))

static void apply_variant(struct grist_loader_config *c, const struct variant *v)
{
	c->engine = v->engine;
	c->threads = v->threads;
	c->queue_depth = v->qd;
	c->prefetch = v->prefetch;
	c->read_mode = v->mode == GRIST_READ_DIRECT && !fx.direct_ok ? GRIST_READ_BUFFERED : v->mode;
}

/* Run @c on the reference engine, then on @nv async variants starting at @first; all must agree. */
static void compare_engines(struct grist_loader_config c, size_t max, const struct ds *const *check,
			    size_t first, size_t nv, struct run *ref_out)
{
	struct run ref, got;

	c.engine = GRIST_ENGINE_REF;
	run_cfg(&c, NULL, max, &ref, check);
	for (size_t k = 0; k < nv; k++) {
		apply_variant(&c, &variants[(first + k) % NUM_VARIANTS]);
		run_cfg(&c, NULL, max, &got, NULL);
		assert_same_runs(&ref, &got);
		run_free(&got);
	}
	if (ref_out)
		*ref_out = ref;
	else
		run_free(&ref);
}

struct det_case {
	int ds;
	enum grist_granularity gran;
	uint64_t window, epochs, batch, shard_count, shard_index;
	enum grist_shard_mode shard_mode;
	bool drop, no_shuffle, same_order;
	size_t max_batches; /* for unbounded epochs */
};

static const struct det_case det_cases[] = {
	{ DS_PLAIN, GRIST_GRANULARITY_RECORD, 0, 1, 7, 0, 0, 0, false, false, false, 0 },
	{ DS_PLAIN, GRIST_GRANULARITY_CHUNK, 3, 2, 64, 0, 0, 0, true, false, false, 0 },
	{ DS_PLAIN, GRIST_GRANULARITY_RECORD, 0, 3, 1, 2, 1, GRIST_SHARD_STRIDED, false, false, false, 0 },
	{ DS_ZSTD, GRIST_GRANULARITY_RECORD, 0, 2, 7, 0, 0, 0, false, false, false, 0 },
	{ DS_ZSTD, GRIST_GRANULARITY_CHUNK, 1, 1, 64, 0, 0, 0, false, false, false, 0 },
	{ DS_ZSTD, GRIST_GRANULARITY_CHUNK, 16, 3, 7, 3, 2, GRIST_SHARD_CONTIGUOUS, false, false, false, 0 },
	{ DS_ZSTD, GRIST_GRANULARITY_RECORD, 0, 0, 64, 0, 0, 0, false, false, false, 9 },
	{ DS_ZSTD, GRIST_GRANULARITY_RECORD, 0, 2, 500, 0, 0, 0, false, false, false, 0 },
	{ DS_ZSTD, GRIST_GRANULARITY_RECORD, 0, 1, 500, 0, 0, 0, true, false, false, 0 },
	{ DS_SNAPPY, GRIST_GRANULARITY_CHUNK, 3, 2, 64, 2, 0, GRIST_SHARD_STRIDED, true, false, false, 0 },
	{ DS_SNAPPY, GRIST_GRANULARITY_RECORD, 0, 1, 7, 0, 0, 0, false, true, false, 0 },
	{ DS_SNAPPY, GRIST_GRANULARITY_CHUNK, 16, 0, 7, 3, 1, GRIST_SHARD_CONTIGUOUS, false, false, false, 40 },
	{ DS_SNAPPY, GRIST_GRANULARITY_RECORD, 0, 3, 64, 0, 0, 0, false, false, true, 0 },
	{ DS_BROTLI, GRIST_GRANULARITY_RECORD, 0, 2, 7, 0, 0, 0, true, false, false, 0 },
	{ DS_BROTLI, GRIST_GRANULARITY_CHUNK, 1, 1, 1, 0, 0, 0, false, false, false, 0 },
	{ DS_BROTLI, GRIST_GRANULARITY_CHUNK, 3, 0, 64, 0, 0, 0, false, false, false, 7 },
	{ DS_FIXED, GRIST_GRANULARITY_CHUNK, 16, 3, 7, 4, 3, GRIST_SHARD_STRIDED, false, true, false, 0 },
	{ DS_ZSTD1, GRIST_GRANULARITY_RECORD, 0, 3, 64, 0, 0, 0, false, false, false, 0 },
	{ DS_ZSTD1, GRIST_GRANULARITY_RECORD, 0, 2, 7, 2, 1, GRIST_SHARD_STRIDED, false, true, false, 0 },
};

static void test_async_equals_ref(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(det_cases) / sizeof(det_cases[0]); i++) {
		const struct det_case *k = &det_cases[i];
		struct grist_loader_config c = { .size = sizeof(c) };
		struct specs sp;

		spec1(&sp, &c, k->ds);
		c.seed = 1000 + i;
		c.granularity = k->gran;
		c.window_chunks = k->window;
		c.epochs = k->epochs;
		c.batch_size = k->batch;
		c.shard_count = k->shard_count;
		c.shard_index = k->shard_index;
		c.shard_mode = k->shard_mode;
		c.drop_remainder = k->drop;
		c.no_shuffle = k->no_shuffle;
		c.same_order_each_epoch = k->same_order;
		compare_engines(c, k->max_batches, sp.check, i, NUM_VARIANTS, NULL);
	}
}

/* The same configuration is delivered identically twice by one engine (no hidden state). */
static void test_repeatable(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct run a, b;
	struct specs sp;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 7;
	c.epochs = 2;
	c.batch_size = 7;
	c.threads = 3;
	run_cfg(&c, NULL, 0, &a, sp.check);
	run_cfg(&c, NULL, 0, &b, sp.check);
	assert_same_runs(&a, &b);
	c.seed = 8;
	run_free(&b);
	run_cfg(&c, NULL, 0, &b, sp.check);
	assert_int_equal(a.nrec, b.nrec);
	assert_true(memcmp(a.idx, b.idx, a.nrec * sizeof(*a.idx)) != 0);
	run_free(&a);
	run_free(&b);
}

/* ------------------------------------------------------------ stream semantics */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void assert_permutation(const uint64_t *idx, uint64_t n)
{
	uint64_t *s = malloc(n * sizeof(*s));

	assert_non_null(s);
	memcpy(s, idx, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(s[i], i);
	free(s);
}

static void test_stream_semantics(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run r;
	uint64_t n = fx.ds[DS_ZSTD].n, e, i;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 3;
	c.epochs = 3;
	c.batch_size = 7;
	c.threads = 2;

	/* no_shuffle: 0..n-1 in order, every epoch */
	c.no_shuffle = true;
	run_cfg(&c, NULL, 0, &r, sp.check);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.nrec, 3 * n);
	assert_int_equal(r.short_batches, (3 * n) % 7 ? 1 : 0);
	for (i = 0; i < 3 * n; i++)
		assert_int_equal(r.idx[i], i % n);
	run_free(&r);

	/* shuffle, record and chunk granularity: each epoch a permutation, reshuffled per epoch */
	c.no_shuffle = false;
	for (int g = 0; g < 2; g++) {
		c.granularity = g ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		c.window_chunks = 2;
		run_cfg(&c, NULL, 0, &r, sp.check);
		assert_int_equal(r.nrec, 3 * n);
		for (e = 0; e < 3; e++)
			assert_permutation(r.idx + e * n, n);
		assert_true(memcmp(r.idx, r.idx + n, n * sizeof(*r.idx)) != 0);
		for (i = 0; i < n && r.idx[i] == i; i++)
			;
		assert_true(i < n);
		run_free(&r);
	}

	/* same_order_each_epoch: one permutation repeated */
	c.granularity = GRIST_GRANULARITY_RECORD;
	c.same_order_each_epoch = true;
	run_cfg(&c, NULL, 0, &r, sp.check);
	assert_permutation(r.idx, n);
	assert_memory_equal(r.idx, r.idx + n, n * sizeof(*r.idx));
	assert_memory_equal(r.idx, r.idx + 2 * n, n * sizeof(*r.idx));
	run_free(&r);
}

/* Strided shard I of K gets global positions I, I+K, ...: interleaving the shards gives the unsharded stream. */
static void test_shards(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run whole, part;
	uint64_t n = fx.ds[DS_SNAPPY].n;
	const uint64_t K = 3;

	(void)state;
	spec1(&sp, &c, DS_SNAPPY);
	c.seed = 11;
	c.epochs = 2;
	c.batch_size = 64;
	c.threads = 2;
	for (int g = 0; g < 2; g++) {
		uint64_t *seen;

		c.granularity = g ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		c.window_chunks = 2;
		c.shard_count = 0;
		c.shard_index = 0;
		c.shard_mode = GRIST_SHARD_STRIDED;
		run_cfg(&c, NULL, 0, &whole, sp.check);
		assert_int_equal(whole.nrec, 2 * n);
		seen = calloc(2 * n, sizeof(*seen));
		assert_non_null(seen);
		c.shard_count = K;
		for (uint64_t s = 0; s < K; s++) {
			c.shard_index = s;
			c.engine = s == 1 ? GRIST_ENGINE_REF : GRIST_ENGINE_URING;
			run_cfg(&c, NULL, 0, &part, sp.check);
			assert_int_equal(part.nrec, (2 * n - s + K - 1) / K);
			for (uint64_t j = 0; j < part.nrec; j++) {
				assert_int_equal(part.idx[j], whole.idx[s + j * K]);
				seen[s + j * K]++;
			}
			run_free(&part);
		}
		for (uint64_t p = 0; p < 2 * n; p++)
			assert_int_equal(seen[p], 1);
		free(seen);
		run_free(&whole);

		/* contiguous: disjoint ranges whose union is each epoch */
		c.shard_mode = GRIST_SHARD_CONTIGUOUS;
		c.epochs = 1;
		seen = calloc(n, sizeof(*seen));
		assert_non_null(seen);
		for (uint64_t s = 0; s < K; s++) {
			c.shard_index = s;
			run_cfg(&c, NULL, 0, &part, sp.check);
			for (uint64_t j = 0; j < part.nrec; j++)
				seen[part.idx[j]]++;
			run_free(&part);
		}
		for (uint64_t p = 0; p < n; p++)
			assert_int_equal(seen[p], 1);
		free(seen);
		c.epochs = 2;
	}
	c.shard_mode = GRIST_SHARD_STRIDED;
}

/* ------------------------------------------------------------ layouts */

static void test_layouts(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_loader *l;
	struct grist_batch *b;
	struct specs sp;
	struct run r;
	uint64_t n;
	int ret;

	(void)state;
	/* fixed: all records FIXED_BYTES */
	spec1(&sp, &c, DS_FIXED);
	n = fx.ds[DS_FIXED].n;
	c.seed = 5;
	c.epochs = 1;
	c.batch_size = 64;
	c.layout = GRIST_LAYOUT_FIXED;
	c.record_bytes = FIXED_BYTES;
	compare_engines(c, 0, sp.check, 0, 4, &r);
	assert_int_equal(r.nrec, n);
	run_free(&r);

	/* fixed with a record of the wrong size: the error names the record */
	spec1(&sp, &c, DS_SNAPPY);
	for (int e = 0; e < 2; e++) {
		c.engine = e ? GRIST_ENGINE_URING : GRIST_ENGINE_REF;
		c.no_shuffle = true;
		run_cfg(&c, NULL, 0, &r, NULL);
		assert_int_equal(r.err, -EMSGSIZE);
		/* record 0 of the snappy dataset is not FIXED_BYTES long */
		assert_non_null(strstr(r.msg, "record 0"));
		assert_non_null(strstr(r.msg, "fixed"));
		run_free(&r);
	}
	c.no_shuffle = false;

	/* padded: short records filled with pad_value, the short final batch padded to batch_size rows */
	c.layout = GRIST_LAYOUT_PADDED;
	c.record_bytes = 40;
	c.pad_value = 0xab;
	c.batch_size = 64;
	c.epochs = 1;
	n = fx.ds[DS_SNAPPY].n;
	compare_engines(c, 0, sp.check, 2, 4, &r);
	assert_int_equal(r.nrec, n);
	assert_int_equal(r.short_batches, 1);
	run_free(&r);
	c.engine = GRIST_ENGINE_PREAD;
	l = open_loader(&c, NULL);
	for (;;) {
		assert_int_equal(grist_loader_next(l, &b), 0);
		assert_non_null(b);
		assert_int_equal(b->num_rows, 64);
		assert_int_equal(b->bytes, 64 * 40);
		if (b->num_records < 64) {
			assert_int_equal(b->num_records, n % 64);
			for (size_t k = b->num_records * 40; k < b->bytes; k++)
				assert_int_equal(b->data[k], 0xab);
			grist_loader_release(l, b);
			break;
		}
		grist_loader_release(l, b);
	}
	assert_int_equal(grist_loader_next(l, &b), 0);
	assert_null(b);
	grist_loader_destroy(l);

	/* padded rows too small for a record: an error, not truncation */
	c.record_bytes = 39;
	c.engine = GRIST_ENGINE_URING;
	l = open_loader(&c, NULL);
	do
		ret = grist_loader_next(l, &b);
	while (ret == 0 && b && (grist_loader_release(l, b), 1));
	assert_int_equal(ret, -EMSGSIZE);
	assert_non_null(strstr(grist_last_error(), "padded"));
	/* after an error the loader keeps failing */
	assert_int_equal(grist_loader_next(l, &b), -EMSGSIZE);
	grist_loader_destroy(l);

	/* ragged, explicitly, with records 0..5000 bytes including empty ones */
	spec1(&sp, &c, DS_PLAIN);
	c.layout = GRIST_LAYOUT_RAGGED;
	c.record_bytes = 0;
	c.batch_size = 7;
	compare_engines(c, 0, sp.check, 4, 3, &r);
	assert_int_equal(r.nrec, fx.ds[DS_PLAIN].n);
	run_free(&r);
}

/* ------------------------------------------------------------ maps */

/* Reverse the bytes and append the index: a transform whose output size differs from the input. */
static int map_reverse(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t cap, size_t *len)
{
	(void)ctx;
	if (in->len + 8 > cap)
		return -ENOSPC;
	for (size_t i = 0; i < in->len; i++)
		out[i] = in->data[in->len - 1 - i];
	memcpy(out + in->len, &in->index, 8);
	*len = in->len + 8;
	return 1;
}

/* A random map: output depends on random_seed only (and on the record's first byte). */
static int map_random(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t cap, size_t *len)
{
	(void)ctx;
	if (cap < 17)
		return -ENOSPC;
	t_fill(out, 16, in->random_seed);
	out[16] = in->len ? in->data[0] : 0;
	*len = 17;
	return 1;
}

/* A filter: drop every record whose first byte is odd. */
static int map_filter(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t cap, size_t *len)
{
	(void)ctx;
	if (in->len && (in->data[0] & 1))
		return 0;
	if (in->len > cap)
		return -ENOSPC;
	memcpy(out, in->data, in->len);
	*len = in->len;
	return 1;
}

/* Fails on one record index given by ctx. */
static int map_fail(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t cap, size_t *len)
{
	if (in->index == *(const uint64_t *)ctx)
		return -EDOM;
	return map_filter(NULL, in, out, cap, len);
}

static void test_maps(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run ref, got;
	uint64_t fail_at = 37;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 21;
	c.epochs = 2;
	c.batch_size = 7;

	c.map = map_reverse;
	c.map_out_max = 5100;
	compare_engines(c, 0, NULL, 0, 4, &ref);
	for (size_t i = 0; i < ref.nrec; i++)
		assert_true(ref.idx[i] < fx.ds[DS_ZSTD].n);
	run_free(&ref);

	/* random map: same bytes for any thread count and any strided shard count */
	c.map = map_random;
	c.map_out_max = 17;
	c.granularity = GRIST_GRANULARITY_CHUNK;
	compare_engines(c, 0, NULL, 5, 3, &ref);
	c.shard_count = 2;
	c.batch_size = 1;
	for (uint64_t s = 0; s < 2; s++) {
		c.shard_index = s;
		c.threads = s + 2;
		run_cfg(&c, NULL, 0, &got, NULL);
		/* each shard batch holds one record: compare its 17 bytes with the unsharded stream */
		for (size_t j = 0; j < got.nbatches; j++) {
			size_t k = s + 2 * j, b = k / 7, r = k % 7;
			const uint8_t *gb = got.blob + got.boff[j], *rb = ref.blob + ref.boff[b];
			uint64_t rn;
			const uint8_t *gdata = gb + 5 * 8 + 2 * 8 + 8 + 4;
			const uint8_t *rdata;

			memcpy(&rn, rb + 8, sizeof(rn)); /* header word 1: num_records */
			rdata = rb + 5 * 8 + (rn + 1) * 8 + rn * 8 + rn * 4;

			assert_memory_equal(gdata, rdata + r * 17, 17);
			assert_int_equal(got.idx[j], ref.idx[k]);
		}
		run_free(&got);
	}
	run_free(&ref);
	c.shard_count = 0;
	c.shard_index = 0;
	c.granularity = GRIST_GRANULARITY_RECORD;

	/* filter: full batches except the last, and exactly the even-first-byte records in order */
	c.map = map_filter;
	c.map_out_max = 5001;
	c.batch_size = 7;
	for (int drop = 0; drop < 2; drop++) {
		struct run all;

		c.drop_remainder = drop;
		compare_engines(c, 0, sp.check, drop * 4, 4, &ref);
		assert_true(ref.short_batches <= 1);
		c.map = NULL;
		run_cfg(&c, NULL, 0, &all, sp.check);
		c.map = map_filter;
		{
			size_t k = 0, kept = 0;
			uint8_t first[5001];

			for (size_t i = 0; i < all.nrec; i++) {
				const struct ds *d = &fx.ds[DS_ZSTD];

				rec_fill(d, all.idx[i], first);
				if (rec_len(d, all.idx[i]) && (first[0] & 1))
					continue;
				kept++;
				if (k < ref.nrec) {
					assert_int_equal(ref.idx[k], all.idx[i]);
					k++;
				}
			}
			assert_int_equal(ref.nrec, drop ? kept / 7 * 7 : kept);
			assert_true(kept < all.nrec);
		}
		run_free(&all);
		run_free(&ref);
	}
	c.drop_remainder = false;

	/* a failing map stops the loader with its error */
	c.map = map_fail;
	c.map_ctx = &fail_at;
	c.no_shuffle = true;
	for (size_t v = 0; v < 3; v++) {
		if (v)
			apply_variant(&c, &variants[v * 3]);
		else
			c.engine = GRIST_ENGINE_REF;
		run_cfg(&c, NULL, 0, &got, NULL);
		assert_int_equal(got.err, -EDOM);
		assert_non_null(strstr(got.msg, "record 37"));
		assert_true(got.nrec < 37);
		run_free(&got);
	}
}

/* ------------------------------------------------------------ holding batches */

static void test_hold_batches(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run ref;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 31;
	c.epochs = 3;
	c.batch_size = 7;
	compare_engines(c, 0, sp.check, 0, 0, &ref);
	for (int e = 0; e < 3; e++) {
		struct grist_batch *held[7];
		uint8_t *copy[7];
		size_t copy_len[7], nheld = 0, seq = 0;
		uint64_t rng = 99 + e;
		struct grist_loader *l;

		c.engine = e == 2 ? GRIST_ENGINE_REF : e ? GRIST_ENGINE_PREAD : GRIST_ENGINE_URING;
		c.prefetch = 8;
		c.threads = 2;
		c.granularity = GRIST_GRANULARITY_RECORD;
		l = open_loader(&c, NULL);
		for (;;) {
			struct grist_batch *b;
			struct run one = { 0 };

			/* hold a random number (up to prefetch - 1) before releasing a random one */
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			while (nheld && (nheld == 7 || (rng >> 33) % 3 == 0)) {
				size_t k = (size_t)((rng >> 40) % nheld);

				/* the held batch's memory is unchanged by the later next() calls */
				record_batch(&one, held[k]);
				assert_int_equal(one.len, copy_len[k]);
				assert_memory_equal(one.blob, copy[k], copy_len[k]);
				run_free(&one);
				grist_loader_release(l, held[k]);
				free(copy[k]);
				held[k] = held[nheld - 1];
				copy[k] = copy[nheld - 1];
				copy_len[k] = copy_len[nheld - 1];
				nheld--;
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			}
			assert_int_equal(grist_loader_next(l, &b), 0);
			if (!b)
				break;
			record_batch(&one, b);
			assert_int_equal(one.len, ref.boff[seq + 1] - ref.boff[seq]);
			assert_memory_equal(one.blob, ref.blob + ref.boff[seq], one.len);
			held[nheld] = b;
			copy[nheld] = one.blob;
			copy_len[nheld] = one.len;
			one.blob = NULL;
			run_free(&one);
			nheld++;
			seq++;
		}
		assert_int_equal(seq, ref.nbatches);
		/* destroy with batches still held frees them */
		for (size_t k = 0; k < nheld; k++)
			free(copy[k]);
		grist_loader_destroy(l);
	}
	run_free(&ref);
}

/* ------------------------------------------------------------ checkpoints */

/* Run @k batches of @c, save, resume with @c2 and check the continuation is @ref's tail. */
static void resume_and_compare(const struct grist_loader_config *c, const struct grist_loader_config *c2,
			       size_t k, const struct run *ref, bool hold)
{
	struct grist_loader_config rc = *c2;
	uint8_t st[GRIST_STATE_MAX];
	struct grist_batch *held = NULL;
	struct grist_loader *l;
	struct run head = { 0 }, tail = { 0 };
	size_t len;

	l = open_loader(c, NULL);
	drain(l, c, k, &head, NULL);
	assert_int_equal(head.err, 0);
	if (hold) {
		/* a batch held while saving does not count beyond what next() returned */
		assert_int_equal(grist_loader_next(l, &held), 0);
		assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
		assert_true(held == NULL || held->sequence == head.nbatches);
		if (held) {
			record_batch(&head, held);
			k++;
		}
		grist_loader_release(l, held);
	} else {
		assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
	}
	grist_loader_destroy(l);
	assert_true(len <= GRIST_STATE_MAX);
	/* the reference engine saves the very same bytes at the same point */
	{
		struct grist_loader_config oc = *c;
		uint8_t ost[GRIST_STATE_MAX];
		struct run skip = { 0 };
		size_t olen;

		oc.engine = GRIST_ENGINE_REF;
		l = open_loader(&oc, NULL);
		drain(l, &oc, k, &skip, NULL);
		assert_int_equal(grist_loader_save_state(l, ost, sizeof(ost), &olen), 0);
		grist_loader_destroy(l);
		run_free(&skip);
		assert_int_equal(olen, len);
		assert_memory_equal(ost, st, len);
	}

	rc.resume_state = st;
	rc.resume_state_len = len;
	l = open_loader(&rc, NULL);
	drain(l, &rc, 0, &tail, NULL);
	grist_loader_destroy(l);
	assert_int_equal(tail.err, 0);
	assert_int_equal(head.nbatches + tail.nbatches, ref->nbatches);
	for (size_t b = 0; b < ref->nbatches; b++) {
		const struct run *x = b < head.nbatches ? &head : &tail;
		size_t xb = b < head.nbatches ? b : b - head.nbatches;
		size_t lx = x->boff[xb + 1] - x->boff[xb];

		assert_int_equal(lx, ref->boff[b + 1] - ref->boff[b]);
		if (memcmp(x->blob + x->boff[xb], ref->blob + ref->boff[b], lx))
			fail_msg("batch %zu differs after resuming at %zu", b, k);
	}
	run_free(&head);
	run_free(&tail);
}

static void test_checkpoint_resume(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) }, c2;
	struct specs sp;
	struct run ref;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 41;
	c.epochs = 2;
	c.batch_size = 7;
	c.prefetch = 8;
	c.threads = 2;
	for (int g = 0; g < 2; g++) {
		c.granularity = g ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		c.window_chunks = 3;
		compare_engines(c, 0, sp.check, 0, 0, &ref);
		for (size_t k = 0; k <= ref.nbatches; k += (k < 4 ? 1 : 9)) {
			c.engine = k % 3 == 0 ? GRIST_ENGINE_URING : k % 3 == 1 ? GRIST_ENGINE_PREAD : GRIST_ENGINE_REF;
			c2 = c;
			c2.engine = k % 2 ? GRIST_ENGINE_REF : GRIST_ENGINE_URING;
			c2.threads = 3;
			c2.prefetch = 2;
			resume_and_compare(&c, &c2, k, &ref, k % 2 == 1);
		}
		resume_and_compare(&c, &c, ref.nbatches - 1, &ref, false);
		resume_and_compare(&c, &c, ref.nbatches, &ref, false);
		run_free(&ref);
	}

	/* with a filter, resuming on the same shard count works too */
	c.granularity = GRIST_GRANULARITY_RECORD;
	c.map = map_filter;
	c.map_out_max = 5001;
	compare_engines(c, 0, NULL, 0, 0, &ref);
	for (size_t k = 1; k <= ref.nbatches; k += (k + 5 < ref.nbatches ? 5 : 1)) {
		c.engine = k % 2 ? GRIST_ENGINE_URING : GRIST_ENGINE_REF;
		c2 = c;
		c2.engine = k % 2 ? GRIST_ENGINE_REF : GRIST_ENGINE_PREAD;
		resume_and_compare(&c, &c2, k, &ref, k % 3 == 0);
	}
	run_free(&ref);

	/* unbounded epochs, drop_remainder, batch size not dividing the epoch */
	c.map = NULL;
	c.epochs = 0;
	c.batch_size = 64;
	compare_engines(c, 12, NULL, 0, 0, &ref);
	{
		struct grist_loader_config rc = c;
		uint8_t st[GRIST_STATE_MAX];
		struct grist_loader *l;
		struct run head = { 0 }, tail = { 0 };
		size_t len;

		c.engine = GRIST_ENGINE_URING;
		l = open_loader(&c, NULL);
		drain(l, &c, 5, &head, NULL);
		assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
		grist_loader_destroy(l);
		rc.resume_state = st;
		rc.resume_state_len = len;
		rc.engine = GRIST_ENGINE_PREAD;
		l = open_loader(&rc, NULL);
		drain(l, &rc, 7, &tail, NULL);
		grist_loader_destroy(l);
		assert_int_equal(tail.len, ref.len - ref.boff[5]);
		assert_memory_equal(tail.blob, ref.blob + ref.boff[5], tail.len);
		run_free(&head);
		run_free(&tail);
	}
	run_free(&ref);
}

static int try_resume(const struct grist_loader_config *c, const uint8_t *st, size_t len)
{
	struct grist_loader_config rc = *c;
	struct grist_loader *l = NULL;
	int ret;

	rc.resume_state = st;
	rc.resume_state_len = len;
	ret = grist_loader_create(&rc, &l);
	grist_loader_destroy(l);
	return ret;
}

static void test_checkpoint_rejects(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) }, o;
	uint8_t st[GRIST_STATE_MAX], bad[GRIST_STATE_MAX];
	struct grist_loader *l;
	struct specs sp, sp2;
	struct run r = { 0 };
	size_t len;

	(void)state;
	spec1(&sp, &c, DS_SNAPPY);
	c.seed = 51;
	c.epochs = 2;
	c.batch_size = 7;
	l = open_loader(&c, NULL);
	drain(l, &c, 3, &r, NULL);
	assert_int_equal(grist_loader_save_state(l, st, 4, &len), -EINVAL);
	assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
	grist_loader_destroy(l);
	run_free(&r);
	assert_int_equal(try_resume(&c, st, len), 0);

	/* every flipped byte and every truncation is refused as corrupt */
	for (size_t i = 0; i < len; i++) {
		memcpy(bad, st, len);
		bad[i] ^= 0x20;
		assert_int_equal(try_resume(&c, bad, len), -EBADMSG);
	}
	for (size_t n = 0; n < len; n += 5)
		assert_int_equal(try_resume(&c, st, n), -EBADMSG);

	/* a dropped remainder still counts as consumed: the state after the end says so */
	for (int e = 0; e < 2; e++) {
		struct grist_loader_config dc = c;
		struct grist_state gs;
		uint64_t n = fx.ds[DS_SNAPPY].n;
		uint8_t end[GRIST_STATE_MAX];
		size_t elen;

		dc.drop_remainder = true;
		dc.epochs = 1;
		dc.engine = e ? GRIST_ENGINE_URING : GRIST_ENGINE_REF;
		l = open_loader(&dc, NULL);
		drain(l, &dc, 0, &r, NULL);
		assert_int_equal(r.nrec, n / 7 * 7);
		assert_int_equal(grist_loader_save_state(l, end, sizeof(end), &elen), 0);
		grist_loader_destroy(l);
		run_free(&r);
		assert_int_equal(grist_state_decode(end, elen, &gs), 0);
		assert_int_equal(gs.consumed, n);
		assert_int_equal(gs.batches, n / 7);
	}

	/* another seed, dataset, batch layout or map: stale */
	o = c;
	o.seed = 52;
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
	o = c;
	spec1(&sp2, &o, DS_SMALL2);
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
	o = c;
	o.map = map_filter;
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
	o = c;
	o.map_id = 5;
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
	o = c;
	o.layout = GRIST_LAYOUT_PADDED;
	o.record_bytes = 40;
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
	o = c;
	o.epochs = 3;
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
	o = c;
	o.shard_mode = GRIST_SHARD_CONTIGUOUS;
	assert_int_equal(try_resume(&o, st, len), -ESTALE);
}

/*
 * Elastic resume: K = 3 hosts in lockstep, one state, restored on K' hosts. Every global
 * stream position must be delivered exactly once, with the record the unsharded stream has there.
 */
static void test_checkpoint_elastic(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run whole;
	const uint64_t K = 3, b = 7;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 61;
	c.epochs = 2;
	c.batch_size = b;
	for (int g = 0; g < 2; g++) {
		c.granularity = g ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		c.window_chunks = 4;
		c.shard_count = 0;
		c.shard_index = 0;
		run_cfg(&c, NULL, 0, &whole, sp.check);
		for (uint64_t k = 1; k <= 4; k += 3) {
			for (uint64_t K2 = 2; K2 <= 4; K2 += 2) {
				uint8_t st[GRIST_STATE_MAX];
				uint32_t *seen = calloc(whole.nrec, sizeof(*seen));
				size_t len = 0;
				uint64_t base = K * k * b;

				assert_non_null(seen);
				c.shard_count = K;
				for (uint64_t s = 0; s < K; s++) {
					struct grist_loader *l;
					struct run r = { 0 };

					c.shard_index = s;
					c.engine = s % 2 ? GRIST_ENGINE_REF : GRIST_ENGINE_URING;
					l = open_loader(&c, NULL);
					drain(l, &c, k, &r, sp.check);
					assert_int_equal(r.nrec, k * b);
					if (s == 1)
						assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
					grist_loader_destroy(l);
					for (uint64_t j = 0; j < r.nrec; j++) {
						assert_int_equal(r.idx[j], whole.idx[s + j * K]);
						seen[s + j * K]++;
					}
					run_free(&r);
				}
				c.shard_count = K2;
				c.resume_state = st;
				c.resume_state_len = len;
				for (uint64_t s = 0; s < K2; s++) {
					struct run r;

					c.shard_index = s;
					c.engine = s % 2 ? GRIST_ENGINE_PREAD : GRIST_ENGINE_REF;
					run_cfg(&c, NULL, 0, &r, sp.check);
					for (uint64_t j = 0; j < r.nrec; j++) {
						uint64_t p = base + s + j * K2;

						assert_true(p < whole.nrec);
						assert_int_equal(r.idx[j], whole.idx[p]);
						seen[p]++;
					}
					run_free(&r);
				}
				c.resume_state = NULL;
				c.resume_state_len = 0;
				for (uint64_t p = 0; p < whole.nrec; p++)
					if (seen[p] != 1)
						fail_msg("K=3 k=%llu K'=%llu: position %llu delivered %u times",
							 (unsigned long long)k, (unsigned long long)K2, (unsigned long long)p, seen[p]);
				free(seen);
			}
		}
		run_free(&whole);
	}
	c.granularity = GRIST_GRANULARITY_RECORD;

	/* a filtered (not lockstep) state cannot move to another shard count */
	{
		uint8_t st[GRIST_STATE_MAX];
		struct grist_loader *l;
		struct run r = { 0 };
		size_t len;

		c.shard_count = 2;
		c.shard_index = 0;
		c.map = map_filter;
		c.map_out_max = 5001;
		l = open_loader(&c, NULL);
		drain(l, &c, 4, &r, NULL);
		assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
		grist_loader_destroy(l);
		run_free(&r);
		c.shard_count = 3;
		assert_int_equal(try_resume(&c, st, len), -ESTALE);
		c.shard_count = 2;
		assert_int_equal(try_resume(&c, st, len), 0);
	}
}

/* Filters under chunk granularity (units larger than a batch), mixing, shards and padding. */
static void test_filter_combinations(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) }, c2;
	struct specs sp;
	struct run ref;

	(void)state;
	for (int k = 0; k < 4; k++) {
		grist_loader_config_init(&c);
		if (k == 1)
			spec2(&sp, &c, DS_SNAPPY, 1.0, DS_SMALL2, 2.0);
		else
			spec1(&sp, &c, k == 3 ? DS_SNAPPY : DS_ZSTD);
		c.seed = 111 + k;
		c.epochs = k == 2 ? 0 : 2;
		c.granularity = GRIST_GRANULARITY_CHUNK;
		c.window_chunks = k == 0 ? 16 : 2;
		c.batch_size = k == 3 ? 64 : 7;
		c.shard_count = k == 2 ? 2 : 0;
		c.shard_index = k == 2 ? 1 : 0;
		c.map = map_filter;
		c.map_out_max = 5001;
		if (k == 3) {
			c.layout = GRIST_LAYOUT_PADDED;
			c.record_bytes = 40;
			c.pad_value = 3;
		}
		compare_engines(c, k == 2 ? 20 : 0, sp.check, 2 * k, 4, &ref);
		if (k != 2) {
			for (size_t b = 1; b < ref.nbatches; b += 4) {
				c.engine = b % 2 ? GRIST_ENGINE_URING : GRIST_ENGINE_PREAD;
				c.threads = 2;
				c2 = c;
				c2.engine = GRIST_ENGINE_REF;
				resume_and_compare(&c, &c2, b, &ref, b % 3 == 0);
			}
		}
		run_free(&ref);
	}
}

/*
 * The loader refuses a batch over the hold limit (prefetch, here 64) with -EBUSY instead
 * of overrunning its table, and destroy then frees every batch still held once (issue 35:
 * device mode freed them twice; tests/device/test_loader_device.c has that side).
 */
static void test_hold_limit(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_batch *b[64], *extra;
	struct grist_loader *l;
	struct specs sp;

	(void)state;
	spec1(&sp, &c, DS_SNAPPY);
	c.batch_size = 1;
	c.prefetch = 64;
	for (int e = 0; e < 4; e++) {
		c.engine = e == 0 ? GRIST_ENGINE_REF : e == 3 ? GRIST_ENGINE_PREAD : GRIST_ENGINE_URING;
		c.granularity = e == 2 ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		l = open_loader(&c, NULL);
		for (int i = 0; i < 64; i++) {
			assert_int_equal(grist_loader_next(l, &b[i]), 0);
			assert_non_null(b[i]);
			assert_int_equal(b[i]->sequence, i);
		}
		assert_int_equal(grist_loader_next(l, &extra), -EBUSY);
		grist_loader_destroy(l);
	}
}

/* The threads a loader of @c runs, once it has delivered a batch. */
static unsigned threads_chosen(const struct grist_loader_config *c)
{
	struct grist_loader *l = open_loader(c, NULL);
	struct grist_loader_stats st;
	struct grist_batch *b;

	assert_int_equal(grist_loader_next(l, &b), 0);
	grist_loader_release(l, b);
	grist_loader_stats(l, &st);
	grist_loader_destroy(l);
	return st.threads;
}

/* test_threads_follow_affinity()'s mask, while it has the process on one CPU */
static cpu_set_t affinity_saved;
static bool affinity_pinned;

/*
 * Its teardown: cmocka runs it after a failed assertion too, which leaves the test between its
 * two sched_setaffinity() calls (a loader that fails to open or deliver on one CPU).
 */
static int affinity_restore(void **state)
{
	(void)state;
	if (affinity_pinned && sched_setaffinity(0, sizeof(affinity_saved), &affinity_saved))
		return -1;
	affinity_pinned = false;
	return 0;
}

/*
 * The default thread count is the CPUs the process may run on, not the machine's online
 * CPUs: under `taskset -c 0`, in a cpuset-limited container, one worker, not one per CPU of
 * the machine crowded onto the one it may use. The mask is put back before the counts are
 * compared, and by the teardown if an assertion fails while the process is on one CPU, so
 * a failure here leaves the rest of the suite unpinned.
 */
static void test_threads_follow_affinity(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	unsigned one_cpu, all;
	struct specs sp;
	cpu_set_t one;
	int cpu = 0;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(affinity_saved), &affinity_saved), 0);
	if (CPU_COUNT(&affinity_saved) < 2)
		skip(); /* one CPU allowed already: both readings are 1 */
	while (!CPU_ISSET(cpu, &affinity_saved))
		cpu++;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	spec1(&sp, &c, DS_SNAPPY);
	c.batch_size = 4;
	c.seed = 3;
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	affinity_pinned = true;
	one_cpu = threads_chosen(&c);
	assert_int_equal(sched_setaffinity(0, sizeof(affinity_saved), &affinity_saved), 0);
	affinity_pinned = false;
	all = threads_chosen(&c);
	assert_int_equal(one_cpu, 1);
	assert_int_equal(all, CPU_COUNT(&affinity_saved));
}

/*
 * grist_loader_get_config(): what was given, with the defaults the loader resolves filled in
 * (the option table's, so no front end repeats them); a packed loader's batch_size is the
 * caller's rows, not the engine's record batches. The resolved prefetch is the hold limit.
 */
static void test_get_config(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) }, got;
	struct grist_batch *b[64], *extra;
	struct grist_loader *l;
	struct specs sp;
	uint64_t prefetch, max_batch;
	unsigned i;

	(void)state;
	assert_int_equal(grist_parse_size(grist_loader_option_find("prefetch")->default_value, &prefetch), 0);
	assert_int_equal(grist_parse_size(grist_loader_option_find("max_batch_bytes")->default_value, &max_batch), 0);
	spec1(&sp, &c, DS_SNAPPY);
	c.batch_size = 1;
	c.seed = 5;
	l = open_loader(&c, NULL);
	grist_loader_config_init(&got);
	assert_int_equal(grist_loader_get_config(l, &got), 0);
	assert_int_equal(got.size, sizeof(got));
	assert_int_equal(got.prefetch, prefetch);
	assert_int_equal(got.shard_count, 1);
	assert_true(got.max_batch_bytes == max_batch);
	assert_int_equal(got.batch_size, 1);
	assert_int_equal(got.seed, 5);
	assert_int_equal(got.threads, 0); /* the engine's own sizing: stats say what it chose */
	assert_int_equal(got.num_datasets, 1);
	assert_string_equal(got.datasets[0].paths[0], c.datasets[0].paths[0]);
	for (i = 0; i < got.prefetch; i++)
		assert_int_equal(grist_loader_next(l, &b[i]), 0);
	assert_int_equal(grist_loader_next(l, &extra), -EBUSY);
	got.size = 0;
	assert_int_equal(grist_loader_get_config(l, &got), -EINVAL);
	grist_loader_destroy(l);

	c.prefetch = 2;
	c.pack = GRIST_PACK_FIRST_FIT;
	c.pack_length = 64;
	c.pack_token_bytes = 1;
	c.batch_size = 3;
	c.drop_remainder = true;
	l = open_loader(&c, NULL);
	grist_loader_config_init(&got);
	assert_int_equal(grist_loader_get_config(l, &got), 0);
	assert_int_equal(got.prefetch, 2);
	assert_int_equal(got.batch_size, 3);
	assert_true(got.drop_remainder);
	assert_int_equal(got.pack_bins, 3);
	grist_loader_destroy(l);
}

/* ------------------------------------------------------------ mixing */

static void test_mixing(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run ref, again;
	const uint64_t S = 300, p0 = 100; /* weights 1 and 2 scale to 100 and 200 */

	(void)state;
	spec2(&sp, &c, DS_SNAPPY, 1.0, DS_SMALL2, 2.0);
	c.seed = 71;
	c.epochs = 2;
	c.batch_size = 7;
	compare_engines(c, 0, sp.check, 0, NUM_VARIANTS, &ref);
	c.engine = GRIST_ENGINE_URING;
	c.threads = 3;
	run_cfg(&c, NULL, 0, &again, sp.check);
	assert_same_runs(&ref, &again);
	run_free(&again);
	/* mixing under chunk granularity and both shard modes, unbounded too */
	for (int k = 0; k < 4; k++) {
		struct grist_loader_config m = c;

		m.granularity = k % 2 ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		m.window_chunks = 3;
		m.shard_count = k ? 3 : 0;
		m.shard_index = k ? (uint64_t)k - 1 : 0;
		m.shard_mode = k == 3 ? GRIST_SHARD_CONTIGUOUS : GRIST_SHARD_STRIDED;
		m.epochs = k == 2 ? 0 : 2;
		m.batch_size = k == 1 ? 64 : 7;
		compare_engines(m, k == 2 ? 30 : 0, sp.check, k, 4, NULL);
	}
	/* the stream ends before dataset 1 (90 records) would start a third epoch */
	assert_true(ref.nrec >= 2 * 90);
	for (uint64_t m = 0; m < ref.nrec; m++) {
		uint64_t c0 = m - m * (S - p0) / S, c1 = (m + 1) - (m + 1) * (S - p0) / S;

		assert_int_equal(ref.dsn[m], c1 > c0 ? 0 : 1);
	}
	/* each dataset's own stream is a permutation per epoch */
	{
		uint64_t *per[2], cnt[2] = { 0, 0 };

		per[0] = malloc(ref.nrec * sizeof(uint64_t));
		per[1] = malloc(ref.nrec * sizeof(uint64_t));
		assert_true(per[0] && per[1]);
		for (uint64_t m = 0; m < ref.nrec; m++)
			per[ref.dsn[m]][cnt[ref.dsn[m]]++] = ref.idx[m];
		assert_int_equal(cnt[1], 2 * 90);
		assert_permutation(per[1], 90);
		assert_permutation(per[1] + 90, 90);
		free(per[0]);
		free(per[1]);
	}
	run_free(&ref);
}

/* ------------------------------------------------------------ errors */

static int create_err(const struct grist_loader_config *c)
{
	struct grist_loader *l = (struct grist_loader *)1;
	int ret = grist_loader_create(c, &l);

	assert_null(l);
	return ret;
}

static void test_config_errors(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) }, o;
	struct specs sp;
	const char *missing[] = { "/nonexistent/grist/none.array_record" };
	struct grist_dataset_spec ms = { missing, 1, 1.0 };

	(void)state;
	spec1(&sp, &c, DS_SMALL2);
	c.batch_size = 4;
	o = c;
	o.batch_size = 0;
	assert_int_equal(create_err(&o), -EINVAL);
	o = c;
	o.shard_count = 3;
	o.shard_index = 3;
	assert_int_equal(create_err(&o), -EINVAL);
	o = c;
	o.shard_count = fx.ds[DS_SMALL2].n + 1;
	assert_int_equal(create_err(&o), -EINVAL);
	o = c;
	o.layout = GRIST_LAYOUT_FIXED;
	assert_int_equal(create_err(&o), -EINVAL);
	o = c;
	o.prefetch = 1000;
	assert_int_equal(create_err(&o), -EINVAL);
	o = c;
	o.verify = (enum grist_verify)2;
	assert_int_equal(create_err(&o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "verify 2"));
	o = c;
	o.num_datasets = 0;
	assert_int_equal(create_err(&o), -EINVAL);
	for (int w = 0; w < 3; w++) {
		o = c;
		spec2(&sp, &o, DS_SNAPPY, 1.0, DS_SMALL2, w == 0 ? 0.0 : w == 1 ? -1.0 : NAN);
		assert_int_equal(create_err(&o), -EINVAL);
		assert_non_null(strstr(grist_last_error(), "weight"));
	}
	o = c;
	o.datasets = &ms;
	o.num_datasets = 1;
	assert_int_equal(create_err(&o), -ENOENT);
	assert_non_null(strstr(grist_last_error(), missing[0]));
}

/* A copy of a dataset file with one byte flipped inside a chunk is reported with its path and offset. */
static void test_corrupt_file(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	const struct ds *d = &fx.ds[DS_BROTLI];
	char *bad = strdup(t_path(fx.dir, "corrupt.array_record"));
	const char *paths[1] = { bad };
	struct grist_dataset_spec s = { paths, 1, 1.0 };
	size_t len;
	uint8_t *bytes = t_read_file(d->paths[0], &len);

	(void)state;
	assert_non_null(bytes);
	/* the data chunks fill the file's first part; the footer and postscript are at the end */
	bytes[len / 3] ^= 0x5a;
	assert_int_equal(t_write_file(bad, bytes, len), 0);
	free(bytes);
	c.datasets = &s;
	c.num_datasets = 1;
	c.batch_size = 7;
	c.epochs = 1;
	c.no_shuffle = true;
	for (int e = 0; e < 3; e++) {
		struct run r;

		c.engine = e == 0 ? GRIST_ENGINE_REF : e == 1 ? GRIST_ENGINE_URING : GRIST_ENGINE_PREAD;
		c.threads = 2;
		run_cfg(&c, NULL, 0, &r, NULL);
		assert_int_equal(r.err, -EBADMSG);
		assert_non_null(strstr(r.msg, bad));
		assert_non_null(strstr(r.msg, "byte"));
		run_free(&r);
	}
	free(bad);
}

static struct grist_loader_hooks fault_hooks(const struct grist_io_fault *f, unsigned n)
{
	struct grist_loader_hooks h = { 0 };

	h.io_override = true;
	h.io_kind = GRIST_IO_FAULT;
	h.io_config.fault.inner = fx.uring_ok ? GRIST_IO_URING : GRIST_IO_PREAD;
	h.io_config.fault.faults = f;
	h.io_config.fault.nr_faults = n;
	return h;
}

/*
 * Each worker makes its own reader on its thread (engine_async.c, setup_own()): when that
 * fails, in every worker at once here (a fault injector asked to wrap itself cannot be
 * made), create() returns the worker's error and message, and nothing hangs or leaks.
 */
static void test_worker_setup_fails(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_loader_hooks h = fault_hooks(NULL, 0);
	struct grist_loader *l = NULL;
	struct specs sp;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 3;
	c.batch_size = 7;
	c.engine = GRIST_ENGINE_URING;
	c.read_mode = GRIST_READ_BUFFERED;
	h.io_config.fault.inner = GRIST_IO_FAULT;
	for (unsigned threads = 1; threads <= 16; threads *= 4) {
		c.threads = threads;
		assert_int_equal(grist_loader_create_hooked(&c, &h, &l), -EINVAL);
		assert_null(l);
		assert_non_null(strstr(grist_last_error(), "cannot wrap itself"));
	}
}

static void test_fault_injection(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run ref, got;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 81;
	c.epochs = 2;
	c.batch_size = 7;
	c.threads = 1;
	c.read_mode = GRIST_READ_BUFFERED; /* faults hit reads: auto would map the cached files */
	compare_engines(c, 0, sp.check, 0, 0, &ref);

	/* EIO at request N: next() fails naming the file and offset, and never hangs */
	for (uint64_t n = 0; n < 40; n += 13) {
		struct grist_io_fault f = { n, GRIST_IO_FAULT_EIO, 0 };
		struct grist_loader_hooks h = fault_hooks(&f, 1);

		c.threads = 1 + n % 2;
		c.engine = GRIST_ENGINE_URING;
		run_cfg(&c, &h, 0, &got, NULL);
		assert_int_equal(got.err, -EIO);
		assert_non_null(strstr(got.msg, "zstd-"));
		assert_non_null(strstr(got.msg, "byte"));
		/* what came before the error is the reference's prefix */
		assert_true(got.nbatches < ref.nbatches);
		assert_memory_equal(got.blob, ref.blob, got.len);
		run_free(&got);
	}

	/* short reads, EAGAIN and delays: same output as the reference */
	{
		struct grist_io_fault f[24];
		struct grist_loader_hooks h;

		for (unsigned i = 0; i < 24; i++) {
			f[i].seq = i * 3 + 1;
			f[i].type = i % 3 == 0 ? GRIST_IO_FAULT_SHORT : i % 3 == 1 ? GRIST_IO_FAULT_EAGAIN
										   : GRIST_IO_FAULT_DELAY;
			f[i].arg = i % 3 == 0 ? 1 + i : i % 3 == 1 ? 3 : 200;
		}
		h = fault_hooks(f, 24);
		for (unsigned t = 1; t <= 3; t += 2) {
			c.threads = t;
			c.queue_depth = t == 1 ? 1 : 4;
			run_cfg(&c, &h, 0, &got, NULL);
			assert_same_runs(&ref, &got);
			run_free(&got);
		}
		h.io_config.fault.inner = GRIST_IO_PREAD;
		run_cfg(&c, &h, 0, &got, NULL);
		assert_same_runs(&ref, &got);
		run_free(&got);
	}
	run_free(&ref);
}

/* Read requests as the engine submitted them: how often one starts below the one before. */
struct descents {
	uint64_t last, reads, down;
};

static void count_descent(void *ctx, const char *path, uint64_t offset, uint64_t len)
{
	struct descents *d = ctx;

	(void)path;
	(void)len;
	d->down += d->reads++ && offset < d->last;
	d->last = offset;
}

/*
 * A unit many times larger than the read buffer: at group_size 1 it is streamed (each
 * region takes read-buffer space when read and gives it back once copied out, regions
 * in stream order), at group_size 8 a chunk's records lie far apart in the unit, so it
 * is read whole as before. Either way the batches are the reference engine's, and a
 * read that fails late in a streamed unit names its file.
 */
static void test_stream_large_unit(void **state)
{
	static const int sets[] = { DS_LARGE, DS_LARGE8 };
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run ref, got;

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct descents d = { 0 };

		spec1(&sp, &c, sets[k]);
		c.seed = 5 + k;
		c.epochs = 2;
		c.batch_size = 32; /* about 4 MB a unit */
		c.read_mode = fx.direct_ok ? GRIST_READ_DIRECT : GRIST_READ_BUFFERED;
		c.queue_depth = 8;
		c.read_ahead_bytes = 1u << 20; /* per worker at 1 thread: a quarter of a unit */
		c.threads = 1;
		compare_engines(c, 0, sp.check, 0, 0, &ref);
		for (unsigned t = 1; t <= 2; t++) {
			c.engine = GRIST_ENGINE_URING;
			c.threads = t;
			c.read_ahead_bytes = t * (1u << 20);
			c.read_trace = t == 1 ? count_descent : NULL;
			c.read_trace_ctx = &d;
			run_cfg(&c, NULL, 0, &got, sp.check);
			assert_same_runs(&ref, &got);
			run_free(&got);
		}
		/*
		 * Streamed regions are read in stream order (shuffled: about every other read
		 * starts below the one before); a unit read whole is read in file order (one
		 * descent per unit at most).
		 */
		if (sets[k] == DS_LARGE)
			assert_true(d.down > d.reads / 4);
		else
			assert_true(d.down <= ref.nbatches);
		c.read_trace = NULL;

		/* EIO on a read late in the first unit: the error names the file, after the reference's prefix */
		if (sets[k] == DS_LARGE) {
			struct grist_io_fault f = { 20, GRIST_IO_FAULT_EIO, 0 };
			struct grist_loader_hooks h = fault_hooks(&f, 1);

			c.threads = 1;
			c.read_ahead_bytes = 1u << 20;
			run_cfg(&c, &h, 0, &got, NULL);
			assert_int_equal(got.err, -EIO);
			assert_non_null(strstr(got.msg, "large-0.array_record"));
			assert_true(got.nbatches < ref.nbatches);
			assert_memory_equal(got.blob, ref.blob, got.len);
			run_free(&got);
		}
		run_free(&ref);
	}
}

/*
 * Slots counted in bytes (256 records of 1 MiB: two 256 MiB slots) count the batches the
 * caller holds too. A caller that holds each batch for a moment, as a training step
 * does, used to let a third unit take a fresh slot meanwhile: 256 MiB more to fault in.
 * Here the slot budget (assembly_bytes 1: one slot, the least it keeps) allows two slots
 * with the one the caller holds; a caller holding @hold batches at a time (one as the CLI
 * does) gets its batches from at most max(2, hold + 1) slot
 * mappings, as stats count them, in the reference engine's order; holding three, more
 * than the budget, does not deadlock (the oldest unit always gets a slot). Small records
 * too: their units are small enough for the consumer to wait for several at once, and
 * it must not wait for one that the caller's batches keep out of the slot window (that
 * hung at hold 2 about one run in three).
 */
static void test_slot_budget(void **state)
{
	static const int sets[] = { DS_LARGE, DS_SNAPPY };
	struct grist_loader_config c = { .size = sizeof(c) };
	struct specs sp;
	struct run ref;

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		c = (struct grist_loader_config){ .size = sizeof(c) };
		spec1(&sp, &c, sets[k]);
		c.seed = 17;
		/* 164 records, or 550: whole batches (a short last one is packed into a slot of its own) */
		c.epochs = sets[k] == DS_LARGE ? 4 : 1;
		c.batch_size = 4;
		c.threads = 2;
		c.read_mode = fx.direct_ok ? GRIST_READ_DIRECT : GRIST_READ_BUFFERED;
		compare_engines(c, 0, sp.check, 0, 0, &ref);
		c.engine = GRIST_ENGINE_URING;
		c.assembly_bytes = 1;
		for (size_t hold = 1; hold <= 3; hold++) {
			struct grist_batch *held[3] = { NULL };
			struct grist_loader *l = open_loader(&c, NULL);
			struct grist_loader_stats st;
			struct run got = { 0 };
			size_t n = 0;

			for (;;) {
				struct grist_batch *b;

				/* the oldest batch goes back first: at most @hold held, the new one included */
				if (held[n % hold])
					grist_loader_release(l, held[n % hold]);
				held[n % hold] = NULL;
				assert_int_equal(grist_loader_next(l, &b), 0);
				if (!b)
					break;
				check_batch(&c, b, sp.check);
				record_batch(&got, b);
				/* the caller's step: the workers run ahead meanwhile, as far as slots let them */
				usleep(2000);
				held[n++ % hold] = b;
			}
			for (size_t j = 0; j < hold; j++)
				if (held[j])
					grist_loader_release(l, held[j]);
			grist_loader_stats(l, &st);
			assert_true(st.slot_maps >= 2);
			if (st.slot_maps > (hold + 1 > 2 ? hold + 1 : 2))
				fail_msg("%zu: holding %zu batches: %llu slots mapped", k, hold,
					 (unsigned long long)st.slot_maps);
			assert_same_runs(&ref, &got);
			run_free(&got);
			grist_loader_destroy(l);
		}
		run_free(&ref);
	}
}

/* Destroy while reads are in flight (held back by delays) and batches are held: no hang, no leak. */
static void test_destroy_mid_epoch(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_io_fault f[32];
	struct specs sp;

	(void)state;
	for (unsigned i = 0; i < 32; i++)
		f[i] = (struct grist_io_fault){ i, GRIST_IO_FAULT_DELAY, 2000 };
	spec1(&sp, &c, DS_PLAIN);
	c.seed = 91;
	c.epochs = 0;
	c.batch_size = 7;
	c.prefetch = 8;
	for (int v = 0; v < 4; v++) {
		struct grist_loader_hooks h = fault_hooks(f, 32);
		struct grist_batch *b[3];
		struct grist_loader *l;

		c.threads = 1 + v % 3;
		c.engine = v == 3 ? GRIST_ENGINE_REF : GRIST_ENGINE_URING;
		l = open_loader(&c, v == 1 ? NULL : &h);
		for (int k = 0; k < v && k < 3; k++)
			assert_int_equal(grist_loader_next(l, &b[k]), 0);
		grist_loader_destroy(l);
	}
}

/* The counters describe what ran: engine, read mode, batches, records, filtered records. */
static void test_stats(void **state)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_loader_stats st;
	struct specs sp;

	(void)state;
	spec1(&sp, &c, DS_ZSTD);
	c.seed = 101;
	c.epochs = 1;
	c.batch_size = 7;
	c.threads = 2;
	for (int e = 0; e < 3; e++) {
		struct grist_loader *l;
		struct run r = { 0 };

		c.engine = e == 0 ? GRIST_ENGINE_REF : e == 1 ? GRIST_ENGINE_URING : GRIST_ENGINE_PREAD;
		c.read_mode = fx.direct_ok && e ? GRIST_READ_DIRECT : GRIST_READ_BUFFERED;
		c.map = e == 2 ? map_filter : NULL;
		c.map_out_max = 5001;
		l = open_loader(&c, NULL);
		drain(l, &c, 0, &r, NULL);
		grist_loader_stats(l, &st);
		assert_int_equal(grist_loader_num_records(l, 0), fx.ds[DS_ZSTD].n);
		assert_int_equal(grist_loader_num_records(l, 1), 0);
		assert_int_equal(st.batches, r.nbatches);
		assert_int_equal(st.records, r.nrec);
		assert_int_equal(st.records + st.records_filtered, fx.ds[DS_ZSTD].n);
		assert_true(e != 2 || st.records_filtered > 0);
		if (e == 0) {
			assert_string_equal(st.engine, "ref");
		} else {
			assert_string_equal(st.engine, e == 1 && fx.uring_ok ? "uring" : "pread");
			assert_int_equal(st.threads, 2);
			assert_string_equal(st.read_mode, fx.direct_ok ? "direct" : "buffered");
			assert_true(st.reads_issued > 0 && st.bytes_read > 0 && st.chunks_decoded > 0);
		}
		grist_loader_destroy(l);
		run_free(&r);
	}
	if (!fx.uring_ok)
		fprintf(stderr, "note: io_uring unavailable (%s); the uring engine ran on the pread pool\n",
			fx.uring_why);
}

/* Drop every page of @d's files from the page cache; false when the file system keeps them. */
static bool evict_dataset(const struct ds *d)
{
	bool all = true;

	for (size_t i = 0; i < d->npaths; i++) {
		int fd = open(d->paths[i], O_RDONLY | O_CLOEXEC);
		double share = 1;

		assert_true(fd >= 0);
		assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		assert_int_equal(grist_io_resident_share(fd, (uint64_t)lseek(fd, 0, SEEK_END), &share), 0);
		all = all && share < 0.05;
		close(fd);
	}
	return all;
}

/*
 * --io auto maps files the page cache holds and reads the others; the bytes never change.
 * DS_LARGE's chunks are large (20 to 220 KB), so only the probe decides for it;
 * DS_ZSTD1's (one record each) are small, so it is mapped evicted or not (map_small_dataset
 * in engine_async.c).
 */
static void auto_maps_run(int id, const char *evicted_mode)
{
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_loader_stats st;
	struct grist_loader *l;
	struct run ref, got;
	struct specs sp;

	spec1(&sp, &c, id);
	c.seed = 77;
	c.epochs = 2;
	c.batch_size = 13;
	c.engine = GRIST_ENGINE_REF;
	run_cfg(&c, NULL, 0, &ref, NULL); /* reads every file: all cached now */
	c.engine = GRIST_ENGINE_URING;
	c.threads = 2;
	c.read_mode = GRIST_READ_AUTO;
	for (int pass = 0; pass < 2; pass++) {
		l = open_loader(&c, NULL);
		memset(&got, 0, sizeof(got));
		drain(l, &c, 0, &got, NULL);
		grist_loader_stats(l, &st);
		assert_string_equal(st.read_mode, pass == 0 ? "mmap" : evicted_mode);
		grist_loader_destroy(l);
		assert_same_runs(&ref, &got);
		run_free(&got);
		if (pass == 0 && !evict_dataset(&fx.ds[id])) {
			run_free(&ref);
			skip(); /* the file system keeps its pages (tmpfs) */
		}
	}
	run_free(&ref);
}

static void test_auto_maps_cached_files(void **state)
{
	(void)state;
	auto_maps_run(DS_LARGE, "buffered");
}

static void test_auto_maps_small_datasets(void **state)
{
	(void)state;
	auto_maps_run(DS_ZSTD1, "mmap");
}

/*
 * Read depth is its own quantity: tiny batches (1, 2, 3) of large records, queue depths
 * 1 and 256, read-ahead budgets smaller than one record (one unit at a time, in heap
 * memory), of a few records and the default, with a map and at chunk granularity: every
 * run is byte-identical to the reference engine.
 */
static void test_read_depth(void **state)
{
	struct grist_io_fault held_back[8]; /* the loader reads these while it lives */
	struct grist_loader_hooks hooks;
	static const int sets[] = { DS_LARGE, DS_LARGEZ };
	static const size_t budgets[] = { 4096, 0, 1u << 20 };
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_loader_stats st;
	struct grist_loader *l;
	struct specs sp;
	struct run ref, got;

	(void)state;
	for (size_t s = 0; s < 2; s++) {
		for (uint64_t b = 1; b <= 3; b++) {
			for (int gran = 0; gran < 2; gran++) {
				grist_loader_config_init(&c);
				spec1(&sp, &c, sets[s]);
				c.seed = 700 + b;
				c.epochs = 2;
				c.batch_size = b;
				c.granularity = gran ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
				c.window_chunks = 2;
				c.map = b == 2 && gran == 0 ? map_reverse : NULL;
				c.map_out_max = 220008;
				c.engine = GRIST_ENGINE_REF;
				run_cfg(&c, NULL, 0, &ref, c.map ? NULL : sp.check);
				for (unsigned v = 0; v < 6; v++) {
					struct variant var = { v % 3 == 2 ? GRIST_ENGINE_PREAD : GRIST_ENGINE_URING, 1 + v % 3,
							       v % 2 ? 256 : 1, 1 + v % 2,
							       v % 3 == 0 ? GRIST_READ_DIRECT
							       : v % 3 == 1 ? GRIST_READ_MMAP : GRIST_READ_BUFFERED };

					apply_variant(&c, &var);
					c.read_ahead_bytes = budgets[(v + b) % 3];
					run_cfg(&c, NULL, 0, &got, NULL);
					assert_same_runs(&ref, &got);
					run_free(&got);
				}
				run_free(&ref);
			}
		}
	}

	/*
	 * The depth is reached whatever the batch: one record per batch, queue depth 8. The
	 * first reads are held back (fault injection) so the check does not depend on how
	 * fast this machine's disk answers: a worker that waited for each unit's reads
	 * before reading the next would show one read in flight here, however slow.
	 */
	grist_loader_config_init(&c);
	spec1(&sp, &c, DS_LARGE);
	c.seed = 9;
	c.epochs = 1;
	c.batch_size = 1;
	c.threads = 1;
	c.queue_depth = 8;
	c.read_mode = fx.direct_ok ? GRIST_READ_DIRECT : GRIST_READ_BUFFERED;
	for (unsigned i = 0; i < 8; i++)
		held_back[i] = (struct grist_io_fault){ i, GRIST_IO_FAULT_DELAY, 100000 };
	hooks = fault_hooks(held_back, 8);
	l = open_loader(&c, &hooks);
	memset(&got, 0, sizeof(got));
	drain(l, &c, 0, &got, sp.check);
	grist_loader_stats(l, &st);
	/* more than the two units a worker kept in flight before reads were decoupled from units */
	assert_true(st.reads_in_flight_max > 2 && st.reads_in_flight_max <= 8);
	assert_true(st.reads_in_flight_mean > 0 && st.reads_in_flight_mean <= 8);
	assert_true(st.assemble_ns > 0);
	grist_loader_destroy(l);
	run_free(&got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_async_equals_ref),
		cmocka_unit_test(test_get_config),
		cmocka_unit_test_teardown(test_threads_follow_affinity, affinity_restore),
		cmocka_unit_test(test_auto_maps_cached_files),
		cmocka_unit_test(test_auto_maps_small_datasets),
		cmocka_unit_test(test_repeatable),
		cmocka_unit_test(test_stream_semantics),
		cmocka_unit_test(test_shards),
		cmocka_unit_test(test_layouts),
		cmocka_unit_test(test_maps),
		cmocka_unit_test(test_hold_batches),
		cmocka_unit_test(test_checkpoint_resume),
		cmocka_unit_test(test_checkpoint_rejects),
		cmocka_unit_test(test_checkpoint_elastic),
		cmocka_unit_test(test_mixing),
		cmocka_unit_test(test_filter_combinations),
		cmocka_unit_test(test_hold_limit),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_corrupt_file),
		cmocka_unit_test(test_fault_injection),
		cmocka_unit_test(test_worker_setup_fails),
		cmocka_unit_test(test_stream_large_unit),
		cmocka_unit_test(test_slot_budget),
		cmocka_unit_test(test_destroy_mid_epoch),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_read_depth),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
