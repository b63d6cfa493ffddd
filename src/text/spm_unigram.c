/*
 * SentencePiece Unigram encoded natively, id for id as PyPI's sentencepiece (0.2.x) encodes it.
 *
 * unigram_model.cc's Model::EncodeOptimized is a Viterbi over the normalized bytes: from each
 * character's start, every piece that the text continues with (a prefix walk of the pieces'
 * trie) offers a path ending where it ends, scored as the best path to its start plus its
 * own score; the best one ending at each byte is kept. A character no piece of exactly its
 * length covers adds an unknown piece of score min_score - kUnkPenalty. A USER_DEFINED piece
 * of len bytes scores (float)(0.1 * (len - 1)) in 0.2.3 (GetUserDefinedScore: never below 0,
 * so it beats any NORMAL piece, and one long piece beats shorter ones spelling the same bytes);
 * 0.1.97 scored it len * max_score - 0.1. UNUSED pieces are skipped. The ids are
 * then PopulateSentencePieceText's (spm_bpe.c's model and normalizer are shared): an unknown
 * as its <0xNN> byte pieces with byte fallback, else a run of unknowns as one <unk>.
 *
 * Exactness rests on the arithmetic, since real texts meet exact ties (runs of "=" or "-"
 * cut in two orders of equal score). A candidate replaces the best path ending at a byte only
 * when it is strictly greater (so, of equal ones, the one that starts first stays), and:
 *  - PyPI's 0.2.3 sums and compares in float: candidate = (float)(score + best so far); and
 *    when the best so far at a character's start is beyond +-1e5 (kScoreResetThreshold: a
 *    long text), it is subtracted, in float, from that start's and every later reached end's
 *    best, so that sums stay small enough for float to tell near paths apart;
 *  - Debian's 0.1.97 (its source) sums in double: the ternary with the 0.1 literal makes a
 *    piece's score a double, so candidate = (double)score + (double)best, compared in double
 *    with the stored float, then stored rounded to float; an unknown's candidate stays float.
 * Near-equal paths then round apart differently. grist follows PyPI; m->ties_0197 (tests
 * only) gives 0.1.97's rule, so that the C tests can hold the whole encoder to Debian's
 * library id for id.
 *
 * The pieces' trie is a double array (base + byte -> a unit whose check names its parent),
 * built once at open; a walk stops at the first byte no piece continues with, so each start
 * costs at most the longest piece's length, and a text costs O(bytes x that), as the library.
 */
#include <errno.h>
#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "text/text_internal.h"

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER_DEFINED = 4, T_UNUSED = 5, T_BYTE = 6 };

#define K_UNK_PENALTY 10.0f    /* unigram_model.cc's kUnkPenalty */
#define K_SCORE_RESET 100000.0f /* and its kScoreResetThreshold (0.2.3) */
#define FREE UINT32_MAX         /* a unit's check when no node owns it */

struct grist_spm_unit {
	uint32_t base;  /* a child by byte c is unit base + c, when that unit's check is this unit */
	uint32_t check; /* the parent unit, or FREE */
	float score;    /* the piece's score as PyPI's encoder adds it */
	int32_t id;     /* the piece ending here, or -1 (none, or an UNUSED one) */
};

struct grist_spm_best {
	float score;   /* of the best path ending here */
	int32_t start; /* where its last piece starts (-1: no path yet); reversed into the next end after */
	int32_t id;
};

size_t grist_spm_unigram_scratch_bytes(const struct grist_spm_scratch *s)
{
	return s->best_cap * sizeof(*s->best);
}

/* The build's pointer trie: children in a list. */
struct tnode {
	uint32_t child, sibling; /* 0: none (node 0 is the root, nobody's child) */
	int32_t id;
	uint8_t byte;
};

struct build {
	const struct grist_spm_native *m;
	struct tnode *t;
	size_t nt;
	uint32_t root[256]; /* the root's children by byte (its list would be long) */
	struct grist_spm_unit *u;
	uint8_t *used;
	uint32_t *next, *prev; /* the free units, a list in ascending order (FREE ends it) */
	uint32_t head, tail;
	size_t nu, top; /* units; 1 + the highest used one */
};

