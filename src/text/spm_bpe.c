/*
 * SentencePiece BPE encoded natively, id for id as libsentencepiece 0.1.97 encodes it.
 *
 * Debian's shared build of the library encodes at under half the speed of PyPI's static one,
 * and a BPE model's encode is small: the normalizer (a longest-prefix charsmap over a
 * darts-clone trie, dummy prefix, extra whitespace, U+2581 for spaces), a split into
 * characters and user-defined pieces, and the merge agenda of bpe_model.cc's
 * Model::SampleEncode, then the ids as SentencePieceProcessor::PopulateSentencePieceText gives
 * them (byte fallback, runs of unknowns merged). Each step below follows that code, named.
 *
 * A model with anything this file does not implement (another model type, UNUSED pieces, a
 * piece whose bytes repeat, a piece over 64 KiB, a NaN score) is left to the library at open, whole; a text
 * whose encode the library would fail (a control piece one character long met in it) is left
 * to the library per text. Nothing is approximated.
 *
 * The model reader and the normalizer serve Unigram models too: spm_unigram.c encodes those.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "text/text_internal.h"

/* sentencepiece_model.proto's field numbers and piece types */
enum { F_PIECES = 1, F_TRAINER = 2, F_NORMALIZER = 3 };
enum { F_PIECE = 1, F_SCORE = 2, F_TYPE = 3 };
enum { F_MODEL_TYPE = 3, F_WS_SUFFIX = 24, F_BYTE_FALLBACK = 35 };
enum { F_CHARSMAP = 2, F_DUMMY_PREFIX = 3, F_EXTRA_WS = 4, F_ESCAPE_WS = 5 };
enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER_DEFINED = 4, T_UNUSED = 5, T_BYTE = 6 };
enum { MODEL_UNIGRAM = 1, MODEL_BPE = 2 };

#define KMAX_TRIE_RESULTS 32 /* Normalizer::kMaxTrieResultsSize */

struct grist_spm_sym {
	int32_t prev, next;
	uint32_t start, len;
	bool freeze;
};

struct grist_spm_pair {
	float score;
	int32_t left, right;
	uint32_t size;
};

void grist_spm_native_close(struct grist_spm_native *m)
{
	if (!m)
		return;
	grist_vocab_free(&m->vocab);
	free(m->score);
	free(m->type);
	free(m->units);
	free(m->strings);
	free(m->trie);
	free(m);
}

/* The settings of the model's specs that encode reads (proto2 defaults where absent). */
struct specs {
	uint64_t model_type;
	bool byte_fallback, ws_suffix, dummy_prefix, extra_ws, escape_ws;
	const uint8_t *charsmap;
	size_t charsmap_len;
};

static int read_specs(const char *path, const uint8_t *data, size_t len, struct specs *sp, uint32_t *n_pieces,
		      size_t *bytes)
{
	struct grist_pb b = { data, data + len }, sb;
	struct grist_pb_field f, g;
	int ret;

	while ((ret = grist_spm_pb_next(path, data, &b, &f)) > 0) {
		if (f.num == F_PIECES) {
			(*n_pieces)++;
			*bytes += f.len;
			continue;
		}
		if (f.num != F_TRAINER && f.num != F_NORMALIZER)
			continue;
		/* repeated sub-messages merge: the last value of each field wins, as here */
		sb = (struct grist_pb){ f.data, f.data + f.len };
		while ((ret = grist_spm_pb_next(path, data, &sb, &g)) > 0) {
			if (f.num == F_TRAINER && g.num == F_MODEL_TYPE)
				sp->model_type = g.v;
			else if (f.num == F_TRAINER && g.num == F_BYTE_FALLBACK)
				sp->byte_fallback = g.v != 0;
			else if (f.num == F_TRAINER && g.num == F_WS_SUFFIX)
				sp->ws_suffix = g.v != 0;
			else if (f.num == F_NORMALIZER && g.num == F_CHARSMAP) {
				sp->charsmap = g.data;
				sp->charsmap_len = g.len;
			} else if (f.num == F_NORMALIZER && g.num == F_DUMMY_PREFIX)
				sp->dummy_prefix = g.v != 0;
			else if (f.num == F_NORMALIZER && g.num == F_EXTRA_WS)
				sp->extra_ws = g.v != 0;
			else if (f.num == F_NORMALIZER && g.num == F_ESCAPE_WS)
				sp->escape_ws = g.v != 0;
		}
		if (ret < 0)
			return ret;
	}
	return ret;
}

