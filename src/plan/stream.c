/* The record stream: epochs, record or chunk granularity, mixing and sharding, by position. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "plan/plan_internal.h"

/* Mark tables hold at most this many entries per epoch (8 bytes each). */
#define MAX_MARKS 65536
/* ... and mark at least every MIN_MARK_STRIDE windows. */
#define MIN_MARK_STRIDE 16

/* One component as this shard sees it. */
struct comp {
	struct grist_geometry geo;
	uint64_t rec_begin, n;            /* record granularity: records [rec_begin, +n) */
	uint64_t chunk_begin, num_chunks; /* chunk granularity: chunks [chunk_begin, +num_chunks) */
	uint64_t shard_key;               /* I + 1 in contiguous mode, else 0 */
	uint64_t window_salt;             /* (component, shard) folded for window keys */
	uint64_t window;                  /* chunks per window, at most num_chunks */
	uint64_t num_windows, mark_stride, num_marks;
};

/*
 * What one reader of the stream remembers about one component: the epoch
 * it last touched (with its permutation), and in chunk granularity the
 * window it last touched plus the epoch's window marks. Pure caches: any
 * state gives the same answers, only the cost differs.
 */
struct comp_cache {
	bool valid;
	uint64_t epoch, epoch_start;      /* epoch_start = epoch * n */
	struct grist_perm perm;           /* records, or chunks in chunk granularity */
	bool marks_valid;
	uint64_t *marks;                  /* marks[i]: first epoch position of window i * stride */
	bool win_valid;
	uint64_t win, win_first, win_records;
	uint64_t win_chunks;
	struct grist_perm win_perm;
	uint64_t *win_rec;                /* first record of each chunk of the window, in order */
	uint64_t *win_prefix;             /* win_chunks + 1 prefix sums of their sizes */
};

struct grist_stream {
	struct grist_plan_config cfg;
	size_t nc;
	struct comp *comps;
	uint64_t *scaled, total;
	bool chunked;                     /* chunk granularity in effect (needs shuffle) */
	uint64_t global_length, length;
	struct comp_cache *at_cache;      /* grist_stream_at()'s own */
};

struct grist_stream_cursor {
	const struct grist_stream *s;
	uint64_t j;
	struct comp_cache *cache;
};

void grist_plan_config_init_sized(struct grist_plan_config *out, size_t size)
{
	struct grist_plan_config c, *cfg = &c;

	memset(cfg, 0, sizeof(*cfg));
	cfg->epochs = 1;
	cfg->shuffle = true;
	cfg->reshuffle = true;
	cfg->granularity = GRIST_GRANULARITY_RECORD;
	cfg->window = GRIST_PLAN_DEFAULT_WINDOW;
	cfg->shard_mode = GRIST_SHARD_STRIDED;
	cfg->shard_index = 0;
	cfg->shard_count = 1;
	/* a caller's struct may be older and shorter than this library's: write what fits */
	cfg->size = size < sizeof(c) ? size : sizeof(c);
	grist_sized_out(out, size, &c, sizeof(c));
}

const struct grist_plan_config *grist_stream_config(const struct grist_stream *s)
{
	return &s->cfg;
}

static void caches_free(const struct grist_stream *s, struct comp_cache *cc)
{
	size_t d;

	if (!cc)
		return;
	for (d = 0; d < s->nc; d++) {
		free(cc[d].marks);
		free(cc[d].win_rec);
		free(cc[d].win_prefix);
	}
	free(cc);
}

static int caches_alloc(const struct grist_stream *s, struct comp_cache **out)
{
	struct comp_cache *cc = calloc(s->nc, sizeof(*cc));
	size_t d;

	if (!cc)
		return grist_fail(-ENOMEM, "stream cache for %zu components", s->nc);
	for (d = 0; s->chunked && d < s->nc; d++) {
		/* window <= GRIST_PLAN_MAX_WINDOW, checked at create. */
		size_t w = (size_t)s->comps[d].window;

		cc[d].win_rec = malloc((w ? w : 1) * sizeof(uint64_t));
		cc[d].win_prefix = malloc((w + 1) * sizeof(uint64_t));
		if (!cc[d].win_rec || !cc[d].win_prefix) {
			caches_free(s, cc);
			return grist_fail(-ENOMEM, "window tables of %zu chunks", w);
		}
	}
	*out = cc;
	return 0;
}