/* Units [0, need) exist (new ones free, at the end of the free list). */
static int grow(struct build *b, size_t need)
{
	size_t cap = b->nu ? b->nu : 1024;
	void *u, *used, *next, *prev;

	if (need <= b->nu)
		return 0;
	while (cap < need)
		cap *= 2;
	if (cap >= FREE)
		return -ENOMEM;
	if (!(u = realloc(b->u, cap * sizeof(*b->u))))
		return -ENOMEM;
	b->u = u;
	if (!(used = realloc(b->used, cap)))
		return -ENOMEM;
	b->used = used;
	if (!(next = realloc(b->next, cap * sizeof(*b->next))))
		return -ENOMEM;
	b->next = next;
	if (!(prev = realloc(b->prev, cap * sizeof(*b->prev))))
		return -ENOMEM;
	b->prev = prev;
	for (size_t i = b->nu; i < cap; i++) {
		b->u[i] = (struct grist_spm_unit){ 0, FREE, 0, -1 };
		b->used[i] = 0;
		b->prev[i] = b->tail;
		b->next[i] = FREE;
		if (b->tail == FREE)
			b->head = (uint32_t)i;
		else
			b->next[b->tail] = (uint32_t)i;
		b->tail = (uint32_t)i;
	}
	b->nu = cap;
	return 0;
}

static void take(struct build *b, size_t at)
{
	uint32_t p = b->prev[at], n = b->next[at];

	b->used[at] = 1;
	if (p == FREE)
		b->head = n;
	else
		b->next[p] = n;
	if (n == FREE)
		b->tail = p;
	else
		b->prev[n] = p;
	if (at >= b->top)
		b->top = at + 1;
}

/*
 * A base for children with bytes @c[0..k) (ascending) that puts them all on free units: the
 * first of the free list's first 4096 that fits, else past the highest used unit (where every
 * unit is free), which bounds the build's time.
 */
static long find_base(struct build *b, const uint8_t *c, size_t k)
{
	size_t tries = 0, p, i;

	for (p = b->head; p != FREE && tries < 4096; p = b->next[p], tries++) {
		size_t base;

		if (p < c[0])
			continue;
		base = p - c[0];
		if (base + 256 > b->nu)
			break;
		for (i = 1; i < k && !b->used[base + c[i]]; i++)
			;
		if (i == k)
			return (long)base;
	}
	p = b->top > c[0] ? b->top : c[0];
	if (grow(b, p + 256))
		return -ENOMEM;
	return (long)(p - c[0]);
}

/* The pointer trie of the pieces @ids. */
static int pointer_trie(struct build *b, const uint32_t *ids, size_t n_ids)
{
	const struct grist_spm_native *m = b->m;
	size_t cap = 1;

	for (size_t i = 0; i < n_ids; i++) {
		size_t len;

		grist_vocab_bytes(&m->vocab, ids[i], &len);
		cap += len;
	}
	b->t = calloc(cap, sizeof(*b->t));
	if (!b->t)
		return -ENOMEM;
	b->t[0].id = -1;
	b->nt = 1;
	for (size_t i = 0; i < n_ids; i++) {
		size_t len;
		const uint8_t *p = grist_vocab_bytes(&m->vocab, ids[i], &len);
		uint32_t node = 0;

		for (size_t k = 0; k < len; k++) {
			uint32_t ch = k ? b->t[node].child : b->root[p[0]];

			while (k && ch && b->t[ch].byte != p[k])
				ch = b->t[ch].sibling;
			if (!ch) {
				ch = (uint32_t)b->nt++;
				b->t[ch] = (struct tnode){ 0, b->t[node].child, -1, p[k] };
				b->t[node].child = ch;
				if (!k)
					b->root[p[0]] = ch;
			}
			node = ch;
		}
		b->t[node].id = m->type[ids[i]] == T_UNUSED ? -1 : (int32_t)ids[i];
	}
	return 0;
}

