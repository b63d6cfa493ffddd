/* Tests for checkpoint state: encoding, corruption, fingerprints, exact elastic restore. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "helpers.h"
#include "grist/plan.h"

static void test_round_trip(void **state)
{
	struct grist_state a = { 0x1122334455667788u, 99, 2, 5, 12345, 77, GRIST_STATE_LOCKSTEP, 0 }, b;
	uint8_t buf[GRIST_STATE_SIZE + 8];

	(void)state;
	assert_int_equal(grist_state_encode(&a, buf, sizeof(buf)), GRIST_STATE_SIZE);
	assert_int_equal(grist_state_decode(buf, GRIST_STATE_SIZE, &b), 0);
	assert_int_equal(b.fingerprint, a.fingerprint);
	assert_int_equal(b.base, a.base);
	assert_int_equal(b.shard_index, a.shard_index);
	assert_int_equal(b.shard_count, a.shard_count);
	assert_int_equal(b.consumed, a.consumed);
	assert_int_equal(b.batches, a.batches);
	assert_int_equal(b.flags, a.flags);
	assert_memory_equal(buf, "GRST", 4);
	assert_int_equal(grist_state_encode(&a, buf, GRIST_STATE_SIZE - 1), -EINVAL);
	a.shard_index = 5;
	assert_int_equal(grist_state_encode(&a, buf, sizeof(buf)), -EINVAL);
}

/* Every flipped bit and every truncation is caught: no silent misread. */
static void test_corruption(void **state)
{
	struct grist_state a = { 42, 1, 0, 3, 10, 1, 0, 0 }, b;
	uint8_t buf[GRIST_STATE_SIZE], bad[GRIST_STATE_SIZE + 1];
	size_t i, bit;

	(void)state;
	assert_int_equal(grist_state_encode(&a, buf, sizeof(buf)), GRIST_STATE_SIZE);
	for (i = 0; i < GRIST_STATE_SIZE; i++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(bad, buf, sizeof(buf));
			bad[i] ^= (uint8_t)(1u << bit);
			assert_int_equal(grist_state_decode(bad, GRIST_STATE_SIZE, &b), -EBADMSG);
		}
	}
	for (i = 0; i < GRIST_STATE_SIZE; i++)
		assert_int_equal(grist_state_decode(buf, i, &b), -EBADMSG);
	memcpy(bad, buf, sizeof(buf));
	bad[GRIST_STATE_SIZE] = 0;
	assert_int_equal(grist_state_decode(bad, GRIST_STATE_SIZE + 1, &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "state: byte"));
}

/* Give an edited state of @len bytes a valid crc again, so the decoder's later checks are what refuse it. */
static void reseal_len(uint8_t *buf, size_t len)
{
	uint32_t crc = (uint32_t)crc32(0, buf, (unsigned)(len - 4));

	for (int i = 0; i < 4; i++)
		buf[len - 4 + i] = (uint8_t)(crc >> (8 * i));
}

static void reseal(uint8_t *buf)
{
	reseal_len(buf, GRIST_STATE_SIZE);
}

/*
 * Packed states are version 2 with pack_skip at byte 48; every other state stays version 1
 * byte for byte, so a reader from before packing still reads it. A version 1 state with a
 * pack_skip or the packed flag is corrupt.
 */
