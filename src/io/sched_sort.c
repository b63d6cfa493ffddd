/*
 * The GET scheduler's waiting pieces in order: by object, then offset, and among equals in
 * their order of arrival (grist_sched_cmp_piece()'s order). A chunk-window shuffle hands the scheduler
 * most of an object's chunks at once (110,000 reads of 611 bytes at group_size 1 and
 * 200,000 records), and glibc's qsort of them (a merge sort through a compare function,
 * moving 56-byte pieces) was 15% of the grist core's time before the first batch. Here
 * the pieces' keys (object rank and offset, and where the piece is) are sorted by a
 * least-significant-digit radix sort and the pieces moved once.
 *
 * The radix sort takes every list of RADIX_MIN pieces or more, whatever it holds:
 * - a digit is as wide as the list is long (2^11 counters at most), so a pass costs
 *   about what its pieces do;
 * - any number of objects: each gets its rank by address from a hash table of the
 *   objects, which are sorted by the same radix sort;
 * - a key wider than 64 bits (rank beside offsets near 2^64) takes more passes: the
 *   composite key's low 64 bits, then the rank's bits above them.
 * Shorter lists, and any list when there is no memory for the keys, take qsort with
 * grist_sched_cmp_piece(). The radix sort alone was weighed for them and is clearly slower:
 * each pass has its fixed cost (counters to clear and sum), and a 27-bit key takes 9 passes
 * of 3-bit digits at 4 pieces. Built with -DRADIX_MIN=2, tests/io/test_sched_sort.c's
 * "bench" (medians of 31 alternating runs, two runs, on a 2-core x86-64 shared with other
 * builds at a load average of 7-10; ns a sort of pieces over one object; radix / qsort):
 *   4 pieces: 710-1,000 / 180-190; 8: 1,240-1,320 / 650-680; 16: 1,820-1,870 / 1,300;
 *   32: 2,700-3,100 / 3,300-3,750 (three objects: 4,000-4,700 / 4,000-4,100);
 *   64: 4,000-4,750 / 7,600-8,100; 128: 9,700 / 16,600-20,000.
 * In instructions (callgrind), one object: 16 pieces 4,600 / 3,100; 64: 12,400 / 16,100;
 * three objects, 64 pieces: 15,900 / 15,900. Past 64 pieces the radix sort leads:
 * 1,024 pieces 53,000-69,000 / 170,000-236,000; 110,000: 18-28 ms / 87-137 ms.
 * tests/io/test_sched_sort.c holds both ways to an order it computes itself.
 *
 * A radix sort is stable, so equal pieces keep the order they are given in; the caller
 * gives them in their order of arrival (sched_launch.c: the waiting list since its last
 * sort is newly arrived pieces, or runs of them each sorted, one run after another).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "io/sched_internal.h"

#ifndef RADIX_MIN
#define RADIX_MIN 64      /* pieces: below, qsort is faster (the figures above; -DRADIX_MIN=2 to retake them) */
#endif
#define DIGIT_BITS_MAX 11 /* 2048 counters: past it a pass's counters no longer stay in L1 */
#define NO_SLOT UINT64_MAX

/* A piece's (or, while ranking, an object's) key and where it is; also a slot of the objects' table. */
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

static unsigned bits_of(uint64_t v)
{
	return v ? 64u - (unsigned)__builtin_clzll(v) : 0;
}

/*
 * Sort @k[0..@n) by the bits [0, @width) of their keys, stably, moving them between @k and
 * @t; returns the one that holds them sorted. A digit has about log2(@n) bits: the
 * counters to clear and sum then cost no more than the keys to count and move.
 */