static void streamfree(struct grist_stream *s)
{
	size_t d;

	if (s->comps)
		for (d = 0; d < s->nc; d++)
			grist_geometry_free(&s->comps[d].geo);
	caches_free(s, s->at_cache);
	free(s->comps);
	free(s->scaled);
	free(s);
}

void grist_stream_destroy(struct grist_stream *s)
{
	if (s)
		streamfree(s);
}

/* Grain's even_split: n / k each, the first n % k parts one more. */
static void even_split(uint64_t n, uint64_t k, uint64_t i, uint64_t *begin, uint64_t *count)
{
	uint64_t per = n / k, rem = n % k;

	*begin = per * i + (i < rem ? i : rem);
	*count = per + (i < rem);
}

/* Lay out component d for this shard; check K against its size. */
static int comp_setup(struct grist_stream *s, size_t d)
{
	const struct grist_plan_config *cfg = &s->cfg;
	struct comp *cp = &s->comps[d];
	uint64_t records = grist_geometry_records(&cp->geo);
	uint64_t chunks = grist_geometry_chunks(&cp->geo);
	uint64_t k = cfg->shard_count, i = cfg->shard_index;
	bool contiguous = cfg->shard_mode == GRIST_SHARD_CONTIGUOUS;

	if (!records)
		return grist_fail(-EINVAL, "dataset %zu has no records", d);
	if (contiguous && s->chunked && k > chunks)
		return grist_fail(-EINVAL, "shard count %llu exceeds the %llu chunks of dataset %zu "
				  "(contiguous chunk sharding gives each shard whole chunks)",
				  (unsigned long long)k, (unsigned long long)chunks, d);
	if (k > records)
		return grist_fail(-EINVAL, "shard count %llu exceeds the %llu records per epoch of "
				  "dataset %zu", (unsigned long long)k, (unsigned long long)records, d);
	cp->chunk_begin = 0;
	cp->num_chunks = chunks;
	cp->rec_begin = 0;
	cp->n = records;
	cp->shard_key = 0;
	if (contiguous) {
		cp->shard_key = i + 1;
		if (s->chunked) {
			uint64_t end, dummy;

			even_split(chunks, k, i, &cp->chunk_begin, &cp->num_chunks);
			cp->rec_begin = grist_geometry_chunk(&cp->geo, cp->chunk_begin, &dummy);
			end = grist_geometry_chunk(&cp->geo, cp->chunk_begin + cp->num_chunks, &dummy);
			cp->n = end - cp->rec_begin;
		} else {
			even_split(records, k, i, &cp->rec_begin, &cp->n);
		}
	}
	cp->window_salt = grist_plan_key(0, 0, d, cp->shard_key, 0);
	cp->window = cfg->window < cp->num_chunks ? cfg->window : cp->num_chunks;
	cp->num_windows = (cp->num_chunks - 1) / cp->window + 1;
	cp->mark_stride = (cp->num_windows - 1) / MAX_MARKS + 1;
	if (cp->mark_stride < MIN_MARK_STRIDE)
		cp->mark_stride = MIN_MARK_STRIDE;
	cp->num_marks = (cp->num_windows - 1) / cp->mark_stride + 1;
	return 0;
}