static void test_packed_versions(void **state)
{
	struct grist_state a = { 42, 1, 0, 3, 10, 1, GRIST_STATE_PACKED, 77 }, b;
	struct grist_state plain = { 42, 1, 0, 3, 10, 1, GRIST_STATE_LOCKSTEP, 0 };
	/* a version 1 state as the encoder before packing wrote it */
	static const uint8_t v1[GRIST_STATE_SIZE] = {
		'G', 'R', 'S', 'T', 1, 0, 1, 0, 42, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 3, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	};
	uint8_t buf[GRIST_STATE_SIZE], old[GRIST_STATE_SIZE];
	uint32_t crc;

	(void)state;
	assert_int_equal(grist_state_encode(&a, buf, sizeof(buf)), GRIST_STATE_SIZE);
	assert_int_equal(buf[4], 2);
	assert_int_equal(buf[48], 77);
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &b), 0);
	assert_int_equal(b.pack_skip, 77);
	assert_int_equal(b.flags, GRIST_STATE_PACKED);

	assert_int_equal(grist_state_encode(&plain, buf, sizeof(buf)), GRIST_STATE_SIZE);
	memcpy(old, v1, sizeof(old));
	crc = 0;
	/* the old encoder's crc is the same crc32 over the same 52 bytes */
	assert_memory_equal(buf, old, 52);
	memcpy(&crc, buf + 52, 4);
	memcpy(old + 52, &crc, 4);
	assert_int_equal(grist_state_decode(old, sizeof(old), &b), 0);
	assert_int_equal(b.pack_skip, 0);
	assert_int_equal(b.consumed, 10);

	/* pack_skip needs the flag, on either side */
	a.flags = 0;
	assert_int_equal(grist_state_encode(&a, buf, sizeof(buf)), -EINVAL);
	/* a newer version than this reader knows is refused as such */
	a.flags = GRIST_STATE_PACKED;
	assert_int_equal(grist_state_encode(&a, buf, sizeof(buf)), GRIST_STATE_SIZE);
	buf[4] = 4;
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &b), -EBADMSG); /* the crc no longer matches */
	reseal(buf);
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &b), -ENOTSUP);
	assert_non_null(strstr(grist_last_error(), "newer"));
	/* the decoder's side: a version 2 pack_skip without the flag */
	buf[4] = 2;
	buf[6] = 0;
	reseal(buf);
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "without the packed flag"));
	/* version 1 knows neither the packed flag nor a pack_skip */
	memcpy(buf, old, sizeof(buf));
	buf[6] |= GRIST_STATE_PACKED;
	reseal(buf);
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "unknown flags"));
	memcpy(buf, old, sizeof(buf));
	buf[48] = 1;
	reseal(buf);
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "reserved"));
}

/*
 * A packed state with a pack_piece is version 3, 64 bytes, written and read by the _ex calls;
 * every state without one keeps its version 1 or 2 bytes, so only a resume inside a record's
 * pieces needs this reader (an older one refuses those 64 bytes by their length).
 */
static void test_piece_version(void **state)
{
	struct grist_state_ex a = { { 42, 1, 0, 3, 10, 1, GRIST_STATE_PACKED, 5 }, 7, { 0 } }, b;
	uint8_t buf[GRIST_STATE_SIZE_V3], edit[GRIST_STATE_SIZE_V3];
	size_t i;

	(void)state;
	assert_int_equal(grist_state_encode_ex(&a, buf, GRIST_STATE_SIZE), -EINVAL);
	assert_int_equal(grist_state_encode_ex(&a, buf, sizeof(buf)), GRIST_STATE_SIZE_V3);
	assert_int_equal(buf[4], 3);
	assert_int_equal(buf[48], 5);
	assert_int_equal(buf[52], 7);
	memset(&b, 0xA5, sizeof(b));
	assert_int_equal(grist_state_decode_ex(buf, sizeof(buf), &b), 0);
	assert_int_equal(b.state.pack_skip, 5);
	assert_int_equal(b.pack_piece, 7);
	assert_int_equal(b.state.consumed, 10);
	assert_int_equal(b.reserved[0] | b.reserved[1] | b.reserved[2], 0);
	/* a flipped bit anywhere, or a cut, is caught */
	for (i = 0; i < sizeof(buf); i++) {
		memcpy(edit, buf, sizeof(buf));
		edit[i] ^= 0x10;
		assert_int_equal(grist_state_decode_ex(edit, sizeof(edit), &b), -EBADMSG);
	}
	assert_int_equal(grist_state_decode_ex(buf, GRIST_STATE_SIZE, &b), -EBADMSG);
	/* the length must be the version's: a version 2 header in 64 bytes, a version 3 one in 56 */
	memcpy(edit, buf, sizeof(buf));
	edit[4] = 2;
	reseal_len(edit, sizeof(edit));
	assert_int_equal(grist_state_decode_ex(edit, sizeof(edit), &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "is 56 bytes"));
	a.pack_piece = 0;
	assert_int_equal(grist_state_encode_ex(&a, edit, sizeof(edit)), GRIST_STATE_SIZE);
	edit[4] = 3;
	reseal(edit);
	assert_int_equal(grist_state_decode_ex(edit, GRIST_STATE_SIZE, &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "is 64 bytes"));
	/* version 3 needs a piece and the packed flag; its reserved word is zero; a piece needs the flag */
	memcpy(edit, buf, sizeof(buf));
	edit[52] = 0;
	reseal_len(edit, sizeof(edit));
	assert_int_equal(grist_state_decode_ex(edit, sizeof(edit), &b), -EBADMSG);
	memcpy(edit, buf, sizeof(buf));
	edit[57] = 1;
	reseal_len(edit, sizeof(edit));
	assert_int_equal(grist_state_decode_ex(edit, sizeof(edit), &b), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "reserved"));
	a.pack_piece = 7;
	a.reserved[1] = 1; /* room for a later version: refused until it has a meaning */
	assert_int_equal(grist_state_encode_ex(&a, buf, sizeof(buf)), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "reserved"));
	a.reserved[1] = 0;
	a.state.pack_skip = 0;
	a.state.flags = 0;
	assert_int_equal(grist_state_encode_ex(&a, buf, sizeof(buf)), -EINVAL);
}

