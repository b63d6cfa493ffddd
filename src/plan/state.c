/* Checkpoint state: a small versioned, checksummed byte string, and elastic restore. */
#include <string.h>
#include <zlib.h>

#include "common/error.h"
#include "plan/plan_internal.h"

/*
 * Layout, little-endian:
 *    0  u32 magic "GRST"     4  u16 version         6  u16 flags
 *    8  u64 fingerprint     16  u64 base
 *   24  u32 shard index     28  u32 shard count
 *   32  u64 consumed        40  u64 batches
 *   48  u32 version 1: reserved (0); versions 2, 3: pack_skip
 *   52  u32 versions 1, 2: crc32 of bytes [0, 52)
 * version 3 only (64 bytes):
 *   52  u32 pack_piece      56  u32 reserved (0)      60  u32 crc32 of bytes [0, 60)
 *
 * Version 2 differs only at byte 48 and is written only for packed states, so a
 * reader that knows version 1 alone still reads every state without packing, and
 * refuses a packed one as "newer" instead of misreading it. Version 3 is written only
 * for a packed state whose round began inside a record cut into pieces, so readers of
 * version 2 read every other state and refuse that one the same way.
 */
#define STATE_MAGIC 0x54535247u /* "GRST" read as a little-endian u32 */
#define STATE_VERSION 3
#define STATE_FLAGS_V1 (GRIST_STATE_LOCKSTEP | GRIST_STATE_CONTIGUOUS)
#define STATE_FLAGS_KNOWN (STATE_FLAGS_V1 | GRIST_STATE_PACKED)

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	int i;

	for (i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	int i;

	for (i = bytes - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

int grist_state_encode_ex(const struct grist_state_ex *x, uint8_t *buf, size_t cap)
{
	const struct grist_state *st = &x->state;
	unsigned version = x->pack_piece ? 3 : st->flags & GRIST_STATE_PACKED ? 2 : 1;
	size_t size = version == 3 ? GRIST_STATE_SIZE_V3 : GRIST_STATE_SIZE, crc_at = size - 4;

	if (cap < size)
		return grist_fail(-EINVAL, "state buffer of %zu bytes; need %zu", cap, size);
	if (!st->shard_count || st->shard_index >= st->shard_count)
		return grist_fail(-EINVAL, "state shard %u/%u is not a shard", st->shard_index,
				  st->shard_count);
	if (st->flags & ~STATE_FLAGS_KNOWN)
		return grist_fail(-EINVAL, "unknown state flags 0x%x", st->flags);
	if (!(st->flags & GRIST_STATE_PACKED) && st->pack_skip)
		return grist_fail(-EINVAL, "state pack_skip %u without the packed flag", st->pack_skip);
	if (!(st->flags & GRIST_STATE_PACKED) && x->pack_piece)
		return grist_fail(-EINVAL, "state pack_piece %u without the packed flag", x->pack_piece);
	/* refused now, so that a later version may give them a meaning where 0 is today's */
	if (x->reserved[0] || x->reserved[1] || x->reserved[2])
		return grist_fail(-EINVAL, "state reserved words are not zero");
	put_le(buf, STATE_MAGIC, 4);
	put_le(buf + 4, version, 2);
	put_le(buf + 6, st->flags, 2);
	put_le(buf + 8, st->fingerprint, 8);
	put_le(buf + 16, st->base, 8);
	put_le(buf + 24, st->shard_index, 4);
	put_le(buf + 28, st->shard_count, 4);
	put_le(buf + 32, st->consumed, 8);
	put_le(buf + 40, st->batches, 8);
	put_le(buf + 48, st->pack_skip, 4);
	if (version == 3) {
		put_le(buf + 52, x->pack_piece, 4);
		put_le(buf + 56, 0, 4);
	}
	put_le(buf + crc_at, crc32(0, buf, (unsigned)crc_at), 4);
	return (int)size;
}

/* The struct grist_state of 1.x callers: read as far as it goes, written as versions 1 and 2. */
int grist_state_encode(const struct grist_state *st, uint8_t *buf, size_t cap)
{
	const struct grist_state_ex x = { .state = *st };

	return grist_state_encode_ex(&x, buf, cap);
}

int grist_state_decode_ex(const uint8_t *buf, size_t len, struct grist_state_ex *x)
{
	struct grist_state *st = &x->state;
	uint32_t crc, version;
	size_t crc_at;

	if (len != GRIST_STATE_SIZE && len != GRIST_STATE_SIZE_V3)
		return grist_fail_at(-EBADMSG, "state", len < GRIST_STATE_SIZE ? len : GRIST_STATE_SIZE,
				     "checkpoint state is %zu bytes; expected %d or %d", len, GRIST_STATE_SIZE,
				     GRIST_STATE_SIZE_V3);
	if (get_le(buf, 4) != STATE_MAGIC)
		return grist_fail_at(-EBADMSG, "state", 0, "bad magic 0x%08llx (expected \"GRST\")",
				     (unsigned long long)get_le(buf, 4));
	/* the checksum covers the version: check it first, then whether the length is that version's */
	crc_at = len - 4;
	crc = (uint32_t)crc32(0, buf, (unsigned)crc_at);
	if (get_le(buf + crc_at, 4) != crc)
		return grist_fail_at(-EBADMSG, "state", crc_at,
				     "checksum mismatch (stored 0x%08llx, computed 0x%08x)",
				     (unsigned long long)get_le(buf + crc_at, 4), crc);
	version = (uint32_t)get_le(buf + 4, 2);
	if (version > STATE_VERSION)
		return grist_fail_at(-ENOTSUP, "state", 4, "state version %u is newer than %d",
				     version, STATE_VERSION);
	if (version == 0)
		return grist_fail_at(-EBADMSG, "state", 4, "state version 0");
	if (len != (version == 3 ? GRIST_STATE_SIZE_V3 : GRIST_STATE_SIZE))
		return grist_fail_at(-EBADMSG, "state", 4, "a state of version %u is %d bytes, not %zu", version,
				     version == 3 ? GRIST_STATE_SIZE_V3 : GRIST_STATE_SIZE, len);
	memset(x, 0, sizeof(*x));
	st->flags = (uint32_t)get_le(buf + 6, 2);
	if (st->flags & ~(version == 1 ? STATE_FLAGS_V1 : STATE_FLAGS_KNOWN))
		return grist_fail_at(-EBADMSG, "state", 6, "unknown flags 0x%x for version %u", st->flags, version);
	st->fingerprint = get_le(buf + 8, 8);
	st->base = get_le(buf + 16, 8);
	st->shard_index = (uint32_t)get_le(buf + 24, 4);
	st->shard_count = (uint32_t)get_le(buf + 28, 4);
	st->consumed = get_le(buf + 32, 8);
	st->batches = get_le(buf + 40, 8);
	if (!st->shard_count || st->shard_index >= st->shard_count)
		return grist_fail_at(-EBADMSG, "state", 24, "shard %u/%u is not a shard",
				     st->shard_index, st->shard_count);
	st->pack_skip = (uint32_t)get_le(buf + 48, 4);
	if (st->pack_skip && version == 1)
		return grist_fail_at(-EBADMSG, "state", 48, "reserved field is not zero");
	if (st->pack_skip && !(st->flags & GRIST_STATE_PACKED))
		return grist_fail_at(-EBADMSG, "state", 48, "pack_skip %u in a state without the packed flag",
				     st->pack_skip);
	if (version == 3) {
		x->pack_piece = (uint32_t)get_le(buf + 52, 4);
		if (!x->pack_piece || !(st->flags & GRIST_STATE_PACKED))
			return grist_fail_at(-EBADMSG, "state", 52, "a version 3 state needs the packed flag and a "
					     "pack_piece (it has 0x%x and %u)", st->flags, x->pack_piece);
		if (get_le(buf + 56, 4))
			return grist_fail_at(-EBADMSG, "state", 56, "reserved field is not zero");
	}
	return 0;
}

/*
 * What the calls of struct grist_state do with a sound version 3 state: refuse it by name,
 * since dropping its pack_piece would resume at the wrong piece of the record.
 */
static int refuse_piece(const struct grist_state_ex *x, const char *newer)
{
	if (!x->pack_piece)
		return 0;
	return grist_fail_at(-EBADMSG, "state", 52, "a version 3 state (pack_piece %u) does not fit struct "
			     "grist_state: read it with %s()", x->pack_piece, newer);
}

int grist_state_decode(const uint8_t *buf, size_t len, struct grist_state *st)
{
	struct grist_state_ex x;
	int ret;

	ret = grist_state_decode_ex(buf, len, &x);
	if (!ret)
		ret = refuse_piece(&x, "grist_state_decode_ex");
	if (!ret)
		*st = x.state;
	return ret;
}

static int stream_save(const struct grist_stream *s, uint64_t consumed, uint64_t batches, uint32_t flags,
		       uint32_t pack_piece, uint32_t pack_skip, uint64_t extra, uint8_t *buf, size_t cap)
{
	const struct grist_plan_config *cfg = grist_stream_config(s);
	struct grist_state_ex x = {
		.state = {
			.fingerprint = grist_stream_fingerprint(s, extra),
			.base = cfg->base,
			.consumed = consumed,
			.batches = batches,
			.flags = flags | (cfg->shard_mode == GRIST_SHARD_CONTIGUOUS ? GRIST_STATE_CONTIGUOUS : 0),
			.pack_skip = pack_skip,
		},
		.pack_piece = pack_piece,
	};

	if (consumed > grist_stream_length(s))
		return grist_fail(-EINVAL, "consumed %llu positions of a shard that has %llu",
				  (unsigned long long)consumed,
				  (unsigned long long)grist_stream_length(s));
	if (cfg->shard_count > UINT32_MAX)
		return grist_fail(-EINVAL, "shard count %llu does not fit a checkpoint (2^32 - 1 at most)",
				  (unsigned long long)cfg->shard_count);
	x.state.shard_index = (uint32_t)cfg->shard_index;
	x.state.shard_count = (uint32_t)cfg->shard_count;
	return grist_state_encode_ex(&x, buf, cap);
}

int grist_stream_save(const struct grist_stream *s, uint64_t consumed, uint64_t batches,
		      bool lockstep, uint64_t extra, uint8_t *buf, size_t cap)
{
	return stream_save(s, consumed, batches, lockstep ? GRIST_STATE_LOCKSTEP : 0, 0, 0, extra, buf, cap);
}

int grist_stream_save_packed_ex(const struct grist_stream *s, uint64_t consumed, uint64_t pack_piece,
				uint64_t pack_skip, uint64_t batches, uint64_t extra, uint8_t *buf, size_t cap)
{
	if (pack_skip > UINT32_MAX || pack_piece > UINT32_MAX)
		return grist_fail(-EINVAL, "pack piece %llu or skip %llu does not fit a checkpoint",
				  (unsigned long long)pack_piece, (unsigned long long)pack_skip);
	return stream_save(s, consumed, batches, GRIST_STATE_PACKED, (uint32_t)pack_piece, (uint32_t)pack_skip, extra,
			   buf, cap);
}

int grist_stream_save_packed(const struct grist_stream *s, uint64_t consumed, uint64_t pack_skip, uint64_t batches,
			     uint64_t extra, uint8_t *buf, size_t cap)
{
	return grist_stream_save_packed_ex(s, consumed, 0, pack_skip, batches, extra, buf, cap);
}

/* @newer: the name to refuse a version 3 state by (a call of struct grist_state), or NULL. */
static int stream_restore(const struct grist_plan_config *caller_cfg, uint64_t extra, const uint8_t *buf,
			  size_t len, uint64_t *base, uint64_t *j, struct grist_state_ex *out, const char *newer)
{
	struct grist_plan_config copy, probe;
	const struct grist_plan_config *cfg = &copy;
	struct grist_stream *s;
	struct grist_state_ex x;
	const struct grist_state *st = &x.state;
	uint64_t fp, shard_len, moved;
	int ret;

	ret = grist_sized_in(&copy, sizeof(copy), caller_cfg, "grist_plan_config");
	if (ret)
		return ret;
	probe = copy;
	ret = grist_state_decode_ex(buf, len, &x);
	if (!ret && newer)
		ret = refuse_piece(&x, newer);
	if (ret < 0)
		return ret;
	/* The fingerprint ignores base and shard; create at shard 0/1 so any K validates. */
	probe.base = 0;
	probe.shard_index = 0;
	probe.shard_count = 1;
	ret = grist_stream_create(&probe, &s);
	if (ret < 0)
		return ret;
	fp = grist_stream_fingerprint(s, extra);
	grist_stream_destroy(s);
	if (fp != st->fingerprint)
		return grist_fail(-ESTALE, "checkpoint fingerprint 0x%016llx does not match this dataset "
				  "and configuration (0x%016llx)", (unsigned long long)st->fingerprint,
				  (unsigned long long)fp);
	if (!cfg->shard_count || cfg->shard_index >= cfg->shard_count)
		return grist_fail(-EINVAL, "restoring shard %llu/%llu: not a shard",
				  (unsigned long long)cfg->shard_index,
				  (unsigned long long)cfg->shard_count);
	/*
	 * The position must lie within the shard that saved it, whichever path restores
	 * it: an elastic restore turns it into a global base, where a position past the
	 * end would otherwise just deliver nothing.
	 */
	probe.base = st->base;
	probe.shard_index = st->shard_index;
	probe.shard_count = st->shard_count;
	probe.shard_mode = (st->flags & GRIST_STATE_CONTIGUOUS) ? GRIST_SHARD_CONTIGUOUS : GRIST_SHARD_STRIDED;
	ret = grist_stream_create(&probe, &s);
	if (ret < 0)
		return grist_fail_prefix(-EBADMSG, "state: shard %u/%u at base %llu", st->shard_index, st->shard_count,
					 (unsigned long long)st->base);
	shard_len = grist_stream_length(s);
	grist_stream_destroy(s);
	if (st->consumed > shard_len)
		return grist_fail_at(-EBADMSG, "state", 32,
				     "position %llu is past the end of shard %u/%u (%llu positions)",
				     (unsigned long long)st->consumed, st->shard_index, st->shard_count,
				     (unsigned long long)shard_len);
	if (cfg->shard_count == st->shard_count) {
		if (cfg->shard_index != st->shard_index && !(st->flags & GRIST_STATE_LOCKSTEP))
			return grist_fail(-ESTALE, "checkpoint of shard %u/%u cannot restore shard "
					  "%llu/%u: it is not lockstep, so hosts consumed different "
					  "amounts", st->shard_index, st->shard_count,
					  (unsigned long long)cfg->shard_index, st->shard_count);
		*base = st->base;
		*j = st->consumed;
	} else {
		if (st->flags & GRIST_STATE_CONTIGUOUS)
			return grist_fail(-ESTALE, "checkpoint from %u contiguous shards cannot restore "
					  "on %llu: contiguous shards own fixed record ranges; use "
					  "strided sharding for elastic restore", st->shard_count,
					  (unsigned long long)cfg->shard_count);
		if (!(st->flags & GRIST_STATE_LOCKSTEP))
			return grist_fail(-ESTALE, "checkpoint from %u shards cannot restore on %llu: "
					  "it is not lockstep (hosts consumed different amounts, "
					  "e.g. after filtering)", st->shard_count,
					  (unsigned long long)cfg->shard_count);
		/* Every host consumed j, so the global stream is consumed up to base + j * K. */
		if (__builtin_mul_overflow(st->consumed, (uint64_t)st->shard_count, &moved) ||
		    __builtin_add_overflow(moved, st->base, base))
			return grist_fail_at(-EBADMSG, "state", 32, "consumed %llu x %u shards overflows",
					     (unsigned long long)st->consumed, st->shard_count);
		*j = 0;
	}
	if (out)
		*out = x;
	return 0;
}

int grist_stream_restore_ex(const struct grist_plan_config *cfg, uint64_t extra, const uint8_t *buf, size_t len,
			    uint64_t *base, uint64_t *j, struct grist_state_ex *out)
{
	return stream_restore(cfg, extra, buf, len, base, j, out, NULL);
}

int grist_stream_restore(const struct grist_plan_config *cfg, uint64_t extra, const uint8_t *buf, size_t len,
			 uint64_t *base, uint64_t *j, struct grist_state *out)
{
	struct grist_state_ex x;
	int ret;

	ret = stream_restore(cfg, extra, buf, len, base, j, &x, "grist_stream_restore_ex");
	if (!ret && out)
		*out = x.state;
	return ret;
}
