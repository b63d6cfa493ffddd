/* Tests for the record stream: epochs, granularity, sharding, mixing, random access vs cursor. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "grist/plan.h"

static struct grist_stream *make(const struct grist_plan_config *cfg)
{
	struct grist_stream *s = NULL;
	int ret = grist_stream_create(cfg, &s);

	if (ret < 0)
		fail_msg("grist_stream_create: %d %s", ret, grist_last_error());
	return s;
}

/* A one-component config over @files. */
static void config_one(struct grist_plan_config *cfg, struct grist_plan_component *comp,
		       const struct grist_plan_file *files, size_t nfiles)
{
	grist_plan_config_init(cfg);
	memset(comp, 0, sizeof(*comp));
	comp->files = files;
	comp->num_files = nfiles;
	comp->weight = 1;
	cfg->components = comp;
	cfg->num_components = 1;
}

/* Read a whole finite shard with a cursor into a malloc'd array. */
static struct grist_stream_item *drain(const struct grist_stream *s, uint64_t *count)
{
	uint64_t len = grist_stream_length(s), j = 0;
	struct grist_stream_item *items = malloc((len ? len : 1) * sizeof(*items));
	struct grist_stream_cursor *c;

	assert_non_null(items);
	assert_int_equal(grist_stream_cursor_create(s, &c), 0);
	while (grist_stream_next(c, &items[j]) == 1) {
		assert_true(j < len);
		j++;
	}
	assert_int_equal(j, len);
	assert_int_equal(grist_stream_next(c, &items[0]) == 0, 1);
	grist_stream_cursor_destroy(c);
	*count = j;
	return items;
}

static void test_record_epochs(void **state)
{
	const struct grist_plan_file f = { 1000, 1 };
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream_item *items;
	struct grist_stream *s;
	struct grist_perm p;
	uint64_t n, j;
	int mode;

	(void)state;
	for (mode = 0; mode < 3; mode++) {
		config_one(&cfg, &comp, &f, 1);
		cfg.seed = 5;
		cfg.epochs = 3;
		cfg.reshuffle = mode != 1;
		cfg.shuffle = mode != 2;
		s = make(&cfg);
		assert_int_equal(grist_stream_length(s), 3000);
		items = drain(s, &n);
		for (j = 0; j < n; j++) {
			uint64_t e = j / 1000, want;

			grist_perm_init(&p, 1000, 5, mode == 1 ? 0 : e);
			want = mode == 2 ? j % 1000 : grist_perm_at(&p, j % 1000);
			assert_int_equal(items[j].record, want);
			assert_int_equal(items[j].epoch, e);
			assert_int_equal(items[j].component, 0);
			assert_int_equal(items[j].component_position, j);
			assert_int_equal(items[j].position, j);
		}
		free(items);
		grist_stream_destroy(s);
	}
}

/* Shards take positions I + jK; together they are the unsharded stream, sizes within one. */
static void test_strided_shards(void **state)
{
	const struct grist_plan_file f[2] = { { 600, 1 }, { 401, 1 } };
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream_item *all, *part;
	struct grist_stream *s;
	uint64_t n_all, n, j, k, i;

	(void)state;
	config_one(&cfg, &comp, f, 2);
	cfg.epochs = 2;
	cfg.seed = 11;
	s = make(&cfg);
	all = drain(s, &n_all);
	grist_stream_destroy(s);
	assert_int_equal(n_all, 2002);
	for (k = 1; k <= 7; k++) {
		uint64_t total = 0;

		for (i = 0; i < k; i++) {
			cfg.shard_count = k;
			cfg.shard_index = i;
			s = make(&cfg);
			part = drain(s, &n);
			assert_int_equal(n, (2002 - i + k - 1) / k);
			for (j = 0; j < n; j++) {
				assert_int_equal(part[j].position, i + j * k);
				assert_int_equal(part[j].record, all[i + j * k].record);
				assert_int_equal(part[j].epoch, all[i + j * k].epoch);
			}
			total += n;
			free(part);
			grist_stream_destroy(s);
		}
		assert_int_equal(total, n_all);
	}
	free(all);
}