/*
 * The calls of the frozen struct grist_state (callers built against libgrist.so.1 before
 * version 3): versions 1 and 2 read as before, field for field what the _ex calls read; a
 * version 3 state is refused by name rather than read without its piece, and the caller's
 * 48 bytes, and whatever follows them, are left as they were.
 */
static void test_old_calls_by_version(void **state)
{
	const struct grist_state v1 = { 42, 1, 0, 3, 10, 1, GRIST_STATE_LOCKSTEP, 0 };
	const struct grist_state v2 = { 42, 1, 0, 3, 10, 1, GRIST_STATE_PACKED, 77 };
	struct grist_state_ex x, v3 = { v2, 9, { 0 } };
	struct {
		struct grist_state st;
		unsigned char canary[16]; /* where a longer struct would continue */
	} old;
	uint8_t buf[GRIST_STATE_SIZE_V3], again[GRIST_STATE_SIZE_V3];
	const struct grist_state *in[] = { &v1, &v2 };
	size_t i, k;

	(void)state;
	for (k = 0; k < 2; k++) {
		assert_int_equal(grist_state_encode(in[k], buf, sizeof(buf)), GRIST_STATE_SIZE);
		assert_int_equal(buf[4], k + 1);
		memset(&old, 0xA5, sizeof(old));
		assert_int_equal(grist_state_decode(buf, GRIST_STATE_SIZE, &old.st), 0);
		assert_memory_equal(&old.st, in[k], sizeof(old.st));
		for (i = 0; i < sizeof(old.canary); i++)
			assert_int_equal(old.canary[i], 0xA5);
		assert_int_equal(grist_state_decode_ex(buf, GRIST_STATE_SIZE, &x), 0);
		assert_memory_equal(&x.state, in[k], sizeof(x.state));
		assert_int_equal(x.pack_piece, 0);
		/* the same bytes from either encoder */
		x.state = *in[k];
		assert_int_equal(grist_state_encode_ex(&x, again, sizeof(again)), GRIST_STATE_SIZE);
		assert_memory_equal(again, buf, GRIST_STATE_SIZE);
	}
	assert_int_equal(grist_state_encode_ex(&v3, buf, sizeof(buf)), GRIST_STATE_SIZE_V3);
	memset(&old, 0xA5, sizeof(old));
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &old.st), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "grist_state_decode_ex()"));
	for (i = 0; i < sizeof(old); i++)
		assert_int_equal(((unsigned char *)&old)[i], 0xA5);
	/* a damaged version 3 state is refused for its damage first */
	buf[40] ^= 1;
	assert_int_equal(grist_state_decode(buf, sizeof(buf), &old.st), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "checksum"));
}

static void assert_same_item(const struct grist_stream_item *a, const struct grist_stream_item *b)
{
	assert_int_equal(a->component, b->component);
	assert_int_equal(a->record, b->record);
	assert_int_equal(a->epoch, b->epoch);
	assert_int_equal(a->component_position, b->component_position);
	assert_int_equal(a->position, b->position);
}

/* A job of @k hosts over a mixed, chunk-granular stream. */
struct job {
	struct grist_plan_file fa[2], fb[1];
	struct grist_plan_component comps[2];
	struct grist_plan_config cfg;
};

