/*
 * grist/plan.h - which record comes next: keyed permutations, epochs,
 * sharding, chunk-granular shuffling, weighted mixing and checkpoint state.
 *
 * The plan stage is pure computation: no I/O, no threads, no clocks. Every
 * answer is a function of a configuration and a position, so any position
 * can be computed on its own (for resume and for sharding) and two hosts
 * with the same configuration agree on every record without talking.
 *
 * Three layers:
 *
 *   1. struct grist_perm - a keyed bijection of [0, n) for every n up to
 *      2^63, O(1) memory, forward and inverse, with a batch fill for
 *      consecutive positions. A balanced Feistel network over the smallest
 *      even bit width that holds n - 1, with cycle walking.
 *
 *   2. struct grist_stream - the record stream of one training job: one or
 *      more weighted components (datasets), each shuffled per epoch at
 *      record or chunk granularity and repeated, interleaved
 *      deterministically, then split among K shards. grist_stream_at()
 *      answers "what is shard position j?"; a struct grist_stream_cursor
 *      walks the same answers sequentially and quickly.
 *
 *   3. Checkpoint state - a small versioned, checksummed byte string that
 *      records how far a shard got, with a fingerprint of everything that
 *      defines the stream, so a restore onto another dataset or
 *      configuration is refused and a restore onto a different number of
 *      hosts is exact.
 *
 * Semantics of the stream (all indices 0-based):
 *
 *   Epochs. Epoch e of a component with n records is a permutation of
 *   [0, n) keyed by (seed, e); with reshuffle off it is keyed by (seed, 0)
 *   in every epoch; with shuffle off it is the identity. The component's
 *   stream is epoch 0, epoch 1, ... concatenated: component stream position
 *   c is epoch c / n, epoch position p = c % n.
 *
 *   Record granularity. Position p of epoch e is record perm_e(p).
 *
 *   Chunk granularity with window W. The chunks of the component (every
 *   chunk of a file holds group_size records except the file's last) are
 *   permuted with a permutation keyed by (seed, e); the permuted chunk list
 *   is cut into windows of W consecutive chunks (the last may be shorter);
 *   the records of window w are shuffled together with a permutation keyed
 *   by (seed, e, w), and the epoch is window 0's records, then window 1's,
 *   and so on. A batch drawn from this order touches about batch/(W*G)
 *   distinct windows instead of one chunk per record, so each chunk read
 *   is used for many records; the price is that records close together in
 *   the stream come from at most W chunks, i.e. the shuffle is global over
 *   chunks but only local (W chunks wide) over records. W = 1 reads each
 *   chunk once per epoch; W >= number of chunks is a full record shuffle.
 *   Measured (bench_permutation, 4M records, group_size 64, batches of
 *   256): record granularity touches 255.5 distinct chunks per batch,
 *   chunk granularity W=16 touches 16 and W=4 touches 4.
 *
 *   Mixing. Weights w_d > 0 are scaled so the smallest becomes 100 and
 *   truncated to integers p_d (Grain's rule). The count of component 0 in
 *   the first m elements is m - floor(m * (S - p_0) / S) with S = sum p_d;
 *   the rest m' = m - count_0 are split the same way among components
 *   1.. with S - p_0, and so on (a smooth, Bresenham-like interleave:
 *   weights [1, 2] give 0, 1, 1, 0, 1, 1, ...). Mixed position m belongs
 *   to the component whose count grows between m and m + 1, at component
 *   stream position c = its count in the first m elements. Each component
 *   is shuffled and repeated on its own. With finite epochs E the mixed
 *   stream ends just before the first element that would take component d
 *   past E * n_d records.
 *
 *   Strided sharding (default). The global stream (single or mixed) of
 *   length L (or unbounded) is split so shard I of K takes global positions
 *   base + I + j * K for j = 0, 1, ...; shard sizes differ by at most one.
 *   If every host has consumed j positions, the global stream is consumed
 *   exactly up to base + j * K, so a checkpoint restores on any K' with
 *   base' = base + j * K and j' = 0.
 *
 *   Contiguous sharding (Grain's IndexSampler). Each component's records
 *   (record granularity) or chunks (chunk granularity) are split with
 *   Grain's even_split: n / K each, the first n % K shards one more.
 *   Shard I then runs the semantics above on its own range only: its
 *   epochs are permutations of its range keyed by (seed, e, I), mixed with
 *   the same interleave, and shard position j is position base + j of that
 *   shard-local stream. Reads are more local, the shuffle is per shard, and
 *   a checkpoint cannot move to another K.
 *
 * Thread-safety: a struct grist_perm is immutable after init and may be
 * shared. A struct grist_stream is immutable after create except for the
 * cache grist_stream_at() uses, so grist_stream_at() must not run
 * concurrently on one stream; cursors hold their own caches, one cursor
 * per thread, many cursors per stream.
 */
