/* Tests for the weighted interleave: Grain's sequence, counts vs picks, lengths, bad weights. */
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "plan/plan_internal.h"

static void test_one_two_pattern(void **state)
{
	const double w[2] = { 1, 2 };
	static const size_t want[9] = { 0, 1, 1, 0, 1, 1, 0, 1, 1 };
	uint64_t scaled[2], total, pos, seen[2] = { 0, 0 };
	size_t m;

	(void)state;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), 0);
	assert_int_equal(scaled[0], 100);
	assert_int_equal(scaled[1], 200);
	assert_int_equal(total, 300);
	for (m = 0; m < 9; m++) {
		size_t d = grist_mix_pick(scaled, 2, total, m, &pos);

		assert_int_equal(d, want[m]);
		assert_int_equal(pos, seen[d]);
		seen[d]++;
	}
}

/* pick() agrees with count() everywhere, and the shares follow the weights. */
static void test_pick_matches_count(void **state)
{
	const double w[4] = { 0.5, 3.25, 1, 7 };
	uint64_t scaled[4], total, seen[4] = { 0 }, pos;
	uint64_t m;
	size_t d;

	(void)state;
	assert_int_equal(grist_mix_scale(w, 4, scaled, &total), 0);
	for (m = 0; m < 50000; m++) {
		for (d = 0; d < 4; d++)
			assert_int_equal(grist_mix_count(scaled, 4, total, d, m), seen[d]);
		d = grist_mix_pick(scaled, 4, total, m, &pos);
		assert_int_equal(pos, seen[d]);
		seen[d]++;
	}
	/* Smooth interleave: every share within 2 of its exact proportion. */
	for (d = 0; d < 4; d++) {
		double exact = 50000.0 * (double)scaled[d] / (double)total;

		assert_true(fabs((double)seen[d] - exact) <= 2.0);
	}
	/* Far positions: counts sum to m. */
	m = UINT64_C(1) << 62;
	assert_int_equal(grist_mix_count(scaled, 4, total, 0, m) + grist_mix_count(scaled, 4, total, 1, m) +
			 grist_mix_count(scaled, 4, total, 2, m) + grist_mix_count(scaled, 4, total, 3, m), m);
}

/* Length: the position of the first element that would exceed a cap, found by walking. */
static void test_length_matches_walk(void **state)
{
	const double w[3] = { 1, 2.5, 0.7 };
	uint64_t scaled[3], total, caps[3] = { 37, 200, 15 }, seen[3] = { 0 }, pos, m;
	size_t d;

	(void)state;
	assert_int_equal(grist_mix_scale(w, 3, scaled, &total), 0);
	for (m = 0;; m++) {
		d = grist_mix_pick(scaled, 3, total, m, &pos);
		if (seen[d] == caps[d])
			break;
		seen[d]++;
	}
	assert_int_equal(grist_mix_length(scaled, 3, total, caps), m);
	caps[0] = caps[1] = caps[2] = 0;
	assert_int_equal(grist_mix_length(scaled, 3, total, caps), 0);
}

static void test_bad_weights(void **state)
{
	double w[2] = { 1, 1 };
	uint64_t scaled[2], total;

	(void)state;
	w[1] = 0;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), -EINVAL);
	w[1] = -1;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), -EINVAL);
	w[1] = NAN;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), -EINVAL);
	w[1] = INFINITY;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "dataset 1"));
	w[1] = 1e30;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "uneven"));
	w[1] = 1e6;
	assert_int_equal(grist_mix_scale(w, 2, scaled, &total), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_two_pattern),
		cmocka_unit_test(test_pick_matches_count),
		cmocka_unit_test(test_length_matches_walk),
		cmocka_unit_test(test_bad_weights),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
