/* Ordered parallel chunk encoding: the caller fills chunks, a pool compresses them, the caller writes them in order. */
#ifndef GRIST_FORMAT_WRITER_POOL_H
#define GRIST_FORMAT_WRITER_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "codec/codec.h"
#include "common/buf.h"

/*
 * One chunk on its way from the caller to the file. Jobs live in a ring and
 * are reused, so their buffers keep their capacity and the steady state
 * allocates nothing.
 *
 * Ownership: a job is the caller's from grist_chunk_pool_job() until
 * grist_chunk_pool_submit(); then the pool's (one worker's) until it is done;
 * then the caller's again (grist_chunk_pool_oldest()) until
 * grist_chunk_pool_retire(). The hand-overs happen under the pool's lock, which
 * orders the buffer writes of one side before the reads of the other.
 */
struct grist_chunk_job {
	struct grist_buf sizes;   /* varint record sizes (caller fills) */
	struct grist_buf values;  /* concatenated record bytes (caller fills) */
	uint64_t num_records;
	/* Results: the encoded simple chunk and its HighwayHash, or ret < 0 and msg. */
	struct grist_buf chunk;
	uint64_t hash;
	int ret;
	char msg[256];
	/* Private to the pool. */
	struct grist_buf scratch;
	bool done;
};

struct grist_chunk_pool;

/*
 * grist_chunk_pool_create() - an encoder for chunks of @codec with @params.
 * @threads: 0 or 1 encode on the caller's thread at submit time (one job);
 *           N >= 2 start N worker threads over a ring of 2N jobs, so at most
 *           2N chunks are in memory at once.
 * Worker threads block every signal, so handlers run on the caller's threads.
 * Return: 0; -ENOMEM; -EAGAIN (and other pthread_create errors).
 */
int grist_chunk_pool_create(const struct grist_codec_ops *codec, const struct grist_codec_params *params,
			    unsigned threads, struct grist_chunk_pool **out);

/* Stop and join the workers, free every job. NULL is fine. */
void grist_chunk_pool_destroy(struct grist_chunk_pool *p);

/*
 * The job the caller fills next. Only valid while !grist_chunk_pool_full():
 * the caller must first write and retire the oldest job.
 */
struct grist_chunk_job *grist_chunk_pool_job(struct grist_chunk_pool *p);

/* True when every job of the ring is submitted and not yet retired. */
bool grist_chunk_pool_full(const struct grist_chunk_pool *p);

/* Hand the filled job to the pool (serial pools encode it now). */
void grist_chunk_pool_submit(struct grist_chunk_pool *p);

/*
 * The oldest submitted, unretired job once it is encoded; NULL when there is
 * none, or when it is still being encoded and @wait is false.
 */
struct grist_chunk_job *grist_chunk_pool_oldest(struct grist_chunk_pool *p, bool wait);

/* The oldest job was written: empty it and make it fillable again. */
void grist_chunk_pool_retire(struct grist_chunk_pool *p);

#endif