/*
 * Check an epoch of chunk granularity: it is a permutation of the records, and
 * it splits into consecutive windows each holding all records of at most W
 * whole chunks (exactly W except the last window).
 */
static void check_chunk_epoch(const struct grist_stream_item *it, uint64_t n, uint64_t window,
			      const uint64_t *chunk_of, const uint64_t *chunk_size, uint64_t nchunks)
{
	uint8_t *seen = calloc(n, 1), *chunk_seen = calloc(nchunks, 1);
	uint64_t p, in_window = 0, covered = 0, chunks = 0, windows = 0;

	assert_non_null(seen);
	assert_non_null(chunk_seen);
	for (p = 0; p < n; p++) {
		uint64_t r = it[p].record, c;

		assert_true(r < n);
		assert_false(seen[r]);
		seen[r] = 1;
		c = chunk_of[r];
		if (!chunk_seen[c]) {
			chunk_seen[c] = 1;
			chunks++;
			covered += chunk_size[c];
			assert_true(chunks <= window);
		}
		in_window++;
		if (in_window == covered && (chunks == window)) {
			in_window = covered = chunks = 0;
			windows++;
		}
	}
	assert_int_equal(in_window, covered); /* the last, shorter window is complete */
	assert_int_equal(windows + (chunks ? 1 : 0), (nchunks + window - 1) / window);
	free(seen);
	free(chunk_seen);
}

static void test_chunk_windows(void **state)
{
	const struct grist_plan_file f[5] = { { 100, 7 }, { 53, 10 }, { 1, 4 }, { 0, 0 }, { 40, 40 } };
	const uint64_t n = 194, windows[] = { 1, 2, 3, 16, 100 };
	uint64_t chunk_of[194], chunk_size[64], nchunks = 0, r = 0, got, w, e;
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream_item *items;
	struct grist_stream *s;
	size_t fi;

	(void)state;
	for (fi = 0; fi < 5; fi++) {
		uint64_t k;

		for (k = 0; k < f[fi].num_records; k++) {
			if (k % f[fi].group_size == 0)
				chunk_size[nchunks++] = 0;
			chunk_size[nchunks - 1]++;
			chunk_of[r++] = nchunks - 1;
		}
	}
	assert_int_equal(r, n);
	for (w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) {
		config_one(&cfg, &comp, f, 5);
		cfg.granularity = GRIST_GRANULARITY_CHUNK;
		cfg.window = windows[w];
		cfg.epochs = 3;
		cfg.seed = 1234 + w;
		s = make(&cfg);
		items = drain(s, &got);
		assert_int_equal(got, 3 * n);
		for (e = 0; e < 3; e++) {
			check_chunk_epoch(items + e * n, n, windows[w], chunk_of, chunk_size, nchunks);
			assert_int_equal(items[e * n].epoch, e);
		}
		/* Epochs differ (reshuffle on). */
		assert_true(memcmp(&items[0].record, &items[n].record, sizeof(uint64_t)) != 0 ||
			    items[1].record != items[n + 1].record || items[2].record != items[n + 2].record);
		free(items);
		grist_stream_destroy(s);
	}
}