/* The pieces into m->vocab, scores and types: 0, 1 for a model left to the library, or an error. */
static int read_pieces(const char *path, const uint8_t *data, size_t len, struct grist_spm_native *m, size_t bytes)
{
	struct grist_pb b = { data, data + len }, pb;
	struct grist_pb_field f, g;
	size_t off = 0, slots;
	uint32_t id = 0;
	int ret;

	m->vocab.arena = malloc(bytes + 1);
	m->vocab.tok = calloc(m->n, sizeof(*m->vocab.tok));
	for (slots = 16; slots < (size_t)m->n * 2; slots *= 2)
		;
	m->vocab.slots = malloc(slots * sizeof(*m->vocab.slots));
	m->score = calloc(m->n, sizeof(*m->score));
	m->type = calloc(m->n, 1);
	if (!m->vocab.arena || !m->vocab.tok || !m->vocab.slots || !m->score || !m->type)
		return grist_fail(-ENOMEM, "%s: no memory for its pieces", path);
	for (size_t i = 0; i < slots; i++)
		m->vocab.slots[i] = (struct grist_vocab_slot){ .rank = GRIST_RANK_NONE };
	m->vocab.mask = slots - 1;
	m->vocab.n_ids = m->n;
	for (int c = 0; c < 256; c++)
		m->vocab.byte_rank[c] = GRIST_RANK_NONE;
	m->unk_id = -1;
	while ((ret = grist_spm_pb_next(path, data, &b, &f)) > 0) {
		const uint8_t *piece = NULL;
		size_t plen = 0;
		uint8_t type = T_NORMAL;
		float score = 0;

		if (f.num != F_PIECES)
			continue;
		pb = (struct grist_pb){ f.data, f.data + f.len };
		while ((ret = grist_spm_pb_next(path, data, &pb, &g)) > 0) {
			if (g.num == F_PIECE) {
				piece = g.data;
				plen = g.len;
			} else if (g.num == F_SCORE) {
				uint32_t u = (uint32_t)g.v;

				memcpy(&score, &u, 4);
			} else if (g.num == F_TYPE) {
				type = (uint8_t)g.v;
			}
		}
		if (ret < 0)
			return ret;
		/*
		 * the arena's 16-bit lengths; BPE: UNUSED's resegmentation, a NaN has no place in the
		 * agenda's order (Unigram skips UNUSED pieces, and its comparisons take a NaN as the library's do)
		 */
		if (plen > 0xffff || (m->model_type == MODEL_BPE && (type == T_UNUSED || isnan(score))))
			return 1;
		memcpy(m->vocab.arena + off, piece, plen);
		m->vocab.tok[id] = (uint64_t)off << 16 | plen;
		off += plen;
		if (plen > m->vocab.max_len)
			m->vocab.max_len = plen;
		/* the library keeps two maps (normal pieces, reserved ones): one key in both is left to it */
		if (grist_vocab_insert(&m->vocab, id) != GRIST_RANK_NONE)
			return 1;
		m->vocab.n_tokens++;
		m->score[id] = score;
		m->type[id] = type;
		if (type == T_UNKNOWN)
			m->unk_id = (int32_t)id;
		if (type == T_USER_DEFINED) {
			m->ud_first[piece[0]] = 1;
			if (plen > m->ud_max)
				m->ud_max = plen;
		}
		id++;
	}
	return ret;
}

static int byte_ids(struct grist_spm_native *m)
{
	static const char hex[] = "0123456789ABCDEF";

	for (int c = 0; c < 256; c++) {
		uint8_t piece[6] = { '<', '0', 'x', (uint8_t)hex[c >> 4], (uint8_t)hex[c & 15], '>' };
		uint32_t id = grist_vocab_rank(&m->vocab, piece, 6);

		m->byte_id[c] = (int32_t)id;
		if (m->byte_fallback && (id == GRIST_RANK_NONE || m->type[id] != T_BYTE))
			return 1;
	}
	return 0;
}

static const uint8_t WS[3] = { 0xe2, 0x96, 0x81 }; /* U+2581, the escaped space */

