/*
 * The GET scheduler's waiting pieces in order: by object, then offset, and among equals in
 * their order of arrival (grist_sched_cmp_piece()'s order). A chunk-window shuffle hands the scheduler
 * most of an object's chunks at once (110,000 reads of 611 bytes at group_size 1 and
 * 200,000 records), and glibc's qsort of them (a merge sort through a compare function,
 * moving 56-byte pieces) was 15% of the grist core's time before the first batch. Here
 * the pieces' keys (object rank and offset in one word, and where the piece is) are
 * sorted by a least-significant-digit radix sort, 11 bits a pass, and the pieces moved
 * once.
 *
 * A radix sort is stable, so equal pieces keep the order they are given in; the caller
 * gives them in their order of arrival (sched_launch.c: the waiting list since its last
 * sort is newly arrived pieces, or runs of them each sorted, one run after another).
 * Fewer than RADIX_MIN pieces, more than RADIX_OBJS objects, keys wider than 64 bits or
 * no memory for the keys: qsort with the same order.
 */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "io/sched_internal.h"

#define RADIX_MIN 2048  /* pieces: below, the passes' 2048 counters cost more than qsort */
#define RADIX_BITS 11
#define RADIX_OBJS 64   /* distinct objects among the pieces, at most (a linear search each) */

struct grist_sched_key {
	uint64_t key;
	uint64_t at;
};

int grist_sched_cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->obj != y->obj)
		return (uintptr_t)x->obj < (uintptr_t)y->obj ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

static unsigned bits_of(uint64_t v)
{
	return v ? 64u - (unsigned)__builtin_clzll(v) : 0;
}

/*
 * The objects' ranks (by address, as grist_sched_cmp_piece() orders them) in @objs[0..*@nobjs), and the
 * largest offset. False when there are more than RADIX_OBJS objects.
 */
static bool objects_of(const struct piece *a, size_t n, const void **objs, unsigned *nobjs, uint64_t *max_off)
{
	const void *last = NULL;
	unsigned k, m = 0;
	size_t i;

	*max_off = 0;
	for (i = 0; i < n; i++) {
		if (a[i].off > *max_off)
			*max_off = a[i].off;
		if (a[i].obj == last)
			continue;
		last = a[i].obj;
		for (k = 0; k < m && objs[k] != last; k++)
			;
		if (k == m) {
			if (m == RADIX_OBJS)
				return false;
			objs[m++] = last;
		}
	}
	qsort(objs, m, sizeof(*objs), cmp_ptr);
	*nobjs = m;
	return true;
}

static unsigned rank_of(const void *const *objs, unsigned nobjs, const void *o)
{
	unsigned lo = 0, hi = nobjs;

	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;

		if ((uintptr_t)objs[mid] <= (uintptr_t)o)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

void grist_sched_sort(struct grist_sched_sort *s, struct piece *a, size_t n)
{
	static const size_t radix = (size_t)1 << RADIX_BITS;
	const void *objs[RADIX_OBJS];
	struct grist_sched_key *k, *t, *swap;
	unsigned nobjs, shift, width, pass;
	uint64_t max_off;
	size_t i, count[(size_t)1 << RADIX_BITS];

	if (n < RADIX_MIN || !objects_of(a, n, objs, &nobjs, &max_off))
		goto fallback;
	shift = bits_of(max_off);
	width = shift + bits_of(nobjs - 1);
	if (width > 64 || grist_array_reserve((void **)&s->keys, &s->keys_cap, 2 * n, sizeof(*s->keys)) ||
	    grist_array_reserve((void **)&s->tmp, &s->tmp_cap, n, sizeof(*s->tmp)))
		goto fallback;
	k = s->keys;
	t = s->keys + n;
	for (i = 0; i < n; i++) {
		uint64_t r = nobjs > 1 ? rank_of(objs, nobjs, a[i].obj) : 0;

		k[i] = (struct grist_sched_key){ (shift < 64 ? r << shift : 0) | a[i].off, i };
	}
	for (pass = 0; pass * RADIX_BITS < width; pass++) {
		unsigned at = pass * RADIX_BITS;
		size_t sum = 0, d;

		memset(count, 0, sizeof(count));
		for (i = 0; i < n; i++)
			count[(k[i].key >> at) & (radix - 1)]++;
		if (count[(k[0].key >> at) & (radix - 1)] == n)
			continue; /* one digit throughout: this pass would move nothing */
		for (d = 0; d < radix; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			t[count[(k[i].key >> at) & (radix - 1)]++] = k[i];
		swap = k;
		k = t;
		t = swap;
	}
	for (i = 0; i < n; i++)
		s->tmp[i] = a[k[i].at];
	memcpy(a, s->tmp, n * sizeof(*a));
	return;
fallback:
	qsort(a, n, sizeof(*a), grist_sched_cmp_piece);
}

void grist_sched_sort_free(struct grist_sched_sort *s)
{
	free(s->keys);
	free(s->tmp);
	memset(s, 0, sizeof(*s));
}
