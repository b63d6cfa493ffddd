/*
 * The ABI rule of docs/architecture.md, shown by callers built the way old and new
 * programs are: this file links the shared library (libgrist.so.1), and its "old caller"
 * passes a copy of struct grist_loader_config as it was laid out before read_ahead_bytes
 * and the fields after it were added, with the size of that copy.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grist/fetch.h"
#include "grist/format.h"
#include "grist/loader.h"
#include "grist/options.h"
#include "grist/plan.h"
#include "helpers.h"

/* struct grist_loader_config of an older grist: the same fields up to prefetch, nothing after. */
struct old_loader_config {
	size_t size;
	const struct grist_dataset_spec *datasets;
	size_t num_datasets;
	uint64_t seed;
	uint64_t epochs;
	bool no_shuffle;
	bool same_order_each_epoch;
	enum grist_granularity granularity;
	uint64_t window_chunks;
	uint64_t shard_index;
	uint64_t shard_count;
	enum grist_shard_mode shard_mode;
	uint64_t batch_size;
	bool drop_remainder;
	enum grist_batch_layout layout;
	size_t record_bytes;
	uint8_t pad_value;
	grist_map_fn map;
	void *map_ctx;
	size_t map_out_max;
	uint64_t map_id;
	enum grist_pack_mode pack;
	size_t pack_length;
	size_t pack_bins;
	unsigned pack_token_bytes;
	enum grist_engine_kind engine;
	enum grist_read_mode read_mode;
	unsigned threads;
	unsigned queue_depth;
	unsigned prefetch;
};

/* The old caller's copy is a prefix of today's struct, field for field. */
_Static_assert(offsetof(struct old_loader_config, prefetch) == offsetof(struct grist_loader_config, prefetch),
	       "the old layout is a prefix of the new one");
_Static_assert(sizeof(struct old_loader_config) < sizeof(struct grist_loader_config), "the old layout is shorter");

/*
 * The frozen structs (docs/architecture.md, "A stable ABI"): embedded in others, so their
 * sizes, and the offsets of what follows them, are compiled into callers. The figures are
 * those of libgrist.so.1 as first released (grist 0.2) on LP64; a change here is a soname bump.
 */
#if defined(__LP64__)
_Static_assert(sizeof(struct grist_remote_options) == 56, "grist_remote_options is frozen");
_Static_assert(sizeof(struct grist_remote_stats) == 104, "grist_remote_stats is frozen");
_Static_assert(offsetof(struct grist_loader_config, read_trace) == 304,
	       "what follows the embedded grist_remote_options stays put");
_Static_assert(offsetof(struct grist_fetcher_stats, mapped_files) == 160,
	       "what follows the embedded grist_remote_stats stays put");
_Static_assert(offsetof(struct grist_loader_stats, remote_budget) == 280,
	       "the budget's figures are appended after the 0.2 layout");
/* grist_state: callers allocate it for grist_state_decode() and grist_stream_restore() */
_Static_assert(sizeof(struct grist_state) == 48, "grist_state is frozen");
_Static_assert(offsetof(struct grist_state, fingerprint) == 0 && offsetof(struct grist_state, base) == 8 &&
	       offsetof(struct grist_state, shard_index) == 16 && offsetof(struct grist_state, shard_count) == 20 &&
	       offsetof(struct grist_state, consumed) == 24 && offsetof(struct grist_state, batches) == 32 &&
	       offsetof(struct grist_state, flags) == 40 && offsetof(struct grist_state, pack_skip) == 44,
	       "grist_state's fields stay put");
/* grist_state_ex, frozen in its turn: grist_state first, then what version 3 of the bytes added */
_Static_assert(sizeof(struct grist_state_ex) == 64, "grist_state_ex is frozen");
_Static_assert(offsetof(struct grist_state_ex, state) == 0 && offsetof(struct grist_state_ex, pack_piece) == 48 &&
	       offsetof(struct grist_state_ex, reserved) == 52, "grist_state_ex's fields stay put");