/*
 * Whether a normal or user-defined piece holds a U+2581 that follows something else: only such
 * a piece can join across the start of a word (a U+2581 after a character that is not one).
 * When none does, each word's merges are its own: the agenda's order restricted to a word is
 * the order the word alone gives (the same scores, the same relative positions).
 */
static bool spans_words(const struct grist_spm_native *m)
{
	for (uint32_t id = 0; id < m->n; id++) {
		size_t len;
		const uint8_t *p = grist_vocab_bytes(&m->vocab, id, &len);

		if (m->type[id] != T_NORMAL && m->type[id] != T_USER_DEFINED)
			continue;
		for (size_t k = 1; k + 3 <= len; k++)
			if (!memcmp(p + k, WS, 3) && (k < 3 || memcmp(p + k - 3, WS, 3)))
				return true;
	}
	return false;
}

int grist_spm_native_open(const char *path, const uint8_t *data, size_t len, struct grist_spm_native **out)
{
	struct specs sp = { .model_type = 1, .dummy_prefix = true, .extra_ws = true, .escape_ws = true };
	struct grist_spm_native *m;
	size_t bytes = 0;
	uint32_t n = 0;
	int ret;

	*out = NULL;
	ret = read_specs(path, data, len, &sp, &n, &bytes);
	if (ret < 0)
		return ret;
	if (sp.model_type != MODEL_BPE && sp.model_type != MODEL_UNIGRAM)
		return 1;
	m = calloc(1, sizeof(*m));
	if (!m)
		return grist_fail(-ENOMEM, "%s: no memory for its model", path);
	m->n = n;
	m->model_type = (uint32_t)sp.model_type;
	m->byte_fallback = sp.byte_fallback;
	m->ws_suffix = sp.ws_suffix;
	m->dummy_prefix = sp.dummy_prefix;
	m->extra_ws = sp.extra_ws;
	m->escape_ws = sp.escape_ws;
	ret = read_pieces(path, data, len, m, bytes);
	if (!ret && m->unk_id < 0)
		ret = 1;
	if (!ret)
		ret = byte_ids(m);
	if (!ret && m->model_type == MODEL_UNIGRAM)
		ret = grist_spm_unigram_build(path, m);
	m->words = !ret && m->model_type == MODEL_BPE && m->escape_ws && !m->ws_suffix && !spans_words(m);
	if (!ret && sp.charsmap_len) {
		/* grist_spm_check() walked this trie from its root: every node reached is in bounds */
		uint32_t trie;

		memcpy(&trie, sp.charsmap, 4);
		m->n_units = trie / 4;
		m->units = malloc(trie);
		m->strings = malloc(sp.charsmap_len - 4 - trie);
		if (!m->units || !m->strings) {
			ret = grist_fail(-ENOMEM, "%s: no memory for its charsmap", path);
		} else {
			memcpy(m->units, sp.charsmap + 4, trie);
			memcpy(m->strings, sp.charsmap + 4 + trie, sp.charsmap_len - 4 - trie);
		}
	}
	for (int c = 0; !ret && c < 256; c++) {
		/* darts-clone from the root: unit root ^ c, when its label is c, is where a rule goes on */
		uint32_t root = m->units ? m->units[0] : 0, at = (root >> 10 << ((root & (1u << 9)) >> 6)) ^ (uint32_t)c;

		m->plain[c] = !m->ud_first[c] && (!m->units || (m->units[at] & (1u << 31 | 0xffu)) != (uint32_t)c);
	}
	if (ret) {
		grist_spm_native_close(m);
		return ret;
	}
	*out = m;
	return 0;
}

void grist_spm_scratch_free(struct grist_spm_scratch *s)
{
	free(s->norm);
	free(s->sym);
	free(s->heap);
	free(s->cache);
	free(s->best);
	memset(s, 0, sizeof(*s));
}

size_t grist_spm_scratch_bytes(const struct grist_spm_scratch *s)
{
	return s->norm_cap + s->sym_cap * sizeof(*s->sym) + s->heap_cap * sizeof(*s->heap) +
	       (s->cache ? GRIST_BPE_CACHE_SLOTS * sizeof(*s->cache) : 0) + grist_spm_unigram_scratch_bytes(s);
}

