/* Deterministic weighted interleave of components (Grain's smooth prefix-count mix). */
#include <math.h>

#include "common/error.h"
#include "plan/plan_internal.h"

int grist_mix_scale(const double *weights, size_t n, uint64_t *scaled, uint64_t *total)
{
	double min = INFINITY, sum = 0;
	size_t d;

	for (d = 0; d < n; d++) {
		if (!isfinite(weights[d]) || !(weights[d] > 0))
			return grist_fail(-EINVAL, "dataset %zu: weight %g must be > 0 and finite",
					  d, weights[d]);
		if (weights[d] < min)
			min = weights[d];
	}
	for (d = 0; d < n; d++) {
		double s = floor(weights[d] / min * 100.0);

		/* Guards both the integer conversion and the 128-bit products later. */
		if (!(s <= (double)GRIST_MIX_MAX_TOTAL) || s < 1 || sum + s > (double)GRIST_MIX_MAX_TOTAL)
			return grist_fail(-EINVAL, "weights too uneven: dataset %zu weighs %g, "
					  "more than 2^40/100 times the lightest (%g)", d, weights[d], min);
		sum += s;
		scaled[d] = (uint64_t)s;
	}
	*total = (uint64_t)sum;
	return 0;
}

/* floor(m * a / b) without overflow: m < 2^64, a <= b <= 2^40. */
static inline uint64_t mul_div(uint64_t m, uint64_t a, uint64_t b)
{
	return (uint64_t)((unsigned __int128)m * a / b);
}

/*
 * Component d's share of the first m elements is m - floor(m * (S - p_d) / S)
 * at its level; the rest goes down to the next level with S - p_d. Exactly one
 * component's count grows from m to m + 1, and at every level above it the
 * remainder for m + 1 is the remainder for m plus one.
 */
size_t grist_mix_pick(const uint64_t *scaled, size_t n, uint64_t total, uint64_t m,
		      uint64_t *position)
{
	uint64_t s = total, rem = m;
	size_t d;

	for (d = 0; d + 1 < n; d++) {
		uint64_t rest = s - scaled[d];
		uint64_t c0 = rem - mul_div(rem, rest, s);
		uint64_t c1 = rem + 1 - mul_div(rem + 1, rest, s);

		if (c1 > c0) {
			*position = c0;
			return d;
		}
		rem -= c0;
		s = rest;
	}
	*position = rem;
	return n - 1;
}

uint64_t grist_mix_count(const uint64_t *scaled, size_t n, uint64_t total, size_t d, uint64_t m)
{
	uint64_t s = total, rem = m;
	size_t k;

	for (k = 0; k < d && k + 1 < n; k++) {
		uint64_t rest = s - scaled[k];

		rem = mul_div(rem, rest, s);
		s = rest;
	}
	if (d + 1 >= n)
		return rem;
	return rem - mul_div(rem, s - scaled[d], s);
}

uint64_t grist_mix_length(const uint64_t *scaled, size_t n, uint64_t total, const uint64_t *caps)
{
	uint64_t best = UINT64_MAX;
	size_t d;

	for (d = 0; d < n; d++) {
		uint64_t lo = 0, hi = UINT64_MAX;

		if (grist_mix_count(scaled, n, total, d, hi) <= caps[d])
			continue;
		/* Largest lo with count(lo) <= cap; count(hi) > cap. Element lo is the overflow. */
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;

			if (grist_mix_count(scaled, n, total, d, mid) <= caps[d])
				lo = mid;
			else
				hi = mid;
		}
		if (lo < best)
			best = lo;
	}
	return best;
}
