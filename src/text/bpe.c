/* Byte-pair merges of one piece by rank, as tiktoken's byte_pair_encode, in O(n log n) for long pieces. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "text/text_internal.h"

int grist_ids_reserve(struct grist_ids *ids, size_t more)
{
	return grist_array_reserve((void **)&ids->v, &ids->cap, ids->n + more, sizeof(*ids->v));
}

void grist_bpe_scratch_free(struct grist_bpe_scratch *s)
{
	free(s->start);
	free(s->next);
	free(s->prev);
	free(s->rank);
	free(s->heap);
	free(s->cache);
	memset(s, 0, sizeof(*s));
}

static int reserve(struct grist_bpe_scratch *s, size_t n)
{
	size_t c = s->cap;

	if (n <= s->cap)
		return 0;
	if (grist_array_reserve((void **)&s->start, &c, n, sizeof(uint32_t)))
		return -ENOMEM;
	c = s->cap;
	if (grist_array_reserve((void **)&s->next, &c, n, sizeof(uint32_t)))
		return -ENOMEM;
	c = s->cap;
	if (grist_array_reserve((void **)&s->prev, &c, n, sizeof(uint32_t)))
		return -ENOMEM;
	c = s->cap;
	if (grist_array_reserve((void **)&s->rank, &c, n, sizeof(uint32_t)))
		return -ENOMEM;
	s->cap = c;
	return 0;
}

/* Emit the rank of each part [start[i], start[i + 1]) of @p; every part is a token by construction. */
static int emit(const struct grist_vocab *v, const uint8_t *p, const uint32_t *bounds, size_t nb,
		struct grist_ids *out)
{
	size_t i;

	if (grist_ids_reserve(out, nb - 1))
		return -ENOMEM;
	for (i = 0; i + 1 < nb; i++) {
		uint32_t r = grist_vocab_rank(v, p + bounds[i], bounds[i + 1] - bounds[i]);

		if (r == GRIST_RANK_NONE)
			return grist_fail(-EBADMSG, "the ranks file has no token for byte 0x%02x", p[bounds[i]]);
		out->v[out->n++] = (int32_t)r;
	}
	return 0;
}

/*
 * tiktoken's _byte_pair_merge, step for step: parts[i] = (start, rank of the pair starting
 * there); merge the leftmost pair of lowest rank, rescore its two neighbours, rescan.
 */
static int merge_scan(const struct grist_vocab *v, struct grist_bpe_scratch *s, const uint8_t *p, size_t len,
		      struct grist_ids *out)
{
	uint32_t *start = s->start, *rank = s->rank;
	size_t n = len + 1, i, best; /* n parts, the last one the end sentinel */
	uint32_t min;

	for (i = 0; i < len; i++) {
		start[i] = (uint32_t)i;
		rank[i] = i + 2 <= len ? grist_vocab_rank(v, p + i, 2) : GRIST_RANK_NONE;
	}
	start[len] = (uint32_t)len;
	rank[len] = GRIST_RANK_NONE;
	for (;;) {
		min = GRIST_RANK_NONE;
		best = 0;
		for (i = 0; i + 1 < n; i++)
			if (rank[i] < min) {
				min = rank[i];
				best = i;
			}
		s->work += n;
		if (min == GRIST_RANK_NONE)
			break;
		/* parts[best + 1] goes; the pairs at best - 1 and best now end one part further on */
		memmove(start + best + 1, start + best + 2, (n - best - 2) * sizeof(*start));
		memmove(rank + best + 1, rank + best + 2, (n - best - 2) * sizeof(*rank));
		n--;
		rank[best] = best + 2 < n ? grist_vocab_rank(v, p + start[best], start[best + 2] - start[best])
					  : GRIST_RANK_NONE;
		if (best > 0)
			rank[best - 1] = grist_vocab_rank(v, p + start[best - 1], start[best + 1] - start[best - 1]);
	}
	return emit(v, p, start, n, out);
}

/* The heap holds (rank << 32 | part): popping the least is "lowest rank, then leftmost". */
static void heap_push(struct grist_bpe_scratch *s, size_t *n, uint64_t key)
{
	size_t i = (*n)++;

	while (i > 0) {
		size_t up = (i - 1) / 2;

		if (s->heap[up] <= key)
			break;
		s->heap[i] = s->heap[up];
		i = up;
	}
	s->heap[i] = key;
	s->work++;
}

static uint64_t heap_pop(struct grist_bpe_scratch *s, size_t *n)
{
	uint64_t top = s->heap[0], last = s->heap[--*n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && s->heap[c + 1] < s->heap[c])
			c++;
		if (last <= s->heap[c])
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	s->heap[i] = last;
	s->work++;
	return top;
}

/*
 * The same merges with a linked list of parts and a heap of pair ranks. A part keeps the
 * index of its first byte, so index order is position order and the heap's tie-break is
 * tiktoken's "leftmost". An entry is stale when its part was merged away or rescored; it is
 * dropped when popped. Each merge pushes at most two entries: O(n log n) in all.
 */
