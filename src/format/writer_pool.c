/* The writer's chunk-compression pool: N workers over a ring of 2N jobs, results taken in order. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/thread.h"
#include "format/hash.h"
#include "format/simple_chunk.h"
#include "format/options.h"
#include "format/varint.h"
#include "format/writer_pool.h"
#define GRIST_INTERNAL
#include "grist/internal/encode_pool.h"

/*
 * Jobs are numbered in submission order; job s lives in ring[s % njobs].
 * Invariant: emitted <= claimed <= queued <= emitted + njobs, where
 *   queued  = jobs submitted (the caller fills ring[queued % njobs]),
 *   claimed = jobs a worker has taken,
 *   emitted = jobs the caller has retired.
 * queued and claimed change under the lock; emitted only on the caller's
 * thread. Workers take jobs in order but may finish them in any order; the
 * caller always waits for the oldest, so the file gets chunks in order.
 */
struct grist_chunk_pool {
	const struct grist_codec_ops *codec;
	struct grist_codec_params params;
	struct grist_codec_set serial_codecs;   /* the caller's, when there are no workers */

	pthread_mutex_t lock;
	pthread_cond_t work;   /* workers: a job was queued, or stop */
	pthread_cond_t done;   /* caller: a job was encoded */
	pthread_t *threads;
	unsigned nthreads;
	bool stop;

	struct grist_chunk_job *ring;
	unsigned njobs;
	uint64_t queued, claimed, emitted;
};

static void encode(struct grist_chunk_pool *p, struct grist_codec_set *codecs, struct grist_chunk_job *j)
{
	void *ctx;
	int ret;

	j->chunk.len = 0;
	ret = grist_codec_set_get(codecs, p->codec, &ctx);
	if (!ret)
		ret = grist_simple_chunk_encode(p->codec, ctx, &p->params, j->sizes.data, j->sizes.len,
						j->values.data, j->values.len, &j->scratch, &j->chunk);
	j->ret = ret;
	if (ret)
		snprintf(j->msg, sizeof(j->msg), "%s", grist_last_error());
	else
		j->hash = grist_hash(j->chunk.data ? j->chunk.data : (const uint8_t *)"", j->chunk.len);
}

static void *worker_main(void *arg)
{
	struct grist_chunk_pool *p = arg;
	struct grist_codec_set codecs = { 0 };

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct grist_chunk_job *j;

		if (p->claimed == p->queued) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->work, &p->lock);
			continue;
		}
		j = &p->ring[p->claimed++ % p->njobs];
		pthread_mutex_unlock(&p->lock);
		encode(p, &codecs, j);
		pthread_mutex_lock(&p->lock);
		j->done = true;
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	grist_codec_set_clear(&codecs);
	return NULL;
}

int grist_chunk_pool_create(const struct grist_codec_ops *codec, const struct grist_codec_params *params,
			    unsigned threads, struct grist_chunk_pool **out)
{
	struct grist_chunk_pool *p;
	int ret = 0;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return grist_fail(-ENOMEM, "cannot allocate the writer's pool");
	p->codec = codec;
	p->params = *params;
	p->njobs = threads >= 2 ? 2 * threads : 1;
	p->ring = calloc(p->njobs, sizeof(*p->ring));
	if (threads >= 2)
		p->threads = calloc(threads, sizeof(*p->threads));
	if (!p->ring || (threads >= 2 && !p->threads)) {
		free(p->ring);
		free(p->threads);
		free(p);
		return grist_fail(-ENOMEM, "cannot allocate the writer's pool");
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	if (threads < 2) {
		*out = p;
		return 0;
	}
	for (p->nthreads = 0; p->nthreads < threads; p->nthreads++) {
		ret = grist_thread_start(&p->threads[p->nthreads], worker_main, p);
		if (ret)
			break;
	}
	if (ret) {
		ret = grist_fail(ret, "cannot start writer thread %u of %u: %s", p->nthreads + 1, threads,
				 strerror(-ret));
		grist_chunk_pool_destroy(p);
		return ret;
	}
	*out = p;
	return 0;
}

void grist_chunk_pool_destroy(struct grist_chunk_pool *p)
{
	unsigned i;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	/* Jobs still queued are dropped, not encoded: destroy after an error must not wait on them. */
	p->queued = p->claimed;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	for (i = 0; i < p->njobs; i++) {
		grist_buf_free(&p->ring[i].sizes);
		grist_buf_free(&p->ring[i].values);
		grist_buf_free(&p->ring[i].chunk);
		grist_buf_free(&p->ring[i].scratch);
	}
	grist_codec_set_clear(&p->serial_codecs);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p->ring);
	free(p);
}