static int compute_lengths(struct grist_stream *s)
{
	const struct grist_plan_config *cfg = &s->cfg;
	uint64_t caps[1], *capv = caps, L;
	size_t d;

	if (!cfg->epochs) {
		L = UINT64_MAX;
	} else {
		if (s->nc > 1) {
			capv = malloc(s->nc * sizeof(uint64_t));
			if (!capv)
				return grist_fail(-ENOMEM, "mix caps");
		}
		for (d = 0; d < s->nc; d++) {
			if (__builtin_mul_overflow(cfg->epochs, s->comps[d].n, &capv[d]) ||
			    capv[d] == UINT64_MAX) {
				if (capv != caps)
					free(capv);
				return grist_fail(-EINVAL, "%llu epochs of dataset %zu exceed 2^64 "
						  "positions; use epochs 0 for an unbounded stream",
						  (unsigned long long)cfg->epochs, d);
			}
		}
		L = s->nc == 1 ? capv[0] : grist_mix_length(s->scaled, s->nc, s->total, capv);
		if (capv != caps)
			free(capv);
	}
	s->global_length = L;
	if (L == UINT64_MAX)
		s->length = UINT64_MAX;
	else if (cfg->shard_mode == GRIST_SHARD_CONTIGUOUS)
		s->length = cfg->base >= L ? 0 : L - cfg->base;
	else if (cfg->base >= L || cfg->shard_index >= L - cfg->base)
		s->length = 0;
	else
		s->length = (L - cfg->base - cfg->shard_index - 1) / cfg->shard_count + 1;
	return 0;
}

int grist_stream_create(const struct grist_plan_config *caller_cfg, struct grist_stream **out)
{
	struct grist_plan_config copy, *cfg = &copy;
	struct grist_stream *s;
	double *weights = NULL;
	size_t d;
	int ret;

	*out = NULL;
	ret = grist_sized_in(&copy, sizeof(copy), caller_cfg, "grist_plan_config");
	if (ret)
		return ret;
	if (!cfg->num_components || !cfg->components)
		return grist_fail(-EINVAL, "a stream needs at least one component");
	if (cfg->num_components > GRIST_PLAN_MAX_COMPONENTS)
		return grist_fail(-EINVAL, "%zu components; at most %d", cfg->num_components,
				  GRIST_PLAN_MAX_COMPONENTS);
	if (!cfg->shard_count || cfg->shard_index >= cfg->shard_count)
		return grist_fail(-EINVAL, "shard %llu/%llu: need a shard count >= 1 and an index below it",
				  (unsigned long long)cfg->shard_index,
				  (unsigned long long)cfg->shard_count);
	if (cfg->granularity != GRIST_GRANULARITY_RECORD && cfg->granularity != GRIST_GRANULARITY_CHUNK)
		return grist_fail(-EINVAL, "unknown granularity %d", (int)cfg->granularity);
	if (cfg->shard_mode != GRIST_SHARD_STRIDED && cfg->shard_mode != GRIST_SHARD_CONTIGUOUS)
		return grist_fail(-EINVAL, "unknown shard mode %d", (int)cfg->shard_mode);
	if (!cfg->window || cfg->window > GRIST_PLAN_MAX_WINDOW)
		return grist_fail(-EINVAL, "window %llu chunks: must be 1 to %d",
				  (unsigned long long)cfg->window, GRIST_PLAN_MAX_WINDOW);

	s = calloc(1, sizeof(*s));
	if (!s)
		return grist_fail(-ENOMEM, "stream");
	s->cfg = *cfg;
	s->cfg.components = NULL;
	s->nc = cfg->num_components;
	s->chunked = cfg->shuffle && cfg->granularity == GRIST_GRANULARITY_CHUNK;
	s->comps = calloc(s->nc, sizeof(*s->comps));
	s->scaled = calloc(s->nc, sizeof(*s->scaled));
	weights = calloc(s->nc, sizeof(*weights));
	if (!s->comps || !s->scaled || !weights) {
		ret = grist_fail(-ENOMEM, "stream of %zu components", s->nc);
		goto fail;
	}
	for (d = 0; d < s->nc; d++) {
		const struct grist_plan_component *c = &cfg->components[d];

		ret = grist_geometry_init(&s->comps[d].geo, c->files, c->num_files, d);
		if (ret < 0)
			goto fail;
		ret = comp_setup(s, d);
		if (ret < 0)
			goto fail;
		weights[d] = c->weight;
	}
	if (s->nc > 1) {
		ret = grist_mix_scale(weights, s->nc, s->scaled, &s->total);
		if (ret < 0)
			goto fail;
	} else {
		s->scaled[0] = 100;
		s->total = 100;
	}
	ret = compute_lengths(s);
	if (ret < 0)
		goto fail;
	ret = caches_alloc(s, &s->at_cache);
	if (ret < 0)
		goto fail;
	free(weights);
	*out = s;
	return 0;
fail:
	free(weights);
	streamfree(s);
	return ret;
}