#endif

/* The calls of struct grist_state keep their signatures: a new argument means a new call. */
#define SAME_TYPE(f, t) _Static_assert(__builtin_types_compatible_p(__typeof__(&f), t), #f " keeps its signature")
SAME_TYPE(grist_state_encode, int (*)(const struct grist_state *, uint8_t *, size_t));
SAME_TYPE(grist_state_decode, int (*)(const uint8_t *, size_t, struct grist_state *));
SAME_TYPE(grist_stream_save, int (*)(const struct grist_stream *, uint64_t, uint64_t, bool, uint64_t, uint8_t *,
				     size_t));
SAME_TYPE(grist_stream_save_packed, int (*)(const struct grist_stream *, uint64_t, uint64_t, uint64_t, uint64_t,
					    uint8_t *, size_t));
SAME_TYPE(grist_stream_restore, int (*)(const struct grist_plan_config *, uint64_t, const uint8_t *, size_t,
					uint64_t *, uint64_t *, struct grist_state *));

static struct t_numbered fx;

static int setup(void **state)
{
	(void)state;
	t_numbered_make(&fx, "abi.ar", "group_size:2,zstd:1", 300);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	t_numbered_drop(&fx);
	return 0;
}

/* XXH64 over every batch's bytes, in order, and the batch count. */
static uint64_t run_digest(const void *cfg, uint64_t *batches)
{
	struct grist_loader *l;
	struct grist_batch *b;
	uint64_t h = 0;

	*batches = 0;
	assert_int_equal(grist_loader_create(cfg, &l), 0);
	while (grist_loader_next(l, &b) == 0 && b) {
		h = XXH64(b->data, b->bytes, h);
		grist_loader_release(l, b);
		++*batches;
	}
	grist_loader_destroy(l);
	return h;
}

static void test_old_caller_keeps_working(void **state)
{
	struct {
		struct old_loader_config cfg;
		unsigned char canary[64]; /* where today's longer struct would continue */
	} old;
	struct t_one_file now;
	uint64_t n_old, n_now, h_old, h_now;
	size_t i;

	(void)state;
	memset(&old, 0xA5, sizeof(old));
	memset(&old.cfg, 0, sizeof(old.cfg));
	old.cfg.size = sizeof(old.cfg);
	t_one_file_init(&now, fx.path);
	now.c.seed = 7;
	now.c.epochs = 2;
	now.c.batch_size = 16;
	now.c.threads = 2;
	old.cfg.datasets = &now.spec; /* the same file */
	old.cfg.num_datasets = 1;
	old.cfg.seed = 7;
	old.cfg.epochs = 2;
	old.cfg.batch_size = 16;
	old.cfg.threads = 2;

	/* the library reads only what the old struct holds, and the rest is the defaults */
	h_old = run_digest(&old.cfg, &n_old);
	h_now = run_digest(&now.c, &n_now);
	assert_int_equal(n_old, 38);
	assert_int_equal(n_old, n_now);
	assert_true(h_old == h_now);

	/* by name: an option inside the old struct is set; a newer one is refused, nothing written past it */
	assert_int_equal(grist_loader_config_set((struct grist_loader_config *)&old.cfg, "queue_depth", "128"), 0);
	assert_int_equal(old.cfg.queue_depth, 128);
	assert_int_equal(grist_loader_config_set((struct grist_loader_config *)&old.cfg, "read_ahead", "4M"), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "newer than the caller's struct"));
	for (i = 0; i < sizeof(old.canary); i++)
		assert_int_equal(old.canary[i], 0xA5);
}

/* A loader over the fixture, built by a current caller. */
static struct grist_loader *fx_loader(uint64_t batch_size, uint64_t epochs, uint64_t seed)
{
	struct t_one_file o;

	t_one_file_init(&o, fx.path);
	o.c.batch_size = batch_size;
	o.c.epochs = epochs;
	o.c.seed = seed;
	return t_one_file_open(&o);
}