static void job_init(struct job *jb, enum grist_shard_mode mode)
{
	memset(jb, 0, sizeof(*jb));
	jb->fa[0] = (struct grist_plan_file){ 300, 8 };
	jb->fa[1] = (struct grist_plan_file){ 77, 8 };
	jb->fb[0] = (struct grist_plan_file){ 250, 3 };
	jb->comps[0] = (struct grist_plan_component){ jb->fa, 2, 1.0 };
	jb->comps[1] = (struct grist_plan_component){ jb->fb, 1, 1.5 };
	grist_plan_config_init(&jb->cfg);
	jb->cfg.components = jb->comps;
	jb->cfg.num_components = 2;
	jb->cfg.seed = 77;
	jb->cfg.epochs = 2;
	jb->cfg.granularity = GRIST_GRANULARITY_CHUNK;
	jb->cfg.window = 4;
	jb->cfg.shard_mode = mode;
}

static struct grist_stream *job_stream(struct job *jb, uint64_t i, uint64_t k, uint64_t base)
{
	struct grist_stream *s;

	jb->cfg.shard_index = i;
	jb->cfg.shard_count = k;
	jb->cfg.base = base;
	if (grist_stream_create(&jb->cfg, &s) < 0)
		fail_msg("%s", grist_last_error());
	return s;
}

/*
 * Run K hosts in lockstep for j steps, checkpoint, restore on K' hosts and run
 * to the end: every global position is delivered exactly once, with the item
 * the uninterrupted stream has there.
 */
static void elastic_run(uint64_t k, uint64_t stop, uint64_t k2)
{
	const uint64_t extra = 0xbeef;
	struct grist_stream_item it, *want;
	struct grist_stream *s, *whole;
	struct job jb;
	uint8_t buf[GRIST_STATE_SIZE], *hits;
	uint64_t L, i, j, base, j2;

	job_init(&jb, GRIST_SHARD_STRIDED);
	whole = job_stream(&jb, 0, 1, 0);
	L = grist_stream_length(whole);
	want = malloc(L * sizeof(*want));
	hits = calloc(L, 1);
	assert_non_null(want);
	assert_non_null(hits);
	for (j = 0; j < L; j++)
		assert_int_equal(grist_stream_at(whole, j, &want[j]), 0);
	grist_stream_destroy(whole);

	for (i = 0; i < k; i++) {
		s = job_stream(&jb, i, k, 0);
		for (j = 0; j < stop; j++) {
			assert_int_equal(grist_stream_at(s, j, &it), 0);
			assert_same_item(&it, &want[it.position]);
			hits[it.position]++;
		}
		if (i == k - 1)
			assert_int_equal(grist_stream_save(s, stop, stop / 4, true, extra, buf, sizeof(buf)),
					 GRIST_STATE_SIZE);
		grist_stream_destroy(s);
	}
	for (i = 0; i < k2; i++) {
		struct grist_stream_cursor *c;

		jb.cfg.shard_index = i;
		jb.cfg.shard_count = k2;
		assert_int_equal(grist_stream_restore(&jb.cfg, extra, buf, sizeof(buf), &base, &j2, NULL), 0);
		s = job_stream(&jb, i, k2, base);
		assert_int_equal(grist_stream_cursor_create(s, &c), 0);
		assert_int_equal(grist_stream_cursor_seek(c, j2), 0);
		while (grist_stream_next(c, &it) == 1) {
			assert_same_item(&it, &want[it.position]);
			hits[it.position]++;
		}
		grist_stream_cursor_destroy(c);
		grist_stream_destroy(s);
	}
	for (j = 0; j < L; j++)
		if (hits[j] != 1)
			fail_msg("K=%llu stop=%llu K'=%llu: position %llu delivered %u times",
				 (unsigned long long)k, (unsigned long long)stop, (unsigned long long)k2,
				 (unsigned long long)j, hits[j]);
	free(hits);
	free(want);
}

