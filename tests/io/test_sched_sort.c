/*
 * The GET scheduler's sort of its waiting pieces (src/io/sched_sort.c) against an order
 * computed here (qsort with this file's own compare: object address, offset, order of
 * arrival), on the inputs the scheduler gives it: newly arrived pieces, or runs of them each
 * sorted, one after another, in their order of arrival. Offsets repeat (two readers of one
 * chunk); lists run from 2 pieces to a first hand-over's 110,000, on both sides of the
 * length where the sort leaves qsort for its radix sort (RADIX_MIN, 64); objects are one, a
 * few, thousands or one a piece; offsets span up to 2^64, so the key is wider than 64 bits.
 *
 * "test_sched_sort bench" times the sort beside that qsort instead (medians of alternating
 * runs, in ns a sort), for the sizes the scheduler sorts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "io/sched_internal.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The oracle's order, written here and not taken from the library. */
static int oracle_cmp(const void *pa, const void *pb)
{
	const struct piece *a = pa, *b = pb;

	if (a->obj != b->obj)
		return (uintptr_t)a->obj < (uintptr_t)b->obj ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * @n pieces over @nobjs objects (@objs) at offsets below @span (0: any 64-bit offset),
 * arriving in runs of @run (0: one unsorted run); each run but the last sorted as the
 * scheduler sorts them, the last left in its order of arrival.
 */
static void make(struct piece *a, size_t n, char **objs, unsigned nobjs, uint64_t span, size_t run)
{
	size_t i;

	for (i = 0; i < n; i++) {
		a[i] = (struct piece){ 0 };
		a[i].obj = (struct grist_remote_object *)(void *)objs[next_rand() % nobjs];
		a[i].off = span ? next_rand() % span : next_rand();
		a[i].len = 611;
		a[i].seq = i;
		a[i].ride = -1;
	}
	/* two readers of one region: a later piece at an earlier one's offset */
	for (i = 1; i < n; i += 7) {
		size_t j = next_rand() % i;

		a[i].off = a[j].off;
		a[i].obj = a[j].obj;
	}
	if (run)
		for (i = 0; i + run < n; i += run)
			qsort(a + i, run, sizeof(*a), oracle_cmp);
}

/*
 * Sort @a, and a copy of it by the oracle, and compare them piece by piece; the merge of
 * sorted lists (sched_launch.c) compares by grist_sched_cmp_piece(), which must agree.
 */
static void compare(struct grist_sched_sort *s, struct piece *a, struct piece *b, size_t n, const char *what)
{
	size_t i;

	memcpy(b, a, n * sizeof(*a));
	grist_sched_sort(s, a, n);
	qsort(b, n, sizeof(*b), oracle_cmp);
	for (i = 0; i < n; i++)
		if (a[i].obj != b[i].obj || a[i].off != b[i].off || a[i].seq != b[i].seq || a[i].len != b[i].len)
			fail_msg("%s: piece %zu of %zu is seq %llu, the oracle's is seq %llu", what, i, n,
				 (unsigned long long)a[i].seq, (unsigned long long)b[i].seq);
	for (i = 1; i < n; i++)
		if (grist_sched_cmp_piece(&a[i - 1], &a[i]) >= 0)
			fail_msg("%s: grist_sched_cmp_piece() puts piece %zu after piece %zu", what, i - 1, i);
}

/* @nobjs objects, each its own allocation: addresses as the scheduler's objects have them. */
static char **objects_new(unsigned nobjs)
{
	char **objs = malloc(nobjs * sizeof(*objs));
	unsigned i;

	assert_non_null(objs);
	for (i = 0; i < nobjs; i++)
		assert_non_null(objs[i] = malloc(64));
	return objs;
}

static void objects_free(char **objs, unsigned nobjs)
{
	unsigned i;

	for (i = 0; i < nobjs; i++)
		free(objs[i]);
	free(objs);
}

static void check(size_t n, unsigned nobjs, uint64_t span, size_t run)
{
	char **objs = objects_new(nobjs);
	struct piece *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));
	struct grist_sched_sort s = { 0 };

	assert_non_null(a);
	assert_non_null(b);
	make(a, n, objs, nobjs, span, run);
	compare(&s, a, b, n, "first sort");
	/* the memory is kept for the next sort, which must give the same */
	make(a, n, objs, nobjs, span, run);
	compare(&s, a, b, n, "second sort");
	grist_sched_sort_free(&s);
	objects_free(objs, nobjs);
	free(a);
	free(b);
}