#ifndef GRIST_PLAN_H
#define GRIST_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Keyed permutation                                                   */
/* ------------------------------------------------------------------ */

/* Feistel rounds; 6 rounds of a two-multiply round function (see permute.c). */
#define GRIST_PERM_ROUNDS 6
/* The largest n a permutation accepts: 2^63. */
#define GRIST_PERM_MAX_N (UINT64_C(1) << 63)

/*
 * A keyed permutation of [0, n). A small value: init it in place, copy it,
 * share it; it owns no memory and needs no destroy. Fields are private.
 */
struct grist_perm {
	uint64_t n;
	uint64_t half_mask;  /* low half of a block: (1 << half_bits) - 1 */
	uint32_t half_bits;  /* block width is 2 * half_bits */
	uint32_t shift;      /* 64 - half_bits: where the round output is taken */
	uint64_t keys[GRIST_PERM_ROUNDS];
};

/**
 * grist_perm_init() - set up the permutation of [0, n) keyed by (seed, epoch).
 * @p:     the permutation to fill.
 * @n:     domain size, 0 <= n <= GRIST_PERM_MAX_N.
 * @seed:  any 64-bit value.
 * @epoch: any 64-bit value; different epochs give unrelated permutations.
 *
 * Round keys are derived here, once; later calls only evaluate.
 *
 * Return: 0, or -EINVAL when n > GRIST_PERM_MAX_N.
 * Thread-safety: writes only *p.
 */
GRIST_API int grist_perm_init(struct grist_perm *p, uint64_t n, uint64_t seed, uint64_t epoch);

/**
 * grist_perm_at() - the image of @position.
 * @position: must be < n (the result is unspecified otherwise; use
 *            grist_perm_fill() for a checked call).
 *
 * Return: a value in [0, n); distinct positions give distinct values.
 * Cost: a few nanoseconds; at most (block size / n) < 4 cipher calls on average.
 * Thread-safety: read-only.
 */
GRIST_API uint64_t grist_perm_at(const struct grist_perm *p, uint64_t position);

/**
 * grist_perm_inverse() - the position whose image is @value (value < n):
 * grist_perm_at(p, grist_perm_inverse(p, v)) == v.
 *
 * Thread-safety: read-only.
 */
GRIST_API uint64_t grist_perm_inverse(const struct grist_perm *p, uint64_t value);

/**
 * grist_perm_fill() - images of the consecutive positions
 * [first, first + count) into @out[0 .. count).
 *
 * Equal to calling grist_perm_at() for each, but evaluates several
 * positions in lock step so the CPU overlaps their multiplies.
 *
 * Return: 0, or -ERANGE when first + count > n.
 * Thread-safety: read-only on @p.
 */
GRIST_API int grist_perm_fill(const struct grist_perm *p, uint64_t first, size_t count,
			      uint64_t *out);

/* ------------------------------------------------------------------ */
/* Stream configuration                                                */
/* ------------------------------------------------------------------ */

/* One file of a component: its record count and chunk size. */
struct grist_plan_file {
	uint64_t num_records;
	uint64_t group_size; /* records per chunk, >= 1 when num_records > 0 */
};