static void test_elastic_restore(void **state)
{
	static const uint64_t stops[] = { 0, 1, 37, 100, 150 };
	static const uint64_t ks[][2] = { { 3, 2 }, { 3, 4 }, { 3, 3 }, { 1, 5 }, { 4, 1 }, { 2, 7 } };
	size_t a, b;

	(void)state;
	for (a = 0; a < sizeof(ks) / sizeof(ks[0]); a++)
		for (b = 0; b < sizeof(stops) / sizeof(stops[0]); b++)
			elastic_run(ks[a][0], stops[b] / ks[a][0], ks[a][1]);
}

static void test_restore_refusals(void **state)
{
	struct grist_stream *s;
	struct grist_state st;
	struct job jb;
	uint8_t buf[GRIST_STATE_SIZE];
	uint64_t base, j;

	(void)state;
	job_init(&jb, GRIST_SHARD_STRIDED);
	s = job_stream(&jb, 1, 3, 0);
	assert_int_equal(grist_stream_save(s, 5, 1, false, 1, buf, sizeof(buf)), GRIST_STATE_SIZE);
	assert_int_equal(grist_stream_save(s, grist_stream_length(s) + 1, 1, false, 1, buf, 8), -EINVAL);
	/* packed: never lockstep, the skip travels */
	{
		uint8_t pb[GRIST_STATE_SIZE];

		assert_int_equal(grist_stream_save_packed(s, 4, 3, 2, 1, pb, sizeof(pb)), GRIST_STATE_SIZE);
		assert_int_equal(grist_stream_save_packed(s, 4, 1ull << 32, 2, 1, pb, sizeof(pb)), -EINVAL);
		assert_int_equal(grist_stream_restore(&jb.cfg, 1, pb, sizeof(pb), &base, &j, &st), 0);
		assert_int_equal(j, 4);
		assert_int_equal(st.pack_skip, 3);
		assert_int_equal(st.flags, GRIST_STATE_PACKED);
		jb.cfg.shard_count = 5;
		assert_int_equal(grist_stream_restore(&jb.cfg, 1, pb, sizeof(pb), &base, &j, &st), -ESTALE);
		assert_non_null(strstr(grist_last_error(), "not lockstep"));
		jb.cfg.shard_count = 3;
	}
	/* records in pieces: the piece travels in a version 3 state, which only the _ex restore takes */
	{
		uint8_t pb[GRIST_STATE_SIZE_V3], same[GRIST_STATE_SIZE_V3];
		struct grist_state_ex x;

		assert_int_equal(grist_stream_save_packed_ex(s, 4, 0, 3, 2, 1, pb, sizeof(pb)), GRIST_STATE_SIZE);
		assert_int_equal(grist_stream_save_packed(s, 4, 3, 2, 1, same, sizeof(same)), GRIST_STATE_SIZE);
		assert_memory_equal(pb, same, GRIST_STATE_SIZE); /* piece 0: grist_stream_save_packed()'s bytes */
		assert_int_equal(grist_stream_save_packed_ex(s, 4, 0, 1ull << 32, 2, 1, pb, sizeof(pb)), -EINVAL);
		assert_int_equal(grist_stream_save_packed_ex(s, 4, 1ull << 32, 0, 2, 1, pb, sizeof(pb)), -EINVAL);
		assert_int_equal(grist_stream_save_packed_ex(s, 4, 6, 3, 2, 1, pb, GRIST_STATE_SIZE), -EINVAL);
		assert_int_equal(grist_stream_save_packed_ex(s, 4, 6, 3, 2, 1, pb, sizeof(pb)), GRIST_STATE_SIZE_V3);
		assert_int_equal(grist_stream_restore_ex(&jb.cfg, 1, pb, sizeof(pb), &base, &j, &x), 0);
		assert_int_equal(j, 4);
		assert_int_equal(x.pack_piece, 6);
		assert_int_equal(x.state.pack_skip, 3);
		assert_int_equal(x.state.batches, 2);
		base = j = 12345;
		memset(&st, 0xA5, sizeof(st));
		assert_int_equal(grist_stream_restore(&jb.cfg, 1, pb, sizeof(pb), &base, &j, &st), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "grist_stream_restore_ex()"));
		assert_int_equal(base, 12345);
		assert_int_equal(j, 12345);
		assert_int_equal(st.consumed, 0xA5A5A5A5A5A5A5A5ull);
		/* the _ex restore checks the rest as the old one does: another configuration is stale */
		assert_int_equal(grist_stream_restore_ex(&jb.cfg, 2, pb, sizeof(pb), &base, &j, &x), -ESTALE);
		assert_int_equal(grist_stream_restore_ex(&jb.cfg, 1, pb, sizeof(pb), &base, &j, NULL), 0);
	}
	grist_stream_destroy(s);

	/* Same host and K: fine, j kept. */
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, &st), 0);
	assert_int_equal(j, 5);
	assert_int_equal(base, 0);
	assert_int_equal(st.batches, 1);
	/* Other caller config, other data, other seed: stale. */
	assert_int_equal(grist_stream_restore(&jb.cfg, 2, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	jb.fb[0].num_records = 251;
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	jb.fb[0].num_records = 250;
	jb.cfg.seed = 78;
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	jb.cfg.seed = 77;
	jb.cfg.window = 5;
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	jb.cfg.window = 4;
	/* Not lockstep: neither another host nor another K. */
	jb.cfg.shard_index = 0;
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	jb.cfg.shard_count = 2;
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	assert_non_null(strstr(grist_last_error(), "lockstep"));
	/* Corrupt: bad message, before anything else. */
	buf[20] ^= 1;
	assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), -EBADMSG);

	/* Contiguous: same K restores, another K is refused. */
	job_init(&jb, GRIST_SHARD_CONTIGUOUS);
	s = job_stream(&jb, 2, 3, 0);
	assert_int_equal(grist_stream_save(s, 9, 0, true, 0, buf, sizeof(buf)), GRIST_STATE_SIZE);
	grist_stream_destroy(s);
	assert_int_equal(grist_stream_restore(&jb.cfg, 0, buf, sizeof(buf), &base, &j, NULL), 0);
	assert_int_equal(j, 9);
	jb.cfg.shard_count = 4;
	assert_int_equal(grist_stream_restore(&jb.cfg, 0, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
	assert_non_null(strstr(grist_last_error(), "contiguous"));
	/* A strided job cannot take a contiguous checkpoint. */
	jb.cfg.shard_mode = GRIST_SHARD_STRIDED;
	jb.cfg.shard_count = 3;
	assert_int_equal(grist_stream_restore(&jb.cfg, 0, buf, sizeof(buf), &base, &j, NULL), -ESTALE);
}

/*
 * A checkpoint with a valid CRC whose position lies past the end of its shard is
 * refused on both paths: restoring the same shard, and an elastic restore on another
 * K (which used to turn it into a base past the end and deliver nothing).
 */
static void test_restore_range(void **state)
{
	struct grist_stream *s;
	struct grist_state st = { 0 };
	struct job jb;
	uint8_t buf[GRIST_STATE_SIZE];
	uint64_t base, j, len;

	(void)state;
	job_init(&jb, GRIST_SHARD_STRIDED);
	s = job_stream(&jb, 1, 3, 0);
	len = grist_stream_length(s);
	st.fingerprint = grist_stream_fingerprint(s, 1);
	grist_stream_destroy(s);
	st.shard_index = 1;
	st.shard_count = 3;
	st.flags = GRIST_STATE_LOCKSTEP;
	for (int past = 0; past < 2; past++) {
		st.consumed = len + (uint64_t)past;
		assert_int_equal(grist_state_encode(&st, buf, sizeof(buf)), GRIST_STATE_SIZE);
		for (uint64_t k = 3; k <= 4; k++) {
			jb.cfg.shard_index = 0;
			jb.cfg.shard_count = k;
			jb.cfg.base = 0;
			if (past) {
				assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL),
						 -EBADMSG);
				assert_non_null(strstr(grist_last_error(), "past the end of shard 1/3"));
			} else {
				/* exactly at the end is a valid checkpoint: it resumes to nothing */
				assert_int_equal(grist_stream_restore(&jb.cfg, 1, buf, sizeof(buf), &base, &j, NULL), 0);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_corruption),
		cmocka_unit_test(test_packed_versions),
		cmocka_unit_test(test_piece_version),
		cmocka_unit_test(test_old_calls_by_version),
		cmocka_unit_test(test_elastic_restore),
		cmocka_unit_test(test_restore_refusals),
		cmocka_unit_test(test_restore_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
