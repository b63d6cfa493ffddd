/* Compression side of the writer: one core's rate on a file's chunks, the pool's rate on the same chunks at N threads, and the whole writer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "grist/format.h"
#define GRIST_INTERNAL /* the writer's chunk encoding on its own: see grist/internal/encode_pool.h */
#include "grist/internal/encode_pool.h"
#include "bench_util.h"

/*
 * usage: bench_write LINES [--options OPTS] [--threads N,N,...] [--runs R] [--out FILE]
 *
 * LINES is a text file, one record per line (bench/py/make_text.py makes the
 * benchmark's). Its records are cut into chunks of group_size as the writer
 * cuts them, held in memory, and then:
 *   one core:  every chunk encoded on this thread with the writer's own code
 *              (grist_encode_pool: simple chunk + HighwayHash, serial);
 *   pool N:    the same chunks through the writer's pool at N threads, taken in order;
 *   writer N:  grist_writer with max_parallelism:N writing all records to --out
 *              (default: a temporary in /tmp), fsync and rename included.
 * Each figure is the median of --runs runs, in MB/s of record bytes. The pool's
 * efficiency is its rate / (N x the one-core rate): 1.0 is perfect scaling,
 * reachable only when N cores are free. Its CPU efficiency is the one-core
 * run's CPU seconds over the pool run's (all threads, getrusage): what the
 * parallel machinery costs in work, whatever else the machine is doing.
 */

/* One chunk's records: lens[i] bytes each, back to back in values. */
struct chunk_in {
	uint8_t *values;
	uint64_t *lens;
	size_t bytes, records, cap_bytes;
};