/* One dataset of the mix: its files in order (records count across them). */
struct grist_plan_component {
	const struct grist_plan_file *files;
	size_t num_files;
	double weight; /* > 0 and finite; ignored with a single component */
};

enum grist_granularity {
	GRIST_GRANULARITY_RECORD = 0, /* shuffle records */
	GRIST_GRANULARITY_CHUNK = 1,  /* shuffle chunks, then records within windows */
};

enum grist_shard_mode {
	GRIST_SHARD_STRIDED = 0,    /* shard I takes global positions I, I+K, ... */
	GRIST_SHARD_CONTIGUOUS = 1, /* shard I takes its own range of each component */
};

/* Window of the chunk granularity when the config leaves the default. */
#define GRIST_PLAN_DEFAULT_WINDOW 16

/* grist_plan_config_init() it, then set what you need. A sized struct. */
struct grist_plan_config {
	size_t size;                    /* sizeof(struct grist_plan_config), set by _init() */
	const struct grist_plan_component *components;
	size_t num_components;          /* >= 1 */
	uint64_t seed;
	uint64_t epochs;                /* 0 = unbounded */
	bool shuffle;                   /* false: every epoch in index order */
	bool reshuffle;                 /* false: the same order every epoch */
	enum grist_granularity granularity;
	uint64_t window;                /* chunks per window, >= 1 */
	enum grist_shard_mode shard_mode;
	uint64_t shard_index;           /* I, < shard_count */
	uint64_t shard_count;           /* K, >= 1 */
	uint64_t base;                  /* first global (or shard-local) position, for resume */
};

/**
 * grist_plan_config_init() - fill @cfg with the defaults: no components,
 * seed 0, 1 epoch, shuffle and reshuffle on, record granularity, window
 * GRIST_PLAN_DEFAULT_WINDOW, strided shard 0 of 1, base 0.
 */
GRIST_API void grist_plan_config_init_sized(struct grist_plan_config *cfg, size_t size);

/* Inline on purpose: the size is the one this caller was compiled with (grist/version.h). */
static inline void grist_plan_config_init(struct grist_plan_config *cfg)
{
	grist_plan_config_init_sized(cfg, sizeof(*cfg));
}

/* ------------------------------------------------------------------ */
/* Stream                                                              */
/* ------------------------------------------------------------------ */

struct grist_stream;
struct grist_stream_cursor;

/* What one stream position delivers. */
struct grist_stream_item {
	uint32_t component;           /* which component (dataset) */
	uint64_t record;              /* record index within that component */
	uint64_t epoch;               /* the component's epoch it belongs to */
	uint64_t component_position;  /* position c in the component's own stream */
	uint64_t position;            /* global position (strided) or shard-local position (contiguous) */
};

/**
 * grist_stream_create() - build the stream described by @cfg.
 * @out: receives the stream; destroy with grist_stream_destroy().
 *
 * The configuration is copied (files and weights included); @cfg may be
 * freed afterwards.
 *
 * Return: 0, or
 *   -EINVAL  no components; a weight <= 0, NaN or infinite (with two or
 *            more components); weights so uneven that the scaled integer
 *            weights overflow; a file with records and group_size 0;
 *            window 0; shard_count 0 or shard_index >= shard_count;
 *            shard_count greater than the records (chunks in contiguous
 *            chunk mode) per epoch of the smallest component; more than
 *            2^63 records in a component;
 *   -ENOMEM.
 * Thread-safety: independent calls may run concurrently.
 */
GRIST_API int grist_stream_create(const struct grist_plan_config *cfg, struct grist_stream **out);

/**
 * grist_stream_destroy() - free a stream (NULL is fine). Destroy its
 * cursors first.
 */
GRIST_API void grist_stream_destroy(struct grist_stream *s);

/**
 * grist_stream_length() - how many positions this shard gets: j runs over
 * [0, length). With finite epochs and strided sharding it is
 * ceil((L - base - I) / K) (0 when base + I >= L) for global length L.
 *
 * Return: the count, or UINT64_MAX when epochs is 0 (unbounded).
 */
GRIST_API uint64_t grist_stream_length(const struct grist_stream *s);

