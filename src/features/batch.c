/*
 * Many records at once: decode_batch on a small pool (random access, e.g. a data source's
 * __getitems__), and gather, which turns a batch of rows into one array per feature.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/thread.h"
#include "features/features_internal.h"

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
/* Records claimed at a time: few enough to balance 28x28 PNGs and 4k JPEGs alike. */
#define CLAIM 4

struct batch_job {
	const struct grist_features_decoder *d;
	const uint8_t *const *records;
	const size_t *lens;
	size_t n;
	uint32_t dataset;
	const uint64_t *indices;
	uint8_t *rows;
	const uint64_t *offsets; /* NULL: fixed rows */
	size_t row_bytes;
	atomic_size_t next;
	/* the failure of the lowest record, under the pool's lock */
	size_t fail_index;
	int fail_code;
	char fail_msg[1024];
};

struct grist_features_pool {
	pthread_mutex_t call_lock; /* one decode_batch at a time */
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	pthread_t *threads;
	unsigned num_threads, started;
	uint64_t generation;       /* bumped for every job */
	unsigned busy;             /* workers still on the current job */
	bool stop;
	struct batch_job *job;
};

static void note_failure(struct grist_features_pool *p, struct batch_job *job, size_t i, int code)
{
	if (p)
		pthread_mutex_lock(&p->lock);
	if (i < job->fail_index) {
		job->fail_index = i;
		job->fail_code = code;
		strncpy(job->fail_msg, grist_last_error(), sizeof(job->fail_msg) - 1);
		job->fail_msg[sizeof(job->fail_msg) - 1] = '\0';
	}
	if (p)
		pthread_mutex_unlock(&p->lock);
}

static void run_job(struct grist_features_pool *p, struct batch_job *job)
{
	size_t first, row_len;

	while ((first = atomic_fetch_add(&job->next, CLAIM)) < job->n) {
		size_t last = first + CLAIM < job->n ? first + CLAIM : job->n;

		for (size_t i = first; i < last; i++) {
			uint8_t *row = job->rows + (job->offsets ? job->offsets[i] : i * job->row_bytes);
			size_t cap = job->offsets ? job->offsets[i + 1] - job->offsets[i] : job->row_bytes;
			int ret = gf_decode_located(job->d, job->records[i], job->lens[i], job->dataset,
						    job->indices ? job->indices[i] : i, 0 /* epoch */, job->indices != NULL, row,
						    cap, &row_len);

			if (ret)
				note_failure(p, job, i, ret);
		}
	}
}

static void *worker(void *arg)
{
	struct grist_features_pool *p = arg;
	uint64_t seen = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->generation == seen)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop)
			break;
		seen = p->generation;
		pthread_mutex_unlock(&p->lock);
		run_job(p, p->job);
		pthread_mutex_lock(&p->lock);
		if (--p->busy == 0)
			pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int grist_features_pool_create(unsigned threads, struct grist_features_pool **out)
{
	struct grist_features_pool *p;
	int ret;

	if (!out || threads < 1 || threads > 256)
		return grist_fail(-EINVAL, "features: a pool of %u threads (1 to 256)", threads);
	p = calloc(1, sizeof(*p));
	if (!p || !(p->threads = calloc(threads, sizeof(*p->threads)))) {
		free(p);
		return grist_fail(-ENOMEM, "features: out of memory");
	}
	pthread_mutex_init(&p->call_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->num_threads = threads;
	for (; p->started < threads; p->started++) {
		ret = grist_thread_start(&p->threads[p->started], worker, p);
		if (ret) {
			grist_features_pool_destroy(p);
			return grist_fail(ret, "features: cannot start a pool thread");
		}
	}
	*out = p;
	return 0;
}

void grist_features_pool_destroy(struct grist_features_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->started; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->call_lock);
	free(p->threads);
	free(p);
}