/* CPU seconds (user + system) of every thread of the process so far. */
static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Seconds to push every chunk through a pool of @threads (0: the caller's thread). */
static double run_pool(const char *opts, unsigned threads, const struct chunk_in *c, size_t n,
		       size_t *out_bytes, double *cpu)
{
	struct grist_encode_pool *p;
	size_t sent = 0, got = 0, len;
	double t0;

	if (grist_encode_pool_create(opts, threads, &p)) {
		fprintf(stderr, "bench_write: %s\n", grist_last_error());
		exit(1);
	}
	*out_bytes = 0;
	*cpu = cpu_now();
	t0 = bench_now();
	while (got < n) {
		if (sent < n && !grist_encode_pool_full(p)) {
			/* Copying the records in is part of the caller's work in the writer too. */
			if (grist_encode_pool_submit(p, c[sent].values, c[sent].lens, c[sent].records))
				goto fail;
			sent++;
			continue;
		}
		if (grist_encode_pool_collect(p, &len))
			goto fail;
		*out_bytes += len;
		got++;
	}
	t0 = bench_now() - t0;
	*cpu = cpu_now() - *cpu;
	grist_encode_pool_destroy(p);
	return t0;
fail:
	fprintf(stderr, "bench_write: %s\n", grist_last_error());
	exit(1);
}

static double run_writer(const char *path, const char *opts, unsigned threads, const struct chunk_in *c, size_t n)
{
	struct grist_writer *w;
	char text[512];
	double t0;
	size_t i;

	snprintf(text, sizeof(text), "%s,max_parallelism:%u", opts, threads);
	t0 = bench_now();
	if (grist_writer_open(path, text, &w))
		goto fail;
	for (i = 0; i < n; i++) {
		const uint8_t *v = c[i].values;

		for (size_t k = 0; k < c[i].records; k++) {
			if (grist_writer_write(w, v, c[i].lens[k]))
				goto fail_abort;
			v += c[i].lens[k];
		}
	}
	if (grist_writer_close(w))
		goto fail;
	return bench_now() - t0;
fail_abort:
	grist_writer_abort(w);
fail:
	fprintf(stderr, "bench_write: %s\n", grist_last_error());
	exit(1);
}

int main(int argc, char **argv)
{
	const char *lines = NULL, *opts = "group_size:64,zstd:3", *threads_arg = "1,2", *out = NULL;
	struct grist_encode_pool *probe;
	uint64_t group_size;
	struct chunk_in *c = NULL;
	size_t n = 0, cap = 0, line_cap = 0, out_bytes = 0;
	uint64_t bytes = 0, records = 0;
	char *line = NULL, *tok, *save, *list, tmp[] = "/tmp/bench_write-XXXXXX";
	double one[64], t[64], one_cpu[64], t_cpu[64], one_rate;
	int runs = 5, i, r;
	ssize_t len;
	FILE *f;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--options") && i + 1 < argc)
			opts = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads_arg = argv[++i];
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else if (argv[i][0] != '-' && !lines)
			lines = argv[i];
		else {
			fprintf(stderr, "usage: bench_write LINES [--options OPTS] [--threads N,N,...] [--runs R] [--out FILE]\n");
			return 2;
		}
	}
	if (!lines || runs < 1 || runs > 64) {
		fprintf(stderr, "usage: bench_write LINES [--options OPTS] [--threads N,N,...] [--runs R] [--out FILE]\n");
		return 2;
	}
	if (grist_encode_pool_create(opts, 0, &probe)) {
		fprintf(stderr, "bench_write: %s\n", grist_last_error());
		return 2;
	}
	group_size = grist_encode_pool_group_size(probe);
	grist_encode_pool_destroy(probe);
	f = fopen(lines, "rb");
	if (!f) {
		perror(lines);
		return 1;
	}
	while ((len = getline(&line, &line_cap, f)) >= 0) {
		struct chunk_in *ch;

		if (len && line[len - 1] == '\n')
			len--;
		if (!n || c[n - 1].records == group_size) {
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				c = realloc(c, cap * sizeof(*c));
				if (!c)
					return 1;
			}
			memset(&c[n++], 0, sizeof(*c));
		}
		ch = &c[n - 1];
		if (ch->bytes + (size_t)len > ch->cap_bytes) {
			size_t ncap = ch->cap_bytes ? 2 * ch->cap_bytes : 4096;

			while (ncap < ch->bytes + (size_t)len)
				ncap *= 2;
			ch->values = realloc(ch->values, ncap);
			if (!ch->values)
				return 1;
			ch->cap_bytes = ncap;
		}
		if (!(ch->records & (ch->records - 1))) { /* 0, 1, 2, 4, ...: lens is full */
			ch->lens = realloc(ch->lens, (ch->records ? 2 * ch->records : 1) * sizeof(*ch->lens));
			if (!ch->lens)
				return 1;
		}
		memcpy(ch->values + ch->bytes, line, (size_t)len);
		ch->lens[ch->records++] = (uint64_t)len;
		ch->bytes += (size_t)len;
		bytes += (uint64_t)len;
		records++;
	}
	fclose(f);
	free(line);
	if (!out) {
		int fd = mkstemp(tmp);

		if (fd < 0) {
			perror("mkstemp");
			return 1;
		}
		close(fd);
		out = tmp;
	}
	printf("input: %s: %llu records, %.1f MB in %zu chunks of %llu; options %s; %d runs, medians\n", lines,
	       (unsigned long long)records, (double)bytes / 1e6, n, (unsigned long long)group_size, opts, runs);
	for (r = 0; r < runs; r++)
		one[r] = run_pool(opts, 0, c, n, &out_bytes, &one_cpu[r]);
	one_rate = (double)bytes / bench_median(one, runs) / 1e6;
	printf("one core (caller's thread): %8.1f MB/s  (ratio %.3f)\n", one_rate, (double)out_bytes / (double)bytes);
	list = strdup(threads_arg);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned k = (unsigned)atoi(tok);
		double rate, wrate;

		if (k < 2)
			continue;
		/* Alternate with one-core runs so drift in the machine's speed hits both alike. */
		for (r = 0; r < runs; r++) {
			one[r] = run_pool(opts, 0, c, n, &out_bytes, &one_cpu[r]);
			t[r] = run_pool(opts, k, c, n, &out_bytes, &t_cpu[r]);
		}
		one_rate = (double)bytes / bench_median(one, runs) / 1e6;
		rate = (double)bytes / bench_median(t, runs) / 1e6;
		for (r = 0; r < runs; r++)
			t[r] = run_writer(out, opts, k, c, n);
		wrate = (double)bytes / bench_median(t, runs) / 1e6;
		printf("pool %2u threads: %8.1f MB/s = %.2f x one core (%.1f MB/s); efficiency %.3f; "
		       "CPU efficiency %.3f (%.2f vs %.2f CPU s); whole writer (file, fsync): %8.1f MB/s\n",
		       k, rate, rate / one_rate, one_rate, rate / (k * one_rate),
		       bench_median(one_cpu, runs) / bench_median(t_cpu, runs), bench_median(t_cpu, runs), bench_median(one_cpu, runs), wrate);
	}
	free(list);
	if (out == tmp)
		unlink(tmp);
	for (i = 0; i < (int)n; i++) {
		free(c[i].values);
		free(c[i].lens);
	}
	free(c);
	return 0;
}