/**
 * grist_stream_global_length() - L, the length of the whole stream before
 * sharding (strided), or of this shard's own stream (contiguous); counts
 * from position 0, not from base. UINT64_MAX when unbounded.
 */
GRIST_API uint64_t grist_stream_global_length(const struct grist_stream *s);

/**
 * grist_stream_at() - what shard position @j delivers.
 * @item: filled on success.
 *
 * Costs O(components) plus one permutation evaluation, except that the
 * first position of a new epoch in chunk granularity scans the epoch's
 * chunk order once (O(chunks)) and caches window boundaries.
 *
 * Return: 0, -ERANGE when j >= grist_stream_length(), -ENOMEM.
 * Thread-safety: uses a cache inside @s: not concurrently on one stream.
 */
GRIST_API int grist_stream_at(struct grist_stream *s, uint64_t j, struct grist_stream_item *item);

/**
 * grist_stream_cursor_create() - a sequential reader of @s starting at j = 0.
 *
 * Return: 0, -ENOMEM.
 * Thread-safety: a cursor belongs to one thread at a time; any number of
 * cursors may read one stream concurrently.
 */
GRIST_API int grist_stream_cursor_create(const struct grist_stream *s,
					 struct grist_stream_cursor **out);

/** grist_stream_cursor_destroy() - free a cursor (NULL is fine). */
GRIST_API void grist_stream_cursor_destroy(struct grist_stream_cursor *c);

/**
 * grist_stream_next() - the item at the cursor's position, then advance.
 *
 * Return: 1 and *item filled; 0 at the end of a finite stream (the cursor
 * stays there); -ENOMEM; -ERANGE when an unbounded stream runs past 2^64
 * global positions.
 * Cost: amortised O(1) per call (plus O(components) when mixing).
 */
GRIST_API int grist_stream_next(struct grist_stream_cursor *c, struct grist_stream_item *item);

/**
 * grist_stream_cursor_window_end() - in chunk granularity with a single
 * component, the shard position where the window of the item last returned by
 * grist_stream_next() ends (the first later position of this shard drawn from
 * another window). Readers cut their work at these positions so that each
 * chunk of a window is read and decoded once.
 *
 * Return: that position (> the item's), or 0 when it does not apply (record
 * granularity, no shuffle, several components, or nothing returned yet).
 */
GRIST_API uint64_t grist_stream_cursor_window_end(const struct grist_stream_cursor *c);

/** grist_stream_cursor_tell() - j of the item the next grist_stream_next() returns. */
GRIST_API uint64_t grist_stream_cursor_tell(const struct grist_stream_cursor *c);

/**
 * grist_stream_cursor_seek() - make @j the next position (j may equal the
 * length: the cursor is then at the end).
 *
 * Return: 0, or -ERANGE when j > grist_stream_length().
 */
GRIST_API int grist_stream_cursor_seek(struct grist_stream_cursor *c, uint64_t j);

/* ------------------------------------------------------------------ */
/* Checkpoint state                                                    */
/* ------------------------------------------------------------------ */

/* Encoded size of a checkpoint state of version 1 or 2, in bytes. */
#define GRIST_STATE_SIZE 56
/* Encoded size of a state of version 3 (one with a pack_piece), and the most any version takes. */
#define GRIST_STATE_SIZE_V3 64

/* Bits of struct grist_state.flags. */
#define GRIST_STATE_LOCKSTEP   0x1u /* every host consumed the same j (no filtering) */
#define GRIST_STATE_CONTIGUOUS 0x2u /* saved from a contiguous-sharded stream */
#define GRIST_STATE_PACKED     0x4u /* saved by a packing loader: pack_skip is meaningful (version 2) */

/*
 * A decoded checkpoint of version 1 or 2. Frozen (docs/architecture.md, "A stable ABI"):
 * callers compiled against libgrist.so.1 allocate these 48 bytes, so a field added later
 * goes into struct grist_state_ex, never here.
 */
