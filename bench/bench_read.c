/* Random reads by index in batches on one ArrayRecord file, one thread: prints records/s. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grist/format.h"
#include "bench_util.h"

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int sink(void *ctx, size_t position, uint64_t index, const uint8_t *data, size_t len)
{
	uint64_t *sum = ctx;

	(void)position;
	(void)index;
	*sum += len + (len ? data[0] : 0);
	return 0;
}

static int generate(const char *path, uint64_t n, size_t size, const char *opts)
{
	struct grist_writer *w;
	uint8_t *rec = malloc(size);
	uint64_t i, s = 88172645463325252ull;
	int ret;

	if (!rec)
		return -ENOMEM;
	ret = grist_writer_open(path, opts, &w);
	for (i = 0; !ret && i < n; i++) {
		size_t j;

		/* Half random, half text-like: compresses roughly like real samples. */
		for (j = 0; j < size; j += 8) {
			uint64_t v = next_rand(&s);

			memcpy(rec + j, &v, size - j < 8 ? size - j : 8);
		}
		memset(rec + size / 2, 'a' + (int)(i % 26), size / 2);
		ret = grist_writer_write(w, rec, size);
	}
	if (!ret)
		ret = grist_writer_close(w);
	else
		grist_writer_abort(w);
	free(rec);
	return ret;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *opts = NULL;
	uint64_t gen = 0, batches = 2000, batch = 256, seed = 1, sum = 0, i, j, total;
	size_t size = 1024;
	struct grist_reader *r;
	uint64_t *idx;
	double t0, t1;
	int k, ret;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--generate") && k + 1 < argc)
			gen = strtoull(argv[++k], NULL, 10);
		else if (!strcmp(argv[k], "--size") && k + 1 < argc)
			size = strtoull(argv[++k], NULL, 10);
		else if (!strcmp(argv[k], "--options") && k + 1 < argc)
			opts = argv[++k];
		else if (!strcmp(argv[k], "--batches") && k + 1 < argc)
			batches = strtoull(argv[++k], NULL, 10);
		else if (!strcmp(argv[k], "--batch") && k + 1 < argc)
			batch = strtoull(argv[++k], NULL, 10);
		else if (argv[k][0] != '-' && !path)
			path = argv[k];
		else {
			fprintf(stderr, "usage: bench_read FILE [--generate N [--size BYTES] [--options OPTS]] "
					"[--batches N] [--batch N]\n");
			return 2;
		}
	}
	if (!path || !batch)
		return fprintf(stderr, "bench_read: no file given\n"), 2;
	if (gen && (ret = generate(path, gen, size, opts))) {
		fprintf(stderr, "bench_read: %s\n", grist_last_error());
		return 1;
	}
	ret = grist_reader_open(&path, 1, NULL, &r);
	if (ret) {
		fprintf(stderr, "bench_read: %s\n", grist_last_error());
		return 1;
	}
	total = grist_reader_num_records(r);
	idx = malloc(batch * sizeof(*idx));
	if (!idx || !total)
		return fprintf(stderr, "bench_read: empty file or no memory\n"), 1;
	t0 = bench_now();
	for (i = 0; i < batches; i++) {
		for (j = 0; j < batch; j++)
			idx[j] = next_rand(&seed) % total;
		ret = grist_reader_read_batch(r, idx, batch, sink, &sum);
		if (ret) {
			fprintf(stderr, "bench_read: %s\n", grist_last_error());
			return 1;
		}
	}
	t1 = bench_now();
	printf("records/s: %.0f (%llu batches of %llu, %.3f s, checksum %llu)\n",
	       (double)(batches * batch) / (t1 - t0), (unsigned long long)batches,
	       (unsigned long long)batch, t1 - t0, (unsigned long long)sum);
	grist_reader_close(r);
	free(idx);
	return 0;
}