static void one_object(void **state)
{
	(void)state;
	check(110000, 1, 122290176, 0);   /* a first hand-over at group_size 1 */
	check(110000, 1, 122290176, 256); /* runs sorted as they came */
	check(5000, 1, 1000, 300);        /* offsets repeat often */
	check(3000, 1, 1ull << 40, 0);    /* a 1 TB object */
	check(3000, 1, 0, 0);             /* offsets anywhere in 64 bits */
}

static void short_lists(void **state)
{
	size_t n;

	(void)state;
	check(0, 1, 1000, 0);
	check(1, 1, 1000, 0);
	for (n = 2; n <= 40; n++)
		check(n, 1 + n % 4, 122290176, n % 3 ? 0 : 4); /* steady state: a few new pieces a launch */
	for (n = 62; n <= 66; n++)
		check(n, 1 + n % 3, 122290176, 0);             /* qsort's and the radix sort's sides */
	check(100, 1, 122290176, 0);
	check(2047, 3, 122290176, 0);
	check(1000, 1000, 1000, 0);                            /* about one object a piece */
}

static void many_objects(void **state)
{
	(void)state;
	check(20000, 3, 10000000, 1000);
	check(20000, 100, 1ull << 30, 0);
	check(20000, 5000, 1ull << 30, 300);
	check(20000, 8, 1ull << 62, 0);   /* keys wider than 64 bits: the rank's top bits in a second round */
	check(20000, 1000, 0, 0);         /* 10 bits of rank beside 64 of offset */
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * The sort beside qsort (the oracle's compare, as the sort's qsort fallback was) on
 * @n pieces over @nobjs objects, fresh pieces each time: the median of 31 alternating
 * pairs, each a loop of sorts long enough for the clock, in ns a sort.
 */
static void bench_one(size_t n, unsigned nobjs)
{
	enum { PAIRS = 31 };
	char **objs = objects_new(nobjs);
	size_t reps = 200000 / n + 1, r, i;
	struct piece *src = malloc(reps * n * sizeof(*src)), *a = malloc(reps * n * sizeof(*a));
	struct grist_sched_sort s = { 0 };
	double t[2][PAIRS];
	int p, way;

	if (!src || !a)
		abort();
	for (r = 0; r < reps; r++)
		make(src + r * n, n, objs, nobjs, 122290176, 0);
	for (p = 0; p < PAIRS; p++)
		for (way = 0; way < 2; way++) {
			double start;
			int w = p % 2 ? 1 - way : way; /* each goes first in half the pairs */

			memcpy(a, src, reps * n * sizeof(*a));
			start = now_ns();
			for (r = 0; r < reps; r++)
				if (w)
					qsort(a + r * n, n, sizeof(*a), oracle_cmp);
				else
					grist_sched_sort(&s, a + r * n, n);
			t[w][p] = (now_ns() - start) / (double)reps;
		}
	for (i = 0; i < 2; i++)
		qsort(t[i], PAIRS, sizeof(double), cmp_double);
	printf("%8zu %6u %12.0f %12.0f %7.2f\n", n, nobjs, t[0][PAIRS / 2], t[1][PAIRS / 2],
	       t[1][PAIRS / 2] / t[0][PAIRS / 2]);
	grist_sched_sort_free(&s);
	objects_free(objs, nobjs);
	free(src);
	free(a);
}

static int bench(void)
{
	static const size_t sizes[] = { 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 8192, 110000 };
	size_t i;

	printf("%8s %6s %12s %12s %7s\n", "pieces", "objs", "sort ns", "qsort ns", "qsort/sort");
	for (i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		bench_one(sizes[i], 1);
		bench_one(sizes[i], 3);
	}
	bench_one(1024, 200);
	bench_one(8192, 200);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_object),
		cmocka_unit_test(short_lists),
		cmocka_unit_test(many_objects),
	};

	if (argc > 1 && !strcmp(argv[1], "bench"))
		return bench();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
