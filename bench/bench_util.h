/* Helpers every micro-benchmark under bench/ shares: a monotonic clock and the median of runs. */
#ifndef GRIST_BENCH_UTIL_H
#define GRIST_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
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

/* A whole file read into memory (one spare byte after it); NULL when it cannot be read. */
static inline uint8_t *bench_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (p = malloc((size_t)n + 1)) && fread(p, 1, (size_t)n, f) == (size_t)n)
		*len = (size_t)n;
	else {
		free(p);
		p = NULL;
	}
	fclose(f);
	return p;
}

#endif
