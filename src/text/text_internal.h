/* text_internal.h - what the text stage's files share: the ranks vocabulary, the split, BPE, the shim. */
#ifndef GRIST_TEXT_INTERNAL_H
#define GRIST_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grist/text.h"

#define GRIST_RANK_NONE UINT32_MAX

/*
 * One entry of the bytes -> rank table. BPE looks up every candidate pair, so a probe must
 * not chase pointers: the token's first 8 bytes (zero-padded) and its length sit in the slot,
 * which decides every token of up to 8 bytes (most of them) without touching the arena.
 */
struct grist_vocab_slot {
	uint64_t head;           /* the first 8 bytes, little-endian, zero-padded */
	uint32_t rank;           /* GRIST_RANK_NONE = empty */
	uint32_t len;
};

/*
 * A ranks file's vocabulary (ranks.c), read-only after load: every token's bytes in one arena,
 * an open-addressing table from bytes to rank, and rank -> bytes for decode.
 */
struct grist_vocab {
	uint8_t *arena;          /* all token bytes, one after another */
	uint64_t *tok;           /* per id < n_ids: arena offset << 16 | length; 0 length = no token */
	uint32_t n_ids;          /* 1 + the largest rank */
	struct grist_vocab_slot *slots; /* hash table of ranks, linear probing */
	size_t mask;             /* slots - 1 (a power of two) */
	size_t n_tokens;
	size_t max_len;          /* the longest token, in bytes */
	uint32_t byte_rank[256]; /* the rank of each single byte, or GRIST_RANK_NONE */
	uint64_t file_hash;      /* XXH3 of the file's bytes */
};

/* Load @path's "<base64> <rank>" lines; -EBADMSG naming the line for anything malformed. */
int grist_vocab_load(struct grist_vocab *v, const char *path);
/* The same from @len bytes already in memory (@path names them in messages). */
int grist_vocab_parse(struct grist_vocab *v, const char *path, const uint8_t *file, size_t len);
void grist_vocab_free(struct grist_vocab *v);
/*
 * Put id @r (its bytes already in the arena, v->tok[r] set) into the hash table (and
 * byte_rank when it is one byte): GRIST_RANK_NONE, or the id whose bytes @r repeats (not put).
 */
uint32_t grist_vocab_insert(struct grist_vocab *v, uint32_t r);
/* Token @id's bytes (len 0 when the vocabulary has no such rank). */
static inline const uint8_t *grist_vocab_bytes(const struct grist_vocab *v, uint32_t id, size_t *len)
{
	uint64_t t = id < v->n_ids ? v->tok[id] : 0;

	*len = (size_t)(t & 0xffff);
	return v->arena + (t >> 16);
}

/* @n <= 8 bytes at @p as a little-endian integer, zero-padded, reading no byte past p + n. */
static inline uint64_t grist_vocab_load8(const uint8_t *p, size_t n)
{
	uint32_t a, b;
	uint16_t c, d;

	if (n >= 4) { /* two 4-byte loads that overlap: the same bytes land on the same bits */
		memcpy(&a, p, 4);
		memcpy(&b, p + n - 4, 4);
		return (uint64_t)a | (uint64_t)b << (8 * (n - 4));
	}
	if (n >= 2) {
		memcpy(&c, p, 2);
		memcpy(&d, p + n - 2, 2);
		return (uint64_t)c | (uint64_t)d << (8 * (n - 2));
	}
	return n ? p[0] : 0;
}

/* Whether @len bytes at @a and @b are equal, 8 at a time (short keys: no call into libc). */
static inline bool grist_vocab_same(const uint8_t *a, const uint8_t *b, size_t len)
{
	size_t i, n;

	for (i = 0; i < len; i += 8) {
		n = len - i < 8 ? len - i : 8;
		if (grist_vocab_load8(a + i, n) != grist_vocab_load8(b + i, n))
			return false;
	}
	return true;
}

static inline uint64_t grist_vocab_mix(uint64_t h)
{
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return h;
}