/* The double array, breadth first from the pointer trie (pos[]: each pointer node's unit). */
static int double_array(struct build *b)
{
	const struct grist_spm_native *m = b->m;
	uint32_t *queue = malloc(b->nt * sizeof(*queue)), *pos = malloc(b->nt * sizeof(*pos));
	size_t qh = 0, qt = 0;
	uint8_t c[256];
	int ret = -ENOMEM;

	b->head = b->tail = FREE;
	if (!queue || !pos || grow(b, 256))
		goto out;
	take(b, 0);
	pos[0] = 0;
	queue[qt++] = 0;
	while (qh < qt) {
		uint32_t node = queue[qh++], unit = pos[node];
		size_t k = 0;
		long base;

		for (uint32_t ch = b->t[node].child; ch; ch = b->t[ch].sibling) { /* in ascending byte order */
			size_t i = k++;

			for (; i > 0 && c[i - 1] > b->t[ch].byte; i--)
				c[i] = c[i - 1];
			c[i] = b->t[ch].byte;
		}
		if (!k)
			continue; /* a leaf: base 0, and no unit's check names it */
		base = find_base(b, c, k);
		if (base < 0)
			goto out;
		b->u[unit].base = (uint32_t)base;
		for (uint32_t ch = b->t[node].child; ch; ch = b->t[ch].sibling) {
			size_t at = (size_t)base + b->t[ch].byte;
			int32_t id = b->t[ch].id;

			take(b, at);
			b->u[at].check = unit;
			b->u[at].id = id;
			if (id >= 0 && m->type[id] == T_USER_DEFINED) {
				size_t len;

				grist_vocab_bytes(&m->vocab, (uint32_t)id, &len);
				/* GetUserDefinedScore: a double product, returned as a float */
				b->u[at].score = (float)(0.1 * (double)(len - 1));
			} else if (id >= 0) {
				b->u[at].score = m->score[id];
			}
			pos[ch] = (uint32_t)at;
			queue[qt++] = ch;
		}
	}
	ret = 0;
out:
	free(queue);
	free(pos);
	return ret;
}

int grist_spm_unigram_build(const char *path, struct grist_spm_native *m)
{
	struct build b = { .m = m };
	uint32_t *ids = NULL;
	size_t n_ids = 0;
	int ret;

	// unigram::Model's scores: min and max over NORMAL pieces, from FLT_MAX and FLT_MIN (the
	// smallest positive float, so max_score is that when every score is negative), as std::min/max;
	// max_score serves 0.1.97's user-defined score only
	m->min_score = FLT_MAX;
	m->max_score = FLT_MIN;
	ids = malloc((size_t)m->n * sizeof(*ids));
	if (!ids)
		return grist_fail(-ENOMEM, "%s: no memory for its Unigram trie", path);
	for (uint32_t id = 0; id < m->n; id++) {
		uint8_t ty = m->type[id];

		if (ty == T_NORMAL) {
			if (m->score[id] < m->min_score)
				m->min_score = m->score[id];
			if (m->max_score < m->score[id])
				m->max_score = m->score[id];
		}
		if (ty == T_NORMAL || ty == T_USER_DEFINED || ty == T_UNUSED) /* the library's pieces_ */
			ids[n_ids++] = id;
	}
	if (!n_ids) { /* the library refuses such a model ("no pieces are loaded") */
		free(ids);
		return 1;
	}
	ret = pointer_trie(&b, ids, n_ids);
	if (!ret)
		ret = double_array(&b);
	free(ids);
	free(b.t);
	free(b.used);
	free(b.next);
	free(b.prev);
	if (ret) {
		free(b.u);
		return grist_fail(ret, "%s: no memory for its Unigram trie", path);
	}
	m->trie = b.u;
	m->trie_len = b.nu;
	return 0;
}

static inline void offer(struct grist_spm_best *b, float score, int32_t start, int32_t id)
{
	if (b->start < 0 || score > b->score) {
		b->score = score;
		b->start = start;
		b->id = id;
	}
}