static void test_old_caller_stats_not_overrun(void **state)
{
	struct grist_loader *l = fx_loader(10, 1, 0);
	struct grist_batch *b;
	/* an older, shorter stats struct: up to memory_bytes */
	size_t old_size = offsetof(struct grist_loader_stats, pack_tokens);
	unsigned char buf[sizeof(struct grist_loader_stats) + 16];
	size_t i;

	(void)state;
	assert_int_equal(grist_loader_next(l, &b), 0);
	grist_loader_release(l, b);
	memset(buf, 0x5A, sizeof(buf));
	grist_loader_stats_sized(l, (struct grist_loader_stats *)buf, old_size);
	assert_int_equal(((struct grist_loader_stats *)buf)->batches, 1);
	for (i = old_size; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5A);
	grist_loader_destroy(l);
}

/* An old caller reads the resolved configuration into its shorter struct: only that is written. */
static void test_old_caller_get_config(void **state)
{
	struct grist_loader *l = fx_loader(10, 0, 3);
	struct {
		struct old_loader_config cfg;
		unsigned char canary[64];
	} old;
	uint64_t prefetch;
	size_t i;

	(void)state;
	memset(&old, 0xA5, sizeof(old));
	memset(&old.cfg, 0, sizeof(old.cfg));
	old.cfg.size = sizeof(old.cfg);
	assert_int_equal(grist_loader_get_config(l, (struct grist_loader_config *)&old.cfg), 0);
	assert_int_equal(old.cfg.size, sizeof(old.cfg));
	assert_int_equal(old.cfg.batch_size, 10);
	assert_int_equal(old.cfg.seed, 3);
	assert_int_equal(grist_parse_size(grist_loader_option_find("prefetch")->default_value, &prefetch), 0);
	assert_int_equal(old.cfg.prefetch, prefetch); /* resolved: the default the table shows */
	for (i = 0; i < sizeof(old.canary); i++)
		assert_int_equal(old.canary[i], 0xA5);
	grist_loader_destroy(l);
}

static void test_newer_caller_and_uninitialised(void **state)
{
	const char *paths[] = { fx.path };
	struct grist_dataset_spec ds = { .paths = paths, .num_paths = 1 };
	/* a newer caller: a struct with a field this library does not know */
	struct {
		struct grist_loader_config cfg;
		uint64_t future_field;
	} newer;
	struct grist_loader_config zero;
	struct grist_loader *l;

	(void)state;
	memset(&newer, 0, sizeof(newer));
	newer.cfg.size = sizeof(newer);
	newer.cfg.datasets = &ds;
	newer.cfg.num_datasets = 1;
	newer.cfg.batch_size = 8;
	assert_int_equal(grist_loader_create(&newer.cfg, &l), 0); /* the unknown field is 0: fine */
	grist_loader_destroy(l);
	newer.future_field = 1;
	assert_int_equal(grist_loader_create(&newer.cfg, &l), -E2BIG);
	assert_non_null(strstr(grist_last_error(), "needs a newer libgrist"));

	memset(&zero, 0, sizeof(zero)); /* not initialised: no size */
	zero.datasets = &ds;
	zero.num_datasets = 1;
	zero.batch_size = 8;
	assert_int_equal(grist_loader_create(&zero, &l), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "grist_loader_config_init()"));
}

static void test_version(void **state)
{
	char want[32];

	(void)state;
	snprintf(want, sizeof(want), "%d.%d.%d", GRIST_VERSION_MAJOR, GRIST_VERSION_MINOR, GRIST_VERSION_PATCH);
	assert_string_equal(grist_version(), GRIST_VERSION_STRING);
	assert_string_equal(grist_version(), want);
	assert_int_equal(grist_version_number(), GRIST_VERSION_NUMBER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_old_caller_keeps_working),
		cmocka_unit_test(test_old_caller_stats_not_overrun),
		cmocka_unit_test(test_old_caller_get_config),
		cmocka_unit_test(test_newer_caller_and_uninitialised),
		cmocka_unit_test(test_version),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