/* The table's hash of @len bytes (len >= 1), and their head (the first 8, as a slot holds them). */
static inline uint64_t grist_vocab_hash(const uint8_t *p, size_t len, uint64_t *head)
{
	uint64_t h;
	size_t i;

	*head = grist_vocab_load8(p, len < 8 ? len : 8);
	h = grist_vocab_mix(*head ^ (uint64_t)len * 0x9e3779b97f4a7c15ull);
	for (i = 8; i < len; i += 8)
		h = grist_vocab_mix(h ^ grist_vocab_load8(p + i, len - i < 8 ? len - i : 8));
	return h ^ h >> 32;
}

/* The rank of the token with these bytes, or GRIST_RANK_NONE. Inline: BPE's innermost call. */
static inline uint32_t grist_vocab_rank(const struct grist_vocab *v, const uint8_t *p, size_t len)
{
	const struct grist_vocab_slot *s;
	uint64_t head;
	size_t i;

	if (len == 1)
		return v->byte_rank[p[0]];
	if (len > v->max_len || !v->slots)
		return GRIST_RANK_NONE;
	for (i = grist_vocab_hash(p, len, &head) & v->mask;; i = (i + 1) & v->mask) {
		s = &v->slots[i];
		if (s->rank == GRIST_RANK_NONE)
			return GRIST_RANK_NONE;
		if (s->len == len && s->head == head) {
			size_t tl;
			const uint8_t *tb;

			if (len <= 8)
				return s->rank;
			tb = grist_vocab_bytes(v, s->rank, &tl);
			if (grist_vocab_same(tb + 8, p + 8, len - 8))
				return s->rank;
		}
	}
}

/* Read a whole regular file of at most @max bytes (malloc'd). */
int grist_text_read_file(const char *path, uint64_t max, uint8_t **out, size_t *len);

/* A growing array of int32 ids (a context's output). */
struct grist_ids {
	int32_t *v;
	size_t n, cap;
};
int grist_ids_reserve(struct grist_ids *ids, size_t more);

/*
 * A piece's merges are a pure function of its bytes, and text repeats its words: a short
 * piece that is not one token keeps its ids in a small direct-mapped cache per context, so
 * the next time it costs one probe instead of a merge loop of a dozen lookups.
 */
#define GRIST_BPE_CACHE_SLOTS 2048 /* a power of two */
#define GRIST_BPE_CACHE_LEN 22     /* longest piece kept, in bytes */
#define GRIST_BPE_CACHE_IDS 11     /* most ids kept for one piece */
struct grist_bpe_cache_entry {
	uint8_t len;                         /* 0: empty */
	uint8_t n;
	uint8_t bytes[GRIST_BPE_CACHE_LEN];
	int32_t ids[GRIST_BPE_CACHE_IDS];
};

/*
 * The entry of @cache (made on first use; NULL when there is no memory for it) that holds
 * @p's ids, or NULL; *slot: where they would go, for grist_bpe_cache_put() (a no-op for a
 * NULL slot, a piece over GRIST_BPE_CACHE_LEN bytes or over GRIST_BPE_CACHE_IDS ids).
 */
struct grist_bpe_cache_entry *grist_bpe_cache_find(struct grist_bpe_cache_entry **cache, const uint8_t *p,
						   size_t len, struct grist_bpe_cache_entry **slot);
void grist_bpe_cache_put(struct grist_bpe_cache_entry *slot, const uint8_t *p, size_t len, const int32_t *ids,
			 size_t n);

/* BPE scratch (bpe.c): the parts of one piece and the heap of candidate merges. */
struct grist_bpe_scratch {
	uint32_t *start, *next, *prev, *rank;
	uint64_t *heap;
	size_t cap, heap_cap;
	uint64_t work; /* heap operations and scan steps, for the tests' linearity check */
	struct grist_bpe_cache_entry *cache; /* made on first use */
};
void grist_bpe_scratch_free(struct grist_bpe_scratch *s);
/*
 * Append the ids of one piece, merged as tiktoken's byte_pair_encode: lowest rank first,
 * leftmost on ties. Pieces up to @scan_max bytes use tiktoken's own O(n^2) scan (fast when
 * small), longer ones a heap (O(n log n)): the same merges in the same order.
 * Return 0, -ENOMEM, or -EBADMSG when a byte has no rank.
 */