/* grist_stream_at() in any order and cursor seeks agree with a sequential pass. */
static void test_random_access_matches_cursor(void **state)
{
	const struct grist_plan_file f[2] = { { 5000, 3 }, { 777, 5 } };
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream_cursor *c;
	struct grist_stream_item *seq, it;
	struct grist_stream *s;
	uint64_t n, k, rnd[3000];
	int gran;

	(void)state;
	t_fill(rnd, sizeof(rnd), 3);
	for (gran = 0; gran < 2; gran++) {
		config_one(&cfg, &comp, f, 2);
		cfg.granularity = gran ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
		cfg.window = 2; /* ~950 windows: far jumps go through the marks */
		cfg.epochs = 2;
		cfg.shard_count = 2;
		cfg.shard_index = 1;
		s = make(&cfg);
		seq = drain(s, &n);
		assert_int_equal(n, 5777);
		for (k = 0; k < 3000; k++) {
			uint64_t j = rnd[k] % n;

			assert_int_equal(grist_stream_at(s, j, &it), 0);
			assert_int_equal(it.record, seq[j].record);
			assert_int_equal(it.position, seq[j].position);
		}
		assert_int_equal(grist_stream_at(s, n, &it), -ERANGE);
		assert_int_equal(grist_stream_cursor_create(s, &c), 0);
		for (k = 0; k < 200; k++) {
			uint64_t j = rnd[k] % n, m;

			assert_int_equal(grist_stream_cursor_seek(c, j), 0);
			assert_int_equal(grist_stream_cursor_tell(c), j);
			for (m = j; m < j + 20 && m < n; m++) {
				assert_int_equal(grist_stream_next(c, &it), 1);
				assert_int_equal(it.record, seq[m].record);
			}
		}
		assert_int_equal(grist_stream_cursor_seek(c, n), 0);
		assert_int_equal(grist_stream_next(c, &it), 0);
		assert_int_equal(grist_stream_cursor_seek(c, n + 1), -ERANGE);
		grist_stream_cursor_destroy(c);
		free(seq);
		grist_stream_destroy(s);
	}
}

static void test_mixing(void **state)
{
	const struct grist_plan_file fa = { 10, 1 }, fb = { 100, 1 };
	struct grist_plan_component comps[2] = { { &fa, 1, 1.0 }, { &fb, 1, 2.0 } };
	struct grist_plan_config cfg;
	struct grist_stream_item *items, it;
	struct grist_stream *s;
	struct grist_perm p;
	uint64_t n, j, count[2] = { 0, 0 };

	(void)state;
	grist_plan_config_init(&cfg);
	cfg.components = comps;
	cfg.num_components = 2;
	cfg.seed = 9;
	s = make(&cfg);
	/* Component 0 gets elements 0, 3, 6, ...; its 11th would be element 30. */
	assert_int_equal(grist_stream_length(s), 30);
	items = drain(s, &n);
	for (j = 0; j < n; j++) {
		uint32_t d = items[j].component;

		assert_int_equal(d, j % 3 == 0 ? 0 : 1);
		assert_int_equal(items[j].component_position, count[d]);
		count[d]++;
	}
	free(items);
	grist_stream_destroy(s);

	/* Unbounded: each component repeats on its own, epochs keyed per component. */
	cfg.epochs = 0;
	s = make(&cfg);
	assert_int_equal(grist_stream_length(s), UINT64_MAX);
	assert_int_equal(grist_stream_at(s, 3 * 25, &it), 0); /* component 0's 26th element */
	assert_int_equal(it.component, 0);
	assert_int_equal(it.component_position, 25);
	assert_int_equal(it.epoch, 2);
	grist_perm_init(&p, 10, 9, 2);
	assert_int_equal(it.record, grist_perm_at(&p, 5));
	grist_stream_destroy(s);

	comps[1].weight = 0;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	comps[1].weight = -2;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
}