struct grist_chunk_job *grist_chunk_pool_job(struct grist_chunk_pool *p)
{
	return &p->ring[p->queued % p->njobs];
}

bool grist_chunk_pool_full(const struct grist_chunk_pool *p)
{
	/* queued only moves on the caller's thread, so reading it here needs no lock. */
	return p->queued - p->emitted == p->njobs;
}

void grist_chunk_pool_submit(struct grist_chunk_pool *p)
{
	struct grist_chunk_job *j = &p->ring[p->queued % p->njobs];

	if (!p->nthreads) {
		encode(p, &p->serial_codecs, j);
		j->done = true;
		p->queued++;
		p->claimed++;
		return;
	}
	pthread_mutex_lock(&p->lock);
	j->done = false;
	p->queued++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}

struct grist_chunk_job *grist_chunk_pool_oldest(struct grist_chunk_pool *p, bool wait)
{
	struct grist_chunk_job *j;
	bool done;

	if (p->emitted == p->queued)
		return NULL;
	j = &p->ring[p->emitted % p->njobs];
	if (!p->nthreads)
		return j;
	pthread_mutex_lock(&p->lock);
	while (!j->done && wait)
		pthread_cond_wait(&p->done, &p->lock);
	done = j->done;
	pthread_mutex_unlock(&p->lock);
	return done ? j : NULL;
}

void grist_chunk_pool_retire(struct grist_chunk_pool *p)
{
	struct grist_chunk_job *j = &p->ring[p->emitted % p->njobs];

	j->sizes.len = 0;
	j->values.len = 0;
	j->num_records = 0;
	j->done = false;
	p->emitted++;
}

/* grist/internal/encode_pool.h: the pool behind a narrow interface, for bench/bench_write.c. */
struct grist_encode_pool {
	struct grist_chunk_pool *pool;
	uint64_t group_size;
	unsigned pending;  /* submitted, not collected */
};

int grist_encode_pool_create(const char *writer_options, unsigned threads, struct grist_encode_pool **out)
{
	struct grist_writer_options o;
	struct grist_codec_params params;
	struct grist_encode_pool *p;
	int ret;

	*out = NULL;
	ret = grist_writer_options_parse(writer_options, &o);
	if (ret)
		return ret;
	p = calloc(1, sizeof(*p));
	if (!p)
		return grist_fail(-ENOMEM, "out of memory");
	p->group_size = o.group_size;
	params = (struct grist_codec_params){ .level = o.level, .window_log = o.window_log };
	ret = grist_chunk_pool_create(grist_codec_find(o.compression), &params, threads, &p->pool);
	if (ret) {
		free(p);
		return ret;
	}
	*out = p;
	return 0;
}

void grist_encode_pool_destroy(struct grist_encode_pool *p)
{
	if (!p)
		return;
	grist_chunk_pool_destroy(p->pool);
	free(p);
}

uint64_t grist_encode_pool_group_size(const struct grist_encode_pool *p)
{
	return p->group_size;
}

bool grist_encode_pool_full(const struct grist_encode_pool *p)
{
	return grist_chunk_pool_full(p->pool);
}

int grist_encode_pool_submit(struct grist_encode_pool *p, const void *values, const uint64_t *lens, size_t n)
{
	struct grist_chunk_job *j = grist_chunk_pool_job(p->pool);
	const uint8_t *v = values;
	uint8_t len[GRIST_VARINT64_MAX];
	size_t i;

	for (i = 0; i < n; i++) {
		if (grist_buf_append(&j->sizes, len, grist_varint_write(len, lens[i])) ||
		    grist_buf_append(&j->values, v, lens[i]))
			return grist_fail(-ENOMEM, "out of memory for a chunk of %zu records", n);
		v += lens[i];
	}
	j->num_records = n;
	grist_chunk_pool_submit(p->pool);
	p->pending++;
	return 0;
}

int grist_encode_pool_collect(struct grist_encode_pool *p, size_t *chunk_len)
{
	struct grist_chunk_job *j;
	int ret;

	if (!p->pending)
		return grist_fail(-ENOENT, "no chunk was submitted");
	j = grist_chunk_pool_oldest(p->pool, true);
	ret = j->ret ? grist_fail(j->ret, "%s", j->msg) : 0;
	*chunk_len = j->chunk.len;
	grist_chunk_pool_retire(p->pool);
	p->pending--;
	return ret;
}
