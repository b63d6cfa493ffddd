/*
 * SentencePiece .model files checked before Debian's libsentencepiece (0.1.97) sees them.
 *
 * The library parses the ModelProto with protobuf and then trusts parts of it blindly. The
 * normalizer's precompiled_charsmap is a darts-clone double array that Normalizer walks by
 * unchecked index, and whose values are offsets into a string blob it reads up to a NUL: a
 * model with a few bytes changed there loads without error and then reads wild memory on the
 * first encode (a segfault in Normalizer::NormalizePrefix). A piece that begins with a NUL
 * is a zero-length darts-clone key, which throws from a constructor inside the library's
 * Load and ends the process. So grist reads the wire format itself (a small protobuf reader
 * over the fields the library relies on) and refuses such a file with a message naming it.
 *
 * Where protobuf would accept something odd that SentencePiece never writes (a known field
 * with another wire type, an enum value the schema lacks, groups), this reader refuses it:
 * being stricter than the library's parser is what keeps the checks exact.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "text/text_internal.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* sentencepiece_model.proto's numbers (the fields the library depends on). */
enum { MODEL_PIECES = 1, MODEL_TRAINER = 2, MODEL_NORMALIZER = 3, MODEL_DENORMALIZER = 5 };
enum { PIECE_PIECE = 1, PIECE_SCORE = 2, PIECE_TYPE = 3 };
enum { TYPE_NORMAL = 1, TYPE_UNKNOWN = 2, TYPE_CONTROL = 3, TYPE_USER_DEFINED = 4, TYPE_UNUSED = 5, TYPE_BYTE = 6 };
enum { TRAINER_MODEL_TYPE = 3, TRAINER_BYTE_FALLBACK = 35 };
enum { NORM_CHARSMAP = 2 };

struct check {
	const char *path;
	const uint8_t *base; /* the file, for byte offsets in messages */
};

static int bad(const struct check *c, const void *at, const char *fmt, ...) GRIST_PRINTF(3, 4);

/* "<path>: not a SentencePiece model, or a corrupt one: byte <offset>: <what>" (-EBADMSG). */
static int bad(const struct check *c, const void *at, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return grist_fail(-EBADMSG, "%s: not a SentencePiece model, or a corrupt one: byte %zu: %s", c->path,
			  (size_t)((const uint8_t *)at - c->base), what);
}