struct grist_state {
	uint64_t fingerprint; /* grist_stream_fingerprint() of the saving stream */
	uint64_t base;        /* the saving stream's base */
	uint32_t shard_index; /* I at save time */
	uint32_t shard_count; /* K at save time */
	uint64_t consumed;    /* j: shard positions delivered */
	uint64_t batches;     /* caller field: batches delivered */
	uint32_t flags;       /* GRIST_STATE_* */
	uint32_t pack_skip;   /* GRIST_STATE_PACKED: what the caller already delivered past
				 consumed (rows of a packing round, tokens of a split sequence) */
};

/*
 * A decoded checkpoint of any version: struct grist_state and what version 3 added.
 * Frozen too (64 bytes); the reserved words are room for a later version, where 0 will
 * mean what a state without them means today.
 */
struct grist_state_ex {
	struct grist_state state;
	uint32_t pack_piece;  /* GRIST_STATE_PACKED: the piece of the record at consumed that the
				 packing round began with (records cut into pieces; version 3) */
	uint32_t reserved[3]; /* 0 */
};

/**
 * grist_stream_fingerprint() - a 64-bit digest of everything that defines
 * the stream's order: per-component files (records, group size), scaled
 * weights, seed, epochs, shuffle and reshuffle, granularity, window and
 * shard mode, mixed with @extra, an opaque value for the caller's own
 * configuration (batch size, map identity, ...). Not included: the shard
 * (I, K) and base, which a restore may change.
 *
 * Thread-safety: read-only.
 */
GRIST_API uint64_t grist_stream_fingerprint(const struct grist_stream *s, uint64_t extra);

/**
 * grist_state_encode() - write @st as GRIST_STATE_SIZE bytes: magic
 * "GRST", version, flags, fingerprint, base, I, K, consumed, batches, and a
 * zlib crc32 of all that, little-endian. Version 1 has a reserved zero u32 at
 * byte 48; version 2 (written only with GRIST_STATE_PACKED, so readers of
 * version 1 still read every state without packing) keeps pack_skip there.
 * Version 3 (a state with a pack_piece) is written by grist_state_encode_ex().
 *
 * Return: GRIST_STATE_SIZE, or -EINVAL when @cap < GRIST_STATE_SIZE or a
 * field is out of range (K = 0, I >= K, unknown flags).
 */
GRIST_API int grist_state_encode(const struct grist_state *st, uint8_t *buf, size_t cap);

/**
 * grist_state_encode_ex() - grist_state_encode() for a state that may hold a
 * pack_piece. Version 3 (written only with a pack_piece, so readers of
 * version 2 still read every other state, and refuse this one) is
 * GRIST_STATE_SIZE_V3 bytes: pack_piece at byte 52, a reserved zero u32 at
 * 56 and the crc32 at 60. Without a pack_piece the bytes are
 * grist_state_encode()'s.
 *
 * Return: the bytes written (GRIST_STATE_SIZE or GRIST_STATE_SIZE_V3), or
 * -EINVAL when @cap is smaller or a field is out of range (K = 0, I >= K,
 * unknown flags, a pack_piece without GRIST_STATE_PACKED, a reserved word
 * not 0).
 */
GRIST_API int grist_state_encode_ex(const struct grist_state_ex *st, uint8_t *buf, size_t cap);

/**
 * grist_state_decode() - parse and validate an encoded state of version 1
 * or 2; a version 1 state has pack_skip 0 and cannot carry
 * GRIST_STATE_PACKED.
 *
 * Return: 0, or -EBADMSG for a wrong length, wrong magic, bad checksum,
 * unknown version or flags, or fields out of range (the message names the
 * byte offset), and for a sound version 3 state, whose pack_piece @st has
 * no room for (the message names grist_state_decode_ex()); -ENOTSUP for a
 * newer version.
 */
GRIST_API int grist_state_decode(const uint8_t *buf, size_t len, struct grist_state *st);

/**
 * grist_state_decode_ex() - grist_state_decode() for every version: only
 * version 3 has a pack_piece (0 in the others); the reserved words are 0.
 *
 * Return: as grist_state_decode(), without the refusal of version 3.
 */