uint64_t grist_stream_length(const struct grist_stream *s)
{
	return s->length;
}

uint64_t grist_stream_global_length(const struct grist_stream *s)
{
	return s->global_length;
}

static void set_epoch(const struct grist_stream *s, size_t d, struct comp_cache *cc, uint64_t e)
{
	const struct comp *cp = &s->comps[d];
	uint64_t ekey = s->cfg.reshuffle ? e : 0;

	cc->valid = true;
	cc->epoch = e;
	cc->epoch_start = e * cp->n;
	cc->marks_valid = false;
	cc->win_valid = false;
	if (!s->cfg.shuffle)
		return;
	/* Sizes were checked at create, so init cannot fail here. */
	if (s->chunked)
		grist_perm_init_key(&cc->perm, cp->num_chunks,
				    grist_plan_key(s->cfg.seed, GRIST_KEY_CHUNKS, ekey, d, cp->shard_key));
	else
		grist_perm_init_key(&cc->perm, cp->n,
				    grist_plan_key(s->cfg.seed, GRIST_KEY_PERM, ekey, d, cp->shard_key));
}

/* Records in window w of the cached epoch; fills the window tables when @rec is set. */
static uint64_t window_records(const struct comp *cp, const struct comp_cache *cc, uint64_t w,
			       uint64_t *rec, uint64_t *prefix)
{
	uint64_t t0 = w * cp->window, count = cp->num_chunks - t0, sum = 0, ids[64];
	uint64_t done = 0;

	if (count > cp->window)
		count = cp->window;
	while (done < count) {
		uint64_t batch = count - done < 64 ? count - done : 64, k;

		grist_perm_fill(&cc->perm, t0 + done, (size_t)batch, ids);
		for (k = 0; k < batch; k++) {
			uint64_t size, first = grist_geometry_chunk(&cp->geo, cp->chunk_begin + ids[k], &size);

			if (rec) {
				rec[done + k] = first;
				prefix[done + k] = sum;
			}
			sum += size;
		}
		done += batch;
	}
	if (prefix)
		prefix[count] = sum;
	return sum;
}

static int build_marks(const struct grist_stream *s, const struct comp *cp, struct comp_cache *cc)
{
	uint64_t w, pos = 0;

	(void)s;
	if (!cc->marks) {
		/* num_marks <= MAX_MARKS by construction of mark_stride. */
		cc->marks = malloc((size_t)cp->num_marks * sizeof(uint64_t));
		if (!cc->marks)
			return grist_fail(-ENOMEM, "window marks (%llu)", (unsigned long long)cp->num_marks);
	}
	/* O(chunks) once per epoch: the price of random access at chunk granularity. */
	for (w = 0; w < cp->num_windows; w++) {
		if (w % cp->mark_stride == 0)
			cc->marks[w / cp->mark_stride] = pos;
		pos += window_records(cp, cc, w, NULL, NULL);
	}
	cc->marks_valid = true;
	return 0;
}

static void load_window(const struct grist_stream *s, size_t d, struct comp_cache *cc, uint64_t w,
			uint64_t first)
{
	const struct comp *cp = &s->comps[d];
	uint64_t ekey = s->cfg.reshuffle ? cc->epoch : 0;

	cc->win = w;
	cc->win_first = first;
	cc->win_records = window_records(cp, cc, w, cc->win_rec, cc->win_prefix);
	cc->win_chunks = cp->num_chunks - w * cp->window < cp->window ?
			 cp->num_chunks - w * cp->window : cp->window;
	grist_perm_init_key(&cc->win_perm, cc->win_records,
			    grist_plan_key(s->cfg.seed, GRIST_KEY_WINDOW, ekey, w, cp->window_salt));
	cc->win_valid = true;
}

