/* grist_reader_read_batch_parallel(): one batch of indices, its chunks split over threads. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "format/dataset.h"
#include "grist/format.h"

#define MAX_PARTS 64

/* One thread's share: consecutive chunks of the sorted request. */
struct part {
	struct grist_reader *r;
	uint64_t *indices;          /* this part's indices, ascending */
	size_t *positions;          /* their positions in the caller's request */
	size_t n;
	grist_record_fn fn;
	void *ctx;
	int ret;
	char msg[512];              /* grist_last_error() of the thread that ran it */
	pthread_t thread;
	bool started;
};

struct pair {
	uint64_t index;
	size_t position;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return x->position < y->position ? -1 : x->position > y->position;
}

/* Positions in the part are local: hand the caller its own. */
static int part_record(void *ctx, size_t position, uint64_t index, const uint8_t *data, size_t len)
{
	struct part *p = ctx;

	return p->fn(p->ctx, p->positions[position], index, data, len);
}

static void *part_run(void *arg)
{
	struct part *p = arg;

	p->ret = grist_reader_read_batch(p->r, p->indices, p->n, part_record, p);
	if (p->ret)
		snprintf(p->msg, sizeof(p->msg), "%s", grist_last_error());
	return NULL;
}

GRIST_API int grist_reader_read_batch_parallel(struct grist_reader *const *readers, unsigned nreaders,
					       const uint64_t *indices, size_t n, grist_record_fn fn, void *ctx)
{
	struct part parts[MAX_PARTS];
	struct grist_record_loc loc, prev;
	struct pair *pairs = NULL;
	uint64_t *idx = NULL;
	size_t *pos = NULL, begin, end, i;
	unsigned k, nparts;
	int ret = 0;

	if (!readers || nreaders == 0 || nreaders > MAX_PARTS || (n && (!indices || !fn)))
		return grist_fail(-EINVAL, "grist_reader_read_batch_parallel: bad arguments (%u readers)", nreaders);
	for (k = 1; k < nreaders; k++)
		if (!readers[k] || grist_reader_num_records(readers[k]) != grist_reader_num_records(readers[0]))
			return grist_fail(-EINVAL, "grist_reader_read_batch_parallel: reader %u is not open on the "
						   "same files as reader 0", k);
	/* A thread costs tens of microseconds: small requests are cheaper on the caller's alone. */
	nparts = nreaders;
	if (n / 32 < nparts)
		nparts = n / 32 ? (unsigned)(n / 32) : 1;
	if (nparts == 1)
		return grist_reader_read_batch(readers[0], indices, n, fn, ctx);

	pairs = malloc(n * sizeof(*pairs));
	idx = malloc(n * sizeof(*idx));
	pos = malloc(n * sizeof(*pos));
	if (!pairs || !idx || !pos) {
		ret = grist_fail(-ENOMEM, "cannot allocate a batch of %zu", n);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (indices[i] >= grist_reader_num_records(readers[0])) {
			ret = grist_fail(-ERANGE, "index %llu (position %zu) is past the end of the dataset (%llu records)",
					 (unsigned long long)indices[i], i,
					 (unsigned long long)grist_reader_num_records(readers[0]));
			goto out;
		}
		pairs[i].index = indices[i];
		pairs[i].position = i;
	}
	qsort(pairs, n, sizeof(*pairs), cmp_pair);
	for (i = 0; i < n; i++) {
		idx[i] = pairs[i].index;
		pos[i] = pairs[i].position;
	}

	/*
	 * Equal shares of the sorted request, each boundary moved past the records of the chunk it
	 * falls in, so that no chunk is read and decoded by two threads.
	 */
	memset(parts, 0, sizeof(parts));
	begin = 0;
	for (k = 0; k < nparts && begin < n; k++) {
		end = k + 1 == nparts ? n : n * (k + 1) / nparts;
		if (end <= begin)
			end = begin + 1;
		if (end < n) {
			ret = grist_reader_locate(readers[0], idx[end - 1], &prev);
			while (!ret && end < n) {
				ret = grist_reader_locate(readers[0], idx[end], &loc);
				if (ret || loc.file != prev.file || loc.chunk != prev.chunk)
					break;
				end++;
			}
			if (ret)
				goto out;
		}
		parts[k] = (struct part){ .r = readers[k], .indices = idx + begin, .positions = pos + begin,
					  .n = end - begin, .fn = fn, .ctx = ctx };
		begin = end;
	}
	nparts = k;
	for (k = 1; k < nparts; k++)
		parts[k].started = pthread_create(&parts[k].thread, NULL, part_run, &parts[k]) == 0;
	/* The caller reads its own share, and any share whose thread could not start. */
	for (k = 0; k < nparts; k++)
		if (k == 0 || !parts[k].started)
			part_run(&parts[k]);
	for (k = 1; k < nparts; k++)
		if (parts[k].started)
			pthread_join(parts[k].thread, NULL);
	/* The first failing share in index order speaks for the batch, on the caller's thread. */
	for (k = 0; k < nparts; k++)
		if (parts[k].ret) {
			ret = grist_fail(parts[k].ret, "%s", parts[k].msg);
			break;
		}
out:
	free(pairs);
	free(idx);
	free(pos);
	return ret;
}
