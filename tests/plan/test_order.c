/* Tests for `grist order`: output equals the library's stream, shards partition it, bad input exits 2. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "grist/plan.h"

static const char *cli(void)
{
	const char *p = getenv("GRIST_CLI");

	return p ? p : "grist";
}

/* Parse one index per line into @v (at most @cap); returns the count. */
static size_t parse_lines(const char *text, uint64_t *v, size_t cap)
{
	size_t n = 0;

	while (*text) {
		char *end;

		assert_true(n < cap);
		v[n++] = strtoull(text, &end, 10);
		assert_int_equal(*end, '\n');
		text = end + 1;
	}
	return n;
}

static void test_matches_library(void **state)
{
	uint64_t v[3000];
	struct grist_perm p;
	char *out = NULL;
	size_t n, i;

	(void)state;
	assert_int_equal(t_run(&out, "%s order --records 1000 --seed 17 --epochs 3", cli()), 0);
	n = parse_lines(out, v, 3000);
	assert_int_equal(n, 3000);
	for (i = 0; i < n; i++) {
		grist_perm_init(&p, 1000, 17, i / 1000);
		assert_int_equal(v[i], grist_perm_at(&p, i % 1000));
	}
	free(out);
	assert_int_equal(t_run(&out, "%s order --records 5 --no-shuffle --epochs 2", cli()), 0);
	assert_string_equal(out, "0\n1\n2\n3\n4\n0\n1\n2\n3\n4\n");
	free(out);
}

static void test_shards_partition(void **state)
{
	uint64_t all[500], part[200];
	char *out = NULL;
	size_t n, i, k;
	int gran;

	(void)state;
	for (gran = 0; gran < 2; gran++) {
		const char *g = gran ? "--granularity chunk --group-size 7 --window 3" : "";

		assert_int_equal(t_run(&out, "%s order --records 500 --seed 2 %s", cli(), g), 0);
		assert_int_equal(parse_lines(out, all, 500), 500);
		free(out);
		for (k = 0; k < 3; k++) {
			assert_int_equal(t_run(&out, "%s order --records 500 --seed 2 --shard %zu/3 %s",
					       cli(), k, g), 0);
			n = parse_lines(out, part, 200);
			free(out);
			assert_int_equal(n, (500 - k + 2) / 3);
			for (i = 0; i < n; i++)
				assert_int_equal(part[i], all[k + 3 * i]);
		}
	}
}

/* FILE... takes record counts and chunk geometry from the files' footers. */
static void test_files(void **state)
{
	const struct grist_plan_file geo[2] = { { 10, 4 }, { 7, 3 } };
	struct grist_plan_component comp = { geo, 2, 1.0 };
	struct grist_plan_config cfg;
	struct grist_stream_cursor *c;
	struct grist_stream_item it;
	struct grist_stream *s;
	uint64_t a[17], b[17];
	char *dir = t_mkdtemp(), *out = NULL;
	size_t i;

	(void)state;
	assert_int_equal(t_run(&out, "seq 1 10 | %s write --options group_size:4 %s && "
			       "seq 1 7 | %s write --options group_size:3 %s", cli(), t_path(dir, "a.ar"),
			       cli(), t_path(dir, "b.ar")), 0);
	free(out);
	/* Record granularity depends only on the record count. */
	assert_int_equal(t_run(&out, "%s order --seed 4 %s %s", cli(), t_path(dir, "a.ar"),
			       t_path(dir, "b.ar")), 0);
	assert_int_equal(parse_lines(out, a, 17), 17);
	free(out);
	assert_int_equal(t_run(&out, "%s order --seed 4 --records 17", cli()), 0);
	assert_int_equal(parse_lines(out, b, 17), 17);
	free(out);
	assert_memory_equal(a, b, sizeof(a));
	/* Chunk granularity follows the files' chunks (4+4+2, 3+3+1 records). */
	assert_int_equal(t_run(&out, "%s order --seed 4 --granularity chunk --window 2 %s %s", cli(),
			       t_path(dir, "a.ar"), t_path(dir, "b.ar")), 0);
	assert_int_equal(parse_lines(out, a, 17), 17);
	free(out);
	grist_plan_config_init(&cfg);
	cfg.components = &comp;
	cfg.num_components = 1;
	cfg.seed = 4;
	cfg.granularity = GRIST_GRANULARITY_CHUNK;
	cfg.window = 2;
	assert_int_equal(grist_stream_create(&cfg, &s), 0);
	assert_int_equal(grist_stream_cursor_create(s, &c), 0);
	for (i = 0; i < 17; i++) {
		assert_int_equal(grist_stream_next(c, &it), 1);
		assert_int_equal(a[i], it.record);
	}
	grist_stream_cursor_destroy(c);
	grist_stream_destroy(s);
	/* A missing file is a data error (1), not a usage error. */
	assert_int_equal(t_run(&out, "%s order %s 2>/dev/null", cli(), t_path(dir, "none.ar")), 1);
	free(out);
	t_rmtree(dir);
}

static void test_bad_input_exits_2(void **state)
{
	static const char *bad[] = {
		"--records x", "--records 5 --shard 3/3", "--records 5 --shard 1/0",
		"--records 5 --shard 0/6", "--records 5 --bogus", "", "--records",
		"--records 5 --granularity chunk --window 0", "--records 5 --granularity sideways",
		"--records -5", "--records 5 --seed 1e3", "--records 0", "x.ar --records 5",
		"x.ar --group-size 2",
	};
	char *out = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int st = t_run(&out, "%s order %s 2>/dev/null", cli(), bad[i]);

		if (st != 2)
			fail_msg("'grist order %s' exited %d, expected 2", bad[i], st);
		free(out);
		out = NULL;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_library),
		cmocka_unit_test(test_shards_partition),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_bad_input_exits_2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