/* Make the cached window the one holding epoch position p. */
static int seek_window(const struct grist_stream *s, size_t d, struct comp_cache *cc, uint64_t p)
{
	const struct comp *cp = &s->comps[d];
	uint64_t w = 0, first = 0, budget = cp->mark_stride + 1, r;
	int ret;

	if (cc->win_valid) {
		if (p >= cc->win_first && p - cc->win_first < cc->win_records)
			return 0;
		if (p >= cc->win_first) {
			w = cc->win;
			first = cc->win_first;
		}
	}
	/* Sequential and nearby positions walk forward; far jumps use the marks. */
	for (; budget && w < cp->num_windows; budget--, w++) {
		r = window_records(cp, cc, w, NULL, NULL);
		if (p - first < r) {
			load_window(s, d, cc, w, first);
			return 0;
		}
		first += r;
	}
	if (!cc->marks_valid) {
		ret = build_marks(s, cp, cc);
		if (ret < 0)
			return ret;
	}
	{
		size_t m = grist_plan_search(cc->marks, (size_t)cp->num_marks, p);

		w = m * cp->mark_stride;
		first = cc->marks[m];
	}
	for (; w < cp->num_windows; w++) {
		r = window_records(cp, cc, w, NULL, NULL);
		if (p - first < r) {
			load_window(s, d, cc, w, first);
			return 0;
		}
		first += r;
	}
	return grist_fail(-ERANGE, "epoch position %llu past the epoch's %llu records",
			  (unsigned long long)p, (unsigned long long)cp->n);
}

/* Component d's stream position c -> record, through the cache. */
static int resolve_component(const struct grist_stream *s, size_t d, struct comp_cache *cc,
			     uint64_t c, struct grist_stream_item *item)
{
	const struct comp *cp = &s->comps[d];
	uint64_t p, rec;
	int ret;

	if (!cc->valid || c < cc->epoch_start || c - cc->epoch_start >= cp->n)
		set_epoch(s, d, cc, c / cp->n);
	p = c - cc->epoch_start;
	if (!s->cfg.shuffle) {
		rec = cp->rec_begin + p;
	} else if (!s->chunked) {
		rec = cp->rec_begin + grist_perm_at(&cc->perm, p);
	} else {
		uint64_t r;
		size_t t;

		ret = seek_window(s, d, cc, p);
		if (ret < 0)
			return ret;
		r = grist_perm_at(&cc->win_perm, p - cc->win_first);
		t = grist_plan_search(cc->win_prefix, (size_t)cc->win_chunks, r);
		rec = cc->win_rec[t] + (r - cc->win_prefix[t]);
	}
	item->component = (uint32_t)d;
	item->record = rec;
	item->epoch = cc->epoch;
	item->component_position = c;
	return 0;
}

static int resolve(const struct grist_stream *s, struct comp_cache *cc, uint64_t j,
		   struct grist_stream_item *item)
{
	const struct grist_plan_config *cfg = &s->cfg;
	uint64_t g, c;
	size_t d = 0;

	if (j >= s->length)
		return grist_fail(-ERANGE, "shard position %llu past the shard's %llu positions",
				  (unsigned long long)j, (unsigned long long)s->length);
	if (cfg->shard_mode == GRIST_SHARD_CONTIGUOUS) {
		if (__builtin_add_overflow(cfg->base, j, &g))
			goto overflow;
	} else if (__builtin_mul_overflow(j, cfg->shard_count, &g) ||
		   __builtin_add_overflow(g, cfg->shard_index, &g) ||
		   __builtin_add_overflow(g, cfg->base, &g)) {
		goto overflow;
	}
	if (g == UINT64_MAX)
		goto overflow;
	c = g;
	if (s->nc > 1)
		d = grist_mix_pick(s->scaled, s->nc, s->total, g, &c);
	item->position = g;
	return resolve_component(s, d, &cc[d], c, item);
overflow:
	return grist_fail(-ERANGE, "shard position %llu runs past 2^64 - 1 stream positions",
			  (unsigned long long)j);
}

