/* Helpers every micro-benchmark under bench/ shares: a monotonic clock and the median of runs. */
#ifndef GRIST_BENCH_UTIL_H
#define GRIST_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock: only differences mean anything. */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of @n runs (the upper one for even @n); sorts @v in place. Medians, not means:
 * the machines these run on are shared, and one descheduled run must not move the figure. */
static inline double bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return v[n / 2];
}

#endif