/* PrefixMatcher::PrefixMatch over the USER_DEFINED pieces: the longest one @p starts with, or 0. */
static size_t ud_match(const struct grist_spm_native *m, const uint8_t *p, size_t n)
{
	size_t best = 0, l;

	if (!m->ud_max || !m->ud_first[p[0]])
		return 0;
	for (l = 1; l <= n && l <= m->ud_max; l++) {
		uint32_t id = grist_vocab_rank(&m->vocab, p, l);

		if (id != GRIST_RANK_NONE && m->type[id] == T_USER_DEFINED)
			best = l;
	}
	return best;
}

/*
 * Normalizer::NormalizePrefix: a user-defined piece as it is, else the charsmap's longest
 * rule (darts-clone commonPrefixSearch, at most kMaxTrieResultsSize results kept), else one
 * character (the text is valid UTF-8). Returns the bytes consumed; *o, *olen the replacement.
 */
static size_t norm_prefix(const struct grist_spm_native *m, const uint8_t *p, size_t n, const uint8_t **o, size_t *olen)
{
	size_t l, longest = 0, found = 0;
	uint32_t value = 0;

	if (m->plain[p[0]]) { /* no rule and no user-defined piece starts with this byte: one character */
		l = grist_spm_char_len(p[0]);
		*o = p;
		*olen = l < n ? l : n;
		return *olen;
	}
	l = ud_match(m, p, n);

	if (l) {
		*o = p;
		*olen = l;
		return l;
	}
	if (m->units) {
		const uint32_t *a = m->units;
		size_t node = 0, i;
		uint32_t u = a[0];

#define OFFSET(x) (((x) >> 10) << (((x) & (1u << 9)) >> 6))
		node ^= OFFSET(u);
		for (i = 0; i < n; i++) {
			node ^= p[i];
			u = a[node];
			if ((u & (1u << 31 | 0xffu)) != p[i])
				break;
			node ^= OFFSET(u);
			if (u >> 8 & 1) {
				if (found < KMAX_TRIE_RESULTS) {
					longest = i + 1;
					value = a[node] & 0x7fffffffu;
				}
				found++;
			}
		}
#undef OFFSET
	}
	if (longest) {
		*o = (const uint8_t *)m->strings + value;
		*olen = strlen((const char *)*o);
		return longest;
	}
	l = grist_spm_char_len(p[0]);
	*o = p;
	*olen = l < n ? l : n;
	return *olen;
}

static inline int norm_reserve(struct grist_spm_scratch *s, size_t need)
{
	return need <= s->norm_cap ? 0 : grist_array_reserve((void **)&s->norm, &s->norm_cap, need, 1);
}

long grist_spm_normalize(const struct grist_spm_native *m, struct grist_spm_scratch *s, const uint8_t *in, size_t n)
{
	const uint8_t *end = in + n, *o;
	size_t nl = 0, olen, used;
	bool prev_space;

	if (m->extra_ws) /* leading spaces */
		while (in < end) {
			used = norm_prefix(m, in, (size_t)(end - in), &o, &olen);
			if (olen != 1 || o[0] != ' ')
				break;
			in += used;
		}
	if (in == end)
		return 0;
	if (norm_reserve(s, 3))
		return -ENOMEM;
	if (!m->ws_suffix && m->dummy_prefix) {
		memcpy(s->norm, m->escape_ws ? WS : (const uint8_t *)" ", m->escape_ws ? 3 : 1);
		nl = m->escape_ws ? 3 : 1;
	}
	prev_space = m->extra_ws;
	while (in < end) {
		used = norm_prefix(m, in, (size_t)(end - in), &o, &olen);
		while (prev_space && olen && o[0] == ' ')
			o++, olen--;
		if (olen) {
			if (norm_reserve(s, nl + 3 * olen + 3))
				return -ENOMEM;
			for (size_t k = 0; k < olen; k++) {
				if (m->escape_ws && o[k] == ' ') {
					memcpy(s->norm + nl, WS, 3);
					nl += 3;
				} else {
					s->norm[nl++] = o[k];
				}
			}
			prev_space = o[olen - 1] == ' ';
		}
		in += used;
		if (!m->extra_ws)
			prev_space = false;
	}
	if (m->extra_ws) { /* trailing spaces */
		size_t wl = m->escape_ws ? 3 : 1;
		const uint8_t *w = m->escape_ws ? WS : (const uint8_t *)" ";

		while (nl >= wl && !memcmp(s->norm + nl - wl, w, wl))
			nl -= wl;
	}
	if (m->ws_suffix && m->dummy_prefix) {
		if (norm_reserve(s, nl + 3))
			return -ENOMEM;
		memcpy(s->norm + nl, m->escape_ws ? WS : (const uint8_t *)" ", m->escape_ws ? 3 : 1);
		nl += m->escape_ws ? 3 : 1;
	}
	return (long)nl;
}