int grist_stream_at(struct grist_stream *s, uint64_t j, struct grist_stream_item *item)
{
	return resolve(s, s->at_cache, j, item);
}

int grist_stream_cursor_create(const struct grist_stream *s, struct grist_stream_cursor **out)
{
	struct grist_stream_cursor *c = calloc(1, sizeof(*c));
	int ret;

	*out = NULL;
	if (!c)
		return grist_fail(-ENOMEM, "stream cursor");
	ret = caches_alloc(s, &c->cache);
	if (ret < 0) {
		free(c);
		return ret;
	}
	c->s = s;
	*out = c;
	return 0;
}

void grist_stream_cursor_destroy(struct grist_stream_cursor *c)
{
	if (!c)
		return;
	caches_free(c->s, c->cache);
	free(c);
}

int grist_stream_next(struct grist_stream_cursor *c, struct grist_stream_item *item)
{
	int ret;

	if (c->j >= c->s->length)
		return 0;
	ret = resolve(c->s, c->cache, c->j, item);
	if (ret < 0)
		return ret;
	c->j++;
	return 1;
}

uint64_t grist_stream_cursor_window_end(const struct grist_stream_cursor *c)
{
	const struct grist_stream *s = c->s;
	const struct comp_cache *cc = &c->cache[0];
	const struct grist_plan_config *cfg = &s->cfg;
	uint64_t g_end, j_end;

	if (!s->chunked || s->nc != 1 || c->j == 0 || !cc->win_valid)
		return 0;
	/* The window of the item just returned ends at this component (= global) position. */
	g_end = cc->epoch_start + cc->win_first + cc->win_records;
	if (cfg->shard_mode == GRIST_SHARD_CONTIGUOUS) {
		j_end = g_end - cfg->base;
	} else {
		uint64_t first = cfg->base + cfg->shard_index;

		j_end = g_end <= first ? 0 : (g_end - first + cfg->shard_count - 1) / cfg->shard_count;
	}
	if (j_end > s->length)
		j_end = s->length;
	return j_end > c->j - 1 ? j_end : 0;
}

uint64_t grist_stream_cursor_tell(const struct grist_stream_cursor *c)
{
	return c->j;
}

int grist_stream_cursor_seek(struct grist_stream_cursor *c, uint64_t j)
{
	if (j > c->s->length)
		return grist_fail(-ERANGE, "seek to shard position %llu past the shard's %llu positions",
				  (unsigned long long)j, (unsigned long long)c->s->length);
	c->j = j;
	return 0;
}

uint64_t grist_stream_fingerprint(const struct grist_stream *s, uint64_t extra)
{
	const struct grist_plan_config *cfg = &s->cfg;
	uint64_t h = grist_plan_mix64(UINT64_C(0x67726973747374) ^ 1); /* "grists", layout 1 */
	size_t d, f;

#define FOLD(x) (h = grist_plan_mix64(h ^ (uint64_t)(x)))
	FOLD(s->nc);
	for (d = 0; d < s->nc; d++) {
		const struct grist_geometry *g = &s->comps[d].geo;

		FOLD(g->num_files);
		for (f = 0; f < g->num_files; f++) {
			FOLD(g->record_first[f + 1] - g->record_first[f]);
			FOLD(g->group_size[f]);
		}
		FOLD(s->scaled[d]);
	}
	FOLD(cfg->seed);
	FOLD(cfg->epochs);
	FOLD(cfg->shuffle);
	FOLD(cfg->reshuffle);
	FOLD(cfg->granularity);
	FOLD(cfg->window);
	FOLD(cfg->shard_mode);
	FOLD(extra);
#undef FOLD
	return h;
}