/*
 * EncodeOptimized's lattice walk over norm[0, n): best[e] the best path ending at byte e.
 * @ties_0197 is a constant at each call, so each rule compiles to its own loop.
 */
static inline void viterbi(const struct grist_spm_native *m, const uint8_t *norm, size_t n,
			   struct grist_spm_best *best, bool ties_0197)
{
	const struct grist_spm_unit *u = m->trie;
	const float unk_score = m->min_score - K_UNK_PENALTY;
	size_t a, mblen, frontier = 0; /* the furthest end reached so far */

	for (a = 0; a <= n; a++)
		best[a].start = -1;
	best[0].score = 0;
	for (a = 0; a < n; a += mblen) {
		float till = best[a].score;
		bool single = false;
		uint32_t node = 0;

		if (!ties_0197 && (till < -K_SCORE_RESET || till > K_SCORE_RESET)) {
			for (size_t i = a; i <= frontier; i++)
				if (i == a || best[i].start >= 0)
					best[i].score -= till;
			till = 0;
		}
		mblen = grist_spm_char_len(norm[a]);
		if (mblen > n - a)
			mblen = n - a;
		for (size_t k = a; k < n; k++) {
			uint32_t t = u[node].base + norm[k];
			int32_t id;

			if (u[t].check != node)
				break;
			node = t;
			id = u[t].id;
			if (id < 0)
				continue;
			if (k + 1 > frontier)
				frontier = k + 1;
			if (!ties_0197) {
				offer(&best[k + 1], u[t].score + till, (int32_t)a, id);
			} else {
				struct grist_spm_best *b = &best[k + 1];
				double sc = m->type[id] == T_USER_DEFINED ? (double)((float)(k + 1 - a) * m->max_score) - 0.1
									  : (double)m->score[id];
				double cand = sc + (double)till;

				if (b->start < 0 || cand > (double)b->score) {
					b->score = (float)cand;
					b->start = (int32_t)a;
					b->id = id;
				}
			}
			if (k + 1 - a == mblen)
				single = true;
		}
		if (!single && a + mblen > frontier)
			frontier = a + mblen;
		if (!single)
			offer(&best[a + mblen], unk_score + till, (int32_t)a, m->unk_id);
	}
}

int grist_spm_unigram_encode(const struct grist_spm_native *m, struct grist_spm_scratch *s, size_t n,
			     struct grist_ids *out)
{
	const uint8_t *norm = s->norm;
	struct grist_spm_best *best;
	int32_t cur, next, e;
	bool prev_unk = false;
	size_t a;

	if (grist_array_reserve((void **)&s->best, &s->best_cap, n + 1, sizeof(*s->best)))
		return grist_fail(-ENOMEM, "no memory for a text's %zu-byte lattice", n);
	best = s->best;
	if (m->ties_0197)
		viterbi(m, norm, n, best, true);
	else
		viterbi(m, norm, n, best, false);
	/* backtrack from the end, turning each end's start into the next piece's end */
	for (cur = (int32_t)n, next = -1;;) {
		int32_t start = best[cur].start;

		best[cur].start = next;
		next = cur;
		if (start <= 0)
			break;
		cur = start;
	}
	/* PopulateSentencePieceText: byte fallback, a run of unknowns as one */
	for (a = 0, e = cur; e >= 0; a = (size_t)e, e = best[e].start) {
		int32_t id = best[e].id;
		bool unk = id == m->unk_id;

		if (unk && m->byte_fallback) {
			if (grist_ids_reserve(out, (size_t)e - a))
				return -ENOMEM;
			for (size_t k = a; k < (size_t)e; k++)
				out->v[out->n++] = m->byte_id[norm[k]];
		} else if (!(unk && prev_unk)) {
			if (grist_ids_reserve(out, 1))
				return -ENOMEM;
			out->v[out->n++] = id;
		}
		prev_unk = unk;
	}
	return 0;
}