/* A varint of at most 10 bytes: 0, or -1 when it is longer or cut short. */
static int pb_varint(struct grist_pb *b, uint64_t *v)
{
	uint64_t x = 0;
	unsigned shift;

	for (shift = 0; shift < 70; shift += 7) {
		uint8_t byte;

		if (b->p == b->end)
			return -1;
		byte = *b->p++;
		x |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* The next field of @b into @f: 1, 0 at the end of @b, or a negative errno with a message. */
static int pb_next(const struct check *c, struct grist_pb *b, struct grist_pb_field *f)
{
	const uint8_t *at = b->p;
	uint64_t key, n;

	if (b->p == b->end)
		return 0;
	if (pb_varint(b, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return bad(c, at, "a field key that is not a protobuf key");
	f->at = at;
	f->num = (uint32_t)(key >> 3);
	f->wt = (unsigned)(key & 7);
	switch (f->wt) {
	case WT_VARINT:
		if (pb_varint(b, &f->v))
			return bad(c, at, "field %u: a varint cut short or longer than 10 bytes", f->num);
		return 1;
	case WT_I64:
	case WT_I32:
		n = f->wt == WT_I64 ? 8 : 4;
		if ((size_t)(b->end - b->p) < n)
			return bad(c, at, "field %u: cut short", f->num);
		f->v = 0;
		memcpy(&f->v, b->p, n); /* little-endian hosts only, as the library itself */
		b->p += n;
		return 1;
	case WT_LEN:
		if (pb_varint(b, &n))
			return bad(c, at, "field %u: a length cut short", f->num);
		if (n > (uint64_t)(b->end - b->p))
			return bad(c, at, "field %u: a length of %llu bytes runs past the end of its message (%zu left)",
				   f->num, (unsigned long long)n, (size_t)(b->end - b->p));
		f->data = b->p;
		f->len = (size_t)n;
		b->p += n;
		return 1;
	default:
		return bad(c, at, "field %u: wire type %u, which SentencePiece models do not use", f->num, f->wt);
	}
}

int grist_spm_pb_next(const char *path, const uint8_t *base, struct grist_pb *b, struct grist_pb_field *f)
{
	struct check c = { path, base };

	return pb_next(&c, b, f);
}

static int want_type(const struct check *c, const struct grist_pb_field *f, unsigned wt, const char *what)
{
	if (f->wt != wt)
		return bad(c, f->at, "%s (field %u) has wire type %u, not %u", what,
			   f->num, f->wt, wt);
	return 0;
}

/* What the model's pieces add up to. */
struct pieces {
	size_t n, n_unk;
	int byte_found[256];
	const uint8_t *first_byte_piece; /* for the message when byte_fallback is off */
};

/* "<0xHH>" as the library's ByteToPiece() writes it (upper-case hex): the byte, or -1. */
static int byte_piece(const uint8_t *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *h, *l;

	if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>' || !s[3] || !s[4])
		return -1;
	h = strchr(hex, s[3]);
	l = strchr(hex, s[4]);
	return h && l ? (int)((h - hex) << 4 | (l - hex)) : -1;
}

static int check_piece(const struct check *c, const uint8_t *msg, size_t len, struct pieces *ps)
{
	struct grist_pb b = { msg, msg + len };
	struct grist_pb_field f;
	const uint8_t *piece = NULL;
	size_t piece_len = 0;
	uint64_t type = TYPE_NORMAL;
	int ret;

	while ((ret = pb_next(c, &b, &f)) > 0) {
		if (f.num == PIECE_PIECE) {
			if ((ret = want_type(c, &f, WT_LEN, "a piece's text")))
				return ret;
			piece = f.data;
			piece_len = f.len;
		} else if (f.num == PIECE_SCORE) {
			if ((ret = want_type(c, &f, WT_I32, "a piece's score")))
				return ret;
		} else if (f.num == PIECE_TYPE) {
			if ((ret = want_type(c, &f, WT_VARINT, "a piece's type")))
				return ret;
			if (f.v < TYPE_NORMAL || f.v > TYPE_BYTE)
				return bad(c, msg, "piece %zu has type %llu, which is no SentencePiece piece type", ps->n,
					   (unsigned long long)f.v);
			type = f.v;
		}
	}
	if (ret < 0)
		return ret;
	if (!piece_len)
		return bad(c, msg, "piece %zu is empty", ps->n);
	// darts-clone keys end at a NUL: a piece with one cannot be matched, and one that begins with
	// a NUL is an empty key, which makes the library's trie builder throw
	if (memchr(piece, 0, piece_len))
		return bad(c, piece, "piece %zu contains a NUL byte", ps->n);
	if (type == TYPE_UNKNOWN)
		ps->n_unk++;
	if (type == TYPE_BYTE) {
		int byte = byte_piece(piece, piece_len);

		if (byte < 0)
			return bad(c, piece, "piece %zu is a byte piece but not <0x00>..<0xFF>", ps->n);
		ps->byte_found[byte] = 1;
		if (!ps->first_byte_piece)
			ps->first_byte_piece = piece;
	}
	ps->n++;
	return 0;
}

/*
 * A precompiled_charsmap: <uint32 trie size><darts-clone double array><NUL-terminated strings>.
 * Normalizer::NormalizePrefix runs darts-clone's commonPrefixSearch over any input bytes: from
 * node p it reads unit p ^ c for every byte c, follows a unit whose label is c to p ^ c ^ its
 * offset, and there, when the unit has a leaf, takes that unit's value as an offset into the
 * strings and reads to a NUL. So from the root, every node reached must have its whole block
 * of 256 units in the array, and every value must start a NUL-terminated string of the blob.
 */
static int check_charsmap(const struct check *c, const char *spec, const uint8_t *p, size_t n)
{
	uint32_t trie_size, nu, root, u;
	const uint8_t *units, *strings;
	size_t n_strings, last_nul, top = 0, i;
	uint8_t *seen = NULL;
	uint32_t *stack = NULL;
	int ret = 0;

	if (n == 0) /* none: the text is not normalized */
		return 0;
	if (n <= 4)
		return bad(c, p, "the %s's precompiled_charsmap is %zu bytes, too short for its trie size", spec, n);
	memcpy(&trie_size, p, 4);
	if (trie_size >= n - 4 || trie_size < 4 || trie_size % 4)
		return bad(c, p, "the %s's precompiled_charsmap claims a trie of %u bytes in %zu (a multiple of 4, "
			   "with strings after it)", spec, trie_size, n - 4);
	units = p + 4;
	nu = trie_size / 4;
	strings = units + trie_size;
	n_strings = n - 4 - trie_size;
	for (last_nul = n_strings; last_nul > 0 && strings[last_nul - 1]; last_nul--)
		;
	if (!last_nul)
		return bad(c, strings, "the %s's normalized strings do not end with a NUL", spec);
	last_nul--; /* a value at or before it reads a NUL-terminated string */
#define UNIT(i) (memcpy(&u, units + 4 * (size_t)(i), 4), u)
#define OFFSET(x) (((x) >> 10) << (((x) & (1u << 9)) >> 6))
	root = OFFSET(UNIT(0));
	seen = calloc(nu / 8 + 1, 1);
	stack = malloc(sizeof(*stack) * ((size_t)nu + 1));
	if (!seen || !stack) {
		ret = grist_fail(-ENOMEM, "%s: no memory to check its SentencePiece charsmap", c->path);
		goto out;
	}
	stack[top++] = root; /* not marked: checked when taken, and at most once more if reached again */
	while (top) {
		uint32_t node = stack[--top];

		if ((node | 0xffu) >= nu) {
			ret = bad(c, units, "the %s's charsmap trie reaches node %u, whose 256 children lie past its %u "
				  "units", spec, node, nu);
			goto out;
		}
		for (i = 0; i < 256; i++) {
			uint32_t q = node ^ (uint32_t)i, next, unit = UNIT(q);

			if ((unit & (1u << 31 | 0xffu)) != i) /* darts-clone's label(): no edge for byte i */
				continue;
			next = q ^ OFFSET(unit);
			if ((next | 0xffu) >= nu) {
				ret = bad(c, units + 4 * (size_t)q, "the %s's charsmap trie unit %u leads to %u, past its %u "
					  "units", spec, q, next, nu);
				goto out;
			}
			if (unit >> 8 & 1) { /* has_leaf(): the value is in unit next */
				uint32_t value = UNIT(next) & 0x7fffffffu;

				if (value > last_nul) {
					ret = bad(c, units + 4 * (size_t)next, "the %s's charsmap trie unit %u gives string "
						  "offset %u, past the last NUL-terminated string (%zu bytes)", spec, next,
						  value, n_strings);
					goto out;
				}
			}
			if (!(seen[next / 8] >> (next % 8) & 1)) {
				seen[next / 8] |= (uint8_t)(1u << (next % 8));
				stack[top++] = next;
			}
		}
	}
#undef OFFSET
#undef UNIT
out:
	free(seen);
	free(stack);
	return ret;
}

/* A NormalizerSpec: its last precompiled_charsmap (protobuf merges repeated messages, the last value wins). */
static int find_charsmap(const struct check *c, const uint8_t *msg, size_t len, const uint8_t **map, size_t *map_len)
{
	struct grist_pb b = { msg, msg + len };
	struct grist_pb_field f;
	int ret;

	while ((ret = pb_next(c, &b, &f)) > 0)
		if (f.num == NORM_CHARSMAP) {
			if ((ret = want_type(c, &f, WT_LEN, "precompiled_charsmap")))
				return ret;
			*map = f.data;
			*map_len = f.len;
		}
	return ret;
}

struct trainer {
	uint64_t model_type, byte_fallback;
};

static int check_trainer(const struct check *c, const uint8_t *msg, size_t len, struct trainer *t)
{
	struct grist_pb b = { msg, msg + len };
	struct grist_pb_field f;
	int ret;

	while ((ret = pb_next(c, &b, &f)) > 0) {
		if (f.num == TRAINER_MODEL_TYPE) {
			if ((ret = want_type(c, &f, WT_VARINT, "model_type")))
				return ret;
			if (f.v < 1 || f.v > 4) /* UNIGRAM, BPE, WORD, CHAR */
				return bad(c, msg, "model_type %llu is none of SentencePiece's (1-4)", (unsigned long long)f.v);
			t->model_type = f.v;
		} else if (f.num == TRAINER_BYTE_FALLBACK) {
			if ((ret = want_type(c, &f, WT_VARINT, "byte_fallback")))
				return ret;
			t->byte_fallback = f.v != 0;
		}
	}
	return ret;
}

int grist_spm_check(const char *path, const uint8_t *data, size_t len)
{
	struct check c = { path, data };
	struct grist_pb b = { data, data + len };
	struct grist_pb_field f;
	struct trainer trainer = { 1, 0 };
	struct pieces *ps;
	const uint8_t *norm = NULL, *denorm = NULL;
	size_t norm_len = 0, denorm_len = 0, i;
	int has_trainer = 0, has_normalizer = 0, ret;

	if (len == 0)
		return grist_fail(-EBADMSG, "%s: not a SentencePiece model, or a corrupt one: the file is empty", path);
	if (len > INT_MAX) /* protobuf's ParseFromArray takes an int */
		return grist_fail(-EFBIG, "%s: %zu bytes is too large for a SentencePiece model", path, len);
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return grist_fail(-ENOMEM, "%s: no memory to check it", path);
	while ((ret = pb_next(&c, &b, &f)) > 0) {
		switch (f.num) {
		case MODEL_PIECES:
			if (!(ret = want_type(&c, &f, WT_LEN, "a piece")))
				ret = check_piece(&c, f.data, f.len, ps);
			break;
		case MODEL_TRAINER:
			has_trainer = 1;
			if (!(ret = want_type(&c, &f, WT_LEN, "trainer_spec")))
				ret = check_trainer(&c, f.data, f.len, &trainer);
			break;
		case MODEL_NORMALIZER:
		case MODEL_DENORMALIZER:
			has_normalizer |= f.num == MODEL_NORMALIZER;
			if (!(ret = want_type(&c, &f, WT_LEN, "a normalizer_spec")))
				ret = f.num == MODEL_NORMALIZER ? find_charsmap(&c, f.data, f.len, &norm, &norm_len)
								: find_charsmap(&c, f.data, f.len, &denorm, &denorm_len);
			break;
		default: /* self_test_data (the library encodes its samples only after these checks), extensions */
			break;
		}
		if (ret < 0)
			goto out;
	}
	if (ret < 0)
		goto out;
	// SentencePiece writes pieces, trainer_spec, normalizer_spec in that order: a file cut short
	// at a field's end parses, and lacks the later ones
	ret = -EBADMSG;
	if (!ps->n)
		grist_fail(ret, "%s: not a SentencePiece model, or a corrupt one: it has no pieces", path);
	else if (!has_trainer || !has_normalizer)
		grist_fail(ret, "%s: not a SentencePiece model, or a corrupt one: it has no %s (cut short?)", path,
			   has_trainer ? "normalizer_spec" : "trainer_spec");
	else if (ps->n > INT32_MAX)
		grist_fail(ret, "%s: not a SentencePiece model, or a corrupt one: %zu pieces", path, ps->n);
	else if (ps->n_unk != 1)
		grist_fail(ret, "%s: not a SentencePiece model, or a corrupt one: %zu pieces of type UNKNOWN, not one", path,
			   ps->n_unk);
	else if (ps->first_byte_piece && !trainer.byte_fallback)
		bad(&c, ps->first_byte_piece, "a byte piece, but byte_fallback is off");
	else
		ret = 0;
	for (i = 0; !ret && trainer.byte_fallback && i < 256; i++)
		if (!ps->byte_found[i])
			ret = grist_fail(-EBADMSG, "%s: not a SentencePiece model, or a corrupt one: byte_fallback is on but it has "
				   "no byte piece <0x%02X>", path, (unsigned)i);
	if (!ret)
		ret = check_charsmap(&c, "normalizer", norm, norm_len);
	if (!ret)
		ret = check_charsmap(&c, "denormalizer", denorm, denorm_len);
out:
	free(ps);
	return ret < 0 ? ret : 0;
}