int grist_bpe_encode_piece(const struct grist_vocab *v, struct grist_bpe_scratch *s, const uint8_t *p, size_t len,
			   size_t scan_max, struct grist_ids *out);
#define GRIST_BPE_SCAN_MAX 64

/* The split pattern (split.c): a name or a regex -> compiled PCRE2 code; -EINVAL if it does not compile. */
struct grist_split;
int grist_split_compile(const char *pattern, struct grist_split **out);
void grist_split_free(struct grist_split *s);
/* Per-thread match state. */
struct grist_split_state;
int grist_split_state_create(const struct grist_split *s, struct grist_split_state **out);
void grist_split_state_free(struct grist_split_state *st);
/*
 * The next piece of @text (valid UTF-8) at or after @at: [*start, *end). Returns 1 when a
 * piece was found, 0 at the end, or a negative error (PCRE2 failed, e.g. out of its stack).
 */
int grist_split_next(struct grist_split_state *st, const uint8_t *text, size_t len, size_t at, size_t *start,
		     size_t *end);

/* The offset of the first byte that makes @p invalid UTF-8 (as Python's strict decode), or @len. */
size_t grist_utf8_check(const uint8_t *p, size_t len);

/*
 * A tekken JSON (tekken.c): the vocabulary (its first default_vocab_size -
 * default_num_special_tokens ranks), its pattern, and its default_num_special_tokens special
 * tokens (listed, or mistral-common's deprecated defaults, then <SPECIAL_n>), ids 0..n-1.
 * A rank's id is rank + offset (= the number of special tokens), as mistral-common gives it.
 */
struct grist_tekken {
	struct grist_vocab vocab;
	char *pattern;
	struct grist_special_token *special;
	size_t n_special;
	uint32_t offset;
};
int grist_tekken_load(const char *path, struct grist_tekken *out);
/* Free what load left that was not taken (the vocab is taken by moving it out). */
void grist_tekken_free(struct grist_tekken *t);

/*
 * grist_tokenizer_ctx_trim() - free each of a context's buffers (ids, BPE scratch, decoded text)
 * that grew past @keep bytes, so that one outlier text does not hold its memory for the
 * context's whole life; the next call grows them again. grist_tokenizer_ctx_retained(): the
 * bytes its buffers hold now.
 */
void grist_tokenizer_ctx_trim(struct grist_tokenizer_ctx *c, size_t keep);
size_t grist_tokenizer_ctx_retained(const struct grist_tokenizer_ctx *c);
/* The bytes the text map's idle contexts hold (text_map.c), for the tests. */
size_t grist_text_map_retained(struct grist_text_map *m);

/* The SentencePiece shim (spm.cc): C entry points over the C++ SentencePieceProcessor. */
struct grist_spm;
/* A model from the file's bytes (@path names it in messages), after grist_spm_check(). */
int grist_spm_open(const char *path, const uint8_t *data, size_t len, struct grist_spm **out);
void grist_spm_close(struct grist_spm *m);
void grist_spm_info(const struct grist_spm *m, struct grist_tokenizer_info *info);
int grist_spm_encode(const struct grist_spm *m, const char *text, size_t len, struct grist_ids *out);
/* Decode into *buf (realloc'd, *cap bytes), NUL-terminated; *len its length. */
int grist_spm_decode(const struct grist_spm *m, const int32_t *ids, size_t n, char **buf, size_t *cap, size_t *len);

/*
 * grist_spm_check() - check a serialized SentencePiece ModelProto (spm_model.c) for what
 * libsentencepiece 0.1.97 uses without a bound check: the normalizer's and denormalizer's
 * charsmaps, the pieces, byte fallback. Return: 0, or -EBADMSG with a message naming @path.
 */
int grist_spm_check(const char *path, const uint8_t *data, size_t len);

