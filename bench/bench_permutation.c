/* Benchmark: grist's keyed permutation vs a Grain-like 4-round Simon Feistel, ns per position. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grist/plan.h"
#include "bench_util.h"

/*
 * The comparison baseline, written from the description of Grain's
 * index_shuffle: block bits = ceil(log2(n - 1)) rounded up to even, at
 * least 16; Simon round F(x) = (rotl(x,1) & rotl(x,8)) ^ rotl(x,2) on half
 * words; 4 rounds; cycle walking. Keys fixed once (Grain re-derives them on
 * every call, which this leaves out, so the baseline is flattered).
 */
struct simon {
	uint64_t max;
	uint32_t w;          /* half-word bits */
	uint64_t wmask;
	uint32_t keys[4];
};

static uint64_t rotl_w(uint64_t x, uint32_t r, uint32_t w, uint64_t mask)
{
	return ((x << r) | (x >> (w - r))) & mask;
}

static uint64_t simon_f(const struct simon *s, uint64_t x)
{
	return (rotl_w(x, 1, s->w, s->wmask) & rotl_w(x, 8, s->w, s->wmask)) ^
	       rotl_w(x, 2, s->w, s->wmask);
}

static void simon_init(struct simon *s, uint64_t n, uint64_t seed)
{
	uint32_t bits = 0;
	int i;

	s->max = n - 1;
	while (bits < 64 && (UINT64_C(1) << bits) < s->max)
		bits++;
	bits = (bits + 1) & ~1u;
	if (bits < 16)
		bits = 16;
	s->w = bits / 2;
	s->wmask = (UINT64_C(1) << s->w) - 1;
	for (i = 0; i < 4; i++) {
		seed = seed * UINT64_C(6364136223846793005) + 1442695040888963407u;
		s->keys[i] = (uint32_t)(seed >> 32);
	}
}

static uint64_t simon_at(const struct simon *s, uint64_t v)
{
	do {
		uint64_t x = v >> s->w, y = v & s->wmask;
		int i;

		for (i = 0; i < 4; i += 2) {
			y ^= simon_f(s, x) ^ (s->keys[i] & s->wmask);
			x ^= simon_f(s, y) ^ (s->keys[i + 1] & s->wmask);
		}
		v = (x << s->w) | y;
	} while (v > s->max);
	return v;
}

static void report(const char *name, double dt, uint64_t count)
{
	printf("%-28s %6.2f ns/position %8.1f M positions/s\n", name, dt * 1e9 / (double)count,
	       (double)count / dt / 1e6);
}

static uint64_t perm_at(const void *ctx, uint64_t i)
{
	return grist_perm_at(ctx, i);
}

static uint64_t perm_inverse(const void *ctx, uint64_t i)
{
	return grist_perm_inverse(ctx, i);
}

static uint64_t simon_fn(const void *ctx, uint64_t i)
{
	return simon_at(ctx, i);
}

/* Time one position at a time through @fn; returns a checksum so nothing is optimised away. */
static uint64_t time_one(const char *name, uint64_t (*fn)(const void *, uint64_t), const void *ctx,
			 uint64_t count)
{
	uint64_t i, sum = 0;
	double t0 = bench_now();

	for (i = 0; i < count; i++)
		sum += fn(ctx, i);
	report(name, bench_now() - t0, count);
	return sum;
}

/*
 * The stream cursor at record and chunk granularity over n records in chunks
 * of @group: ns per item, and the distinct chunks a batch of 256 touches
 * (what a reader must fetch) - the trade-off the window buys.
 */
static void bench_stream(uint64_t n, uint64_t group, enum grist_granularity gran, uint64_t window)
{
	enum { BATCH = 256 };
	struct grist_plan_file file = { n, group };
	struct grist_plan_component comp = { &file, 1, 1.0 };
	struct grist_plan_config cfg;
	struct grist_stream_cursor *c;
	struct grist_stream_item it;
	struct grist_stream *s;
	uint64_t chunks[BATCH], items = 0, distinct = 0, batches = 0;
	char name[64];
	double t0, dt;

	grist_plan_config_init(&cfg);
	cfg.components = &comp;
	cfg.num_components = 1;
	cfg.granularity = gran;
	cfg.window = window;
	if (grist_stream_create(&cfg, &s) < 0 || grist_stream_cursor_create(s, &c) < 0) {
		fprintf(stderr, "%s\n", grist_last_error());
		exit(1);
	}
	t0 = bench_now();
	while (grist_stream_next(c, &it) == 1)
		items += it.record;
	dt = bench_now() - t0;
	items = 0;
	grist_stream_cursor_seek(c, 0);
	while (grist_stream_next(c, &it) == 1) {
		uint64_t ch = it.record / group, k, b = items % BATCH;

		for (k = 0; k < b && chunks[k] != ch; k++)
			;
		if (k == b)
			distinct++;
		chunks[b] = ch;
		if (b == BATCH - 1)
			batches++;
		items++;
	}
	snprintf(name, sizeof(name), "stream %s W=%llu G=%llu", gran ? "chunk" : "record",
		 (unsigned long long)window, (unsigned long long)group);
	printf("%-28s %6.2f ns/item, %.1f distinct chunks per %d-record batch\n",
	       name, dt * 1e9 / (double)items, (double)distinct / (double)(batches ? batches : 1),
	       BATCH);
	grist_stream_cursor_destroy(c);
	grist_stream_destroy(s);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : UINT64_C(1000000000);
	uint64_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : UINT64_C(100000000);
	enum { CHUNK = 4096 };
	static uint64_t out[CHUNK];
	struct grist_perm p;
	struct simon sim;
	uint64_t i, sum = 0;
	double t0;

	if (n < 2 || count > n) {
		fprintf(stderr, "usage: bench_permutation [N >= 2] [COUNT <= N]\n");
		return 2;
	}
	if (grist_perm_init(&p, n, 42, 0) < 0)
		return 1;
	printf("n = %" PRIu64 ", %" PRIu64 " consecutive positions, one core\n", n, count);

	t0 = bench_now();
	for (i = 0; i < count; i += CHUNK) {
		size_t c = count - i < CHUNK ? (size_t)(count - i) : CHUNK;

		grist_perm_fill(&p, i, c, out);
		sum += out[c - 1];
	}
	report("grist_perm_fill (6 rounds)", bench_now() - t0, count);

	sum += time_one("grist_perm_at (6 rounds)", perm_at, &p, count);
	sum += time_one("grist_perm_inverse", perm_inverse, &p, count);
	simon_init(&sim, n, 42);
	sum += time_one("Grain-like Simon, 4 rounds", simon_fn, &sim, count);
	bench_stream(UINT64_C(4000000), 64, GRIST_GRANULARITY_RECORD, 16);
	bench_stream(UINT64_C(4000000), 64, GRIST_GRANULARITY_CHUNK, 16);
	bench_stream(UINT64_C(4000000), 64, GRIST_GRANULARITY_CHUNK, 4);
	bench_stream(UINT64_C(4000000), 64, GRIST_GRANULARITY_CHUNK, 1);
	printf("(checksum %" PRIu64 ")\n", sum);
	return 0;
}