GRIST_API int grist_state_decode_ex(const uint8_t *buf, size_t len, struct grist_state_ex *st);

/**
 * grist_stream_save() - the state of shard I of @s after @consumed
 * positions (and @batches caller batches), encoded into @buf.
 * @lockstep: true when every host consumed the same number of positions,
 *            which is what allows a restore on a different shard count.
 * @extra:    the caller's configuration digest (see grist_stream_fingerprint()).
 *
 * Return: GRIST_STATE_SIZE, or -EINVAL (small @buf, consumed > length).
 */
GRIST_API int grist_stream_save(const struct grist_stream *s, uint64_t consumed, uint64_t batches,
				bool lockstep, uint64_t extra, uint8_t *buf, size_t cap);

/**
 * grist_stream_save_packed() - grist_stream_save() for a packing caller: the
 * state also holds @pack_skip (what was delivered past @consumed) and the
 * GRIST_STATE_PACKED flag, and is never lockstep.
 *
 * Return: GRIST_STATE_SIZE, or -EINVAL (small @buf, consumed > length,
 * pack_skip above 2^32 - 1).
 */
GRIST_API int grist_stream_save_packed(const struct grist_stream *s, uint64_t consumed, uint64_t pack_skip,
				       uint64_t batches, uint64_t extra, uint8_t *buf, size_t cap);

/**
 * grist_stream_save_packed_ex() - grist_stream_save_packed() for a caller
 * that packs records cut into pieces: the state also holds @pack_piece, the
 * piece of the record at @consumed the packing round began with (@pack_skip
 * then counts what was delivered past that). With @pack_piece 0 it is
 * grist_stream_save_packed().
 *
 * Return: the bytes written (GRIST_STATE_SIZE_V3 with a piece,
 * GRIST_STATE_SIZE without), or -EINVAL (small @buf, consumed > length,
 * pack_piece or pack_skip above 2^32 - 1).
 */
GRIST_API int grist_stream_save_packed_ex(const struct grist_stream *s, uint64_t consumed, uint64_t pack_piece,
					  uint64_t pack_skip, uint64_t batches, uint64_t extra, uint8_t *buf,
					  size_t cap);

/**
 * grist_stream_restore() - check a saved state against @cfg and compute
 * where shard cfg->shard_index of cfg->shard_count resumes.
 * @cfg:   the configuration of the restoring job; its base is ignored.
 * @extra: the restoring caller's configuration digest.
 * @base:  receives the base to put in the config before grist_stream_create().
 * @j:     receives the shard position to seek the cursor to.
 * @st:    receives the decoded state (may be NULL).
 *
 * Same K: base is kept and j is the saved count (the host must be the one
 * that saved, or another host in lockstep). Different K: allowed only for
 * strided sharding of a lockstep save; then base = saved base + j * K and
 * j = 0.
 *
 * Return: 0, or
 *   -EBADMSG  corrupt or truncated state, or a position past the end of the
 *             shard that saved it, or a version 3 state (its pack_piece
 *             needs grist_stream_restore_ex());
 *   -ESTALE   the fingerprint differs (other data or configuration), the
 *             shard mode differs, another host restores a save that is not
 *             lockstep, or K differs and the save was contiguous or not
 *             lockstep (the message says which);
 *   -EINVAL   @cfg is invalid (a shard index >= count, ...);
 *   -ENOMEM.
 */
GRIST_API int grist_stream_restore(const struct grist_plan_config *cfg, uint64_t extra,
				   const uint8_t *buf, size_t len, uint64_t *base, uint64_t *j,
				   struct grist_state *st);

/**
 * grist_stream_restore_ex() - grist_stream_restore() for states of every
 * version: @st (may be NULL) receives the pack_piece too.
 *
 * Return: as grist_stream_restore(), without the refusal of version 3.
 */
GRIST_API int grist_stream_restore_ex(const struct grist_plan_config *cfg, uint64_t extra,
				      const uint8_t *buf, size_t len, uint64_t *base, uint64_t *j,
				      struct grist_state_ex *st);

#ifdef __cplusplus
}
#endif
#endif