/* bpe_model.cc's SymbolPairComparator, inverted: whether @a comes off the agenda before @b. */
static inline bool before(const struct grist_spm_pair *a, const struct grist_spm_pair *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void sift_down(struct grist_spm_pair *h, size_t n, size_t i)
{
	struct grist_spm_pair x = h[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && before(&h[c + 1], &h[c]))
			c++;
		if (!before(&h[c], &x))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

struct agenda {
	struct grist_spm_scratch *s;
	size_t n;
};

/* MaybeAddNewSymbolPair: push the pair when its joined bytes are a normal or user-defined piece. */
static int maybe_add(const struct grist_spm_native *m, struct agenda *ag, const uint8_t *norm, const struct grist_spm_sym *sym,
		     int32_t l, int32_t r, bool heapify_later)
{
	uint32_t size, id;
	struct grist_spm_pair *h;
	size_t i;

	if (l < 0 || r < 0 || sym[l].freeze || sym[r].freeze)
		return 0;
	size = sym[l].len + sym[r].len;
	id = grist_vocab_rank(&m->vocab, norm + sym[l].start, size);
	if (id == GRIST_RANK_NONE || (m->type[id] != T_NORMAL && m->type[id] != T_USER_DEFINED))
		return 0;
	if (grist_array_reserve((void **)&ag->s->heap, &ag->s->heap_cap, ag->n + 1, sizeof(*h)))
		return -ENOMEM;
	h = ag->s->heap;
	i = ag->n++;
	h[i] = (struct grist_spm_pair){ m->score[id], l, r, size };
	if (heapify_later)
		return 0;
	while (i > 0) { /* sift up */
		size_t p = (i - 1) / 2;
		struct grist_spm_pair x;

		if (!before(&h[i], &h[p]))
			break;
		x = h[p];
		h[p] = h[i];
		h[i] = x;
		i = p;
	}
	return 0;
}

/*
 * bpe_model.cc's SampleEncode over norm[a, b), then PopulateSentencePieceText's ids appended to
 * @out; *prev_unk: whether the last id was an unknown (a run of them is one id). 0, 1 (the
 * text is the library's) or a negative errno.
 */
static int encode_range(const struct grist_spm_native *m, struct grist_spm_scratch *s, const uint8_t *norm, size_t a,
			size_t b, struct grist_ids *out, bool *prev_unk)
{
	struct agenda ag = { s, 0 };
	struct grist_spm_sym *sym;
	int32_t n = 0, i;

	if (grist_array_reserve((void **)&s->sym, &s->sym_cap, b - a, sizeof(*s->sym)))
		return grist_fail(-ENOMEM, "no memory for a text's %zu symbols", b - a);
	sym = s->sym;
	norm += a;
	/* the characters and user-defined pieces (frozen), linked */
	for (size_t at = 0; at < b - a; n++) {
		size_t l = ud_match(m, norm + at, b - a - at);
		bool freeze = l > 0;

		if (!l) {
			l = grist_spm_char_len(norm[at]);
			if (l > b - a - at)
				l = b - a - at;
		}
		sym[n] = (struct grist_spm_sym){ n - 1, n + 1, (uint32_t)at, (uint32_t)l, freeze };
		at += l;
	}
	sym[n - 1].next = -1;
	for (i = 1; i < n; i++)
		if (maybe_add(m, &ag, norm, sym, i - 1, i, true))
			return grist_fail(-ENOMEM, "no memory for a text's merges");
	for (size_t k = ag.n / 2; k-- > 0;)
		sift_down(s->heap, ag.n, k);
	while (ag.n) {
		struct grist_spm_pair top = s->heap[0];
		struct grist_spm_sym *l = &sym[top.left], *r = &sym[top.right];

		s->heap[0] = s->heap[--ag.n];
		sift_down(s->heap, ag.n, 0);
		if (!l->len || !r->len || l->len + r->len != top.size)
			continue; /* stale */
		l->len += r->len;
		l->next = r->next;
		if (r->next >= 0)
			sym[r->next].prev = top.left;
		r->len = 0;
		if (maybe_add(m, &ag, norm, sym, l->prev, top.left, false) ||
		    maybe_add(m, &ag, norm, sym, top.left, l->next, false))
			return grist_fail(-ENOMEM, "no memory for a text's merges");
	}
	/* PopulateSentencePieceText: PieceToId, byte fallback, a run of unknowns as one */
	for (i = 0; i >= 0; i = sym[i].next) {
		const uint8_t *p = norm + sym[i].start;
		uint32_t id = grist_vocab_rank(&m->vocab, p, sym[i].len);
		bool unk;

		if (id == GRIST_RANK_NONE)
			id = (uint32_t)m->unk_id;
		if (m->type[id] == T_CONTROL)
			return 1; /* the library fails such a text ("all normalized characters are not consumed") */
		unk = (int32_t)id == m->unk_id;
		if (unk && m->byte_fallback) {
			if (grist_ids_reserve(out, sym[i].len))
				return -ENOMEM;
			for (uint32_t k = 0; k < sym[i].len; k++)
				out->v[out->n++] = m->byte_id[p[k]];
		} else if (!(unk && *prev_unk)) {
			if (grist_ids_reserve(out, 1))
				return -ENOMEM;
			out->v[out->n++] = (int32_t)id;
		}
		*prev_unk = unk;
	}
	return 0;
}

/* One word (or a whole text): from the cache when it is there, else merged and kept. */
static int encode_word(const struct grist_spm_native *m, struct grist_spm_scratch *s, const uint8_t *norm, size_t a,
		       size_t b, struct grist_ids *out, bool *prev_unk)
{
	struct grist_bpe_cache_entry *e, *slot;
	size_t first = out->n;
	bool unk = false;
	int ret;

	if (b - a > GRIST_BPE_CACHE_LEN)
		return encode_range(m, s, norm, a, b, out, prev_unk);
	e = grist_bpe_cache_find(&s->cache, norm + a, b - a, &slot);
	if (e) {
		if (grist_ids_reserve(out, e->n))
			return -ENOMEM;
		memcpy(out->v + out->n, e->ids, e->n * sizeof(*e->ids));
		out->n += e->n;
	} else {
		/* kept as the word alone gives them (no unknown before it) */
		ret = encode_range(m, s, norm, a, b, out, &unk);
		if (ret)
			return ret;
		grist_bpe_cache_put(slot, norm + a, b - a, out->v + first, out->n - first);
	}
	if (m->byte_fallback || out->n == first)
		return 0;
	/*
	 * Without byte fallback an id is <unk> exactly when its piece is unknown: join the run.
	 * (A word starts with U+2581, so this happens only in a model that lacks that piece.)
	 */
	if (*prev_unk && out->v[first] == m->unk_id) {
		memmove(out->v + first, out->v + first + 1, (out->n - first - 1) * sizeof(*out->v));
		out->n--;
	}
	*prev_unk = out->n > first ? out->v[out->n - 1] == m->unk_id : *prev_unk;
	return 0;
}

int grist_spm_native_encode(const struct grist_spm_native *m, struct grist_spm_scratch *s, const uint8_t *text, size_t len,
			 struct grist_ids *out)
{
	long nl = grist_spm_normalize(m, s, text, len);
	bool prev_unk = false;
	size_t a = 0, i;
	int ret;

	if (nl < 0)
		return grist_fail((int)nl, "no memory to normalize a text of %zu bytes", len);
	if (nl == 0)
		return 0;
	if (nl >= INT32_MAX)
		return 1; /* the library's int indexes */
	if (m->model_type == MODEL_UNIGRAM)
		return grist_spm_unigram_encode(m, s, (size_t)nl, out);
	if (!m->words)
		return encode_range(m, s, s->norm, 0, (size_t)nl, out, &prev_unk);
	/* words: each U+2581 that does not follow another starts one */
	for (i = 1; i + 3 <= (size_t)nl; i++) {
		if (s->norm[i] != 0xe2 || memcmp(s->norm + i, WS, 3) || (i >= 3 && !memcmp(s->norm + i - 3, WS, 3)))
			continue;
		ret = encode_word(m, s, s->norm, a, i, out, &prev_unk);
		if (ret)
			return ret;
		a = i;
	}
	return encode_word(m, s, s->norm, a, (size_t)nl, out, &prev_unk);
}
