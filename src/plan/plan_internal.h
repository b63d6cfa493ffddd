/* Internal pieces of the plan stage shared by its files: key derivation, geometry, mixing. */
#ifndef GRIST_PLAN_INTERNAL_H
#define GRIST_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "grist/plan.h"

/* Domain tags keep the keys of different uses of one seed unrelated. */
enum grist_key_tag {
	GRIST_KEY_PERM = 1,   /* grist_perm_init() and record-granular epochs */
	GRIST_KEY_CHUNKS = 2, /* chunk order of an epoch */
	GRIST_KEY_WINDOW = 3, /* record order inside one window */
};

/* A 64-bit bijection with full avalanche (splitmix64's finaliser). */
uint64_t grist_plan_mix64(uint64_t x);
/* Key for (seed, tag, a, b, c): a hash chain, different for any differing input. */
uint64_t grist_plan_key(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b, uint64_t c);
/* grist_perm_init() with a ready 64-bit key. */
int grist_perm_init_key(struct grist_perm *p, uint64_t n, uint64_t key);

/*
 * Chunk geometry of one component: its files in order. Chunks are numbered
 * across files; chunk c of file f holds group_size records except the last.
 */
struct grist_geometry {
	size_t num_files;
	uint64_t *chunk_first;  /* num_files + 1: first chunk of each file, then the total */
	uint64_t *record_first; /* num_files + 1: first record of each file, then the total */
	uint64_t *group_size;   /* num_files */
};

/* The last i in [0, n) with a[i] <= v, for ascending @a with a[0] <= v. */
static inline size_t grist_plan_search(const uint64_t *a, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Copy and validate @files (sizes, overflow); -EINVAL or -ENOMEM. */
int grist_geometry_init(struct grist_geometry *g, const struct grist_plan_file *files, size_t n,
			size_t component);
void grist_geometry_free(struct grist_geometry *g);
static inline uint64_t grist_geometry_records(const struct grist_geometry *g)
{
	return g->record_first[g->num_files];
}
static inline uint64_t grist_geometry_chunks(const struct grist_geometry *g)
{
	return g->chunk_first[g->num_files];
}
/* First record of chunk @c (c <= chunks; c == chunks gives the record total) and its size. */
uint64_t grist_geometry_chunk(const struct grist_geometry *g, uint64_t c, uint64_t *count);

/* Largest total of scaled weights: keeps m * S inside 128 bits with room. */
#define GRIST_MIX_MAX_TOTAL (UINT64_C(1) << 40)

/*
 * Scale @weights (> 0, finite) so the smallest becomes 100, truncated;
 * -EINVAL for bad weights or a total over GRIST_MIX_MAX_TOTAL.
 */
int grist_mix_scale(const double *weights, size_t n, uint64_t *scaled, uint64_t *total);
/*
 * Which component mixed position @m belongs to; *position gets its count
 * in the first m elements (its component stream position).
 */
size_t grist_mix_pick(const uint64_t *scaled, size_t n, uint64_t total, uint64_t m,
		      uint64_t *position);
/* How many of the first @m mixed elements belong to component @d. */
uint64_t grist_mix_count(const uint64_t *scaled, size_t n, uint64_t total, size_t d, uint64_t m);
/*
 * Length of the mixed stream when component d may deliver at most caps[d]
 * elements: the first position that would exceed a cap (UINT64_MAX if none
 * within 2^64 - 1).
 */
uint64_t grist_mix_length(const uint64_t *scaled, size_t n, uint64_t total, const uint64_t *caps);

/* The largest chunk window: bounds the per-cursor window tables (16 bytes a chunk). */
#define GRIST_PLAN_MAX_WINDOW 65536
/* The most components a mix may have (item.component is 32 bits; tables are per component). */
#define GRIST_PLAN_MAX_COMPONENTS 65536

/* The configuration a stream was created with (components not kept). */
const struct grist_plan_config *grist_stream_config(const struct grist_stream *s);

#endif