/* Contiguous shards own even_split ranges; each epoch permutes the shard's range. */
static void test_contiguous(void **state)
{
	const struct grist_plan_file f = { 50, 4 }; /* 13 chunks: 12 of 4 and one of 2 */
	static const uint64_t rec_lo[4] = { 0, 13, 26, 38 }, rec_hi[4] = { 13, 26, 38, 50 };
	static const uint64_t chk_lo[4] = { 0, 16, 28, 40 }, chk_hi[4] = { 16, 28, 40, 50 };
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream_item *items;
	struct grist_stream *s;
	uint64_t i, n, j;
	int gran;

	(void)state;
	for (gran = 0; gran < 2; gran++) {
		const uint64_t *lo = gran ? chk_lo : rec_lo, *hi = gran ? chk_hi : rec_hi;
		uint8_t seen[50] = { 0 };

		for (i = 0; i < 4; i++) {
			config_one(&cfg, &comp, &f, 1);
			cfg.shard_mode = GRIST_SHARD_CONTIGUOUS;
			cfg.shard_count = 4;
			cfg.shard_index = i;
			cfg.epochs = 2;
			cfg.granularity = gran ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
			cfg.window = 2;
			s = make(&cfg);
			items = drain(s, &n);
			assert_int_equal(n, 2 * (hi[i] - lo[i]));
			for (j = 0; j < n; j++) {
				uint64_t r = items[j].record;

				assert_true(r >= lo[i] && r < hi[i]);
				assert_int_equal(items[j].position, j);
				if (j < n / 2) {
					assert_false(seen[r]);
					seen[r] = 1;
				}
			}
			free(items);
			grist_stream_destroy(s);
		}
		for (j = 0; j < 50; j++)
			assert_true(seen[j]);
	}
}

static void test_unbounded_and_overflow(void **state)
{
	const struct grist_plan_file f = { 7, 1 };
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream_item it;
	struct grist_stream *s;

	(void)state;
	config_one(&cfg, &comp, &f, 1);
	cfg.epochs = 0;
	cfg.shard_count = 3;
	cfg.shard_index = 2;
	s = make(&cfg);
	assert_int_equal(grist_stream_length(s), UINT64_MAX);
	assert_int_equal(grist_stream_at(s, UINT64_C(1000000000000000), &it), 0);
	assert_int_equal(it.position, UINT64_C(3000000000000002));
	assert_int_equal(it.epoch, UINT64_C(3000000000000002) / 7);
	assert_int_equal(grist_stream_at(s, UINT64_MAX / 3, &it), -ERANGE);
	grist_stream_destroy(s);

	/* base past the end: an empty shard, not an error. */
	cfg.epochs = 1;
	cfg.base = 100;
	s = make(&cfg);
	assert_int_equal(grist_stream_length(s), 0);
	grist_stream_destroy(s);
}

static void test_bad_configs(void **state)
{
	const struct grist_plan_file f = { 10, 2 }, empty = { 0, 0 }, nogroup = { 5, 0 };
	struct grist_plan_component comp;
	struct grist_plan_config cfg;
	struct grist_stream *s = (void *)1;

	(void)state;
	config_one(&cfg, &comp, &f, 1);
	cfg.shard_count = 0;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	assert_null(s);
	cfg.shard_count = 3;
	cfg.shard_index = 3;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	cfg.shard_count = 11;
	cfg.shard_index = 0;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "exceeds the 10 records"));
	cfg.shard_count = 10;
	assert_int_equal(grist_stream_create(&cfg, &s), 0);
	grist_stream_destroy(s);
	/* Contiguous chunk sharding needs a chunk per shard: 5 chunks. */
	cfg.shard_count = 6;
	cfg.shard_mode = GRIST_SHARD_CONTIGUOUS;
	cfg.granularity = GRIST_GRANULARITY_CHUNK;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "chunks"));
	config_one(&cfg, &comp, &f, 1);
	cfg.window = 0;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	cfg.window = GRIST_PLAN_DEFAULT_WINDOW;
	cfg.epochs = UINT64_MAX / 5;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	config_one(&cfg, &comp, &empty, 1);
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "no records"));
	config_one(&cfg, &comp, &nogroup, 1);
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "group_size 0"));
	cfg.num_components = 0;
	assert_int_equal(grist_stream_create(&cfg, &s), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_epochs),
		cmocka_unit_test(test_strided_shards),
		cmocka_unit_test(test_chunk_windows),
		cmocka_unit_test(test_random_access_matches_cursor),
		cmocka_unit_test(test_mixing),
		cmocka_unit_test(test_contiguous),
		cmocka_unit_test(test_unbounded_and_overflow),
		cmocka_unit_test(test_bad_configs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
