/* Sequence packing: token records, in stream order, become fixed-length rows with segment ids and positions. */
#ifndef GRIST_EXEC_PACK_H
#define GRIST_EXEC_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/loader.h"
#include "exec/slot.h"

/*
 * The packer sits after the engine, on the consumer's thread: it takes the engine's
 * ragged record batches strictly in stream order and writes rows into batch slots of
 * its own. It never looks at how the batches were produced, so its rows are the same
 * for every engine, thread count and queue depth (the engines already agree on the
 * record stream byte for byte).
 *
 * Checkpoints are Grain's: a stream position and a count past it. First-fit and
 * best-fit: the position of the first record of the round being emitted and the rows of
 * that round already emitted. Concat-split: the position of the record being split
 * across rows and the tokens of it already emitted. After the last row of a round (or a
 * row that ended without a split), the pair is (position of the next record, 0).
 * Restoring replays from the position and skips the count, which reproduces the
 * packer's state exactly because the packer is a pure function of the records from that
 * point on.
 *
 * With pieces (MaxText's TokenizeAndChunk: each record cut into pieces of `piece`
 * tokens, each piece a sequence of its own), a first-fit or best-fit round can begin
 * inside a record, so its checkpoint also names the piece the round began with: the
 * replay drops the pieces before it. Concat-split needs no more: its count is tokens of
 * the record, pieces included.
 */

/* Fixed by the loader configuration. */
struct grist_pack_params {
	enum grist_pack_mode mode;
	size_t length;        /* L, tokens per row */
	size_t bins;          /* first-fit, best-fit: rows open at once */
	unsigned token_bytes; /* 1, 2 or 4 */
	size_t batch_rows;    /* rows per delivered batch */
	bool drop_remainder;  /* drop a short last batch of rows */
	size_t piece;         /* tokens per piece a record is cut into first; 0: records whole */
	bool bos;             /* concat-split: the first token of every segment becomes bos_id */
	uint32_t bos_id;      /* fits token_bytes */
};

/* Where records come from: the loader's engine, in stream order. */
struct grist_pack_source {
	/* The next engine batch, published with a ragged layout; NULL or a batch with no records ends the stream. */
	int (*pull)(void *ctx, struct grist_slot **out);
	void (*release)(void *ctx, struct grist_slot *s);
	/* Put where record @record of dataset @dataset lives before the error just set. Returns @code. */
	int (*record_error)(void *ctx, uint32_t dataset, uint64_t record, int code);
	void *ctx;
};

struct grist_packer;

/*
 * grist_packer_check() - validate @p (mode, L, bins, token width, piece, a BOS id (concat-split
 * only, within the token width), and that a batch and a first-fit or best-fit round fit
 * @max_bytes). 0 or -EINVAL with a message.
 */
int grist_packer_check(const struct grist_pack_params *p, size_t max_bytes);

/* Where a packer resumes: a checkpoint from grist_packer_batch_info(); all 0 at the start. */
struct grist_pack_resume {
	uint64_t position; /* shard position of the first record to pull */
	uint64_t piece;    /* first-fit, best-fit: pieces of that record not pushed (params.piece set) */
	uint64_t skip;     /* rows of the round (first-fit, best-fit) or tokens of the record (concat-split)
			      already delivered */
};

/*
 * grist_packer_create() - a packer whose source starts at @at (see struct grist_pack_resume).
 * The source must stay valid until grist_packer_destroy(). 0, -EINVAL (bad @p), -EBADMSG
 * (first-fit, best-fit: @skip is not below bins, or a piece without pieces, so no state
 * could hold it) or -ENOMEM.
 */
int grist_packer_create(const struct grist_pack_params *p, const struct grist_pack_source *src,
			const struct grist_pack_resume *at, struct grist_packer **out);

/*
 * grist_packer_next() - the next batch of rows (batch_rows of them, or fewer only for
 * the last batch of the stream), or *out = NULL at the end. The slot's batch is filled
 * (sequence 0: the caller sets it). Return: 0, or the source's error, or -EMSGSIZE for a
 * record whose length is not a multiple of the token width (named by the source's
 * record_error), or -EBADMSG for a resume position and count that do not match the records.
 * Thread-safety: one thread at a time.
 */
int grist_packer_next(struct grist_packer *pk, struct grist_slot **out);

/* Hand a batch from grist_packer_next() back, in any order. */
void grist_packer_release(struct grist_packer *pk, struct grist_slot *s);

/* What batch @s carries: the checkpoint after it and its real (non-pad) tokens. */
void grist_packer_batch_info(const struct grist_slot *s, struct grist_pack_resume *after, uint64_t *tokens);

/* After grist_packer_next() returned NULL: the shard position just past the last record. */
uint64_t grist_packer_end_position(const struct grist_packer *pk);

/* Records the map dropped in the engine batches consumed so far. */
uint64_t grist_packer_filtered(const struct grist_packer *pk);

/* Memory the packer holds (output slots and the first-fit or best-fit round), in bytes. */
uint64_t grist_packer_memory(const struct grist_packer *pk);

/* Free everything; batches still held by the caller are freed too. */
void grist_packer_destroy(struct grist_packer *pk);

#endif