/* spm_model.c's protobuf reader, for spm_bpe.c to read a model grist_spm_check() passed. */
struct grist_pb {
	const uint8_t *p, *end;
};
struct grist_pb_field {
	const uint8_t *at; /* its key */
	uint32_t num;
	unsigned wt;
	uint64_t v;	     /* a varint's or fixed field's value */
	const uint8_t *data; /* wire type 2: the bytes */
	size_t len;
};
/* The next field of @b: 1, 0 at its end, or -EBADMSG naming @path and the offset from @base. */
int grist_spm_pb_next(const char *path, const uint8_t *base, struct grist_pb *b, struct grist_pb_field *f);

/*
 * Native SentencePiece (spm_bpe.c: the model, the normalizer, BPE; spm_unigram.c: Unigram): the
 * library's encode, id for id, for the models whose every encode-time setting it implements.
 * grist_spm_native_open() gives 1 with *out NULL for any other model (the library encodes
 * those). Encode returns 1 for a text it leaves to the library.
 */
struct grist_spm_unit; /* spm_unigram.c's trie */
struct grist_spm_native {
	struct grist_vocab vocab; /* piece bytes -> id (its "rank"), every piece of every type */
	float *score;
	uint8_t *type;
	uint32_t n;
	uint32_t model_type; /* 1 Unigram, 2 BPE */
	int32_t unk_id;
	int32_t byte_id[256];
	bool byte_fallback, dummy_prefix, extra_ws, escape_ws, ws_suffix;
	uint32_t *units; /* the charsmap's darts-clone array (NULL: none) */
	size_t n_units;
	char *strings;   /* its NUL-terminated replacement strings */
	size_t ud_max;   /* the longest USER_DEFINED piece, 0: none */
	uint8_t ud_first[256];
	uint8_t plain[256]; /* no charsmap rule and no USER_DEFINED piece starts with this byte */
	bool words;      /* BPE: no piece spans a word's start: words merge apart, and repeat (a cache) */
	/* Unigram */
	struct grist_spm_unit *trie; /* the pieces' double array (spm_unigram.c) */
	size_t trie_len;
	float min_score, max_score;  /* over NORMAL pieces, as unigram::Model's (max: 0.1.97's rule) */
	bool ties_0197;              /* compare as 0.1.97 does (see spm_unigram.c); tests only */
};
struct grist_spm_best; /* spm_unigram.c's Viterbi cell */
struct grist_spm_scratch {
	uint8_t *norm;
	size_t norm_cap;
	struct grist_spm_sym *sym;
	size_t sym_cap;
	struct grist_spm_pair *heap;
	size_t heap_cap;
	struct grist_bpe_cache_entry *cache; /* a word's ids (made on first use) */
	struct grist_spm_best *best;         /* Unigram: the best path ending at each byte */
	size_t best_cap;
};
/* string_util::OneCharLen: a UTF-8 lead byte's length (1 for a stray continuation byte) */
static inline size_t grist_spm_char_len(uint8_t c)
{
	return (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[c >> 4];
}
int grist_spm_native_open(const char *path, const uint8_t *data, size_t len, struct grist_spm_native **out);
void grist_spm_native_close(struct grist_spm_native *m);
int grist_spm_native_encode(const struct grist_spm_native *m, struct grist_spm_scratch *s, const uint8_t *text,
			    size_t len, struct grist_ids *out);
void grist_spm_scratch_free(struct grist_spm_scratch *s);
size_t grist_spm_scratch_bytes(const struct grist_spm_scratch *s);
/* Normalizer::Normalize into s->norm (spm_bpe.c): its length, or a negative errno. */
long grist_spm_normalize(const struct grist_spm_native *m, struct grist_spm_scratch *s, const uint8_t *in, size_t n);
/* spm_unigram.c: the trie from m's pieces (0, or -ENOMEM); encode s->norm[0, n) into @out. */
int grist_spm_unigram_build(const char *path, struct grist_spm_native *m);
int grist_spm_unigram_encode(const struct grist_spm_native *m, struct grist_spm_scratch *s, size_t n,
			     struct grist_ids *out);
size_t grist_spm_unigram_scratch_bytes(const struct grist_spm_scratch *s);

#endif
