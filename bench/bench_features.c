/*
 * bench_features: decoding MNIST-like tf.train.Example records (a 28x28x1 PNG and a label)
 * through grist_features_decode() beside libspng alone on the same PNGs, one thread.
 *
 * The records are tests/data/features/mnist-*.pb (serialized by TFDS). "libspng alone"
 * is what a caller writes for one PNG: new context, buffer, header, decode, free; it
 * gets the PNG bytes for free (cut out before timing), so the ratio charges grist for
 * everything it adds: parsing the Example, checking the header against the spec, the
 * label. Time is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID): the figure is per
 * core, and a run descheduled on a shared machine does not count the time it waited.
 * Each round alternates the two in slices of SLICE decodes, and the figures are medians
 * over rounds.
 *
 * Usage: bench_features [DATA_DIR] [ROUNDS]   (DATA_DIR: tests/data by default)
 */
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "grist/features.h"

#define RECORDS 32
#define SLICE 2000
#define SLICES 10 /* per method and round */

static struct grist_features_decoder *make(bool image)
{
	struct grist_features *f;
	struct grist_features_decoder *d;
	int i;

	if (grist_features_create(&f))
		exit(1);
	if (image) {
		i = grist_features_add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ 28, 28, 1 }, 3);
		grist_features_set(f, (size_t)i, GRIST_FEATURE_DECODE, GRIST_DECODE_PNG);
	}
	grist_features_add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0);
	if (grist_features_finish(f) || grist_features_decoder_create(f, NULL, 0, &d)) {
		fprintf(stderr, "bench_features: %s\n", grist_last_error());
		exit(1);
	}
	grist_features_destroy(f);
	return d;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds for SLICE decodes. */
static double run_grist(struct grist_features_decoder *d, uint8_t *const *recs, const size_t *lens)
{
	uint8_t row[800] __attribute__((aligned(8)));
	size_t row_len;
	double t = cpu_now();

	for (int i = 0; i < SLICE; i++)
		if (grist_features_decode(d, recs[i % RECORDS], lens[i % RECORDS], 0, (uint64_t)i, row, sizeof(row),
					  &row_len)) {
			fprintf(stderr, "bench_features: %s\n", grist_last_error());
			exit(1);
		}
	return cpu_now() - t;
}

static double run_spng(uint8_t *const *pngs, const size_t *lens)
{
	uint8_t out[784];
	double t = cpu_now();

	for (int i = 0; i < SLICE; i++) {
		spng_ctx *ctx = spng_ctx_new(0);
		struct spng_ihdr ihdr;
		size_t size;

		if (!ctx || spng_set_png_buffer(ctx, pngs[i % RECORDS], lens[i % RECORDS]) || spng_get_ihdr(ctx, &ihdr) ||
		    spng_decoded_image_size(ctx, SPNG_FMT_PNG, &size) || size != sizeof(out) ||
		    spng_decode_image(ctx, out, sizeof(out), SPNG_FMT_PNG, 0)) {
			fprintf(stderr, "bench_features: libspng failed\n");
			exit(1);
		}
		spng_ctx_free(ctx);
	}
	return cpu_now() - t;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : getenv("GRIST_TEST_DATA") ? getenv("GRIST_TEST_DATA") : "tests/data";
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	uint8_t *recs[RECORDS], *pngs[RECORDS];
	size_t lens[RECORDS], png_lens[RECORDS];
	struct grist_features_decoder *full = make(true), *parse_only = make(false);
	double *g, *s, *p, *ratio;

	if (rounds < 1)
		rounds = 1;
	g = calloc((size_t)rounds, sizeof(double));
	s = calloc((size_t)rounds, sizeof(double));
	p = calloc((size_t)rounds, sizeof(double));
	ratio = calloc((size_t)rounds, sizeof(double));
	for (int i = 0; i < RECORDS; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/features/mnist-%02d.pb", dir, i);
		recs[i] = bench_slurp(path, &lens[i]);
		if (!recs[i]) {
			fprintf(stderr, "bench_features: cannot read %s\n", path);
			return 1;
		}
		/* the PNG for the baseline: from its signature to the end of its IEND chunk */
		pngs[i] = NULL;
		for (size_t k = 0; k + 8 <= lens[i]; k++)
			if (!memcmp(recs[i] + k, "\x89PNG\r\n\x1a\n", 8)) {
				for (size_t e = k + 8; e + 8 <= lens[i]; e++)
					if (!memcmp(recs[i] + e, "IEND", 4)) {
						pngs[i] = recs[i] + k;
						png_lens[i] = e + 8 - k;
						break;
					}
				break;
			}
		if (!pngs[i]) {
			fprintf(stderr, "bench_features: no PNG in %s\n", path);
			return 1;
		}
	}
	run_grist(full, recs, lens); /* warm up both */
	run_spng(pngs, png_lens);
	for (int r = 0; r < rounds; r++) {
		double tg = 0, ts = 0, tp = 0;

		/* alternate slice by slice, each going first in turn, so load changes hit both alike */
		for (int k = 0; k < SLICES; k++) {
			if (k % 2) {
				ts += run_spng(pngs, png_lens);
				tg += run_grist(full, recs, lens);
			} else {
				tg += run_grist(full, recs, lens);
				ts += run_spng(pngs, png_lens);
			}
		}
		for (int k = 0; k < SLICES; k++)
			tp += run_grist(parse_only, recs, lens);
		g[r] = SLICE * SLICES / tg;
		s[r] = SLICE * SLICES / ts;
		p[r] = SLICE * SLICES / tp;
		ratio[r] = g[r] / s[r];
	}
	printf("records: %d MNIST-like Examples (28x28x1 PNG + label), %d decodes per method and round, %d rounds, "
	       "1 thread, per CPU-second\n", RECORDS, SLICE * SLICES, rounds);
	printf("grist_features_decode (parse + PNG + label): %.0f records/s (median)\n", bench_median(g, (size_t)rounds));
	printf("libspng alone on the same PNGs:              %.0f images/s (median)\n", bench_median(s, (size_t)rounds));
	printf("ratio grist / libspng: %.3f (median of the per-round ratios; target >= 0.9)\n",
	       bench_median(ratio, (size_t)rounds));
	printf("parse only (label, the image skipped):       %.0f records/s (median)\n", bench_median(p, (size_t)rounds));
	grist_features_decoder_destroy(full);
	grist_features_decoder_destroy(parse_only);
	for (int i = 0; i < RECORDS; i++)
		free(recs[i]);
	free(g);
	free(s);
	free(p);
	free(ratio);
	return 0;
}
