/*
 * The GET scheduler's sort of its waiting pieces (src/io/sched_sort.c) against qsort with
 * the same order, on the inputs the scheduler gives it: newly arrived pieces, or runs of
 * them each sorted, one after another, in their order of arrival. Offsets repeat (two
 * readers of one chunk), objects are one, a few, or more than the radix path takes, and
 * counts fall on both sides of the point where the sort leaves qsort.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * @n pieces over @nobjs objects (addresses from @objs) at offsets below @span, arriving
 * in runs of @run (0: one unsorted run); each run but the last sorted as the scheduler
 * sorts them, the last left in its order of arrival.
 */
static void make(struct piece *a, size_t n, const char *objs, unsigned nobjs, uint64_t span, size_t run)
{
	size_t i;

	for (i = 0; i < n; i++) {
		a[i] = (struct piece){ 0 };
		a[i].obj = (struct grist_remote_object *)(uintptr_t)(objs + 64 * (next_rand() % nobjs));
		a[i].off = next_rand() % span;
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
			qsort(a + i, run, sizeof(*a), grist_sched_cmp_piece);
}

/* Sort a copy of @a both ways and compare them, piece by piece. */
static void compare(struct grist_sched_sort *s, struct piece *a, struct piece *b, size_t n, const char *what)
{
	size_t i;

	memcpy(b, a, n * sizeof(*a));
	grist_sched_sort(s, a, n);
	qsort(b, n, sizeof(*b), grist_sched_cmp_piece);
	for (i = 0; i < n; i++)
		if (a[i].obj != b[i].obj || a[i].off != b[i].off || a[i].seq != b[i].seq || a[i].len != b[i].len)
			fail_msg("%s: piece %zu of %zu is seq %llu, qsort's is seq %llu", what, i, n,
				 (unsigned long long)a[i].seq, (unsigned long long)b[i].seq);
}

static void check(size_t n, unsigned nobjs, uint64_t span, size_t run)
{
	static char objs[64 * 100];
	struct piece *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
	struct grist_sched_sort s = { 0 };

	assert_non_null(a);
	assert_non_null(b);
	make(a, n, objs, nobjs, span, run);
	compare(&s, a, b, n, "first sort");
	/* the memory is kept for the next sort, which must give the same */
	make(a, n, objs, nobjs, span, run);
	compare(&s, a, b, n, "second sort");
	grist_sched_sort_free(&s);
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
	check(100, 1, 122290176, 0);      /* below the radix path */
}

static void many_objects(void **state)
{
	(void)state;
	check(50000, 3, 10000000, 1000);
	check(50000, 64, 1ull << 30, 0);  /* the most the radix path takes */
	check(50000, 100, 1ull << 30, 0); /* more: qsort */
	check(20000, 8, 1ull << 62, 0);   /* keys wider than 64 bits: qsort */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_object),
		cmocka_unit_test(many_objects),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