int grist_features_decode_batch(const struct grist_features_decoder *d, struct grist_features_pool *pool,
				const uint8_t *const *records, const size_t *lens, size_t n, uint32_t dataset,
				const uint64_t *indices, uint8_t *rows, size_t cap, uint64_t *offsets)
{
	const struct grist_features *f = grist_features_decoder_spec(d);
	struct batch_job *job;
	size_t need;
	int ret;

	if (!f || (n && (!records || !lens || !rows)))
		return grist_fail(-EINVAL, "features: decode_batch: NULL argument");
	if (f->ragged && !offsets)
		return grist_fail(-EINVAL, "features: decode_batch: ragged rows need an offsets array");
	need = grist_features_batch_bound(f, lens, n);
	if (cap < need)
		return grist_fail(-EINVAL, "features: decode_batch: %zu bytes of rows given, %zu needed", cap, need);
	if (offsets) {
		uint64_t at = 0;

		for (size_t i = 0; i < n; i++) {
			offsets[i] = at;
			at += f->ragged ? grist_features_row_bound(f, lens[i]) : f->row_bytes;
		}
		offsets[n] = at;
	}
	if (!n)
		return 0;
	job = malloc(sizeof(*job));
	if (!job)
		return grist_fail(-ENOMEM, "features: out of memory");
	*job = (struct batch_job){ .d = d, .records = records, .lens = lens, .n = n, .dataset = dataset,
				   .indices = indices, .rows = rows, .offsets = offsets, .row_bytes = f->row_bytes,
				   .fail_index = SIZE_MAX };
	atomic_init(&job->next, 0);
	if (!pool || n <= CLAIM) {
		run_job(NULL, job);
	} else {
		pthread_mutex_lock(&pool->call_lock);
		pthread_mutex_lock(&pool->lock);
		pool->job = job;
		pool->busy = pool->num_threads;
		pool->generation++;
		pthread_cond_broadcast(&pool->work);
		pthread_mutex_unlock(&pool->lock);
		run_job(pool, job);
		pthread_mutex_lock(&pool->lock);
		while (pool->busy)
			pthread_cond_wait(&pool->done, &pool->lock);
		pool->job = NULL;
		pthread_mutex_unlock(&pool->lock);
		pthread_mutex_unlock(&pool->call_lock);
	}
	ret = job->fail_index == SIZE_MAX ? 0 : grist_fail(job->fail_code, "%s", job->fail_msg);
	free(job);
	return ret;
}

/* Row i of a batch at *r, and the bytes it may span; it must hold at least the spec's fixed part. */
static int row_at(const struct grist_features *f, const uint8_t *rows, const uint64_t *offsets, size_t i,
		  const uint8_t **r, size_t *room)
{
	if (!offsets) {
		*room = f->row_bytes;
		*r = rows + i * f->row_bytes;
		return 0;
	}
	*room = offsets[i + 1] >= offsets[i] ? (size_t)(offsets[i + 1] - offsets[i]) : 0;
	*r = rows + offsets[i];
	if (*room < f->row_bytes)
		return grist_fail(-EBADMSG, "features: gather: row %zu has %zu bytes, less than the spec's %zu", i,
				  *room, f->row_bytes);
	return 0;
}

/* A ragged feature's values in row @r: where, how many bytes, and its dims. */
static int ragged_values(const struct grist_features *f, const struct gf_feature *ft, const uint8_t *r, size_t room,
			 size_t i, size_t *pos, size_t *bytes, int64_t *dims)
{
	uint64_t p, count = 1;

	memcpy(&p, r + ft->offset, 8);
	memcpy(dims, r + ft->dims_offset, 8 * ft->ndim);
	if (ft->decode == GRIST_DECODE_STRINGS) {
		/* the strings' lengths, then their bytes */
		uint64_t sum = 0, len;

		if (dims[0] < 0 || p < f->row_bytes || p > room || (uint64_t)dims[0] > (room - p) / 8)
			return grist_fail(-EBADMSG, "features: gather: row %zu: feature '%s' lies outside its row", i,
					  ft->key);
		for (int64_t k = 0; k < dims[0]; k++) {
			memcpy(&len, r + p + 8 * (uint64_t)k, 8);
			if (len > room - p - 8 * (uint64_t)dims[0] - sum)
				return grist_fail(-EBADMSG, "features: gather: row %zu: feature '%s' lies outside its row",
						  i, ft->key);
			sum += len;
		}
		*pos = (size_t)(p + 8 * (uint64_t)dims[0]);
		*bytes = (size_t)sum;
		return 0;
	}
	for (size_t d = 0; d < ft->ndim; d++) {
		if (dims[d] < 0 || (dims[d] && count > GF_ROW_MAX / (uint64_t)dims[d]))
			return grist_fail(-EBADMSG, "features: gather: row %zu: feature '%s' has a bad shape", i, ft->key);
		count *= (uint64_t)dims[d];
	}
	count *= ft->elem_bytes;
	if (p < f->row_bytes || p > room || count > room - p)
		return grist_fail(-EBADMSG, "features: gather: row %zu: feature '%s' lies outside its row", i, ft->key);
	*pos = (size_t)p;
	*bytes = (size_t)count;
	return 0;
}