static int merge_heap(const struct grist_vocab *v, struct grist_bpe_scratch *s, const uint8_t *p, size_t len,
		      struct grist_ids *out)
{
	uint32_t *next = s->next, *prev = s->prev, *rank = s->rank, *bounds = s->start;
	size_t hn = 0, i, nb;

	if (grist_array_reserve((void **)&s->heap, &s->heap_cap, 3 * len, sizeof(*s->heap)))
		return -ENOMEM;
	/* next[len] is the end sentinel; a merged-away part gets rank NONE and is never linked again */
	for (i = 0; i <= len; i++) {
		next[i] = (uint32_t)i + 1;
		prev[i] = (uint32_t)i - 1;
		rank[i] = i + 2 <= len ? grist_vocab_rank(v, p + i, 2) : GRIST_RANK_NONE;
		if (rank[i] != GRIST_RANK_NONE)
			heap_push(s, &hn, (uint64_t)rank[i] << 32 | i);
	}
	while (hn) {
		uint64_t key = heap_pop(s, &hn);
		uint32_t r = (uint32_t)(key >> 32), a = (uint32_t)key, b, c;

		if (rank[a] != r)
			continue; /* stale: rescored since (merged-away parts read NONE) */
		b = next[a];
		c = next[b]; /* the pair is [a, c): c <= len */
		next[a] = c;
		if (c < len)
			prev[c] = a;
		rank[b] = GRIST_RANK_NONE;
		rank[a] = next[c] <= len && c < len ? grist_vocab_rank(v, p + a, next[c] - a) : GRIST_RANK_NONE;
		if (rank[a] != GRIST_RANK_NONE)
			heap_push(s, &hn, (uint64_t)rank[a] << 32 | a);
		if (a > 0) {
			uint32_t z = prev[a];

			rank[z] = grist_vocab_rank(v, p + z, c - z);
			if (rank[z] != GRIST_RANK_NONE)
				heap_push(s, &hn, (uint64_t)rank[z] << 32 | z);
		}
	}
	for (i = 0, nb = 0; i < len; i = next[i])
		bounds[nb++] = (uint32_t)i;
	bounds[nb++] = (uint32_t)len;
	return emit(v, p, bounds, nb, out);
}

struct grist_bpe_cache_entry *grist_bpe_cache_find(struct grist_bpe_cache_entry **cache, const uint8_t *p,
						   size_t len, struct grist_bpe_cache_entry **slot)
{
	struct grist_bpe_cache_entry *e;
	uint64_t head;

	*slot = NULL;
	if (!*cache) {
		*cache = calloc(GRIST_BPE_CACHE_SLOTS, sizeof(**cache));
		if (!*cache)
			return NULL; /* no cache: merge every time */
	}
	e = &(*cache)[grist_vocab_hash(p, len, &head) & (GRIST_BPE_CACHE_SLOTS - 1)];
	*slot = e;
	return e->len == len && grist_vocab_same(e->bytes, p, len) ? e : NULL;
}

void grist_bpe_cache_put(struct grist_bpe_cache_entry *slot, const uint8_t *p, size_t len, const int32_t *ids,
			 size_t n)
{
	if (!slot || len > GRIST_BPE_CACHE_LEN || n > GRIST_BPE_CACHE_IDS)
		return;
	slot->len = (uint8_t)len;
	slot->n = (uint8_t)n;
	memcpy(slot->bytes, p, len);
	memcpy(slot->ids, ids, n * sizeof(*ids));
}

static int merge(const struct grist_vocab *v, struct grist_bpe_scratch *s, const uint8_t *p, size_t len,
		 size_t scan_max, struct grist_ids *out)
{
	if (len >= UINT32_MAX - 1)
		return grist_fail(-EINVAL, "a piece of %zu bytes is too long", len);
	if (reserve(s, len + 2))
		return -ENOMEM;
	return len <= scan_max ? merge_scan(v, s, p, len, out) : merge_heap(v, s, p, len, out);
}

int grist_bpe_encode_piece(const struct grist_vocab *v, struct grist_bpe_scratch *s, const uint8_t *p, size_t len,
			   size_t scan_max, struct grist_ids *out)
{
	struct grist_bpe_cache_entry *e, *slot = NULL;
	size_t first;
	uint32_t r;
	int ret;

	if (len == 0)
		return 0;
	/* tiktoken looks the whole piece up first: a piece that is one token is that token. */
	r = grist_vocab_rank(v, p, len);
	if (r != GRIST_RANK_NONE) {
		if (grist_ids_reserve(out, 1))
			return -ENOMEM;
		out->v[out->n++] = (int32_t)r;
		return 0;
	}
	if (len > GRIST_BPE_CACHE_LEN)
		return merge(v, s, p, len, scan_max, out);
	e = grist_bpe_cache_find(&s->cache, p, len, &slot);
	if (e) {
		if (grist_ids_reserve(out, e->n))
			return -ENOMEM;
		memcpy(out->v + out->n, e->ids, e->n * sizeof(*e->ids));
		out->n += e->n;
		return 0;
	}
	first = out->n;
	ret = merge(v, s, p, len, scan_max, out);
	if (!ret)
		grist_bpe_cache_put(slot, p, len, out->v + first, out->n - first);
	return ret;
}