static struct grist_sched_key *radix(struct grist_sched_key *k, struct grist_sched_key *t, size_t n,
				     unsigned width)
{
	size_t count[(size_t)1 << DIGIT_BITS_MAX];
	unsigned bits = bits_of(n), at;
	size_t mask, i, d, sum;

	if (bits > DIGIT_BITS_MAX)
		bits = DIGIT_BITS_MAX;
	mask = ((size_t)1 << bits) - 1;
	for (at = 0; at < width; at += bits) {
		struct grist_sched_key *swap;

		memset(count, 0, (mask + 1) * sizeof(*count));
		for (i = 0; i < n; i++)
			count[(k[i].key >> at) & mask]++;
		if (count[(k[0].key >> at) & mask] == n)
			continue; /* one digit throughout: this pass would move nothing */
		for (d = 0, sum = 0; d <= mask; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			t[count[(k[i].key >> at) & mask]++] = k[i];
		swap = k;
		k = t;
		t = swap;
	}
	return k;
}

/*
 * The objects' hash table: open addressing, linear probing, @cap a power of two at least
 * twice the objects in it, kept in the key buffer past its 2n keys (grown with the objects,
 * so one object costs a few slots). A slot's key is the object's address, its at the
 * object's place in the list of objects, then its rank.
 */
struct objects {
	struct grist_sched_sort *s;
	size_t base, cap;             /* the table: keys[base..base + cap) */
	struct grist_sched_key *slot;
	struct grist_sched_key *list; /* keys[0..n): the distinct objects, address and slot */
	size_t n;
	const void *last;             /* the object looked up last, and its slot: pieces come in runs */
	size_t last_slot;
};

static size_t slot_of(const struct objects *o, const void *obj)
{
	size_t i = (size_t)(((uint64_t)(uintptr_t)obj * 0x9e3779b97f4a7c15ull) >> (64 - bits_of(o->cap - 1)));

	while (o->slot[i].at != NO_SLOT && o->slot[i].key != (uint64_t)(uintptr_t)obj)
		i = (i + 1) & (o->cap - 1);
	return i;
}

/* The table at @cap slots, every listed object in it again. 0, or -ENOMEM (its message set). */
static int objects_rehash(struct objects *o, size_t cap)
{
	struct grist_sched_sort *s = o->s;
	size_t i;

	if (grist_array_reserve((void **)&s->keys, &s->keys_cap, o->base + cap, sizeof(*s->keys)))
		return -ENOMEM;
	o->list = s->keys;
	o->slot = s->keys + o->base;
	o->cap = cap;
	for (i = 0; i < cap; i++)
		o->slot[i].at = NO_SLOT;
	for (i = 0; i < o->n; i++) {
		size_t at = slot_of(o, (const void *)(uintptr_t)o->list[i].key);

		o->slot[at] = (struct grist_sched_key){ o->list[i].key, i };
		o->list[i].at = at;
	}
	o->last = NULL;
	return 0;
}

/* @obj listed, if it is new; 0 or -ENOMEM. */
static int objects_add(struct objects *o, const void *obj)
{
	size_t at;

	if (obj == o->last)
		return 0;
	o->last = obj;
	at = slot_of(o, obj);
	if (o->slot[at].at != NO_SLOT)
		return 0;
	o->list[o->n] = (struct grist_sched_key){ (uint64_t)(uintptr_t)obj, at };
	o->slot[at] = (struct grist_sched_key){ (uint64_t)(uintptr_t)obj, o->n++ };
	return 2 * o->n > o->cap ? objects_rehash(o, 2 * o->cap) : 0;
}

/* A listed object's rank. */
static uint64_t objects_rank(struct objects *o, const void *obj)
{
	if (obj != o->last) {
		o->last = obj;
		o->last_slot = slot_of(o, obj);
	}
	return o->slot[o->last_slot].at;
}

void grist_sched_sort(struct grist_sched_sort *s, struct piece *a, size_t n)
{
	struct objects o = { .s = s, .base = 2 * n };
	struct grist_sched_key *k, *t;
	uint64_t min_off = UINT64_MAX, max_off = 0, min_obj = UINT64_MAX, max_obj = 0;
	unsigned shift, rbits;
	size_t i;

	if (n < RADIX_MIN)
		goto fallback;
	if (grist_array_reserve((void **)&s->tmp, &s->tmp_cap, n, sizeof(*s->tmp)) || objects_rehash(&o, 16))
		goto fallback;
	for (i = 0; i < n; i++) {
		if (a[i].off < min_off)
			min_off = a[i].off;
		if (a[i].off > max_off)
			max_off = a[i].off;
		if (objects_add(&o, a[i].obj))
			goto fallback;
	}
	/* Each object's rank by address: the list of objects sorted by the same radix sort. */
	for (i = 0; i < o.n; i++) {
		if (o.list[i].key < min_obj)
			min_obj = o.list[i].key;
		if (o.list[i].key > max_obj)
			max_obj = o.list[i].key;
	}
	for (i = 0; i < o.n; i++)
		o.list[i].key -= min_obj;
	k = radix(o.list, s->keys + n, o.n, bits_of(max_obj - min_obj));
	for (i = 0; i < o.n; i++)
		o.slot[k[i].at].at = i;
	o.last = NULL;

	/* Key: rank, then offset from the least; the rank's bits past 64 sort in a second round. */
	shift = bits_of(max_off - min_off);
	rbits = bits_of(o.n - 1);
	k = s->keys;
	t = s->keys + n;
	for (i = 0; i < n; i++)
		k[i] = (struct grist_sched_key){
			(shift < 64 ? objects_rank(&o, a[i].obj) << shift : 0) | (a[i].off - min_off), i
		};
	k = radix(k, t, n, shift + rbits < 64 ? shift + rbits : 64);
	if (shift + rbits > 64) {
		t = k == s->keys ? s->keys + n : s->keys;
		for (i = 0; i < n; i++)
			k[i].key = objects_rank(&o, a[k[i].at].obj) >> (64 - shift);
		k = radix(k, t, n, shift + rbits - 64);
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