static int gather(const struct grist_features *f, size_t fi, const uint8_t *rows, const uint64_t *offsets, size_t n,
		  uint8_t *values, size_t cap, int64_t *dims, size_t *total)
{
	const struct gf_feature *ft;
	int64_t dd[GRIST_FEATURE_MAX_DIMS];
	size_t at = 0;

	if (!f || !f->finished || fi >= f->n || (n && !rows))
		return grist_fail(-EINVAL, "features: gather: unfinished spec, no feature %zu, or no rows", fi);
	if (f->ragged && n && !offsets)
		return grist_fail(-EINVAL, "features: gather: rows of a ragged spec need their offsets");
	ft = &f->feat[fi];
	for (size_t i = 0; i < n; i++) {
		size_t room, pos = 0, bytes = 0;
		const uint8_t *r;
		int ret = row_at(f, rows, offsets, i, &r, &room);

		if (ret)
			return ret;
		if (ft->varlen == GRIST_VARLEN_RAGGED) {
			ret = ragged_values(f, ft, r, room, i, &pos, &bytes, dd);
			if (ret)
				return ret;
		} else {
			pos = ft->offset;
			bytes = ft->bytes;
			if (ft->dims_offset != SIZE_MAX)
				memcpy(dd, r + ft->dims_offset, 8 * ft->ndim);
			else
				memcpy(dd, ft->shape, sizeof(dd));
		}
		if (values) {
			if (bytes > cap - at)
				return grist_fail(-EINVAL, "features: gather: feature '%s' needs more than the %zu bytes given",
						  ft->key, cap);
			memcpy(values + at, r + pos, bytes);
		}
		if (dims)
			memcpy(dims + i * ft->ndim, dd, 8 * ft->ndim);
		at += bytes;
	}
	*total = at;
	return 0;
}

int grist_features_gather_bytes(const struct grist_features *f, size_t i, const uint8_t *rows,
				const uint64_t *offsets, size_t n, size_t *bytes)
{
	if (!bytes)
		return grist_fail(-EINVAL, "features: gather_bytes: NULL argument");
	return gather(f, i, rows, offsets, n, NULL, 0, NULL, bytes);
}

int grist_features_gather(const struct grist_features *f, size_t i, const uint8_t *rows, const uint64_t *offsets,
			  size_t n, void *values, size_t cap, int64_t *dims)
{
	size_t total;

	if (!values && cap)
		return grist_fail(-EINVAL, "features: gather: NULL values");
	return gather(f, i, rows, offsets, n, values, cap, dims, &total);
}

int grist_features_gather_lengths(const struct grist_features *f, size_t fi, const uint8_t *rows,
				  const uint64_t *offsets, size_t n, uint64_t *lengths, size_t cap, size_t *count)
{
	const struct gf_feature *ft;
	size_t total = 0;

	if (!f || !f->finished || fi >= f->n || !count || (n && (!rows || !offsets)) ||
	    f->feat[fi].decode != GRIST_DECODE_STRINGS)
		return grist_fail(-EINVAL, "features: gather_lengths: not a strings feature of a finished spec, or no rows");
	ft = &f->feat[fi];
	for (size_t i = 0; i < n; i++) {
		size_t room, pos, bytes;
		const uint8_t *r;
		int64_t dims[GRIST_FEATURE_MAX_DIMS];
		int ret = row_at(f, rows, offsets, i, &r, &room);

		if (!ret)
			ret = ragged_values(f, ft, r, room, i, &pos, &bytes, dims);

		if (ret)
			return ret;
		if (lengths) {
			if ((size_t)dims[0] > cap - total)
				return grist_fail(-EINVAL, "features: gather_lengths: feature '%s' has more than the %zu "
						  "strings room was given for", ft->key, cap);
			memcpy(lengths + total, r + pos - 8 * (size_t)dims[0], 8 * (size_t)dims[0]);
		}
		total += (size_t)dims[0];
	}
	*count = total;
	return 0;
}
